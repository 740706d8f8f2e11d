// grove::io checkpoints of N-D Eigen tensors: shape (d0, ..., dN-1) and row-major data in the
// file whatever the tensor's storage order (checked on the file's bytes, read here without
// grove's loader), loads into either order and into Eigen::TensorFixedSize, dtype conversions,
// transposes, and the errors: rank and dimension mismatches name the tensor and leave the tree
// untouched.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <grove/tree/tensor.hpp>
#include <string>
#include <vector>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"

namespace tensor_ckpt {

namespace io = grove::io;
using ordered_json = nlohmann::ordered_json;

using C3 = Eigen::Tensor<float, 3>;
using R3 = Eigen::Tensor<float, 3, Eigen::RowMajor>;
using F234 = Eigen::TensorFixedSize<float, Eigen::Sizes<2, 3, 4>>;

// Element (i, j, k) of the arrays here, from the index alone: the oracle for element order.
double value_at(std::size_t i, std::size_t j, std::size_t k) {
  return static_cast<double>(100 * i + 10 * j + k) + 0.25;
}
// Element (i, j, k, l) of the 4-D arrays.
double value_at(std::size_t i, std::size_t j, std::size_t k, std::size_t l) {
  return -static_cast<double>(1000 * i + 100 * j + 10 * k + l) - 0.5;
}

template <class T>
void fill3(T& t) {
  for (Eigen::Index i = 0; i < t.dimension(0); ++i)
    for (Eigen::Index j = 0; j < t.dimension(1); ++j)
      for (Eigen::Index k = 0; k < t.dimension(2); ++k)
        t(i, j, k) = static_cast<typename T::Scalar>(value_at(
            static_cast<std::size_t>(i), static_cast<std::size_t>(j), static_cast<std::size_t>(k)));
}

struct Saved {
  C3 col;                                         // (2, 3, 5), column-major
  Eigen::Tensor<double, 4, Eigen::RowMajor> row;  // (2, 1, 3, 2), row-major
  F234 fixed;
  Eigen::Tensor<std::int32_t, 1> line;  // (4,)
  Eigen::Tensor<float, 0> zero_d;       // ()
  Eigen::MatrixXf m;                    // a matrix next to them
};
GROVE_NODE(Saved, col, row, fixed, line, zero_d, m);

Saved saved() {
  Saved s;
  s.col.resize(2, 3, 5);
  fill3(s.col);
  s.row.resize(2, 1, 3, 2);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index k = 0; k < 3; ++k)
      for (Eigen::Index l = 0; l < 2; ++l)
        s.row(i, 0, k, l) = value_at(static_cast<std::size_t>(i), 0, static_cast<std::size_t>(k),
                                     static_cast<std::size_t>(l));
  fill3(s.fixed);
  s.line.resize(4);
  s.line.setValues({-7, 0, 2147483647, 5});
  s.zero_d() = 2.5f;
  s.m.resize(2, 3);
  s.m << 1, 2, 3, 4, 5, 6;
  return s;
}

// The same key paths with the other storage orders and other values everywhere.
struct Flipped {
  R3 col;
  Eigen::Tensor<double, 4> row;
  F234 fixed;
  Eigen::Tensor<std::int32_t, 1, Eigen::RowMajor> line;
  Eigen::Tensor<float, 0, Eigen::RowMajor> zero_d;
  Eigen::MatrixXf m;
};
GROVE_NODE(Flipped, col, row, fixed, line, zero_d, m);

Flipped flipped() {
  Flipped f;
  f.col.resize(2, 3, 5);
  f.col.setConstant(9);
  f.row.resize(2, 1, 3, 2);
  f.row.setConstant(9);
  f.fixed.setConstant(9);
  f.line.resize(4);
  f.line.setConstant(9);
  f.zero_d.setConstant(9);
  f.m = Eigen::MatrixXf::Constant(2, 3, 9);
  return f;
}

// The file's header and data, parsed here with nlohmann only.
struct raw_file {
  ordered_json header;
  std::string data;
};
raw_file parse(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= std::uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  return {ordered_json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}
template <class T>
T element(const raw_file& f, const std::string& name, std::size_t k) {
  const auto begin = f.header[name]["data_offsets"][0].get<std::size_t>();
  T v;
  std::memcpy(&v, f.data.data() + begin + k * sizeof(T), sizeof(T));
  return v;
}

// A safetensors file from a header and its data, which starts 8-byte aligned in the file (so
// that an odd data offset is unaligned for every type wider than a byte).
std::string assemble(const ordered_json& header, const std::string& data) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return ckpt_test::assemble(text, data);
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// value_at over (d0, d1, d2) in row-major order (C order, numpy's), as T.
template <class T>
std::vector<T> row_major3(std::size_t d0, std::size_t d1, std::size_t d2) {
  std::vector<T> out;
  for (std::size_t i = 0; i < d0; ++i)
    for (std::size_t j = 0; j < d1; ++j)
      for (std::size_t k = 0; k < d2; ++k) out.push_back(static_cast<T>(value_at(i, j, k)));
  return out;
}

struct Loaded {
  C3 col;
  R3 row;
  F234 fixed;
};
GROVE_NODE(Loaded, col, row, fixed);

Loaded loaded() {
  Loaded l;
  l.col.resize(2, 3, 4);
  l.col.setConstant(-1);
  l.row.resize(2, 3, 4);
  l.row.setConstant(-1);
  l.fixed.setConstant(-1);
  return l;
}

template <class T>
bool all_equal(const T& t, float v) {
  for (Eigen::Index k = 0; k < t.size(); ++k)
    if (t.data()[k] != v) return false;
  return true;
}

// What f throws, which must be a grove::io::format_error: its message.
template <class F>
std::string format_error_of(F&& f) {
  try {
    f();
  } catch (const io::format_error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a format_error: ") + e.what();
  }
  return "nothing thrown";
}

}  // namespace tensor_ckpt

using namespace tensor_ckpt;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("save writes N-D tensors with their dimensions and row-major data",
          "[io][checkpoint][tensor]") {
  ckpt_test::temp_dir dir;
  const auto path = dir / "t.safetensors";
  const Saved s = saved();
  io::save(path, s);
  const raw_file f = parse(ckpt_test::read_bytes(path));
  CHECK(f.header["col"]["dtype"] == "F32");
  CHECK(f.header["col"]["shape"] == ordered_json::array({2, 3, 5}));
  CHECK(f.header["row"]["dtype"] == "F64");
  CHECK(f.header["row"]["shape"] == ordered_json::array({2, 1, 3, 2}));
  CHECK(f.header["fixed"]["shape"] == ordered_json::array({2, 3, 4}));
  CHECK(f.header["line"]["dtype"] == "I32");
  CHECK(f.header["line"]["shape"] == ordered_json::array({4}));
  CHECK(f.header["zero_d"]["shape"] == ordered_json::array());
  CHECK(f.header["m"]["shape"] == ordered_json::array({2, 3}));
  // Element k of the file is numpy's a.reshape(-1)[k]: the last index fastest.
  std::size_t k = 0;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t l = 0; l < 5; ++l, ++k)
        CHECK(element<float>(f, "col", k) == static_cast<float>(value_at(i, j, l)));
  k = 0;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t l = 0; l < 2; ++l, ++k)
        CHECK(element<double>(f, "row", k) == value_at(i, 0, j, l));
  for (k = 0; k < 24; ++k)
    CHECK(element<float>(f, "fixed", k) == static_cast<float>(value_at(k / 12, k / 4 % 3, k % 4)));
  CHECK(element<std::int32_t>(f, "line", 2) == 2147483647);
  CHECK(element<float>(f, "zero_d", 0) == 2.5f);
  CHECK(element<float>(f, "m", 3) == 4.0f);
  // The tree's TreeDef and the listing of inspect.
  const auto info = io::inspect(path);
  REQUIRE(info.tensors.size() == 6);
  CHECK(info.tensors[0].shape == std::vector<std::uint64_t>{2, 3, 5});
  CHECK(info.tensors[4].shape.empty());

  // A TensorMap saves as the tensor it views.
  C3 base = s.col;
  std::tuple<Eigen::TensorMap<C3>> mapped{Eigen::TensorMap<C3>(base.data(), 2, 3, 5)};
  io::save(dir / "map.safetensors", mapped);
  const raw_file g = parse(ckpt_test::read_bytes(dir / "map.safetensors"));
  CHECK(g.header["0"]["shape"] == ordered_json::array({2, 3, 5}));
  CHECK(element<float>(g, "0", 7) == element<float>(f, "col", 7));
}

TEST_CASE("N-D tensors load into either storage order and into TensorFixedSize",
          "[io][checkpoint][tensor]") {
  ckpt_test::temp_dir dir;
  const auto path = dir / "t.safetensors";
  const Saved s = saved();
  io::save(path, s);

  // Into the other storage order, by key path: element (i, ...) is the saved element (i, ...).
  Flipped f = flipped();
  io::load_into(path, f);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j)
      for (Eigen::Index k = 0; k < 5; ++k) CHECK(f.col(i, j, k) == s.col(i, j, k));
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index k = 0; k < 3; ++k)
      for (Eigen::Index l = 0; l < 2; ++l) CHECK(f.row(i, 0, k, l) == s.row(i, 0, k, l));
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j)
      for (Eigen::Index k = 0; k < 4; ++k) CHECK(f.fixed(i, j, k) == s.fixed(i, j, k));
  for (Eigen::Index k = 0; k < 4; ++k) CHECK(f.line(k) == s.line(k));
  CHECK(f.zero_d() == 2.5f);
  CHECK(f.m == s.m);

  // load(path, like) gives a copy of like's types and shapes with the file's values.
  const Saved back = io::load(path, Saved{saved()});
  for (Eigen::Index k = 0; k < back.col.size(); ++k) CHECK(back.col.data()[k] == s.col.data()[k]);
  const auto [again, report] = io::load(path, flipped(), {.strict = false});
  CHECK(again.col(1, 2, 4) == s.col(1, 2, 4));
  CHECK(report.missing.empty());
  CHECK(report.unexpected.empty());
}

TEST_CASE("N-D tensors from a file written without grove: unaligned, converted",
          "[io][checkpoint][tensor]") {
  ckpt_test::temp_dir dir;
  // F16 values of (2, 3, 4): value_at is exact in F16 for these indices (at most 123.25).
  std::vector<std::uint16_t> f16;
  for (const double v : row_major3<double>(2, 3, 4)) f16.push_back(io::detail::round_to_f16(v));
  const std::string one = std::string(1, '\x01');  // one BOOL byte first: the rest is unaligned
  const auto f64 = row_major3<double>(2, 3, 4);
  ordered_json header = ordered_json::object();
  header["flag"] = {{"dtype", "BOOL"}, {"shape", ordered_json::array()}, {"data_offsets", {0, 1}}};
  header["col"] = {{"dtype", "F16"}, {"shape", {2, 3, 4}}, {"data_offsets", {1, 49}}};
  header["row"] = {{"dtype", "F64"}, {"shape", {2, 3, 4}}, {"data_offsets", {49, 241}}};
  header["fixed"] = {{"dtype", "F32"}, {"shape", {2, 3, 4}}, {"data_offsets", {241, 337}}};
  const std::string data =
      one + bytes_of(f16) + bytes_of(f64) + bytes_of(row_major3<float>(2, 3, 4));
  const auto path = dir / "world.safetensors";
  ckpt_test::write_bytes(path, assemble(header, data));

  // F64 into a float tensor narrows: refused without convert, naming the tensor.
  Loaded l = loaded();
  CHECK_THAT(format_error_of([&] { (void)io::load_into(path, l, {.strict = false}); }),
             Contains("tensor \"row\" (key path .row): dtype F64 in the file, F32 "
                      "(float32) in the tree; F64 to F32 narrows"));
  CHECK(all_equal(l.col, -1.0f));
  const auto report = io::load_into(path, l, {.strict = false, .convert = true});
  CHECK(report.unexpected == std::vector<std::string>{"flag"});
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) {
        const auto want = static_cast<float>(value_at(i, j, k));
        const auto a = static_cast<Eigen::Index>(i), b = static_cast<Eigen::Index>(j),
                   c = static_cast<Eigen::Index>(k);
        CHECK(l.col(a, b, c) == want);
        CHECK(l.row(a, b, c) == want);
        CHECK(l.fixed(a, b, c) == want);
      }

  // Into Eigen::half and integer tensors: F32 -> F16 narrows (convert), I16 -> I64 widens.
  ordered_json h2 = ordered_json::object();
  h2["ints"] = {{"dtype", "I16"}, {"shape", {2, 3}}, {"data_offsets", {0, 12}}};
  h2["fixed"] = {{"dtype", "F32"}, {"shape", {2, 3, 4}}, {"data_offsets", {12, 108}}};
  const std::vector<std::int16_t> ints{-32768, 1, 2, 3, 4, 32767};
  ckpt_test::write_bytes(dir / "narrow.safetensors",
                         assemble(h2, bytes_of(ints) + bytes_of(row_major3<float>(2, 3, 4))));
  std::tuple<Eigen::Tensor<Eigen::half, 3, Eigen::RowMajor>, Eigen::Tensor<std::int64_t, 2>> n;
  std::get<0>(n).resize(2, 3, 4);
  std::get<1>(n).resize(2, 3);
  const auto r = io::load_into(
      dir / "narrow.safetensors", n,
      {.rename = [](std::string_view name) { return std::string(name == "fixed" ? "0" : "1"); },
       .convert = true});
  CHECK(r.missing.empty());
  CHECK(static_cast<float>(std::get<0>(n)(1, 2, 3)) == static_cast<float>(value_at(1, 2, 3)));
  CHECK(std::get<1>(n)(0, 0) == -32768);
  CHECK(std::get<1>(n)(1, 0) == 3);  // (1, 0) is the file's element 3 (row-major)
  CHECK(std::get<1>(n)(0, 1) == 1);
  CHECK(std::get<1>(n)(1, 2) == 32767);
}

TEST_CASE("tensor shape mismatches are format_errors naming the tensor, the tree untouched",
          "[io][checkpoint][tensor]") {
  ckpt_test::temp_dir dir;
  const auto path = dir / "t.safetensors";
  std::tuple<C3> three{C3(2, 3, 4)};
  fill3(std::get<0>(three));
  io::save(path, three);
  const std::string prefix = "grove::io::load_into: " + path.string() + ": ";

  // Rank: (2, 3, 4) into a 2-D tensor of as many elements.
  std::tuple<Eigen::Tensor<float, 2>> two{Eigen::Tensor<float, 2>(6, 4)};
  std::get<0>(two).setConstant(5);
  CHECK_THAT(format_error_of([&] { (void)io::load_into(path, two); }),
             StartsWith(prefix) && Contains("tensor \"0\" (key path [0]): shape [2, 3, 4] "
                                            "in the file, [6, 4] in the tree"));
  CHECK(all_equal(std::get<0>(two), 5.0f));
  // Into a matrix of (6, 4): the same.
  std::tuple<Eigen::MatrixXf> matrix{Eigen::MatrixXf::Constant(6, 4, 5)};
  CHECK_THAT(format_error_of([&] { (void)io::load_into(path, matrix); }),
             Contains("shape [2, 3, 4] in the file, [6, 4] in the tree"));
  // Dimensions: into a dynamic tensor of another shape, which is not resized.
  std::tuple<R3> other{R3(2, 4, 3)};
  std::get<0>(other).setConstant(5);
  CHECK_THAT(format_error_of([&] { (void)io::load_into(path, other); }),
             Contains("tensor \"0\" (key path [0]): shape [2, 3, 4] in the file, "
                      "[2, 4, 3] in the tree"));
  CHECK(all_equal(std::get<0>(other), 5.0f));
  // Into a TensorFixedSize of other dimensions.
  std::tuple<Eigen::TensorFixedSize<float, Eigen::Sizes<4, 3, 2>>> fixed;
  std::get<0>(fixed).setConstant(5);
  CHECK_THAT(format_error_of([&] { (void)io::load(path, fixed); }),
             StartsWith("grove::io::load: ") &&
                 Contains("tensor \"0\" (key path [0]): shape [2, 3, 4] in the file, "
                          "[4, 3, 2] in the tree"));
  CHECK(all_equal(std::get<0>(fixed), 5.0f));
  // A 4-D tensor into a 3-D leaf.
  std::tuple<Eigen::Tensor<float, 4>> four{Eigen::Tensor<float, 4>(1, 2, 3, 4)};
  std::get<0>(four).setConstant(5);
  io::save(dir / "four.safetensors", four);
  std::tuple<C3> into3{C3(2, 3, 4)};
  std::get<0>(into3).setConstant(5);
  CHECK_THAT(format_error_of([&] { (void)io::load_into(dir / "four.safetensors", into3); }),
             Contains("shape [1, 2, 3, 4] in the file, [2, 3, 4] in the tree"));
  CHECK(all_equal(std::get<0>(into3), 5.0f));

  // load_options::transpose: 2-D only, naming the tensor.
  C3 target(2, 3, 4);
  target.setConstant(5);
  std::tuple<C3> t3{target};
  CHECK_THAT(
      format_error_of([&] {
        (void)io::load_into(path, t3, {.transpose = [](std::string_view) { return true; }});
      }),
      Contains("tensor \"0\" (key path [0]): load_options::transpose asks to transpose it, but "
               "its shape [2, 3, 4] is not 2-D"));
  CHECK(all_equal(std::get<0>(t3), 5.0f));
}

TEST_CASE("a 2-D tensor leaf loads transposed like a matrix", "[io][checkpoint][tensor]") {
  ckpt_test::temp_dir dir;
  std::tuple<Eigen::MatrixXf> kernel{Eigen::MatrixXf(2, 3)};
  std::get<0>(kernel) << 1, 2, 3, 4, 5, 6;
  io::save(dir / "k.safetensors", kernel);
  for (const bool row_major : {false, true}) {
    auto check = [&](auto leaf) {
      std::tuple<decltype(leaf)> tree{leaf};
      io::load_into(dir / "k.safetensors", tree,
                    {.transpose = [](std::string_view) { return true; }});
      for (Eigen::Index i = 0; i < 3; ++i)
        for (Eigen::Index j = 0; j < 2; ++j)
          CHECK(std::get<0>(tree)(i, j) == std::get<0>(kernel)(j, i));
    };
    if (row_major)
      check(Eigen::Tensor<float, 2, Eigen::RowMajor>(3, 2));
    else
      check(Eigen::Tensor<float, 2>(3, 2));
  }
}

TEST_CASE("float tensors saved as F16 and BF16 round element by element",
          "[io][checkpoint][tensor]") {
  ckpt_test::temp_dir dir;
  std::tuple<C3> tree{C3(2, 2, 3)};
  for (Eigen::Index k = 0; k < 12; ++k)
    std::get<0>(tree).data()[k] = static_cast<float>(k) / 3.0f + 0.001f;
  io::save(dir / "h.safetensors", tree, {}, {.floats = io::float_storage::f16});
  const raw_file f = parse(ckpt_test::read_bytes(dir / "h.safetensors"));
  CHECK(f.header["0"]["dtype"] == "F16");
  std::size_t k = 0;
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 2; ++j)
      for (Eigen::Index l = 0; l < 3; ++l, ++k)
        CHECK(element<std::uint16_t>(f, "0", k) ==
              std::bit_cast<std::uint16_t>(Eigen::half(std::get<0>(tree)(i, j, l))));
}

TEST_CASE("empty tensors save and load with their shapes", "[io][checkpoint][tensor]") {
  ckpt_test::temp_dir dir;
  std::tuple<C3, Eigen::Tensor<float, 2, Eigen::RowMajor>> empty{
      C3(2, 0, 3), Eigen::Tensor<float, 2, Eigen::RowMajor>(0, 4)};
  io::save(dir / "e.safetensors", empty);
  const raw_file f = parse(ckpt_test::read_bytes(dir / "e.safetensors"));
  CHECK(f.header["0"]["shape"] == ordered_json::array({2, 0, 3}));
  CHECK(f.header["1"]["shape"] == ordered_json::array({0, 4}));
  auto back = io::load(dir / "e.safetensors", empty);
  CHECK(std::get<0>(back).dimension(1) == 0);
  CHECK(std::get<1>(back).dimension(1) == 4);
  // Another empty shape is still another shape.
  std::tuple<C3, Eigen::Tensor<float, 2, Eigen::RowMajor>> other{
      C3(2, 3, 0), Eigen::Tensor<float, 2, Eigen::RowMajor>(0, 4)};
  CHECK_THAT(format_error_of([&] { (void)io::load_into(dir / "e.safetensors", other); }),
             Contains("shape [2, 0, 3] in the file, [2, 3, 0] in the tree"));
}
