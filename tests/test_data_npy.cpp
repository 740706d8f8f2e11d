// grove/data/npy.hpp, npy_tensor.hpp and npz.hpp: round trips of every element type and layout,
// the conversion rules, numpy's exact header bytes, and every kind of bad file (special files,
// truncations, headers that are not numpy's dict, claims larger than the file, zip bombs,
// archives that are not .npz), each an error of grove's that names the file and the place; and
// the mutation test: every truncation and single-byte change of a valid .npy and .npz either
// loads or raises grove's error, never a crash, a hang or a giant allocation.
#include <sys/stat.h>
#include <unistd.h>
#include <zip.h>
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <cerrno>
#include <chrono>
#include <complex>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <grove/data/npy.hpp>
#include <grove/data/npy_tensor.hpp>
#include <grove/data/npz.hpp>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "temp_dir.hpp"

namespace fs = std::filesystem;
namespace data = grove::data;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using Bytes = std::vector<unsigned char>;

namespace {

void write_bytes(const fs::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

Bytes read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

Bytes as_bytes(std::string_view s) {
  return Bytes(s.begin(), s.end());
}

// A .npy file by hand: the magic string, the version, the header length (2 bytes for 1.0, else
// 4), the header padded with blanks and a newline to a multiple of 64 (as numpy pads it), then
// the data.
Bytes npy_file(std::string_view dict, const Bytes& payload, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string header(dict);
  const std::size_t hlen = header.size() + 1;
  header.append(64 - (prefix + hlen) % 64, ' ');
  header += '\n';
  Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(major), 0};
  for (std::size_t i = 0; i < prefix - 8; ++i)
    out.push_back(static_cast<unsigned char>((header.size() >> (8 * i)) & 0xFF));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

// The bytes of values as this machine stores them, reversed element by element for big-endian.
template <class T>
Bytes payload(const std::vector<T>& values, bool big_endian = false) {
  Bytes out;
  for (const T& v : values) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if (big_endian) std::reverse(b, b + sizeof(T));
    out.insert(out.end(), b, b + sizeof(T));
  }
  return out;
}

// What `f` throws: its message, checked to be a grove::io::format_error naming `file`.
template <class F>
std::string format_problem(F&& f, const fs::path& file) {
  try {
    f();
  } catch (const grove::io::format_error& e) {
    CHECK(e.path() == file);
    CHECK_THAT(e.what(), StartsWith("grove::data::"));
    CHECK_THAT(e.what(), Contains(file.string()));
    return e.problem();
  }
  FAIL("no grove::io::format_error was thrown");
  return {};
}

std::string npy_problem(const TempDir& dir, const Bytes& file) {
  const auto path = dir / "bad.npy";
  write_bytes(path, file);
  return format_problem([&] { (void)data::read_npy(path); }, path);
}

std::string header_problem(const TempDir& dir, std::string_view dict, const Bytes& data = {}) {
  return npy_problem(dir, npy_file(dict, data));
}

// A zip archive built with libzip: each (name, bytes), stored or deflated.
Bytes zip_archive(const std::vector<std::pair<std::string, Bytes>>& entries, bool deflate) {
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* archive = zip_source_buffer_create(nullptr, 0, 0, &error);
  REQUIRE(archive != nullptr);
  zip_t* z = zip_open_from_source(archive, ZIP_TRUNCATE, &error);
  REQUIRE(z != nullptr);
  zip_source_keep(archive);
  for (const auto& [name, bytes] : entries) {
    zip_source_t* s = zip_source_buffer(z, bytes.data(), bytes.size(), 0);
    const auto i = zip_file_add(z, name.c_str(), s, 0);
    REQUIRE(i >= 0);
    REQUIRE(zip_set_file_compression(z, static_cast<zip_uint64_t>(i),
                                     deflate ? ZIP_CM_DEFLATE : ZIP_CM_STORE, 0) == 0);
  }
  REQUIRE(zip_close(z) == 0);
  zip_stat_t st;
  REQUIRE(zip_source_stat(archive, &st) == 0);
  Bytes out(st.size);
  REQUIRE(zip_source_open(archive) == 0);
  REQUIRE(zip_source_read(archive, out.data(), out.size()) == static_cast<zip_int64_t>(out.size()));
  zip_source_close(archive);
  zip_source_free(archive);
  zip_error_fini(&error);
  return out;
}

std::uint32_t get_u32(const Bytes& b, std::size_t at) {
  return std::uint32_t{b[at]} | std::uint32_t{b[at + 1]} << 8 | std::uint32_t{b[at + 2]} << 16 |
         std::uint32_t{b[at + 3]} << 24;
}
void put_u32(Bytes& b, std::size_t at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<unsigned char>(v >> (8 * i));
}

// The offsets of every zip record with this signature (local header 0x04034b50, central
// directory entry 0x02014b50).
std::vector<std::size_t> zip_records(const Bytes& b, std::uint32_t signature) {
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i + 4 <= b.size(); ++i)
    if (get_u32(b, i) == signature) at.push_back(i);
  return at;
}

// Sets every entry's declared uncompressed size (in its local header and its central directory
// entry), as a forged archive would.
void forge_uncompressed_size(Bytes& zip, std::uint32_t size) {
  const auto locals = zip_records(zip, 0x04034b50);
  const auto centrals = zip_records(zip, 0x02014b50);
  REQUIRE(!locals.empty());
  REQUIRE(centrals.size() == locals.size());
  for (auto at : locals) put_u32(zip, at + 22, size);
  for (auto at : centrals) put_u32(zip, at + 24, size);
}

Eigen::MatrixXd sample_matrix() {
  Eigen::MatrixXd a(2, 3);
  a << 1.5, -2, 3, 4, 5.25, -6;
  return a;
}

}  // namespace

// --- round trips ---------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("npy: matrices of every element type round-trip", "[data][npy]", bool,
                   std::int8_t, std::int16_t, std::int32_t, std::int64_t, std::uint8_t,
                   std::uint16_t, std::uint32_t, std::uint64_t, float, double, Eigen::half,
                   std::complex<float>, std::complex<double>) {
  TempDir dir;
  Eigen::Matrix<TestType, Eigen::Dynamic, Eigen::Dynamic> a(3, 4);
  for (Eigen::Index i = 0; i < a.size(); ++i) {
    if constexpr (std::is_same_v<TestType, bool>)
      a.data()[i] = i % 3 == 0;
    else if constexpr (data::detail::is_npy_complex<TestType>)
      a.data()[i] = TestType(static_cast<float>(i), -static_cast<float>(i) / 2);
    else
      a.data()[i] = static_cast<TestType>(static_cast<int>(i * 7 % 100));
  }
  data::save_npy(dir / "a.npy", a);
  const auto back = data::load_npy<TestType>(dir / "a.npy");
  CHECK(back == a);
  const auto raw = data::read_npy(dir / "a.npy");
  CHECK(raw.dtype == data::detail::npy_dtype_of<TestType>().descr());
  CHECK(raw.shape == std::vector<std::int64_t>{3, 4});
  CHECK(raw.fortran_order);
  CHECK(raw == data::to_npy(a));
  // The data starts at a multiple of 64 bytes, as numpy aligns it.
  CHECK((read_bytes(dir / "a.npy").size() - raw.bytes.size()) % 64 == 0);
  // Row-major: fortran_order False, the same a[i, j].
  const Eigen::Matrix<TestType, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> r = a;
  data::save_npy(dir / "r.npy", r);
  CHECK(!data::read_npy(dir / "r.npy").fortran_order);
  CHECK(data::load_npy<TestType>(dir / "r.npy") == a);
}

TEST_CASE("npy: the header is numpy's, byte for byte", "[data][npy]") {
  TempDir dir;
  data::save_npy(dir / "a.npy", sample_matrix());
  const Bytes file = read_bytes(dir / "a.npy");
  // np.save(f, np.asfortranarray(a)) for a 2x3 float64 array (numpy 1.24).
  std::string expected = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                         "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }";
  expected.append(127 - expected.size(), ' ');
  expected += '\n';
  REQUIRE(file.size() == 128 + 48);
  CHECK(std::string(file.begin(), file.begin() + 128) == expected);
  // A 0-D array: np.save(f, np.float64(3)), no spare blanks for a first axis.
  const auto h = data::detail::npy_header_bytes("<f8", {}, false);
  CHECK(h.size() == 128);
  CHECK(h.substr(10, 61) == "{'descr': '<f8', 'fortran_order': False, 'shape': (), }      ");
  // A header that does not fit version 1.0's 2-byte length is written as 2.0.
  std::vector<std::int64_t> many(64, 1);
  CHECK(data::detail::npy_header_bytes("<f8", many, false)[6] == 1);
}

TEST_CASE("npy: vectors, 0-D, empty and expression objects", "[data][npy]") {
  TempDir dir;
  Eigen::VectorXf v(4);
  v << 1, 2, 3, 4;
  data::save_npy(dir / "v.npy", v);
  auto raw = data::read_npy(dir / "v.npy");
  CHECK(raw.shape == std::vector<std::int64_t>{4});
  CHECK(!raw.fortran_order);
  const auto m = data::load_npy<float>(dir / "v.npy");
  CHECK(m.rows() == 4);
  CHECK(m.cols() == 1);
  CHECK(m.col(0) == v);

  // A compile-time row vector is 2-D, (1, n).
  Eigen::RowVector3d row(1, 2, 3);
  data::save_npy(dir / "row.npy", row);
  CHECK(data::read_npy(dir / "row.npy").shape == std::vector<std::int64_t>{1, 3});

  // Arrays, expressions and strided blocks are evaluated first.
  Eigen::ArrayXXd a = sample_matrix().array();
  data::save_npy(dir / "expr.npy", a * 2);
  CHECK(data::load_npy<double>(dir / "expr.npy") == 2 * sample_matrix());
  data::save_npy(dir / "block.npy", sample_matrix().block(0, 1, 2, 2));
  CHECK(data::load_npy<double>(dir / "block.npy") == sample_matrix().block(0, 1, 2, 2));
  data::save_npy(dir / "transposed.npy", sample_matrix().transpose());
  CHECK(data::read_npy(dir / "transposed.npy").shape == std::vector<std::int64_t>{3, 2});
  CHECK(data::load_npy<double>(dir / "transposed.npy") == sample_matrix().transpose());

  // Empty arrays keep their shape.
  data::save_npy(dir / "empty.npy", Eigen::MatrixXd(0, 3));
  raw = data::read_npy(dir / "empty.npy");
  CHECK(raw.shape == std::vector<std::int64_t>{0, 3});
  CHECK(raw.bytes.empty());
  const auto e = data::load_npy<double>(dir / "empty.npy");
  CHECK(e.rows() == 0);
  CHECK(e.cols() == 3);

  // A 0-D array loads as 1x1.
  write_bytes(
      dir / "scalar.npy",
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", payload<double>({2.5})));
  const auto s = data::load_npy<double>(dir / "scalar.npy");
  REQUIRE(s.size() == 1);
  CHECK(s(0, 0) == 2.5);
}

TEST_CASE("npy: tensors of any rank, either layout", "[data][npy][tensor]") {
  TempDir dir;
  Eigen::Tensor<float, 3> t(2, 3, 4);
  for (Eigen::Index i = 0; i < t.size(); ++i) t.data()[i] = static_cast<float>(i) / 4;
  data::save_npy(dir / "t.npy", t);
  const auto raw = data::read_npy(dir / "t.npy");
  CHECK(raw.shape == std::vector<std::int64_t>{2, 3, 4});
  CHECK(raw.fortran_order);
  const Eigen::Tensor<float, 3> back = data::load_npy<float, 3>(dir / "t.npy");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) CHECK(back(i, j, k) == t(i, j, k));

  // Row-major: fortran_order False, the same t(i, j, k); into double.
  Eigen::Tensor<float, 3, Eigen::RowMajor> r =
      t.swap_layout().shuffle(Eigen::array<int, 3>{2, 1, 0});
  REQUIRE(r(1, 2, 3) == t(1, 2, 3));
  data::save_npy(dir / "r.npy", r);
  CHECK(!data::read_npy(dir / "r.npy").fortran_order);
  const auto rd = data::load_npy<double, 3>(dir / "r.npy");
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) CHECK(rd(i, j, k) == t(i, j, k));

  // Expressions, maps, 0-D and 4-D; as_tensor from an NpyArray.
  data::save_npy(dir / "expr.npy", t * 2.0f);
  CHECK(data::load_npy<float, 3>(dir / "expr.npy")(1, 2, 3) == 2 * t(1, 2, 3));
  Eigen::TensorMap<Eigen::Tensor<float, 3>> map(t.data(), 2, 3, 4);
  CHECK(data::to_npy(map) == data::to_npy(t));
  Eigen::Tensor<double, 0> zero;
  zero() = 7;
  data::save_npy(dir / "zero.npy", zero);
  CHECK(data::read_npy(dir / "zero.npy").shape.empty());
  CHECK(data::load_npy<double, 0>(dir / "zero.npy")() == 7);
  Eigen::Tensor<std::int16_t, 4> four(2, 1, 3, 2);
  for (Eigen::Index i = 0; i < four.size(); ++i) four.data()[i] = static_cast<std::int16_t>(i - 5);
  const auto four_back = data::to_npy(four).as_tensor<std::int64_t, 4>();
  CHECK(four_back(1, 0, 2, 1) == four(1, 0, 2, 1));

  // The rank must match.
  CHECK_THAT(format_problem([&] { (void)data::load_npy<float, 2>(dir / "t.npy"); }, dir / "t.npy"),
             Contains("3 dimensions (shape (2, 3, 4)), not the 2 asked for"));
  CHECK_THROWS_AS((raw.as_tensor<float, 4>()), grove::shape_error);
  CHECK_THAT(format_problem([&] { (void)data::load_npy<float>(dir / "t.npy"); }, dir / "t.npy"),
             Contains("use load_npy<T, 3>"));
  CHECK_THROWS_AS(raw.as_matrix<float>(), grove::shape_error);
}

TEST_CASE("npy: C and Fortran order, every byte order, versions 1.0 to 3.0", "[data][npy]") {
  TempDir dir;
  // numpy's a = [[1, 2, 3], [4, 5, 6]] as int32, in C order, big-endian.
  const Bytes c_big = npy_file("{'descr': '>i4', 'fortran_order': False, 'shape': (2, 3), }",
                               payload<std::int32_t>({1, 2, 3, 4, 5, 6}, true));
  // The same array in Fortran order, little-endian, with numpy's '=' and version 2.0.
  const Bytes f_native = npy_file("{'descr': '=i4', 'fortran_order': True, 'shape': (2, 3), }",
                                  payload<std::int32_t>({1, 4, 2, 5, 3, 6}), 2);
  // Version 3.0, double quotes, Python's trailing commas and line breaks.
  const Bytes v3 = npy_file("{\"descr\": \"<i4\",\n \"fortran_order\": False, \"shape\": (2,3,),}",
                            payload<std::int32_t>({1, 2, 3, 4, 5, 6}), 3);
  // Python 2's long integers, in a version 1.0 header.
  const Bytes longs = npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }",
                               payload<std::int32_t>({1, 2, 3, 4, 5, 6}));
  Eigen::MatrixXi expected(2, 3);
  expected << 1, 2, 3, 4, 5, 6;
  for (const auto* file : {&c_big, &f_native, &v3, &longs}) {
    write_bytes(dir / "a.npy", *file);
    CHECK(data::load_npy<int>(dir / "a.npy") == expected);
    CHECK(data::load_npy<double>(dir / "a.npy") == expected.cast<double>());
  }
  CHECK(data::read_npy(dir / "a.npy").dtype == "<i4");
  write_bytes(dir / "a.npy", c_big);
  const auto raw = data::read_npy(dir / "a.npy");
  CHECK(raw.dtype == ">i4");  // kept as the file has it
  CHECK(raw.bytes[3] == std::byte{1});
  // Big-endian floats, complex numbers (each part swapped) and float16.
  write_bytes(dir / "f.npy", npy_file("{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }",
                                      payload<double>({0.1, -3e300}, true)));
  CHECK(data::load_npy<double>(dir / "f.npy") == Eigen::Vector2d(0.1, -3e300));
  Bytes c = payload<double>({1.5, -2.5}, true);
  write_bytes(dir / "c.npy",
              npy_file("{'descr': '>c16', 'fortran_order': False, 'shape': (1,), }", c));
  CHECK(data::load_npy<std::complex<double>>(dir / "c.npy")(0, 0) ==
        std::complex<double>(1.5, -2.5));
  write_bytes(dir / "h.npy", npy_file("{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }",
                                      {0x3C, 0x00, 0xC1, 0x00}));  // 1.0, -2.5
  CHECK(data::load_npy<float>(dir / "h.npy") == Eigen::Vector2f(1.0f, -2.5f));
  // Python 2's longs only in the versions Python 2 wrote.
  Bytes v3_longs = longs;
  v3_longs[6] = 3;
  v3_longs.insert(v3_longs.begin() + 10, {0, 0});
  CHECK_THAT(npy_problem(dir, v3_longs), Contains("expected ',' or ')' in 'shape'"));
}

// --- conversions ---------------------------------------------------------------------------------

TEST_CASE("npy: conversions check every value and name the element", "[data][npy]") {
  TempDir dir;
  // [[1, 2], [300, 4]] as int16, in C order and in Fortran order: the same index either way.
  write_bytes(dir / "c.npy", npy_file("{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }",
                                      payload<std::int16_t>({1, 2, 300, 4})));
  write_bytes(dir / "f.npy", npy_file("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2), }",
                                      payload<std::int16_t>({1, 300, 2, 4})));
  for (const char* name : {"c.npy", "f.npy"}) {
    const auto file = dir / name;
    CHECK(format_problem([&] { (void)data::load_npy<std::uint8_t>(file); }, file) ==
          "element [1, 0] is 300, which std::uint8_t cannot hold");
    CHECK(data::load_npy<std::int16_t>(file)(1, 0) == 300);
    CHECK(data::load_npy<float>(file)(1, 0) == 300.0f);
    try {
      (void)data::read_npy(file).as_matrix<std::int8_t>();
      FAIL("no error");
    } catch (const grove::argument_error& e) {
      CHECK(std::string(e.what()) ==
            "grove::data::NpyArray::as_matrix: element [1, 0] is 300, which std::int8_t cannot "
            "hold");
    }
  }
  // Negative values into unsigned types, uint64 past int64.
  write_bytes(dir / "n.npy", npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }",
                                      payload<std::int64_t>({0, 5, -1})));
  CHECK_THAT(
      format_problem([&] { (void)data::load_npy<std::uint64_t>(dir / "n.npy"); }, dir / "n.npy"),
      Contains("element [2] is -1, which std::uint64_t cannot hold"));
  write_bytes(dir / "u.npy", npy_file("{'descr': '<u8', 'fortran_order': False, 'shape': (1,), }",
                                      payload<std::uint64_t>({1ull << 63})));
  CHECK_THAT(
      format_problem([&] { (void)data::load_npy<std::int64_t>(dir / "u.npy"); }, dir / "u.npy"),
      Contains("element [0] is 9223372036854775808, which std::int64_t cannot hold"));
  CHECK(data::load_npy<std::uint64_t>(dir / "u.npy")(0, 0) == 1ull << 63);
  CHECK(data::load_npy<double>(dir / "u.npy")(0, 0) == 9223372036854775808.0);

  // Floating-point arrays are never rounded to integers; complex ones go into complex types only.
  data::save_npy(dir / "d.npy", sample_matrix());
  const auto refusal =
      format_problem([&] { (void)data::load_npy<int>(dir / "d.npy"); }, dir / "d.npy");
  CHECK_THAT(refusal, Contains("float64 ('<f8')"));
  CHECK_THAT(refusal, Contains("load it as float or double"));
  CHECK_THROWS_AS(data::read_npy(dir / "d.npy").as_matrix<bool>(), grove::argument_error);
  CHECK(data::load_npy<std::complex<float>>(dir / "d.npy")(0, 0) == std::complex<float>(1.5f, 0));
  CHECK(data::load_npy<Eigen::half>(dir / "d.npy")(0, 0) == Eigen::half(1.5f));
  Eigen::MatrixXcd z = sample_matrix().cast<std::complex<double>>();
  data::save_npy(dir / "z.npy", z);
  CHECK_THAT(format_problem([&] { (void)data::load_npy<double>(dir / "z.npy"); }, dir / "z.npy"),
             Contains("load it as std::complex<double> or std::complex<float>"));

  // bool: from bool arrays (any nonzero byte is True, as numpy reads it) and 0/1 integers.
  write_bytes(dir / "b.npy",
              npy_file("{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", {0, 1, 7}));
  CHECK(data::load_npy<bool>(dir / "b.npy") == Eigen::Matrix<bool, 3, 1>(false, true, true));
  CHECK(data::load_npy<int>(dir / "b.npy") == Eigen::Vector3i(0, 1, 1));
  CHECK(data::load_npy<float>(dir / "b.npy") == Eigen::Vector3f(0, 1, 1));
  write_bytes(dir / "i.npy",
              npy_file("{'descr': '|i1', 'fortran_order': False, 'shape': (3,), }", {0, 1, 2}));
  CHECK_THAT(format_problem([&] { (void)data::load_npy<bool>(dir / "i.npy"); }, dir / "i.npy"),
             Contains("element [2] is 2, which bool cannot hold"));
}

TEST_CASE("npy: arrays built by hand are checked before they are used", "[data][npy]") {
  TempDir dir;
  data::NpyArray a;
  a.dtype = "<f8";
  a.shape = {2, 3};
  a.bytes.resize(47);
  CHECK_THROWS_WITH(data::save_npy(dir / "a.npy", a), Contains("need 48 bytes, but it holds 47"));
  CHECK(!fs::exists(dir / "a.npy"));
  a.bytes.resize(48);
  a.shape = {-2, -3};
  CHECK_THROWS_AS(a.as_matrix<double>(), grove::argument_error);
  a.shape = {2, 3};
  a.dtype = "|O";
  CHECK_THROWS_WITH(a.as_matrix<double>(), Contains("object array"));
  a.dtype = "=f8";
  CHECK(a.as_matrix<double>().size() == 6);
  data::save_npy(dir / "a.npy", a);
  CHECK(data::read_npy(dir / "a.npy").dtype == "<f8");
  CHECK_THROWS_AS(data::save_npz(dir / "a.npz", {{std::string("a\0b", 3), a}}),
                  grove::argument_error);
}

// --- bad files -----------------------------------------------------------------------------------

TEST_CASE("npy: dtypes grove does not read are refused with what they are", "[data][npy]") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"'|O'", "object array: its elements are pickled Python objects"},
      {"'<U5'", "array of strings"},
      {"'|S3'", "array of strings"},
      {"'|V8'", "raw bytes"},
      {"'<M8[ns]'", "datetimes or timedeltas"},
      {"'<m8[s]'", "datetimes or timedeltas"},
      {"'<f16'", "long double"},
      {"'<c32'", "long double"},
      {"'<i3'", "unsupported dtype '<i3'"},
      {"'<x4'", "unknown dtype '<x4'"},
      {"'<f'", "must be followed by the size"},
      {"''", "empty dtype"},
      {"[('a', '<f8'), ('b', '<i4')]", "structured dtype"},
      {"('<f8', (2,))", "sub-array dtype"},
      {"{'names': ['a']}", "a dtype given as a dict"},
      {"u'<f8'", "expected a string in quotes"},
  };
  for (const auto& [descr, message] : cases) {
    INFO(descr);
    CHECK_THAT(
        header_problem(dir, "{'descr': " + descr + ", 'fortran_order': False, 'shape': (1,), }",
                       Bytes(8)),
        Contains(message));
  }
}

TEST_CASE("npy: headers that are not numpy's dict literal", "[data][npy]") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{'descr': '<f8', 'fortran_order': False, }", "the header has no 'shape' key"},
      {"{'fortran_order': False, 'shape': (1,), }", "the header has no 'descr' key"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'extra': 1, }",
       "unknown key 'extra'"},
      {"{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
       "the key 'descr' appears twice"},
      {"{'descr': '<f8', 'fortran_order': 0, 'shape': (1,), }", "expected True or False"},
      {"{'descr': '<f8', 'fortran_order': Falsey, 'shape': (1,), }", "expected True or False"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1), }", "without its comma"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': [1], }", "a list for 'shape'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }", "signed dimension"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (+1,), }", "signed dimension"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (01,), }", "leading zero"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1.0,), }", "expected ',' or ')'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,,), }", "expected a dimension"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999,), }",
       "larger than 2^63 - 1"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), } x",
       "unexpected text after the header's closing '}'"},
      {"{'descr': '<f8', 'fortran_order': False, 'shape': (1,) ", "expected ',' or '}'"},
      {"{'descr': '<f8\\n', 'fortran_order': False, 'shape': (1,), }", "escape sequence"},
      {"{'descr': '<f8, 'fortran_order': False, 'shape': (1,), }", "unknown dtype '<f8, '"},
      {"{'descr: '<f8'", "expected ':' after the key 'descr: '"},
      {"{'descr': '<f8", "an unterminated string at byte 20"},
      {"{descr: '<f8', 'fortran_order': False, 'shape': (1,), }", "expected a string in quotes"},
      {"['descr', '<f8']", "expected '{'"},
      {"", "expected '{'"},
      {"{'descr': '\xe9"
       "f8', 'fortran_order': False, 'shape': (1,), }",
       "not printable ASCII"},
  };
  for (const auto& [dict, message] : cases) {
    INFO(dict);
    const auto problem = header_problem(dir, dict, Bytes(8));
    CHECK_THAT(problem, Contains(message));
    CHECK_THAT(problem, StartsWith("malformed header") ||
                            Contains("(the header's 'descr' at byte") ||
                            Contains("the header has no"));
  }
  // The place: the byte offset in the file and at most 64 characters of the header there.
  const auto problem = header_problem(dir,
                                      "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x" +
                                          std::string(200, 'y') + "': 1}",
                                      Bytes(8));
  CHECK_THAT(problem, Contains("unknown key 'xyyy"));
  CHECK_THAT(problem, Contains("at byte 66 (header text there: ''xyyy"));
  CHECK(problem.size() < 400);
  // More dimensions than numpy allows.
  std::string dims;
  for (int i = 0; i < 65; ++i) dims += "1, ";
  CHECK_THAT(
      header_problem(dir, "{'descr': '<f8', 'fortran_order': False, 'shape': (" + dims + "), }"),
      Contains("more than 64 dimensions"));
}

TEST_CASE("npy: truncated files, claims past the end, bytes after the data", "[data][npy]") {
  TempDir dir;
  const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
  const Bytes good = npy_file(dict, payload<double>({1, 2, 3, 4, 5, 6}));
  CHECK_THAT(npy_problem(dir, {}), Contains("the file is empty"));
  CHECK_THAT(npy_problem(dir, {0x93, 'N', 'U', 'M'}),
             Contains("the file ends at byte 4, inside the magic string and version"));
  CHECK_THAT(npy_problem(dir, as_bytes("PK\x03\x04 an npz")),
             Contains("not a .npy file") && Contains("load_npz"));
  CHECK_THAT(npy_problem(dir, as_bytes("hello, world")),
             Contains("it starts with 'hello,', not numpy's magic string"));
  Bytes v = good;
  v[6] = 4;
  CHECK_THAT(npy_problem(dir, v), Contains("unsupported .npy format version 4.0 at byte 6"));
  v[6] = 1;
  v[7] = 1;
  CHECK_THAT(npy_problem(dir, v), Contains("version 1.1"));
  CHECK_THAT(npy_problem(dir, Bytes(good.begin(), good.begin() + 9)),
             Contains("inside the header length (bytes 8 to 9)"));
  // A header length past the end, and over numpy's max_header_size.
  CHECK_THAT(npy_problem(dir, Bytes(good.begin(), good.begin() + 100)),
             Contains("truncated header: the header length at byte 8 says 118 bytes, to byte 128, "
                      "but the file ends at byte 100"));
  Bytes big = npy_file(dict + std::string(20000, ' '), {}, 2);
  CHECK_THAT(npy_problem(dir, big), Contains("more than numpy's limit of 10000"));
  // Data shorter than the header says, by a byte or by terabytes (refused before allocating).
  CHECK_THAT(npy_problem(dir, Bytes(good.begin(), good.end() - 1)),
             Contains("truncated data: the header describes an array of shape (2, 3) and dtype "
                      "float64 ('<f8'), 48 bytes from byte 128, but the file ends at byte 175 "
                      "(47 data bytes)"));
  CHECK_THAT(
      header_problem(dir, "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }"),
      Contains("8796093022208 bytes from byte 128"));
  // Shapes whose bytes overflow, even beside a zero.
  CHECK_THAT(header_problem(dir,
                            "{'descr': '<f8', 'fortran_order': False, 'shape': "
                            "(4611686018427387904, 4), }"),
             Contains("more bytes than this machine can address"));
  CHECK_THAT(header_problem(dir,
                            "{'descr': '<c16', 'fortran_order': False, 'shape': "
                            "(0, 4294967296, 4294967296), }"),
             Contains("more bytes than this machine can address"));
  // Bytes after the data: refused (a .npy file holds one array).
  Bytes twice = good;
  twice.insert(twice.end(), good.begin(), good.end());
  CHECK_THAT(npy_problem(dir, twice), Contains("176 bytes after the data") &&
                                          Contains("which ends at byte 176") &&
                                          Contains("np.save called twice"));
}

TEST_CASE("npy: special files and missing files raise file_error", "[data][npy]") {
  TempDir dir;
  auto code = [](auto&& f) {
    try {
      f();
    } catch (const grove::io::file_error& e) {
      return e.code().value();
    }
    return 0;
  };
  CHECK(code([&] { (void)data::read_npy(dir / "missing.npy"); }) == ENOENT);
  CHECK(code([&] { (void)data::load_npy<float>(dir.path); }) == EISDIR);
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  CHECK(code([&] { (void)data::read_npy(dir / "fifo"); }) == EINVAL);
  CHECK(code([&] { (void)data::load_npz(dir / "fifo"); }) == EINVAL);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  CHECK(code([&] { (void)data::read_npy("/dev/null"); }) == EINVAL);
  CHECK(code([&] { (void)data::load_npz(dir.path); }) == EISDIR);
  // Writing replaces regular files only.
  CHECK_THROWS_AS(data::save_npy(dir.path / "", sample_matrix()), grove::argument_error);
  fs::create_directory(dir / "sub");
  CHECK(code([&] { data::save_npy(dir / "sub", sample_matrix()); }) == EISDIR);
  CHECK(code([&] { data::save_npy(dir / "fifo", sample_matrix()); }) == EINVAL);
  CHECK(code([&] {
          data::save_npz(dir / "fifo", {{"a", data::to_npy(sample_matrix())}});
        }) == EINVAL);
  data::save_npy(dir / "a.npy", sample_matrix());
  data::save_npy(dir / "a.npy", Eigen::MatrixXd::Ones(1, 1));  // replaced whole
  CHECK(data::load_npy<double>(dir / "a.npy") == Eigen::MatrixXd::Ones(1, 1));
  for (const auto& entry : fs::directory_iterator(dir.path))
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
}

// --- .npz ----------------------------------------------------------------------------------------

TEST_CASE("npz: archives round-trip, stored and compressed", "[data][npz]") {
  TempDir dir;
  Eigen::Tensor<std::int32_t, 3> t(2, 3, 4);
  t.setConstant(-7);
  std::map<std::string, data::NpyArray> arrays = {
      {"weights", data::to_npy(sample_matrix())},
      {"tensor", data::to_npy(t)},
      {"empty", data::to_npy(Eigen::VectorXf(0))},
      {"nested/name", data::to_npy(Eigen::Matrix<bool, 2, 2>::Identity())}};
  for (const bool compress : {false, true}) {
    data::save_npz(dir / "a.npz", arrays, {.compress = compress});
    const auto back = data::load_npz(dir / "a.npz");
    REQUIRE(back.size() == arrays.size());
    for (const auto& [key, array] : arrays) CHECK(back.at(key) == array);
    CHECK(back.at("tensor").as_tensor<int, 3>()(1, 2, 3) == -7);
    // The same arrays make the same archive.
    const Bytes first = read_bytes(dir / "a.npz");
    data::save_npz(dir / "a.npz", arrays, {.compress = compress});
    CHECK(read_bytes(dir / "a.npz") == first);
  }
  data::save_npz(dir / "none.npz", std::map<std::string, data::NpyArray>{});
  CHECK(data::load_npz(dir / "none.npz").empty());
}

TEST_CASE("npz: zip bombs and forged sizes are refused early", "[data][npz]") {
  TempDir dir;
  // 16 MiB of zeros, which deflate to some 16 KiB.
  const Eigen::Matrix<std::uint8_t, Eigen::Dynamic, 1> zeros =
      Eigen::Matrix<std::uint8_t, Eigen::Dynamic, 1>::Zero(16 << 20);
  data::save_npz(dir / "bomb.npz", {{"zeros", data::to_npy(zeros)}}, {.compress = true});
  REQUIRE(fs::file_size(dir / "bomb.npz") < 100000);
  CHECK(data::load_npz(dir / "bomb.npz").at("zeros").bytes.size() == 16u << 20);
  // Over the cap by its declared size: refused before it is inflated.
  const auto path = dir / "bomb.npz";
  CHECK_THAT(format_problem([&] { (void)data::load_npz(path, 1 << 20); }, path),
             Contains("entry 'zeros.npy': it declares 16777344 uncompressed bytes") &&
                 Contains("more than the limit of 1048576 bytes (pass a larger max_bytes"));
  // Declaring less than it holds: refused one byte past what it declares.
  Bytes forged = read_bytes(path);
  forge_uncompressed_size(forged, 1000);
  write_bytes(path, forged);
  const auto start = std::chrono::steady_clock::now();
  const auto problem = format_problem([&] { (void)data::load_npz(path); }, path);
  CHECK_THAT(problem, Contains("entry 'zeros.npy': "));
  CHECK_THAT(problem,
             Contains("inflates to more than the 1000 bytes it declares") || Contains("libzip"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  // Declaring more than it holds, past the default cap: refused before anything is allocated.
  forge_uncompressed_size(forged, 0xF0000000u);
  write_bytes(path, forged);
  CHECK_THAT(format_problem([&] { (void)data::load_npz(path); }, path),
             Contains("declares 4026531840 uncompressed bytes"));
  // Declaring more than it holds, under the cap: refused when it ends early.
  forge_uncompressed_size(forged, (16u << 20) + 1000);
  write_bytes(path, forged);
  CHECK_THAT(format_problem([&] { (void)data::load_npz(path); }, path),
             Contains("entry 'zeros.npy': "));
  // Many entries together over the cap.
  const auto npy = data::to_npy(Eigen::VectorXd::Zero(1000));
  data::save_npz(dir / "many.npz", {{"a", npy}, {"b", npy}, {"c", npy}});
  CHECK_THAT(
      format_problem([&] { (void)data::load_npz(dir / "many.npz", 20000); }, dir / "many.npz"),
      Contains("entry 'c.npy'") &&
          Contains("which with the 16256 bytes of the entries before it is more than"));
}

TEST_CASE("npz: archives that are not numpy's", "[data][npz]") {
  TempDir dir;
  const auto path = dir / "bad.npz";
  auto problem = [&](const Bytes& bytes) {
    write_bytes(path, bytes);
    return format_problem([&] { (void)data::load_npz(path); }, path);
  };
  CHECK_THAT(problem({}), Contains("the file is empty"));
  CHECK_THAT(problem(as_bytes("not a zip file at all")),
             Contains("not a valid zip archive (libzip: "));
  const Bytes npy =
      npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", payload<double>({1}));
  CHECK_THAT(problem(npy), Contains("not a valid zip archive"));
  CHECK_THAT(problem(zip_archive({{"readme.txt", as_bytes("hello")}}, false)),
             Contains("entry 'readme.txt': not a .npy file"));
  CHECK_THAT(problem(zip_archive({{"dir/", {}}}, false)),
             Contains("entry 'dir/': not a .npy file"));
  CHECK_THAT(problem(zip_archive({{"x.npy", as_bytes("hello")}}, true)),
             Contains("entry 'x.npy': not a .npy file: it starts with 'hello'"));
  Bytes trailing = npy;
  trailing.push_back(0);
  CHECK_THAT(
      problem(zip_archive({{"x.npy", trailing}}, true)),
      Contains("entry 'x.npy': 1 bytes after the data") && Contains("the entry is 137 bytes"));
  CHECK_THAT(problem(zip_archive({{"x.npy", Bytes(npy.begin(), npy.end() - 1)}}, false)),
             Contains("entry 'x.npy': truncated data") && Contains("the entry ends at byte 135"));
  // Two entries of one name (forged: libzip will not write them).
  Bytes twice = zip_archive({{"a.npy", npy}, {"b.npy", npy}}, false);
  for (std::size_t i = 0; i + 5 <= twice.size(); ++i)
    if (std::memcmp(twice.data() + i, "b.npy", 5) == 0) twice[i] = 'a';
  CHECK_THAT(problem(twice), Contains("a.npy") || Contains("libzip"));
  // A corrupt deflate stream or CRC.
  Bytes corrupt = zip_archive({{"x.npy", npy}}, true);
  const auto local = zip_records(corrupt, 0x04034b50).at(0);
  // After the local header, its name and its extra field.
  const std::size_t data_at = local + 30 + (corrupt[local + 26] | corrupt[local + 27] << 8) +
                              (corrupt[local + 28] | corrupt[local + 29] << 8);
  corrupt[data_at + 20] ^= 0xFF;
  CHECK_THAT(problem(corrupt), Contains("entry 'x.npy': ") || Contains("libzip"));
  // The archive, cut anywhere.
  const Bytes whole = zip_archive({{"x.npy", npy}}, true);
  for (std::size_t n = 0; n < whole.size(); ++n) {
    INFO(n);
    (void)problem(Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n)));
  }
}

// --- the mutation test ---------------------------------------------------------------------------

namespace {
// Loads `bytes` as `path` every way a user would, and accepts a result or grove's error, nothing
// else (a crash, another exception, a hang, a giant allocation all fail the test).
void load_or_grove_error(const fs::path& path, const Bytes& bytes, bool npz) {
  write_bytes(path, bytes);
  try {
    if (npz) {
      for (const auto& [key, array] : data::load_npz(path)) {
        try {
          (void)array.as_matrix<double>();
        } catch (const grove::error&) {
        }
      }
    } else {
      const auto array = data::read_npy(path);
      try {
        (void)array.as_matrix<std::int64_t>();
      } catch (const grove::error& e) {
        CHECK_THAT(e.what(), StartsWith("grove::data::"));
      }
      (void)data::load_npy<double>(path);
    }
  } catch (const grove::io::format_error& e) {
    CHECK_THAT(e.what(), StartsWith(npz ? "grove::data::load_npz: " : "grove::data::"));
  }
}
}  // namespace

TEST_CASE("npy: every truncation and single-byte change loads or raises grove's error",
          "[data][npy][mutation]") {
  TempDir dir;
  Eigen::Matrix<std::int16_t, 2, 3> a;
  a << 1, -2, 3, 300, 5, -6;
  data::save_npy(dir / "good.npy", a);
  const Bytes good = read_bytes(dir / "good.npy");
  const auto path = dir / "m.npy";
  for (std::size_t n = 0; n < good.size(); ++n)
    load_or_grove_error(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)),
                        false);
  // Every value of every byte up to the end of the header's dict (the magic string, the version,
  // the length and the text); the blanks after it and the data, to values of each kind.
  const std::size_t dict_end = std::string(good.begin(), good.end()).find('}') + 1;
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (int value = 0; value < 256; ++value) {
      if (value == good[i]) continue;
      if (i > dict_end && value != 0 && value != 0x7F && value != 0xFF && value != '\n' &&
          value != '}' && value != '0' && value != 'x' && value != (good[i] ^ 0x80))
        continue;
      Bytes m = good;
      m[i] = static_cast<unsigned char>(value);
      load_or_grove_error(path, m, false);
    }
  }
}

TEST_CASE("npz: every truncation and single-byte change loads or raises grove's error",
          "[data][npz][mutation]") {
  TempDir dir;
  Eigen::Matrix<std::int16_t, 2, 3> a;
  a << 1, -2, 3, 300, 5, -6;
  const auto path = dir / "m.npz";
  for (const bool compress : {false, true}) {
    data::save_npz(dir / "good.npz",
                   {{"a", data::to_npy(a)}, {"v", data::to_npy(Eigen::Vector2f(1, 2))}},
                   {.compress = compress});
    const Bytes good = read_bytes(dir / "good.npz");
    for (std::size_t n = 0; n < good.size(); ++n)
      load_or_grove_error(path, Bytes(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n)),
                          true);
    // Each byte changed to values that flip its low and high bits and to the extremes.
    for (std::size_t i = 0; i < good.size(); ++i) {
      for (const int change : {0x01, 0x02, 0x10, 0x80, 0xFF}) {
        Bytes m = good;
        m[i] = static_cast<unsigned char>(m[i] ^ change);
        load_or_grove_error(path, m, true);
      }
      for (const int value : {0x00, 0x7F, 0xFF}) {
        Bytes m = good;
        m[i] = static_cast<unsigned char>(value);
        load_or_grove_error(path, m, true);
      }
    }
  }
}

// --- docs/npy.md ---------------------------------------------------------------------------------

TEST_CASE("npy: the C++ blocks of docs/npy.md after its program", "[data][npy][docs]") {
  TempDir dir;
  struct Restore {
    fs::path cwd = fs::current_path();
    ~Restore() { fs::current_path(cwd); }
  } restore;
  fs::current_path(dir.path);
  Eigen::Tensor<float, 4> conv(2, 3, 4, 5);
  conv.setConstant(1.0f);
  data::save_npz("weights.npz",
                 {{"w", data::to_npy(sample_matrix())}, {"conv", data::to_npy(conv)}});
  {
    const auto arrays = grove::data::load_npz("weights.npz");
    const Eigen::MatrixXf w = arrays.at("w").as_matrix<float>();
    const Eigen::Tensor<float, 4> kernels = arrays.at("conv").as_tensor<float, 4>();
    CHECK(w == sample_matrix().cast<float>());
    CHECK(kernels(1, 2, 3, 4) == 1.0f);

    grove::data::save_npz("out.npz", {{"w", grove::data::to_npy(w)}}, {.compress = true});
    CHECK(data::load_npz("out.npz").at("w").as_matrix<float>() == w);
  }
  data::save_npy("labels.npy", Eigen::MatrixXcd::Zero(1, 1));
  std::ostringstream captured;
  auto* const old = std::cerr.rdbuf(captured.rdbuf());
  try {
    (void)grove::data::load_npy<float>("labels.npy");
  } catch (const grove::io::format_error& e) {
    std::cerr << e.what() << '\n';  // grove::data::load_npy: labels.npy: ...
  }
  std::cerr.rdbuf(old);
  CHECK_THAT(captured.str(),
             StartsWith("grove::data::load_npy: labels.npy: the array is complex128"));
}
