// grove/data/npy.hpp: numpy's .npy files, read into and written from Eigen matrices.
//
//   Eigen::MatrixXd a = grove::data::load_npy<double>("a.npy");  // a(i, j) is numpy's a[i, j]
//   grove::data::save_npy("b.npy", a);          // np.load("b.npy") is a, bit for bit
//   grove::data::NpyArray raw = grove::data::read_npy("c.npy");  // any dtype, as the file has it
//
// N-D arrays load into Eigen tensors with grove/data/npy_tensor.hpp; .npz archives are in
// grove/data/npz.hpp. This header needs Eigen's core only.
//
// Reading follows numpy's format (numpy/lib/format.py) strictly: versions 1.0, 2.0 and 3.0, C and
// Fortran order, the byte orders '<', '>', '|' and '=' (data in the other order than this
// machine's is swapped when converted), and the numeric dtypes numpy writes: b1, i1, i2, i4, i8,
// u1, u2, u4, u8, f2, f4, f8, c8, c16. Refused, each with a message that says so: object arrays
// (pickles, never unpickled), structured dtypes, sub-array dtypes, strings, raw bytes ('V'),
// datetimes and timedeltas, long double.
//
// Converting to an element type T (load_npy<T>, NpyArray::as_matrix<T>):
//  * a floating-point T (float, double, Eigen::half) takes every real dtype (bool as 0 and 1;
//    integers and wider floats rounded to nearest, as numpy's astype does);
//  * std::complex<float> / std::complex<double> take every dtype (a real value's imaginary part
//    is 0); a complex array goes into no other T;
//  * an integer T takes bool and integer dtypes only, each value checked: one that T cannot hold
//    is an error naming the element's index in numpy's order and its value. A floating-point
//    array is never rounded to integers; the message says to load it as float or double;
//  * bool takes bool arrays, and integer arrays whose values are all 0 or 1.
//
// Errors: a file that cannot be opened or read, or that is not a regular file (a directory, a
// FIFO, a device: never waited on), raises grove::io::file_error; a malformed file raises
// grove::io::format_error, whose message names the function, the file, what is wrong and where
// (the byte offset, the header text there, the element's index): a wrong magic string, an
// unknown version, a header length past the end of the file or over numpy's max_header_size
// (10000 bytes), a header that is not numpy's dict literal (exactly the keys 'descr',
// 'fortran_order' and 'shape', Python's string, bool and tuple literals), a shape whose bytes
// overflow, data shorter than the header describes (refused before anything is allocated for it)
// and bytes after the data: a .npy file holds one array, and numpy's trick of calling np.save
// twice on one open file makes a file that grove refuses rather than half-reads.
//
// Memory: the data once (at most the size of the file). load_npy reads a file whose dtype is
// T's own, in this machine's byte order, straight into the matrix (a C-order one into a buffer
// that is transposed once); any other is read into an NpyArray and converted.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/data/detail/npy_format.hpp"
#include "grove/error.hpp"
#include "grove/io/error.hpp"
#include "grove/io/file.hpp"

namespace grove::data {

namespace detail {
// Defined by grove/data/npy_tensor.hpp, which NpyArray::as_tensor needs.
struct npy_tensor_support;
}  // namespace detail

/// One array of a .npy file (or of an .npz archive) as the file holds it: any numeric dtype, any
/// number of dimensions. Building one by hand is allowed; the functions that take one check that
/// its parts agree (grove::argument_error otherwise).
struct NpyArray {
  /// numpy's descr of the elements, normalised: the byte order ('<' or '>', '|' for one-byte
  /// types; '=' resolved to this machine's) then the kind and size: "<f8", "|u1", ">i4", "|b1".
  std::string dtype = "<f8";
  /// numpy's shape: () for a 0-D array, (n,) for 1-D...
  std::vector<std::int64_t> shape;
  /// Whether the elements are in Fortran (column-major) order rather than C (row-major) order.
  bool fortran_order = false;
  /// The elements, in the order fortran_order says and the byte order dtype says (as the file
  /// has them: not swapped).
  std::vector<std::byte> bytes;

  /// The number of elements: the product of the shape (1 for a 0-D array).
  std::int64_t size() const {
    std::int64_t n = 1;
    for (const auto d : shape) n *= d;
    return n;
  }

  /// The array as an Eigen matrix whose (i, j) is numpy's a[i, j]: a 2-D array as it is, a 1-D
  /// array as one column, a 0-D array as 1x1. T follows the conversion rules at the top of this
  /// header. Throws grove::shape_error for an array of more than two dimensions (use as_tensor),
  /// grove::argument_error when the dtype cannot become T or a value does not fit it (the message
  /// names the element's index in numpy's order and its value), or when the array's parts
  /// disagree. load_npy reads and converts in one call and raises format_error instead.
  template <class T>
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> as_matrix() const;

  /// The array as a column-major Eigen::Tensor<T, Rank>, t(i, j, k) == a[i, j, k]; needs
  /// grove/data/npy_tensor.hpp. Throws grove::shape_error when the array does not have Rank
  /// dimensions, else as as_matrix.
  template <class T, int Rank, class Support = detail::npy_tensor_support>
  auto as_tensor() const {
    static_assert(
        requires { sizeof(Support); },
        "grove: NpyArray::as_tensor needs #include <grove/data/npy_tensor.hpp>");
    return Support::template as_tensor<T, Rank>(*this);
  }

  bool operator==(const NpyArray&) const = default;
};

namespace detail {

// What messages name: the public function, the file, and inside an .npz the entry.
struct npy_where {
  std::string_view function;
  const std::filesystem::path& file;
  std::string entry;          // "entry 'w.npy': " inside an .npz, else ""
  const char* noun = "file";  // "file" or "entry"

  [[noreturn]] void fail(const std::string& problem) const {
    throw io::format_error(function, file, entry + problem);
  }
};

struct npy_layout {
  npy_header header;
  std::uint64_t data_offset = 0;
};

inline std::string describe(const npy_header& h) {
  return "an array of shape " + shape_string(h.shape) + " and dtype " + h.dtype.describe();
}

// Reads and checks everything before the data: the magic string, the version, the header length
// and the header, and checks the data's size against `size` (the file's or the entry's), so that
// a header's claim is refused before anything is allocated for it. `read(offset, out, n)` reads
// exactly n bytes or returns false.
template <class Read>
npy_layout read_npy_layout(Read&& read, std::uint64_t size, const npy_where& where) {
  const std::string noun = where.noun;
  auto get = [&](std::uint64_t offset, void* out, std::uint64_t n) {
    if (!read(offset, out, n))
      where.fail("truncated: the " + noun + " ends before byte " + std::to_string(offset + n) +
                 " (it shrank while it was read)");
  };
  static constexpr unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  unsigned char prefix[12] = {};
  get(0, prefix, std::min<std::uint64_t>(size, 12));
  if (size == 0)
    where.fail("the " + noun + " is empty (a .npy file starts with the magic string \\x93NUMPY)");
  const auto seen = static_cast<std::size_t>(std::min<std::uint64_t>(size, 6));
  if (std::memcmp(prefix, magic, seen) != 0) {
    const std::string start(reinterpret_cast<const char*>(prefix), seen);
    where.fail("not a .npy file: it starts with " + quote_text(start) +
               ", not numpy's magic string \\x93NUMPY" +
               (start.rfind("PK", 0) == 0 ? " (it looks like a zip archive: an .npz file is read "
                                            "with grove::data::load_npz)"
                                          : ""));
  }
  if (size < 8)
    where.fail("truncated: the " + noun + " ends at byte " + std::to_string(size) +
               ", inside the magic string and version (8 bytes)");
  const int major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3 || minor != 0)
    where.fail("unsupported .npy format version " + std::to_string(major) + "." +
               std::to_string(minor) + " at byte 6 (grove reads 1.0, 2.0 and 3.0)");
  const std::uint64_t length_bytes = major == 1 ? 2 : 4;
  const std::uint64_t start = 8 + length_bytes;
  if (size < start)
    where.fail("truncated: the " + noun + " ends at byte " + std::to_string(size) +
               ", inside the header length (bytes 8 to " + std::to_string(start - 1) + ")");
  std::uint64_t header_length = 0;
  for (std::uint64_t i = 0; i < length_bytes; ++i)
    header_length |= std::uint64_t{prefix[8 + i]} << (8 * i);
  if (header_length > npy_max_header_size)
    where.fail("the header length at byte 8 is " + std::to_string(header_length) +
               " bytes, more than numpy's limit of " + std::to_string(npy_max_header_size) +
               " (max_header_size)");
  if (header_length > size - start)
    where.fail("truncated header: the header length at byte 8 says " +
               std::to_string(header_length) + " bytes, to byte " +
               std::to_string(start + header_length) + ", but the " + noun + " ends at byte " +
               std::to_string(size));
  std::string text(static_cast<std::size_t>(header_length), '\0');
  get(start, text.data(), header_length);
  npy_layout out;
  npy_header_parser parser(text, start, major <= 2);
  if (auto problem = parser.parse(out.header); !problem.empty()) where.fail(problem);
  out.data_offset = start + header_length;
  const std::uint64_t have = size - out.data_offset;
  const std::uint64_t need = out.header.data_bytes();
  if (need > have)
    where.fail("truncated data: the header describes " + describe(out.header) + ", " +
               std::to_string(need) + " bytes from byte " + std::to_string(out.data_offset) +
               ", but the " + noun + " ends at byte " + std::to_string(size) + " (" +
               std::to_string(have) + " data bytes)");
  if (have > need)
    where.fail(std::to_string(have - need) + " bytes after the data: the header describes " +
               describe(out.header) + ", which ends at byte " +
               std::to_string(out.data_offset + need) + ", but the " + noun + " is " +
               std::to_string(size) +
               " bytes (a .npy file holds one array: was np.save called twice on one file?)");
  return out;
}

inline NpyArray npy_array(const npy_header& h) {
  NpyArray a;
  a.dtype = h.dtype.descr();
  a.shape = h.shape;
  a.fortran_order = h.fortran_order;
  return a;
}

// A .npy file opened, its header read and checked against its size; the data not yet read.
struct npy_file {
  io::input_file in;
  npy_where where;
  npy_layout layout;

  npy_file(const std::filesystem::path& file, std::string_view function)
      : in(file, function), where{function, file, {}, "file"}, layout(read_layout()) {}

  // Reads the data (header.data_bytes() bytes) into `out`.
  void read_data(void* out) const {
    if (!in.read_at(layout.data_offset, out, layout.header.data_bytes()))
      where.fail("truncated data: the file shrank to less than " +
                 std::to_string(layout.data_offset + layout.header.data_bytes()) +
                 " bytes while it was read");
  }

  // The whole array, as the file holds it.
  NpyArray array() const {
    NpyArray a = npy_array(layout.header);
    a.bytes.resize(static_cast<std::size_t>(layout.header.data_bytes()));
    read_data(a.bytes.data());
    return a;
  }

 private:
  npy_layout read_layout() const {
    auto read = [&](std::uint64_t offset, void* out, std::uint64_t n) {
      return in.read_at(offset, out, n);
    };
    return read_npy_layout(read, in.size(), where);
  }
};

// A whole .npy file.
inline NpyArray read_npy_file(const std::filesystem::path& file, std::string_view function) {
  return npy_file(file, function).array();
}

// A .npy file held in memory (an .npz entry): its data becomes the array's, without a copy.
inline NpyArray npy_from_bytes(std::vector<std::byte>&& buffer, const npy_where& where) {
  auto read = [&](std::uint64_t offset, void* out, std::uint64_t n) {
    if (offset > buffer.size() || n > buffer.size() - offset) return false;
    if (n > 0) std::memcpy(out, buffer.data() + offset, static_cast<std::size_t>(n));
    return true;
  };
  const auto layout = read_npy_layout(read, buffer.size(), where);
  NpyArray a = npy_array(layout.header);
  buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(layout.data_offset));
  a.bytes = std::move(buffer);
  return a;
}

// The matrix in a .npy file whose dtype is T's own (this machine's byte order, not bool, whose
// bytes other than 0 and 1 need converting), read straight into the matrix's memory: one pass
// over the data instead of a read, a copy and a conversion, for a column-major file; a row-major
// one is read whole and transposed once. Nothing when the file needs converting or has more
// than 2 dimensions: load_npy's general path then reads the same opened file.
template <class T>
std::optional<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>> load_npy_direct(const npy_file& f) {
  if constexpr (std::is_same_v<T, bool>) {
    return std::nullopt;
  } else {
    const npy_header& h = f.layout.header;
    const npy_dtype native = npy_dtype_of<T>();
    if (h.shape.size() > 2 || h.dtype.kind != native.kind || h.dtype.size != native.size ||
        h.dtype.swapped())
      return std::nullopt;
    const Eigen::Index rows = h.shape.empty() ? 1 : static_cast<Eigen::Index>(h.shape[0]);
    const Eigen::Index cols = h.shape.size() < 2 ? 1 : static_cast<Eigen::Index>(h.shape[1]);
    Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> m(rows, cols);
    if (h.fortran_order || rows == 1 || cols == 1) {
      f.read_data(m.data());
    } else {
      Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> c(rows, cols);
      f.read_data(c.data());
      m = c;
    }
    return m;
  }
}

// Checks that an array's parts agree; returns its parsed header. grove::argument_error if not.
inline npy_header checked_npy_array(const NpyArray& a, std::string_view function) {
  auto fail = [&](const std::string& problem) {
    throw grove::argument_error(std::string(function) + ": " + problem);
  };
  npy_header h;
  std::string problem;
  if (!parse_npy_descr(a.dtype, h.dtype, problem)) fail("the array's " + problem);
  if (a.shape.size() > npy_max_dims)
    fail("the array has " + std::to_string(a.shape.size()) + " dimensions, more than " +
         std::to_string(npy_max_dims));
  for (const auto d : a.shape)
    if (d < 0) fail("the array's shape " + shape_string(a.shape) + " has a negative dimension");
  h.shape = a.shape;
  h.fortran_order = a.fortran_order;
  if (auto overflow = count_npy_elements(h); !overflow.empty()) fail("the array's " + overflow);
  if (a.bytes.size() != h.data_bytes())
    fail("the array's shape " + shape_string(a.shape) + " and dtype " + h.dtype.describe() +
         " need " + std::to_string(h.data_bytes()) + " bytes, but it holds " +
         std::to_string(a.bytes.size()));
  return h;
}

// The array as a column-major Eigen object of numpy's shape (rows x cols for a matrix): the
// conversion of convert_column_major, or the problem.
template <class T>
std::string npy_convert(const NpyArray& a, const npy_header& h, T* out) {
  return convert_column_major(h.dtype, a.shape, a.fortran_order, a.bytes.data(),
                              static_cast<std::uint64_t>(h.elements), out);
}

inline std::string npy_rank_problem(const NpyArray& a, const std::string& instead) {
  return "the array has " + std::to_string(a.shape.size()) + " dimensions (shape " +
         shape_string(a.shape) + "), and a matrix takes 0, 1 or 2: use " + instead + "<T, " +
         std::to_string(a.shape.size()) + "> (grove/data/npy_tensor.hpp)";
}

template <class T>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> npy_matrix_shape(const NpyArray& a) {
  const Eigen::Index rows = a.shape.empty() ? 1 : static_cast<Eigen::Index>(a.shape[0]);
  const Eigen::Index cols = a.shape.size() < 2 ? 1 : static_cast<Eigen::Index>(a.shape[1]);
  return Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>(rows, cols);
}

// What a plain (evaluated) Eigen object is as a .npy array, pointing at its data.
struct npy_view {
  npy_dtype dtype;
  std::vector<std::int64_t> shape;
  bool fortran_order = false;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

// numpy writes fortran_order False for an array that is both C- and Fortran-contiguous: one
// with no elements or with at most one axis longer than 1. grove does the same, so that its
// files are numpy's bytes.
inline bool npy_fortran_order(bool column_major, const std::vector<std::int64_t>& shape) {
  if (!column_major) return false;
  int longer = 0;
  for (const auto d : shape) {
    if (d == 0) return false;
    if (d > 1) ++longer;
  }
  return longer > 1;
}

// `Derived` is the object the caller passed (a compile-time column vector is written as a 1-D
// array), `plain` its evaluation (contiguous, in its storage order).
template <class Derived, class Plain>
npy_view npy_view_of(const Plain& plain) {
  using T = typename Plain::Scalar;
  npy_view v;
  v.dtype = npy_dtype_of<T>();
  if constexpr (Derived::ColsAtCompileTime == 1)
    v.shape = {static_cast<std::int64_t>(plain.rows())};
  else
    v.shape = {static_cast<std::int64_t>(plain.rows()), static_cast<std::int64_t>(plain.cols())};
  v.fortran_order = npy_fortran_order(!Plain::IsRowMajor, v.shape);
  v.data = plain.data();
  v.bytes = static_cast<std::size_t>(plain.size()) * sizeof(T);
  return v;
}

inline NpyArray npy_from_view(const npy_view& v) {
  NpyArray a;
  a.dtype = v.dtype.descr();
  a.shape = v.shape;
  a.fortran_order = v.fortran_order;
  const auto* p = static_cast<const std::byte*>(v.data);
  if (v.bytes > 0) a.bytes.assign(p, p + v.bytes);
  return a;
}

inline void write_npy_file(const std::filesystem::path& file, std::string_view function,
                           const std::string& header, const void* data, std::size_t bytes) {
  io::atomic_writer out(file, function);
  out.write(header.data(), header.size());
  if (bytes > 0) out.write(data, bytes);
  out.commit();
}

// A whole .npy file's bytes (for an .npz entry).
inline std::vector<std::byte> npy_file_bytes(const NpyArray& a, const npy_header& h) {
  const std::string header = npy_header_bytes(h.dtype.descr(), a.shape, a.fortran_order);
  std::vector<std::byte> out(header.size() + a.bytes.size());
  std::memcpy(out.data(), header.data(), header.size());
  if (!a.bytes.empty()) std::memcpy(out.data() + header.size(), a.bytes.data(), a.bytes.size());
  return out;
}

}  // namespace detail

template <class T>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> NpyArray::as_matrix() const {
  static_assert(detail::is_npy_element<T>,
                "grove: NpyArray::as_matrix<T>: T is bool, a signed or unsigned integer, float, "
                "double, Eigen::half, std::complex<float> or std::complex<double>");
  constexpr std::string_view function = "grove::data::NpyArray::as_matrix";
  const auto h = detail::checked_npy_array(*this, function);
  if (shape.size() > 2)
    throw grove::shape_error(std::string(function) + ": " +
                             detail::npy_rank_problem(*this, "as_tensor"));
  auto m = detail::npy_matrix_shape<T>(*this);
  if (auto problem = detail::npy_convert(*this, h, m.data()); !problem.empty())
    throw grove::argument_error(std::string(function) + ": " + problem);
  return m;
}

/// Reads a whole .npy file as it is: its dtype, shape, order and bytes (see NpyArray). Throws
/// grove::io::format_error for a malformed file (see the top of this header), file_error when it
/// cannot be opened or read or is not a regular file.
inline NpyArray read_npy(const std::filesystem::path& file) {
  return detail::read_npy_file(file, "grove::data::read_npy");
}

/// Reads a .npy file of 0, 1 or 2 dimensions as an Eigen matrix whose (i, j) is numpy's
/// a[i, j] (np.load's array): a 1-D array as one column, a 0-D array as 1x1, in either file
/// order. T follows the conversion rules at the top of this header. Throws format_error for a
/// malformed file, an array of more dimensions (load_npy<T, Rank> in grove/data/npy_tensor.hpp
/// reads those), a dtype that cannot become T or a value that does not fit it (naming the
/// element's index in numpy's order and its value); file_error as read_npy.
template <class T>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> load_npy(const std::filesystem::path& file) {
  static_assert(detail::is_npy_element<T>,
                "grove: load_npy<T>: T is bool, a signed or unsigned integer, float, double, "
                "Eigen::half, std::complex<float> or std::complex<double>");
  constexpr std::string_view function = "grove::data::load_npy";
  const detail::npy_file f(file, function);
  if (auto direct = detail::load_npy_direct<T>(f)) return std::move(*direct);
  const auto a = f.array();
  if (a.shape.size() > 2)
    throw io::format_error(function, file, detail::npy_rank_problem(a, "load_npy"));
  const auto h = detail::checked_npy_array(a, function);
  auto m = detail::npy_matrix_shape<T>(a);
  if (auto problem = detail::npy_convert(a, h, m.data()); !problem.empty())
    throw io::format_error(function, file, problem);
  return m;
}

/// An Eigen object (a matrix, vector, array, or any expression, which is evaluated first) as an
/// NpyArray of dtype T in this machine's byte order: a compile-time column vector (VectorXd,
/// ArrayXf...) as a 1-D array, anything else as 2-D; a column-major object with fortran_order
/// True and its bytes as Eigen stores them (no transpose), a row-major one with False. (Like
/// numpy, fortran_order is False whenever the two orders hold the same bytes: a row, a column,
/// no elements.)
template <class Derived>
NpyArray to_npy(const Eigen::DenseBase<Derived>& x) {
  const auto& plain = x.derived().eval();
  return detail::npy_from_view(detail::npy_view_of<Derived>(plain));
}

/// Writes an Eigen object as a .npy file that np.load reads back bit for bit, laid out as
/// to_npy says, with numpy's own header (version 1.0 unless it needs 2.0, the data starting at
/// a multiple of 64 bytes). The file is replaced atomically, and only if it is missing or a
/// regular file: file_error otherwise, or when the system refuses to write it.
template <class Derived>
void save_npy(const std::filesystem::path& file, const Eigen::DenseBase<Derived>& x) {
  const auto& plain = x.derived().eval();
  const auto v = detail::npy_view_of<Derived>(plain);
  detail::write_npy_file(file, "grove::data::save_npy",
                         detail::npy_header_bytes(v.dtype.descr(), v.shape, v.fortran_order),
                         v.data, v.bytes);
}

/// Writes an NpyArray as a .npy file, as it is (its dtype's byte order, its order). Throws
/// grove::argument_error when its parts disagree (an unknown dtype, a negative dimension, bytes
/// that are not shape x itemsize), file_error as the other save_npy.
inline void save_npy(const std::filesystem::path& file, const NpyArray& array) {
  constexpr std::string_view function = "grove::data::save_npy";
  const auto h = detail::checked_npy_array(array, function);
  detail::write_npy_file(
      file, function, detail::npy_header_bytes(h.dtype.descr(), array.shape, array.fortran_order),
      array.bytes.data(), array.bytes.size());
}

}  // namespace grove::data
