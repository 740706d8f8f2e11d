// The C++ side of tests/data_npy_interop.py: numpy is the oracle for grove's .npy and .npz files.
//
//   data_npy_interop print FILE...   each array (each entry of an .npz) as grove converts it: its
//                                    dtype, shape and order, then its values in numpy's C order,
//                                    read through as_matrix (0 to 2 dimensions) or as_tensor (3,
//                                    4): bools as 0/1, integers in decimal, floats in C's %a
//   data_npy_interop refuse FILE     expects grove::io::format_error; prints its problem
//   data_npy_interop write DIR       writes .npy and .npz files of every element type and layout,
//                                    whose values follow the formulas the script shares
//   data_npy_interop seed DIR        a valid .npy and .npz, the fuzzer's corpus
//
// Exit status 0 on success, 3 when `refuse` loaded the file, 1 on any other error.
#include <Eigen/Core>
#include <complex>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <grove/data/npy.hpp>
#include <grove/data/npy_tensor.hpp>
#include <grove/data/npz.hpp>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace data = grove::data;

namespace {

std::string hex(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%a", v);
  return buffer;
}

template <class T>
std::string text(const T& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v ? "1" : "0";
  else if constexpr (std::is_same_v<T, std::complex<double>>)
    return hex(v.real()) + ":" + hex(v.imag());
  else if constexpr (std::is_same_v<T, double>)
    return hex(v);
  else
    return std::to_string(v);
}

// The values of `a` converted to T, in numpy's C order.
template <class T>
std::string values(const data::NpyArray& a) {
  std::string out;
  auto add = [&](const T& v) {
    out += ' ';
    out += text(v);
  };
  const auto& s = a.shape;
  if (s.size() <= 2) {
    const auto m = a.as_matrix<T>();
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) add(m(i, j));
  } else if (s.size() == 3) {
    const auto t = a.as_tensor<T, 3>();
    for (Eigen::Index i = 0; i < s[0]; ++i)
      for (Eigen::Index j = 0; j < s[1]; ++j)
        for (Eigen::Index k = 0; k < s[2]; ++k) add(t(i, j, k));
  } else if (s.size() == 4) {
    const auto t = a.as_tensor<T, 4>();
    for (Eigen::Index i = 0; i < s[0]; ++i)
      for (Eigen::Index j = 0; j < s[1]; ++j)
        for (Eigen::Index k = 0; k < s[2]; ++k)
          for (Eigen::Index l = 0; l < s[3]; ++l) add(t(i, j, k, l));
  } else {
    throw std::runtime_error("the driver prints 0 to 4 dimensions");
  }
  return out;
}

void print(const std::string& name, const data::NpyArray& a) {
  std::string shape;
  for (std::size_t i = 0; i < a.shape.size(); ++i)
    shape += (i ? "," : "") + std::to_string(a.shape[i]);
  std::cout << "array " << name << "\n"
            << a.dtype << " (" << shape << ") " << a.fortran_order << "\n";
  const char kind = a.dtype[1];
  std::string v;
  if (kind == 'b')
    v = values<bool>(a);
  else if (kind == 'i')
    v = values<std::int64_t>(a);
  else if (kind == 'u')
    v = values<std::uint64_t>(a);
  else if (kind == 'f')
    v = values<double>(a);
  else
    v = values<std::complex<double>>(a);
  std::cout << "values" << v << "\n";
}

// --- what `write` writes: the formulas of data_npy_interop.py, at numpy's C-order index k -------

template <class T>
T formula(std::int64_t k) {
  if constexpr (std::is_same_v<T, bool>)
    return k % 3 == 0;
  else if constexpr (data::detail::is_npy_complex<T>)
    return T(static_cast<typename T::value_type>((k - 5) * 0.375),
             static_cast<typename T::value_type>(k * 0.5));
  else if constexpr (data::detail::is_npy_floating<T>)
    return static_cast<T>((k - 5) * 0.375);
  else if constexpr (std::is_signed_v<T>)
    return static_cast<T>((k * 37) % 200 - 100);
  else
    return static_cast<T>((k * 37) % 250);
}

template <class T>
void write_matrices(const fs::path& dir, const std::string& name,
                    std::map<std::string, data::NpyArray, std::less<>>& archive) {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> col(3, 4);
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row(3, 4);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) col(i, j) = row(i, j) = formula<T>(i * 4 + j);
  data::save_npy(dir / ("m_" + name + "_col.npy"), col);
  data::save_npy(dir / ("m_" + name + "_row.npy"), row);
  archive.emplace("m_" + name, data::to_npy(col));
}

template <class Tensor>
void fill_c_order(Tensor& t) {
  const auto& d = t.dimensions();
  std::int64_t k = 0;
  for (Eigen::Index i = 0; i < d[0]; ++i)
    for (Eigen::Index j = 0; j < d[1]; ++j)
      for (Eigen::Index l = 0; l < d[2]; ++l) t(i, j, l) = formula<typename Tensor::Scalar>(k++);
}

int write(const fs::path& dir) {
  fs::create_directories(dir);
  std::map<std::string, data::NpyArray, std::less<>> archive;
  write_matrices<bool>(dir, "b1", archive);
  write_matrices<std::int8_t>(dir, "i1", archive);
  write_matrices<std::int16_t>(dir, "i2", archive);
  write_matrices<std::int32_t>(dir, "i4", archive);
  write_matrices<std::int64_t>(dir, "i8", archive);
  write_matrices<std::uint8_t>(dir, "u1", archive);
  write_matrices<std::uint16_t>(dir, "u2", archive);
  write_matrices<std::uint32_t>(dir, "u4", archive);
  write_matrices<std::uint64_t>(dir, "u8", archive);
  write_matrices<Eigen::half>(dir, "f2", archive);
  write_matrices<float>(dir, "f4", archive);
  write_matrices<double>(dir, "f8", archive);
  write_matrices<std::complex<float>>(dir, "c8", archive);
  write_matrices<std::complex<double>>(dir, "c16", archive);

  Eigen::VectorXd v(5);
  for (int k = 0; k < 5; ++k) v(k) = formula<double>(k);
  data::save_npy(dir / "v_f8.npy", v);
  Eigen::RowVectorXf r(4);
  for (int k = 0; k < 4; ++k) r(k) = formula<float>(k);
  data::save_npy(dir / "rowvec_f4.npy", r);
  data::save_npy(dir / "empty_f8.npy", Eigen::MatrixXd(0, 3));
  Eigen::Matrix<std::int32_t, Eigen::Dynamic, Eigen::Dynamic> column(4, 1);
  for (int k = 0; k < 4; ++k) column(k, 0) = formula<std::int32_t>(k);
  data::save_npy(dir / "column_i4.npy", column);

  Eigen::Tensor<float, 3> tc(2, 3, 4);
  Eigen::Tensor<float, 3, Eigen::RowMajor> tr(2, 3, 4);
  fill_c_order(tc);
  fill_c_order(tr);
  data::save_npy(dir / "t3_f4_col.npy", tc);
  data::save_npy(dir / "t3_f4_row.npy", tr);
  Eigen::Tensor<double, 0> t0;
  t0() = formula<double>(0);
  data::save_npy(dir / "t0_f8.npy", t0);
  Eigen::Tensor<std::int16_t, 4> t4(2, 1, 3, 2);
  {
    std::int64_t k = 0;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 1; ++j)
        for (int l = 0; l < 3; ++l)
          for (int m = 0; m < 2; ++m) t4(i, j, l, m) = formula<std::int16_t>(k++);
  }
  data::save_npy(dir / "t4_i2.npy", t4);

  archive.emplace("t3_f4_col", data::to_npy(tc));
  archive.emplace("t3_f4_row", data::to_npy(tr));
  archive.emplace("t0_f8", data::to_npy(t0));
  archive.emplace("v_f8", data::to_npy(v));
  archive.emplace("empty_f8", data::to_npy(Eigen::MatrixXd(0, 3)));
  data::save_npz(dir / "arrays.npz", archive);
  data::save_npz(dir / "arrays_compressed.npz", archive, {.compress = true});
  return 0;
}

int seed(const fs::path& dir) {
  fs::create_directories(dir);
  Eigen::Matrix<std::int16_t, 2, 3> a;
  a << 1, -2, 3, 300, 5, -6;
  data::save_npy(dir / "seed.npy", a);
  data::save_npz(dir / "seed.npz",
                 {{"a", data::to_npy(a)}, {"v", data::to_npy(Eigen::Vector2f(1, 2))}},
                 {.compress = true});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() < 2) {
    std::cerr << "data_npy_interop: usage: data_npy_interop print|refuse|write|seed PATH...\n";
    return 2;
  }
  try {
    if (args[0] == "print") {
      for (std::size_t i = 1; i < args.size(); ++i) {
        const fs::path file = args[i];
        if (file.extension() == ".npz") {
          for (const auto& [key, array] : data::load_npz(file))
            print(file.filename().string() + ":" + key, array);
        } else {
          print(file.filename().string(), data::read_npy(file));
        }
      }
      return 0;
    }
    if (args[0] == "refuse") {
      try {
        if (fs::path(args[1]).extension() == ".npz") {
          for (const auto& [key, array] : data::load_npz(args[1])) (void)array.as_matrix<double>();
        } else {
          (void)data::load_npy<double>(args[1]);
        }
      } catch (const grove::io::format_error& e) {
        std::cout << e.problem() << "\n";
        return 0;
      }
      std::cout << "loaded\n";
      return 3;
    }
    if (args[0] == "write") return write(args[1]);
    if (args[0] == "seed") return seed(args[1]);
    std::cerr << "data_npy_interop: unknown command " << args[0] << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "data_npy_interop: " << e.what() << "\n";
    return 1;
  }
}
