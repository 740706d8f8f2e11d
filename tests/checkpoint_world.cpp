// The C++ side of checkpoint_world.py (files from other tools: torch-style names, F16/BF16,
// unaligned and scattered data, extra entries):
//   checkpoint_world read FILE     loads FILE into a World with torch_rename and strict = false;
//                                  prints the loaded values (as bit patterns) and the report as
//                                  JSON
//   checkpoint_world strict FILE   loads FILE strictly; prints {"error": what(), "untouched": bool}
//   checkpoint_world inspect FILE  prints each tensor's name and dtype as JSON
//   checkpoint_world write FILE F16FILE BF16FILE
//                                  saves Half16 (Eigen::half / Eigen::bfloat16 leaves) to FILE and
//                                  inputs() (float leaves) to F16FILE and BF16FILE with
//                                  save_options::floats f16 and bf16
//   checkpoint_world torch FILE    loads a torch nn.Sequential state_dict ("net.0.weight", ...)
//                                  into the params of nn::sequential(dense(4, 3), relu,
//                                  dense(3, 2)) with io::torch_sequential_names("net."); prints
//                                  each leaf as rows of hex bit patterns, element (i, j) at [i][j]
//   checkpoint_world flax FILE     the same from a Flax tree ("params/Dense_0/kernel", (in, out))
//                                  with io::flax_dense_names({0, 2}) and io::flax_kernels()
//   checkpoint_world flax_vector FILE
//                                  the Flax file into nn::init_network_params' std::vector of
//                                  nn::Dense, with io::flax_dense_names()
//   checkpoint_world tensors FILE  loads FILE's N-D tensors into column-major and row-major
//                                  Eigen::Tensor leaves and into Eigen::TensorFixedSize leaves;
//                                  prints each leaf's shape and its elements in row-major order
//                                  of their indices, read through Eigen's own indexing, then the
//                                  errors of loading into leaves of another rank or dimensions
//   checkpoint_world tensors_write FILE
//                                  saves tensors of both storage orders whose element at
//                                  (i0, ..., iN-1) is tensor_value(i0, ..., iN-1)
#include <array>
#include <bit>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grove/io/checkpoint.hpp"
#include "grove/nn.hpp"
#include "grove/tree/tensor.hpp"

namespace {

struct Linear {
  Eigen::MatrixXf w;  // (out, in), as torch's nn.Linear.weight
  Eigen::VectorXf b;
};
GROVE_NODE(Linear, w, b);

struct World {
  std::vector<Linear> layers;             // F16 (layers/0) and BF16 (layers/1) in the file
  Eigen::MatrixXd wide;                   // F16 into double
  Eigen::Matrix<Eigen::half, 2, 3> half;  // F16, exact
  Eigen::Matrix<std::int32_t, Eigen::Dynamic, 1> counts;  // I16 into int32 (widening)
  Eigen::Matrix<std::uint64_t, Eigen::Dynamic, 1> ids;    // U8 into uint64 (widening)
  double scale = 0;                                       // F32 scalar into double
  Eigen::VectorXf not_in_file;                            // missing: keeps its values
};
GROVE_NODE(World, layers, wide, half, counts, ids, scale, not_in_file);

World blank() {
  World w;
  w.layers.resize(2);
  w.layers[0].w = Eigen::MatrixXf::Constant(2, 3, 7.0f);
  w.layers[0].b = Eigen::VectorXf::Constant(2, 7.0f);
  w.layers[1].w = Eigen::MatrixXf::Constant(3, 2, 7.0f);
  w.layers[1].b = Eigen::VectorXf::Constant(3, 7.0f);
  w.wide = Eigen::MatrixXd::Constant(3, 4, 7.0);
  w.half.setConstant(Eigen::half(7.0f));
  w.counts = Eigen::VectorXi::Constant(3, 7);
  w.ids = Eigen::Matrix<std::uint64_t, Eigen::Dynamic, 1>::Constant(3, 7);
  w.scale = 7.0;
  w.not_in_file = Eigen::VectorXf::Constant(2, 7.0f);
  return w;
}

// torch's state_dict names to grove's key paths: "model.layers.0.weight" -> "layers/0/w".
// Buffers grove has no leaf for ("num_batches_tracked") are skipped.
std::string torch_rename(std::string_view name) {
  if (name.ends_with("num_batches_tracked")) return "";
  std::string out(name.starts_with("model.") ? name.substr(6) : name);
  for (char& c : out)
    if (c == '.') c = '/';
  if (out.ends_with("/weight")) out.replace(out.size() - 6, 6, "w");
  if (out.ends_with("/bias")) out.replace(out.size() - 4, 4, "b");
  return out;
}

template <class T>
std::string hex(T x) {
  static constexpr char digits[] = "0123456789abcdef";
  std::uint64_t bits = 0;
  std::memcpy(&bits, &x, sizeof(T));
  std::string out(sizeof(T) * 2, '0');
  for (std::size_t i = 0; i < out.size(); ++i)
    out[out.size() - 1 - i] = digits[(bits >> (4 * i)) & 0xf];
  return out;
}

// Each leaf's elements in row-major order, as hex bit patterns (floats) or numbers (integers).
nlohmann::json dump(const World& w) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(w)) {
    nlohmann::json values = nlohmann::json::array();
    std::visit(
        [&](const auto* p) {
          using L = std::remove_cvref_t<decltype(*p)>;
          if constexpr (std::is_arithmetic_v<L>) {
            values.push_back(hex(*p));
          } else {
            for (Eigen::Index i = 0; i < p->rows(); ++i)
              for (Eigen::Index j = 0; j < p->cols(); ++j) {
                const auto x = (*p)(i, j);
                if constexpr (std::is_integral_v<std::remove_cvref_t<decltype(x)>>)
                  values.push_back(x);
                else
                  values.push_back(hex(x));
              }
          }
        },
        leaf);
    out[grove::keystr(path, "/")] = values;
  }
  return out;
}

bool same(const World& a, const World& b) {
  return dump(a) == dump(b);
}

// What `write` saves: 16-bit leaves given by their bits.
struct Half16 {
  Eigen::Matrix<Eigen::half, 2, 3> h;
  Eigen::Matrix<Eigen::bfloat16, Eigen::Dynamic, 1> b;
  Eigen::half h_scalar;
};
GROVE_NODE(Half16, h, b, h_scalar);

// The float inputs of the f16/bf16 save options (checkpoint_world.py has the same list).
std::vector<std::uint32_t> input_bits() {
  return {0x00000000u,
          0x80000000u,
          0x3f800000u,
          0x3dcccccdu /* 0.1 */,
          0x477fe000u /* 65504 */,
          0x477ff000u /* 65520: ties to inf in F16 */,
          0x33800000u /* 2^-24 */,
          0x33000000u /* 2^-25: ties to 0 */,
          0x33c00000u /* 1.5 * 2^-24 */,
          0x3f808000u /* 1 + 2^-8: BF16 tie to even (down) */,
          0x3f818000u /* 1 + 3 * 2^-8: BF16 tie to even (up) */,
          0x7f800000u,
          0xff800000u,
          0x7fc00000u,
          0xffc00000u,
          0x7f7fffffu /* F32 max: inf in F16, inf in BF16 */,
          0x00000001u /* F32 denorm_min */,
          0xc2f6e979u /* -123.456 */};
}

struct Inputs {
  Eigen::MatrixXf m;  // 3 x 6, row-major order of input_bits()
  float s = 0;
};
GROVE_NODE(Inputs, m, s);

Inputs inputs() {
  const auto bits = input_bits();
  Inputs in;
  in.m.resize(3, 6);
  for (Eigen::Index k = 0; k < 18; ++k)
    in.m(k / 6, k % 6) = std::bit_cast<float>(bits[static_cast<std::size_t>(k)]);
  in.s = -1.0f / 3.0f;
  return in;
}

// Each leaf of a tree of float matrices and vectors as rows of hex bit patterns: [i][j] holds
// element (i, j) (a vector is one column).
template <class Tree>
nlohmann::json dump_rows(const Tree& tree) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(tree)) {
    nlohmann::json rows = nlohmann::json::array();
    grove::io::detail::visit_leaf(leaf, [&](const auto& x) {
      for (Eigen::Index i = 0; i < x.rows(); ++i) {
        nlohmann::json row = nlohmann::json::array();
        for (Eigen::Index j = 0; j < x.cols(); ++j) row.push_back(hex(x(i, j)));
        rows.push_back(row);
      }
    });
    out[grove::keystr(path, "/")] = rows;
  }
  return out;
}

// --- N-D tensors -----------------------------------------------------------------------------
// The tensors checkpoint_world.py writes, by name, with their shapes there. The storage order is
// a type parameter (std::integral_constant), as GROVE_NODE registers templates of types.
template <class StorageOrder>
struct Tensors {
  static constexpr int Order = StorageOrder::value;
  Eigen::Tensor<float, 3, Order> t3;         // F32 (2, 3, 4)
  Eigen::Tensor<float, 4, Order> t4;         // F16 (2, 3, 2, 2), special values
  Eigen::Tensor<float, 3, Order> tb;         // BF16 (3, 1, 2)
  Eigen::Tensor<float, 3, Order> u3;         // F32 (3, 2, 5), unaligned in the file
  Eigen::Tensor<float, 1, Order> t1;         // F32 (5,)
  Eigen::Tensor<double, 0, Order> t0;        // F64 ()
  Eigen::Tensor<double, 2, Order> t2;        // F32 (3, 4), widened
  Eigen::Tensor<std::int32_t, 3, Order> i3;  // I16 (2, 2, 3), widened
};
GROVE_NODE(Tensors, t3, t4, tb, u3, t1, t0, t2, i3);

template <int Order>
auto blank_tensors() {
  Tensors<std::integral_constant<int, Order>> t;
  t.t3.resize(2, 3, 4);
  t.t4.resize(2, 3, 2, 2);
  t.tb.resize(3, 1, 2);
  t.u3.resize(3, 2, 5);
  t.t1.resize(5);
  t.t2.resize(3, 4);
  t.i3.resize(2, 2, 3);
  grove::tree_for_each(
      [](auto& x) { x.setConstant(typename std::remove_cvref_t<decltype(x)>::Scalar(7)); }, t);
  return t;
}

// Fixed-size leaves for some of the file's tensors; the others are missing from this tree.
struct FixedTensors {
  Eigen::TensorFixedSize<float, Eigen::Sizes<2, 3, 4>> t3;
  Eigen::TensorFixedSize<double, Eigen::Sizes<2, 3, 2, 2>> t4;  // F16 into double
  Eigen::TensorFixedSize<float, Eigen::Sizes<3, 2, 5>, Eigen::RowMajor> u3;
};
GROVE_NODE(FixedTensors, t3, t4, u3);

// Each element of a tensor, in row-major order of its indices (the last fastest), through
// Eigen's operator()(indices): grove's element order plays no part.
template <class T>
nlohmann::json tensor_json(const T& t) {
  constexpr std::size_t n = grove::detail::tensor_rank<T>;
  std::array<Eigen::Index, n> dims{};
  nlohmann::json shape = nlohmann::json::array();
  for (std::size_t d = 0; d < n; ++d) {
    dims[d] = static_cast<Eigen::Index>(t.dimensions()[d]);
    shape.push_back(dims[d]);
  }
  nlohmann::json values = nlohmann::json::array();
  std::array<Eigen::Index, n> index{};
  for (Eigen::Index k = 0; k < static_cast<Eigen::Index>(t.size()); ++k) {
    // Eigen's operator()(indices) does not compile for rank 0, whose one element is t().
    const auto x = [&] {
      if constexpr (n == 0)
        return t();
      else
        return t(index);
    }();
    if constexpr (std::is_integral_v<std::remove_cvref_t<decltype(x)>>)
      values.push_back(x);
    else
      values.push_back(hex(x));
    for (std::size_t d = n; d-- > 0;) {  // the odometer: the last index fastest
      if (++index[d] < dims[d]) break;
      index[d] = 0;
    }
  }
  return {{"shape", shape}, {"values", values}};
}

template <class Tree>
nlohmann::json dump_tensors(const Tree& tree) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(tree))
    grove::io::detail::visit_leaf(
        leaf, [&](const auto& x) { out[grove::keystr(path, "/")] = tensor_json(x); });
  return out;
}

// Loading t3 (2, 3, 4) into `leaf`: the error, and whether the leaf kept its values.
template <class Leaf>
nlohmann::json mismatch(const std::filesystem::path& file, Leaf leaf) {
  leaf.setConstant(3);
  std::map<std::string, Leaf> tree{{"t3", leaf}};
  try {
    (void)grove::io::load_into(file, tree, {.strict = false});
    return {{"error", ""}};
  } catch (const grove::io::format_error& e) {
    bool untouched = true;
    for (Eigen::Index k = 0; k < static_cast<Eigen::Index>(leaf.size()); ++k)
      untouched = untouched && tree.at("t3").data()[k] == 3.0f;
    return {{"error", e.what()}, {"untouched", untouched}};
  }
}

// The value grove writes at (i0, ..., iN-1), which checkpoint_world.py computes too.
double tensor_value(const std::vector<Eigen::Index>& index) {
  double v = 0.25;
  for (const auto i : index) v = v * 10 + static_cast<double>(i);
  return v;
}

template <class T>
void fill_tensor(T& t) {
  constexpr std::size_t n = grove::detail::tensor_rank<T>;
  std::array<Eigen::Index, n> index{};
  for (Eigen::Index k = 0; k < static_cast<Eigen::Index>(t.size()); ++k) {
    const auto v = static_cast<typename T::Scalar>(
        tensor_value(std::vector<Eigen::Index>(index.begin(), index.end())));
    if constexpr (n == 0)
      t() = v;
    else
      t(index) = v;
    for (std::size_t d = n; d-- > 0;) {
      if (++index[d] < static_cast<Eigen::Index>(t.dimensions()[d])) break;
      index[d] = 0;
    }
  }
}

struct Written {
  Eigen::Tensor<float, 3> col;                                 // (2, 3, 4)
  Eigen::Tensor<double, 4, Eigen::RowMajor> row;               // (2, 1, 3, 2)
  Eigen::TensorFixedSize<float, Eigen::Sizes<3, 2, 2>> fixed;  // column-major
  Eigen::Tensor<std::int32_t, 1> line;                         // (5,)
  Eigen::Tensor<float, 0> scalar;                              // ()
  Eigen::Tensor<Eigen::half, 3, Eigen::RowMajor> half;         // (2, 2, 2)
  Eigen::Tensor<std::int16_t, 5> five;                         // (1, 2, 1, 2, 2)
};
GROVE_NODE(Written, col, row, fixed, line, scalar, half, five);

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: checkpoint_world read|strict|inspect|write FILE...\n";
    return 2;
  }
  const std::string_view mode = argv[1];
  const std::filesystem::path file = argv[2];
  try {
    if (mode == "read") {
      World w = blank();
      const auto report = grove::io::load_into(file, w, {.strict = false, .rename = torch_rename});
      std::cout << nlohmann::json{{"values", dump(w)},
                                  {"missing", report.missing},
                                  {"unexpected", report.unexpected},
                                  {"metadata", report.metadata}}
                       .dump()
                << '\n';
      return 0;
    }
    if (mode == "strict") {
      World w = blank();
      try {
        (void)grove::io::load_into(file, w, {.rename = torch_rename});
        std::cout << nlohmann::json{{"error", ""}}.dump() << '\n';
      } catch (const grove::io::format_error& e) {
        std::cout << nlohmann::json{{"error", e.what()}, {"untouched", same(w, blank())}}.dump()
                  << '\n';
      }
      return 0;
    }
    if (mode == "inspect") {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& t : grove::io::inspect(file).tensors) out[t.name] = t.dtype;
      std::cout << out.dump() << '\n';
      return 0;
    }
    if (mode == "torch" || mode == "flax") {
      namespace nn = grove::nn;
      const auto model = nn::sequential(nn::dense(4, 3), nn::relu, nn::dense(3, 2));
      auto params = nn::init<float>(model, grove::random::key(0));
      if (mode == "torch")
        grove::io::load_into(file, params, {.rename = grove::io::torch_sequential_names("net.")});
      else
        grove::io::load_into(file, params,
                             {.rename = grove::io::flax_dense_names({0, 2}),
                              .transpose = grove::io::flax_kernels()});
      std::cout << dump_rows(params).dump() << '\n';
      return 0;
    }
    if (mode == "flax_vector") {
      auto params = grove::nn::init_network_params<float>({4, 3, 2}, grove::random::key(0));
      grove::io::load_into(
          file, params,
          {.rename = grove::io::flax_dense_names(), .transpose = grove::io::flax_kernels()});
      std::cout << dump_rows(params).dump() << '\n';
      return 0;
    }
    if (mode == "tensors") {
      auto col = blank_tensors<Eigen::ColMajor>();
      auto row = blank_tensors<Eigen::RowMajor>();
      // Strict, but for the file's one-byte "pad", which the rename skips.
      const auto skip_pad = [](std::string_view name) {
        return name == "pad" ? std::string() : std::string(name);
      };
      grove::io::load_into(file, col, {.rename = skip_pad});
      grove::io::load_into(file, row, {.rename = skip_pad});
      // t4 (F16) once more, exactly, into an Eigen::half tensor.
      std::map<std::string, Eigen::Tensor<Eigen::half, 4, Eigen::RowMajor>> half{
          {"t4", Eigen::Tensor<Eigen::half, 4, Eigen::RowMajor>(2, 3, 2, 2)}};
      (void)grove::io::load_into(file, half, {.strict = false});
      FixedTensors fixed;
      const auto report = grove::io::load_into(file, fixed, {.strict = false});
      using Sizes243 = Eigen::Sizes<2, 4, 3>;
      std::cout << nlohmann::json{{"col", dump_tensors(col)},
                                  {"row", dump_tensors(row)},
                                  {"fixed", dump_tensors(fixed)},
                                  {"half", dump_tensors(half)},
                                  {"fixed_unexpected", report.unexpected},
                                  {"errors",
                                   {{"rank", mismatch(file, Eigen::Tensor<float, 2>(6, 4))},
                                    {"dimensions",
                                     mismatch(file, Eigen::Tensor<float, 3>(2, 4, 3))},
                                    {"fixed",
                                     mismatch(file, Eigen::TensorFixedSize<float, Sizes243>())}}}}
                       .dump()
                << '\n';
      return 0;
    }
    if (mode == "tensors_write") {
      Written w;
      w.col.resize(2, 3, 4);
      w.row.resize(2, 1, 3, 2);
      w.line.resize(5);
      w.half.resize(2, 2, 2);
      w.five.resize(1, 2, 1, 2, 2);
      grove::tree_for_each([](auto& x) { fill_tensor(x); }, w);
      grove::io::save(file, w);
      return 0;
    }
    if (mode == "write" && argc == 5) {
      Half16 t;
      const std::uint16_t h[] = {0x0000, 0x8000, 0x3c00, 0x7c00, 0x0001, 0x7e01};
      for (int k = 0; k < 6; ++k) t.h(k / 3, k % 3) = std::bit_cast<Eigen::half>(h[k]);
      t.b.resize(4);
      const std::uint16_t b[] = {0x3f80, 0xff80, 0x0001, 0x7fc1};
      for (int k = 0; k < 4; ++k) t.b(k) = std::bit_cast<Eigen::bfloat16>(b[k]);
      t.h_scalar = std::bit_cast<Eigen::half>(std::uint16_t{0xc500});  // -5
      grove::io::save(file, t);
      grove::io::save(argv[3], inputs(), {}, {.floats = grove::io::float_storage::f16});
      grove::io::save(argv[4], inputs(), {}, {.floats = grove::io::float_storage::bf16});
      return 0;
    }
    std::cerr << "unknown mode " << mode << '\n';
    return 2;
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
