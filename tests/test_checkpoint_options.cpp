// grove::io checkpoints: load_options (strict, rename, convert), the load_report, dtype
// conversions, the 16-bit floats bit by bit, and save_options.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"

using namespace ckpt_test;
namespace io = grove::io;
namespace d = grove::io::detail;
using json = nlohmann::ordered_json;

namespace {

// A safetensors file from a header (ordered JSON) and its data.
std::string file_from(const json& header, const std::string& data) {
  return ckpt_test::assemble(header.dump(), data);
}

struct Net {
  Eigen::MatrixXf w;
  Eigen::VectorXd b;
  Eigen::Matrix<std::int16_t, Eigen::Dynamic, 1> n;
  float extra = 0;
};
GROVE_NODE(Net, w, b, n, extra);

Net net() {
  Net x;
  x.w = Eigen::MatrixXf::Constant(2, 2, 5.0f);
  x.b = Eigen::VectorXd::Constant(2, 5.0);
  x.n = Eigen::Matrix<std::int16_t, Eigen::Dynamic, 1>::Constant(3, 5);
  x.extra = 5.0f;
  return x;
}

// torch-style names: "net.weight" -> "w", "net.bias" -> "b", "net.n" -> "n"; "net.skip" skipped.
std::string torch_like(std::string_view name) {
  if (name == "net.skip") return "";
  if (name == "net.weight") return "w";
  if (name == "net.bias") return "b";
  if (name.starts_with("net.")) return std::string(name.substr(4));
  return std::string(name);
}

// w: F64 (narrowing into float), b: F16 (widening into double), n: I64 (narrowing into int16),
// a skipped tensor and an unexpected one. No "extra": missing.
std::string net_file(std::int64_t n2 = -3) {
  json h;
  h["net.weight"] = {{"dtype", "F64"}, {"shape", {2, 2}}, {"data_offsets", {0, 32}}};
  h["net.bias"] = {{"dtype", "F16"}, {"shape", {2}}, {"data_offsets", {32, 36}}};
  h["net.n"] = {{"dtype", "I64"}, {"shape", {3}}, {"data_offsets", {36, 60}}};
  h["net.skip"] = {{"dtype", "U8"}, {"shape", {1}}, {"data_offsets", {60, 61}}};
  h["net.other"] = {{"dtype", "F8_E5M2"}, {"shape", {2}}, {"data_offsets", {61, 63}}};
  h["__metadata__"] = {{"k", "v"}};
  const std::string data = bytes_of<double>({0.1, -1.0, 1e300, 2.5}) +
                           bytes_of<std::uint16_t>({0x3555, 0x8001}) +
                           bytes_of<std::int64_t>({1, -32768, n2}) + std::string("\x01\x02\x03", 3);
  return file_from(h, data);
}

}  // namespace

TEST_CASE("checkpoint options: rename, strict = false and convert, with an exact report",
          "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "net.safetensors";
  write_bytes(file, net_file());
  Net x = net();
  const auto report =
      io::load_into(file, x, {.strict = false, .rename = torch_like, .convert = true});
  CHECK(report.missing == std::vector<std::string>{"extra"});
  CHECK(report.unexpected == std::vector<std::string>{"net.other"});
  CHECK(report.metadata == io::metadata{{"k", "v"}});
  // F64 -> F32 rounds to nearest (static_cast is IEEE's conversion); overflow gives infinity.
  CHECK(std::bit_cast<std::uint32_t>(x.w(0, 0)) == std::bit_cast<std::uint32_t>(0.1f));
  CHECK(x.w(0, 1) == -1.0f);
  CHECK(x.w(1, 0) == std::numeric_limits<float>::infinity());
  CHECK(x.w(1, 1) == 2.5f);
  // F16 0x3555 = 2^-2 * (1 + 0x155 / 1024), 0x8001 = -2^-24: exact.
  CHECK(x.b(0) == std::ldexp(1.0 + 0x155 / 1024.0, -2));
  CHECK(x.b(1) == -std::ldexp(1.0, -24));
  CHECK(x.n(0) == 1);
  CHECK(x.n(1) == -32768);
  CHECK(x.n(2) == -3);
  CHECK(x.extra == 5.0f);  // missing: kept

  // load() with options gives the tree and the report.
  const auto [tree, report2] =
      io::load(file, net(), {.strict = false, .rename = torch_like, .convert = true});
  CHECK(tree.n(2) == -3);
  CHECK(report2.missing == report.missing);
  CHECK(report2.unexpected == report.unexpected);
}

TEST_CASE("checkpoint options: refusals leave the tree untouched", "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "net.safetensors";
  auto refused = [&](const io::load_options& options, const std::vector<std::string>& needles) {
    Net x = net();
    try {
      (void)io::load_into(file, x, options);
      FAIL("accepted");
    } catch (const io::format_error& e) {
      INFO(e.what());
      CHECK_THAT(e.what(), Catch::StartsWith("grove::io::load_into: " + file.string() + ": "));
      for (const auto& n : needles) CHECK_THAT(e.problem(), Catch::Contains(n));
    }
    CHECK(bits_equal(x, net()));
  };
  write_bytes(file, net_file());
  // Strict: the missing and the unexpected tensors, listed.
  refused({.rename = torch_like, .convert = true},
          {"2 problems", "tensor \"extra\" (key path .extra) is missing from the file",
           "the file has tensor \"net.other\" (F8_E5M2 [2]), which the tree does not have"});
  // Without convert: both narrowing loads named, the widening one fine.
  refused({.strict = false, .rename = torch_like},
          {"2 problems",
           "tensor \"net.weight\" (renamed \"w\") (key path .w): dtype F64 in the file, F32 "
           "(float32) in the tree; F64 to F32 narrows, which load_options::convert allows",
           "tensor \"net.n\" (renamed \"n\") (key path .n): dtype I64 in the file, I16"});
  // Without rename nothing matches; the strict message lists all of it.
  refused({}, {"9 problems", "tensor \"w\" (key path .w) is missing"});
  // An integer that does not fit.
  write_bytes(file, net_file(40000));
  refused({.strict = false, .rename = torch_like, .convert = true},
          {"tensor \"net.n\" (key path .n): element 2 (row-major) is 40000, which int16 cannot "
           "hold"});
  // Two tensors renamed to one name.
  write_bytes(file, net_file());
  refused({.strict = false, .rename = [](std::string_view) { return std::string("w"); }},
          {"tensors \"net.weight\" and \"net.bias\" both rename to \"w\""});
  // An exception from rename propagates.
  Net x = net();
  CHECK_THROWS_WITH(io::load_into(file, x, {.rename = [](std::string_view) -> std::string {
                                    throw std::runtime_error("user's rename");
                                  }}),
                    "user's rename");
  CHECK(bits_equal(x, net()));
  // A shape mismatch fails even with strict = false (as in torch).
  json h;
  h["w"] = {{"dtype", "F32"}, {"shape", {4}}, {"data_offsets", {0, 16}}};
  write_bytes(file, file_from(h, std::string(16, '\0')));
  refused({.strict = false},
          {"tensor \"w\" (key path .w): shape [4] in the file, [2, 2] in the tree"});
  // Floats and integers never mix, even with convert; keys and bools load only exactly.
  h["w"] = {{"dtype", "I32"}, {"shape", {2, 2}}, {"data_offsets", {0, 16}}};
  write_bytes(file, file_from(h, std::string(16, '\0')));
  refused({.strict = false, .convert = true}, {"grove does not convert I32 to F32"});
}

TEST_CASE("checkpoint options: which conversions are widening, narrowing or impossible",
          "[io][checkpoint]") {
  using d::conversion;
  using d::dtype;
  CHECK(d::conversion_of(dtype::F16, dtype::F32) == conversion::widening);
  CHECK(d::conversion_of(dtype::BF16, dtype::F64) == conversion::widening);
  CHECK(d::conversion_of(dtype::F32, dtype::F64) == conversion::widening);
  CHECK(d::conversion_of(dtype::F16, dtype::BF16) == conversion::narrowing);
  CHECK(d::conversion_of(dtype::BF16, dtype::F16) == conversion::narrowing);
  CHECK(d::conversion_of(dtype::F64, dtype::F32) == conversion::narrowing);
  CHECK(d::conversion_of(dtype::I8, dtype::I64) == conversion::widening);
  CHECK(d::conversion_of(dtype::U8, dtype::I16) == conversion::widening);
  CHECK(d::conversion_of(dtype::U16, dtype::I16) == conversion::narrowing);
  CHECK(d::conversion_of(dtype::I8, dtype::U64) == conversion::narrowing);
  CHECK(d::conversion_of(dtype::I32, dtype::F64) == conversion::impossible);
  CHECK(d::conversion_of(dtype::BOOL, dtype::U8) == conversion::impossible);
  CHECK(d::conversion_of(dtype::F8_E4M3, dtype::F32) == conversion::impossible);
  CHECK(d::conversion_of(dtype::C64, dtype::F64) == conversion::impossible);
}

TEST_CASE("checkpoint options: F16 and BF16 bit by bit against their definitions",
          "[io][checkpoint]") {
  // Every F16: (-1)^s 2^(e-15) (1 + m/1024), subnormals 2^-14 m/1024, inf, NaN.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const double sign = (h & 0x8000) ? -1.0 : 1.0;
    const int e = static_cast<int>((h >> 10) & 0x1f);
    const int m = static_cast<int>(h & 0x3ff);
    const double got = d::f16_to_double(static_cast<std::uint16_t>(h));
    INFO("F16 bits " << h);
    if (e == 31 && m != 0) {
      REQUIRE(std::isnan(got));
      REQUIRE(std::signbit(got) == (sign < 0));
      // The payload survives the round trip, quieted.
      REQUIRE(d::round_to_f16(got) == (h | 0x200));
      continue;
    }
    const double want = e == 31  ? sign * INFINITY
                        : e == 0 ? sign * std::ldexp(m / 1024.0, -14)
                                 : sign * std::ldexp(1 + m / 1024.0, e - 15);
    REQUIRE(std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(want));
    REQUIRE(d::round_to_f16(got) == h);
    // BF16 is the top half of an F32.
    const double b = d::bf16_to_double(static_cast<std::uint16_t>(h));
    const float f = std::bit_cast<float>(h << 16);
    if (!std::isnan(f)) {
      REQUIRE(std::bit_cast<std::uint64_t>(b) ==
              std::bit_cast<std::uint64_t>(static_cast<double>(f)));
      REQUIRE(d::round_to_bf16(b) == h);
    }
  }
  // Rounding floats: against Eigen's own conversions (round to nearest even) on random bits and
  // on the ties, from the definition: halfway values go to the even neighbour.
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isnan(x)) continue;
    INFO("float bits " << std::bit_cast<std::uint32_t>(x));
    REQUIRE(d::round_to_f16(x) == std::bit_cast<std::uint16_t>(Eigen::half(x)));
    REQUIRE(d::round_to_bf16(x) == std::bit_cast<std::uint16_t>(Eigen::bfloat16(x)));
  }
  CHECK(d::round_to_f16(1.0 + std::ldexp(1.0, -11)) == 0x3c00);      // tie, down to even
  CHECK(d::round_to_f16(1.0 + 3 * std::ldexp(1.0, -11)) == 0x3c02);  // tie, up to even
  CHECK(d::round_to_f16(65519.99) == 0x7bff);
  CHECK(d::round_to_f16(65520.0) == 0x7c00);  // the tie above the largest finite: infinity
  CHECK(d::round_to_f16(-std::ldexp(1.0, -25)) == 0x8000);             // tie to -0
  CHECK(d::round_to_f16(std::ldexp(1.0, -25) * 1.0000001) == 0x0001);  // above the tie
  // One rounding from double: 1 + 2^-11 + 2^-40 is above the tie, although a float rounding
  // first would make it the tie itself and round down.
  CHECK(d::round_to_f16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)) == 0x3c01);
}

TEST_CASE("checkpoint options: 16-bit leaves and save_options::floats round-trip",
          "[io][checkpoint]") {
  temp_dir dir;
  struct T16 {
    Eigen::Matrix<Eigen::half, Eigen::Dynamic, Eigen::Dynamic> h;
    Eigen::bfloat16 b;
  };
  T16 t;
  t.h.resize(2, 3);
  for (int k = 0; k < 6; ++k)
    t.h(k / 3, k % 3) = std::bit_cast<Eigen::half>(static_cast<std::uint16_t>(0x3c00 + k));
  t.b = std::bit_cast<Eigen::bfloat16>(std::uint16_t{0x7fc1});
  const auto file = dir / "t16.safetensors";
  grove::io::save(file, std::tuple(t.h, t.b));
  const auto info = io::inspect(file);
  REQUIRE(info.tensors.size() == 2);
  CHECK(info.tensors[0].dtype == "F16");
  CHECK(info.tensors[0].shape == std::vector<std::uint64_t>{2, 3});
  CHECK(info.tensors[1].dtype == "BF16");
  // Row-major in the file: element (0, 1) is the second.
  const std::string raw = read_bytes(file);
  const std::size_t start = raw.size() - 14;
  std::uint16_t second;
  std::memcpy(&second, raw.data() + start + info.tensors[0].data_begin + 2, 2);
  CHECK(second == 0x3c01);
  auto back = io::load(file, std::tuple(decltype(t.h)::Zero(2, 3).eval(), Eigen::bfloat16(0)));
  for (int k = 0; k < 6; ++k)
    CHECK(std::bit_cast<std::uint16_t>(std::get<0>(back)(k / 3, k % 3)) == 0x3c00 + k);
  CHECK(std::bit_cast<std::uint16_t>(std::get<1>(back)) == 0x7fc1);
  // F16 into float leaves: widening, exact.
  const auto wide = io::load(file, std::tuple(Eigen::MatrixXf::Zero(2, 3).eval(), 0.0f));
  CHECK(std::get<0>(wide)(1, 2) == static_cast<float>(d::f16_to_double(0x3c05)));
  CHECK(std::isnan(std::get<1>(wide)));

  // Floats saved as BF16 load back rounded; as F16, into Eigen::half leaves, exactly.
  Eigen::VectorXf v(3);
  v << 1.0f / 3.0f, -1e-6f, 70000.0f;
  grove::io::save(file, v, {}, {.floats = io::float_storage::bf16});
  CHECK(io::inspect(file).tensors[0].dtype == "BF16");
  const auto vb = io::load(file, Eigen::VectorXf::Zero(3).eval());
  for (int k = 0; k < 3; ++k) CHECK(vb(k) == static_cast<float>(Eigen::bfloat16(v(k))));
  grove::io::save(file, v, {}, {.floats = io::float_storage::f16});
  const auto vh = io::load(file, Eigen::Matrix<Eigen::half, Eigen::Dynamic, 1>::Zero(3).eval());
  for (int k = 0; k < 2; ++k)
    CHECK(std::bit_cast<std::uint16_t>(vh(k)) == std::bit_cast<std::uint16_t>(Eigen::half(v(k))));
  CHECK(std::bit_cast<std::uint16_t>(vh(2)) == 0x7c00);  // 70000 overflows to infinity
  // A float tensor into an Eigen::half leaf narrows: convert allows it.
  grove::io::save(file, v);
  Eigen::Matrix<Eigen::half, Eigen::Dynamic, 1> h3 = decltype(h3)::Zero(3);
  CHECK_THROWS_WITH(io::load_into(file, h3), Catch::Contains("F32 to F16 narrows"));
  (void)io::load_into(file, h3, {.convert = true});
  CHECK(std::bit_cast<std::uint16_t>(h3(0)) == std::bit_cast<std::uint16_t>(Eigen::half(v(0))));
}

TEST_CASE("checkpoint options: inspect lists every dtype of the specification",
          "[io][checkpoint]") {
  temp_dir dir;
  json h;
  std::uint64_t offset = 0;
  std::vector<std::string> names;
  for (const auto& t : d::dtype_table) {
    // 8 elements: a whole number of bytes for every dtype, F4 and F6 included.
    const std::uint64_t bytes = 8 * t.bits / 8;
    h[std::string(t.name)] = {
        {"dtype", t.name}, {"shape", {2, 4}}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    names.emplace_back(t.name);
  }
  CHECK(names.size() == 20);
  const auto file = dir / "all.safetensors";
  write_bytes(file, file_from(h, std::string(offset, '\0')));
  const auto info = io::inspect(file);
  REQUIRE(info.tensors.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    CHECK(info.tensors[i].name == names[i]);
    CHECK(info.tensors[i].dtype == names[i]);
  }
  // Three F6 elements are 18 bits: not a whole number of bytes.
  json bad;
  bad["x"] = {{"dtype", "F6_E3M2"}, {"shape", {3}}, {"data_offsets", {0, 2}}};
  write_bytes(file, file_from(bad, std::string(2, '\0')));
  CHECK_THROWS_WITH(io::inspect(file),
                    Catch::Contains("tensor \"x\": shape [3] of F6_E3M2 (6 bits each) does not "
                                    "fill a whole number of bytes"));
  // An F4 shape whose element count overflows, and one whose bytes do.
  bad["x"] = {{"dtype", "F4"},
              {"shape", {std::uint64_t{1} << 32, std::uint64_t{1} << 32}},
              {"data_offsets", {0, 2}}};
  write_bytes(file, file_from(bad, std::string(2, '\0')));
  CHECK_THROWS_WITH(io::inspect(file), Catch::Contains("of F4 has more than 2^64 bytes"));
  bad["x"] = {{"dtype", "F4"}, {"shape", {std::uint64_t{1} << 63}}, {"data_offsets", {0, 2}}};
  write_bytes(file, file_from(bad, std::string(2, '\0')));
  CHECK_THROWS_WITH(io::inspect(file), Catch::Contains("needs 4611686018427387904 bytes"));
}

namespace {
// numpy's float16 widening (numpy/core/src/npymath/halffloat.c, npy_halfbits_to_floatbits and
// npy_halfbits_to_doublebits), transcribed as numpy writes it: the oracle for F16 into float and
// double leaves. A NaN keeps its payload and its quiet bit: a signaling NaN stays signaling.
std::uint32_t npy_halfbits_to_floatbits(std::uint16_t h) {
  std::uint16_t h_exp = h & 0x7c00u, h_sig;
  const std::uint32_t f_sgn = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  switch (h_exp) {
    case 0x0000u:
      h_sig = h & 0x03ffu;
      if (h_sig == 0) return f_sgn;
      h_sig = static_cast<std::uint16_t>(h_sig << 1);
      while ((h_sig & 0x0400u) == 0) {
        h_sig = static_cast<std::uint16_t>(h_sig << 1);
        h_exp++;
      }
      return f_sgn + (static_cast<std::uint32_t>(127 - 15 - h_exp) << 23) +
             (static_cast<std::uint32_t>(h_sig & 0x03ffu) << 13);
    case 0x7c00u:
      return f_sgn + 0x7f800000u + (static_cast<std::uint32_t>(h & 0x03ffu) << 13);
    default:
      return f_sgn + ((static_cast<std::uint32_t>(h & 0x7fffu) + 0x1c000u) << 13);
  }
}
std::uint64_t npy_halfbits_to_doublebits(std::uint16_t h) {
  std::uint16_t h_exp = h & 0x7c00u, h_sig;
  const std::uint64_t d_sgn = (static_cast<std::uint64_t>(h) & 0x8000u) << 48;
  switch (h_exp) {
    case 0x0000u:
      h_sig = h & 0x03ffu;
      if (h_sig == 0) return d_sgn;
      h_sig = static_cast<std::uint16_t>(h_sig << 1);
      while ((h_sig & 0x0400u) == 0) {
        h_sig = static_cast<std::uint16_t>(h_sig << 1);
        h_exp++;
      }
      return d_sgn + (static_cast<std::uint64_t>(1023 - 15 - h_exp) << 52) +
             (static_cast<std::uint64_t>(h_sig & 0x03ffu) << 42);
    case 0x7c00u:
      return d_sgn + 0x7ff0000000000000ull + (static_cast<std::uint64_t>(h & 0x03ffu) << 42);
    default:
      return d_sgn + ((static_cast<std::uint64_t>(h & 0x7fffu) + 0xfc000u) << 42);
  }
}
// BF16 is the top half of an F32; into a double, widened as numpy widens float16: the F32 bits
// field by field (sign, exponent rebiased, mantissa shifted), a NaN's quiet bit kept.
std::uint64_t bf16_bits_to_doublebits(std::uint16_t b) {
  const std::uint64_t sign = static_cast<std::uint64_t>(b >> 15) << 63;
  const std::uint64_t e = (b >> 7) & 0xffu, m = b & 0x7fu;
  if (e == 0xff) return sign | (std::uint64_t{0x7ff} << 52) | (m << 45);
  if (e != 0) return sign | ((e - 127 + 1023) << 52) | (m << 45);
  if (m == 0) return sign;
  // Subnormal: m * 2^-133, exactly, as a double (which holds it as a normal number).
  return sign | std::bit_cast<std::uint64_t>(std::ldexp(static_cast<double>(m), -133));
}
}  // namespace

TEST_CASE("checkpoint options: every F16 and BF16 widens into float and double bit for bit",
          "[io][checkpoint]") {
  // All 65,536 patterns of each, in a file written from the specification, loaded into float and
  // double leaves and compared bit for bit with numpy's widening, signaling NaNs included (a
  // conversion through a double, or through the FPU, would set their quiet bit).
  temp_dir dir;
  std::string bits;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    bits.push_back(static_cast<char>(h & 0xff));
    bits.push_back(static_cast<char>(h >> 8));
  }
  write_safetensors(dir / "all.safetensors",
                    {{"f16", "F16", {0x10000}, bits}, {"bf16", "BF16", {0x10000}, bits}});
  using VF = Eigen::VectorXf;
  using VD = Eigen::VectorXd;
  std::map<std::string, VF> floats{{"f16", VF::Zero(0x10000)}, {"bf16", VF::Zero(0x10000)}};
  std::map<std::string, VD> doubles{{"f16", VD::Zero(0x10000)}, {"bf16", VD::Zero(0x10000)}};
  io::load_into(dir / "all.safetensors", floats);
  io::load_into(dir / "all.safetensors", doubles);
  // A scalar leaf goes through the same conversion one element at a time.
  std::map<std::string, float> one{{"f16", 0.0f}};
  write_safetensors(dir / "one.safetensors", {{"f16", "F16", {}, std::string("\x01\x7c", 2)}});
  io::load_into(dir / "one.safetensors", one);
  CHECK(std::bit_cast<std::uint32_t>(one["f16"]) == 0x7f802000u);  // numpy's, still signaling

  long differ = 0;
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto b = static_cast<std::uint16_t>(h);
    const auto k = static_cast<Eigen::Index>(h);
    const bool ok =
        std::bit_cast<std::uint32_t>(floats["f16"](k)) == npy_halfbits_to_floatbits(b) &&
        std::bit_cast<std::uint64_t>(doubles["f16"](k)) == npy_halfbits_to_doublebits(b) &&
        std::bit_cast<std::uint32_t>(floats["bf16"](k)) == (h << 16) &&
        std::bit_cast<std::uint64_t>(doubles["bf16"](k)) == bf16_bits_to_doublebits(b) &&
        std::bit_cast<std::uint64_t>(d::f16_to_double(b)) == npy_halfbits_to_doublebits(b) &&
        std::bit_cast<std::uint64_t>(d::bf16_to_double(b)) == bf16_bits_to_doublebits(b);
    if (!ok && ++differ <= 5) UNSCOPED_INFO("16-bit pattern " << h << " differs");
  }
  CHECK(differ == 0);
}
