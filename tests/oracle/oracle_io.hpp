// The records that the oracle drivers and scripts exchange (tests/oracle/oracle_common.py reads
// and writes the same): named arrays and texts, each a header line
//   grove-record NAME DTYPE NDIM D0 ... D(NDIM-1) NBYTES
// followed by NBYTES of data, little-endian, row-major (numpy's C order). DTYPE is numpy's
// short name (f4, f8, i2, i4, i8, u1, u2, u4, u8, b1) or `text` for UTF-8 text (NDIM 0).
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace oracle {

template <class T>
constexpr const char* dtype_of() {
  if constexpr (std::is_same_v<T, float>)
    return "f4";
  else if constexpr (std::is_same_v<T, double>)
    return "f8";
  else if constexpr (std::is_same_v<T, bool>)
    return "b1";
  else if constexpr (std::is_same_v<T, std::int32_t>)
    return "i4";
  else if constexpr (std::is_same_v<T, std::int64_t>)
    return "i8";
  else if constexpr (std::is_same_v<T, std::uint32_t>)
    return "u4";
  else if constexpr (std::is_same_v<T, std::uint64_t>)
    return "u8";
  else if constexpr (std::is_same_v<T, std::uint8_t>)
    return "u1";
  else if constexpr (std::is_same_v<T, std::uint16_t>)
    return "u2";
  else if constexpr (std::is_same_v<T, std::int16_t>)
    return "i2";
  else
    static_assert(sizeof(T) == 0, "oracle records: unsupported element type");
}

/// Writes one record to `out` (standard output by default).
inline void emit_raw(std::string_view name, std::string_view dtype,
                     const std::vector<std::size_t>& shape, const void* data, std::size_t nbytes,
                     std::FILE* out = stdout) {
  std::string header = "grove-record " + std::string(name) + " " + std::string(dtype) + " " +
                       std::to_string(shape.size());
  for (std::size_t d : shape) header += " " + std::to_string(d);
  header += " " + std::to_string(nbytes) + "\n";
  std::fwrite(header.data(), 1, header.size(), out);
  if (nbytes) std::fwrite(data, 1, nbytes, out);
}

/// An array of `count` elements, shaped `shape` (row-major).
template <class T>
void emit(std::string_view name, const T* data, std::vector<std::size_t> shape,
          std::FILE* out = stdout) {
  std::size_t count = 1;
  for (std::size_t d : shape) count *= d;
  emit_raw(name, dtype_of<T>(), shape, data, count * sizeof(T), out);
}
template <class T>
void emit(std::string_view name, const std::vector<T>& values, std::FILE* out = stdout) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<std::uint8_t> bytes(values.begin(), values.end());
    emit_raw(name, "b1", {values.size()}, bytes.data(), bytes.size(), out);
  } else {
    emit(name, values.data(), {values.size()}, out);
  }
}
/// An Eigen matrix as a 2-D array (numpy's a[i, j] is m(i, j)); a vector as a 1-D array.
template <class Derived>
void emit(std::string_view name, const Eigen::DenseBase<Derived>& m, std::FILE* out = stdout) {
  using T = typename Derived::Scalar;
  const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major = m;
  if (Derived::ColsAtCompileTime == 1 || Derived::RowsAtCompileTime == 1)
    emit(name, row_major.data(), {static_cast<std::size_t>(m.size())}, out);
  else
    emit(name, row_major.data(),
         {static_cast<std::size_t>(m.rows()), static_cast<std::size_t>(m.cols())}, out);
}
inline void emit_text(std::string_view name, std::string_view text, std::FILE* out = stdout) {
  emit_raw(name, "text", {}, text.data(), text.size(), out);
}

/// A record read back: its dtype, shape and bytes.
struct Record {
  std::string dtype;
  std::vector<std::size_t> shape;
  std::string bytes;

  std::size_t count() const {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
  }
  template <class T>
  std::vector<T> values() const {
    if (dtype != dtype_of<T>())
      throw std::runtime_error("oracle record: dtype " + dtype + ", read as " + dtype_of<T>());
    std::vector<T> v(count());
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }
  /// A 2-D record as an Eigen matrix (a 1-D one as a column).
  template <class T>
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> matrix() const {
    const std::vector<T> v = values<T>();
    const Eigen::Index rows = shape.empty() ? 1 : static_cast<Eigen::Index>(shape[0]);
    const Eigen::Index cols = shape.size() == 2 ? static_cast<Eigen::Index>(shape[1]) : 1;
    if (shape.size() > 2) throw std::runtime_error("oracle record: not 1-D or 2-D");
    return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
        v.data(), rows, cols);
  }
  std::string text() const { return bytes; }
};

/// Reads every record of a file that oracle_common.write_records wrote.
inline std::map<std::string, Record> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("oracle records: cannot open " + path);
  std::map<std::string, Record> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream header(line);
    std::string magic, name;
    Record r;
    std::size_t ndim = 0, nbytes = 0;
    header >> magic >> name >> r.dtype >> ndim;
    if (magic != "grove-record") throw std::runtime_error("oracle records: bad header in " + path);
    r.shape.resize(ndim);
    for (auto& d : r.shape) header >> d;
    header >> nbytes;
    r.bytes.resize(nbytes);
    in.read(r.bytes.data(), static_cast<std::streamsize>(nbytes));
    if (!in) throw std::runtime_error("oracle records: truncated " + path);
    out.emplace(name, std::move(r));
  }
  return out;
}

}  // namespace oracle
