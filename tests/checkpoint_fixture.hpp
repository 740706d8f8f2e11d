// A tree with every kind of checkpoint leaf, and helpers shared by the checkpoint tests and the
// Python interoperability helper. checkpoint_interop.py holds the same values: change both.
#pragma once

#include <unistd.h>
#include <Eigen/Core>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grove/io/checkpoint.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"

namespace ckpt_test {

// A safetensors file from its header's text and its data: the 8-byte little-endian header length,
// the header, the data.
inline std::string assemble(const std::string& header_text, const std::string& data) {
  std::string out(8, '\0');
  const std::uint64_t n = header_text.size();
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header_text + data;
}

// The bytes of values as this machine stores them (little-endian on every CPU grove supports).
template <class T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string out;
  for (const T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

struct Layer {
  Eigen::MatrixXf w;
  Eigen::VectorXf b;
};
GROVE_NODE(Layer, w, b);

struct Sample {
  std::vector<Layer> layers;
  Eigen::MatrixXd f64;                                                              // column-major
  Eigen::Array<std::int32_t, Eigen::Dynamic, Eigen::Dynamic> i32;                   // an Array
  Eigen::Matrix<std::int64_t, Eigen::Dynamic, 1> i64;                               // a vector
  Eigen::Matrix<std::uint32_t, 1, Eigen::Dynamic> u32;                              // a row vector
  Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> u8;  // row-major
  Eigen::Matrix2f fixed;                                                            // fixed size
  float f32_scalar = 0;
  double f64_scalar = 0;
  std::int64_t step = 0;
  std::int32_t i32_scalar = 0;
  std::uint8_t u8_scalar = 0;
  bool flag = false;
  Eigen::Matrix<bool, Eigen::Dynamic, 1> mask;
  grove::random::Key key;
  grove::random::Key old_key;
  std::map<std::string, Eigen::VectorXf> named;
  std::optional<Eigen::VectorXd> absent;  // None: no tensor
};
GROVE_NODE(Sample, layers, f64, i32, i64, u32, u8, fixed, f32_scalar, f64_scalar, step, i32_scalar,
           u8_scalar, flag, mask, key, old_key, named, absent);

inline float f32_from_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The values checkpoint_interop.py expects (and writes).
inline Sample sample() {
  using F = std::numeric_limits<float>;
  Sample s;
  s.layers.resize(2);
  s.layers[0].w.resize(2, 3);
  s.layers[0].w << 1.5f, -2.25f, 3.0f, 0.0f, -0.0f, F::denorm_min();
  s.layers[0].b.resize(2);
  s.layers[0].b << 0.5f, -1.0f;
  s.layers[1].w.resize(1, 2);
  s.layers[1].w << F::infinity(), -F::infinity();
  s.layers[1].b.resize(2);
  s.layers[1].b << F::max(), f32_from_bits(0x7fc00001u);  // a NaN with a payload
  s.f64.resize(2, 3);
  s.f64 << 0.1, -1e300, 3.0, 4.0, std::numeric_limits<double>::denorm_min(), 6.25;
  s.i32.resize(3, 2);
  s.i32 << std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(), 0,
      -1, 7, 42;
  s.i64.resize(4);
  s.i64 << std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), 0,
      -5;
  s.u32.resize(3);
  s.u32 << 0u, 4294967295u, 123456789u;
  s.u8.resize(2, 3);
  s.u8 << 0, 1, 255, 128, 7, 9;
  s.fixed << 1, 2, 3, 4;
  s.f32_scalar = 3.25f;
  s.f64_scalar = -0.125;
  s.step = 1234567890123;
  s.i32_scalar = -7;
  s.u8_scalar = 200;
  s.flag = true;
  s.mask.resize(3);
  s.mask << true, false, true;
  s.key = grove::random::key(42);
  s.old_key =
      grove::random::wrap_key_data({0xDEADBEEFu, 12345u}, grove::random::key_layout::legacy);
  s.named["alpha"].resize(3);
  s.named["alpha"] << 1, 2, 3;
  s.named["beta"] = Eigen::VectorXf(0);
  return s;
}

// A tree of sample()'s structure and shapes with other values everywhere (keys partitionable).
inline Sample zeroed() {
  Sample s = sample();
  grove::tree_for_each(
      [](auto& leaf) {
        using L = std::remove_cvref_t<decltype(leaf)>;
        if constexpr (std::is_same_v<L, grove::random::Key>)
          leaf = grove::random::wrap_key_data({0, 0});
        else if constexpr (std::is_arithmetic_v<L>)
          leaf = L{};
        else
          leaf.setZero();
      },
      s);
  return s;
}

// Leaf-by-leaf equality of the bits (NaN payloads, -0.0) and of key layouts.
template <class Tree>
bool bits_equal(const Tree& a, const Tree& b) {
  bool same = true;
  grove::tree_for_each(
      [&](const auto& x, const auto& y) {
        using L = std::remove_cvref_t<decltype(x)>;
        if constexpr (std::is_same_v<L, grove::random::Key>)
          same = same && x == y;
        else if constexpr (std::is_arithmetic_v<L>)
          same = same && std::memcmp(&x, &y, sizeof(L)) == 0;
        else
          same =
              same && x.rows() == y.rows() && x.cols() == y.cols() &&
              (x.size() == 0 ||  // (memcmp may not be given the null data of an empty matrix)
               std::memcmp(x.data(), y.data(),
                           sizeof(typename L::Scalar) * static_cast<std::size_t>(x.size())) == 0);
      },
      a, b);
  return same;
}

// A fresh directory, removed with its contents at the end of the scope.
struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    static std::atomic<int> counter{0};
    path = std::filesystem::temp_directory_path() /
           ("grove-ckpt-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }
};

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  // A new file rather than a truncated one: ext4 flushes a truncated file's data on close
  // (auto_da_alloc), which makes thousands of rewrites slow.
  std::filesystem::remove(p);
  std::ofstream out(p, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// One tensor of a hand-written safetensors file: its name, dtype, row-major shape and
// little-endian bytes.
struct Entry {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::string bytes;
};

// A safetensors file holding `entries` in order, with `metadata` (if not null), assembled from the
// specification (an 8-byte little-endian header length, the JSON header, the data) rather than by
// grove's save, so that the tests that read it check grove against the format itself.
inline void write_safetensors(const std::filesystem::path& path, const std::vector<Entry>& entries,
                              const nlohmann::ordered_json& metadata = nullptr) {
  auto header = nlohmann::ordered_json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::string data;
  for (const auto& e : entries) {
    header[e.name] = {{"dtype", e.dtype},
                      {"shape", e.shape},
                      {"data_offsets", {data.size(), data.size() + e.bytes.size()}}};
    data += e.bytes;
  }
  const std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  write_bytes(path, out + text + data);
}

}  // namespace ckpt_test
