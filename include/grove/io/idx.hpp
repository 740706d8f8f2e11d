// grove/io/idx.hpp: IDX files, the format of MNIST and Fashion-MNIST, gzip-compressed or plain.
//
//   auto [train, test] = grove::io::load_mnist<float>("/usr/share/datasets/fashion-mnist");
//   // train.images: 784 x 60000 (one column per image, pixels in row-major order, in [0, 1])
//   // train.labels: 60000 labels in [0, 10)
//
// Needs zlib (link ZLIB::ZLIB; Debian: zlib1g-dev). Whether a file is gzip-compressed is decided
// by its first bytes, not its name.
//
// Errors: a file that cannot be opened or read, or that is not a regular file (a directory, a
// FIFO, a device: never waited on), raises grove::io::file_error (a std::system_error); a
// malformed one raises grove::io::format_error, whose message names the function, the file, what
// is wrong and where: a wrong magic number, an unknown type code, a truncated header or data
// (with the offset where the data ends and how much the header promised), bytes after the data
// (a gzip file that inflates to more than its header declares is refused after at most 1 MiB
// more, however much more it holds), corrupt or truncated gzip data (the CRC-32 and length
// trailer included), bytes after the gzip stream that are not another gzip member, images and
// labels of different counts, a label outside the class range, a header declaring more data than
// the cap (default_max_idx_bytes, overridable; refused before anything is allocated).
//
// Memory: what the header declares, at most, and no more than the data that has arrived (a
// gzip file is read into memory that grows as it inflates), so that neither a header's claim
// nor a gzip bomb allocates more than the file really holds up to what its header declares.
#pragma once

#include <zlib.h>

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/io/detail/atomic_file.hpp"
#include "grove/io/detail/gzip_stream.hpp"
#include "grove/io/error.hpp"

namespace grove::io {

/// The element types an IDX file can hold (the third byte of its magic number).
enum class idx_type : std::uint8_t {
  u8 = 0x08,   ///< unsigned byte (MNIST's images and labels)
  i8 = 0x09,   ///< signed byte
  i16 = 0x0B,  ///< big-endian int16
  i32 = 0x0C,  ///< big-endian int32
  f32 = 0x0D,  ///< big-endian float32
  f64 = 0x0E,  ///< big-endian float64
};

/// The size in bytes of one element of type t.
constexpr std::size_t idx_element_size(idx_type t) {
  switch (t) {
    case idx_type::u8:
    case idx_type::i8:
      return 1;
    case idx_type::i16:
      return 2;
    case idx_type::i32:
    case idx_type::f32:
      return 4;
    case idx_type::f64:
      return 8;
  }
  return 0;
}

/// A name for an element type, as the error messages use it.
constexpr const char* idx_type_name(idx_type t) {
  switch (t) {
    case idx_type::u8:
      return "unsigned byte (0x08)";
    case idx_type::i8:
      return "signed byte (0x09)";
    case idx_type::i16:
      return "int16 (0x0B)";
    case idx_type::i32:
      return "int32 (0x0C)";
    case idx_type::f32:
      return "float32 (0x0D)";
    case idx_type::f64:
      return "float64 (0x0E)";
  }
  return "unknown";
}

/// A whole IDX file: its element type, its dimensions (the first is usually the number of
/// examples) and its elements in the file's (row-major) order, converted to native byte order.
struct IdxArray {
  idx_type type = idx_type::u8;
  std::vector<std::size_t> dims;
  std::vector<std::uint8_t> bytes;

  /// The number of elements.
  std::size_t size() const { return bytes.size() / idx_element_size(type); }

  /// The elements converted to T.
  template <class T>
  std::vector<T> values() const {
    std::vector<T> out(size());
    auto convert = [&](auto tag) {
      using S = decltype(tag);
      for (std::size_t i = 0; i < out.size(); ++i) {
        S v;
        std::memcpy(&v, bytes.data() + i * sizeof(S), sizeof(S));
        out[i] = static_cast<T>(v);
      }
    };
    switch (type) {
      case idx_type::u8:
        convert(std::uint8_t{});
        break;
      case idx_type::i8:
        convert(std::int8_t{});
        break;
      case idx_type::i16:
        convert(std::int16_t{});
        break;
      case idx_type::i32:
        convert(std::int32_t{});
        break;
      case idx_type::f32:
        convert(float{});
        break;
      case idx_type::f64:
        convert(double{});
        break;
    }
    return out;
  }
};

namespace detail {

struct idx_header {
  idx_type type = idx_type::u8;
  std::vector<std::size_t> dims;
  std::uint64_t header_bytes = 0;
  std::uint64_t elements = 1;
  // The product of the dimensions after the first (the elements of one example), which a zero
  // first dimension does not make zero.
  std::uint64_t per_example = 1;

  std::uint64_t data_bytes() const { return elements * idx_element_size(type); }
  std::string shape() const {
    std::string s;
    for (std::size_t i = 0; i < dims.size(); ++i) {
      if (i) s += 'x';
      s += std::to_string(dims[i]);
    }
    return s;
  }
  std::string describe() const { return shape() + " elements of type " + idx_type_name(type); }
};

inline std::uint32_t big_endian_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

inline std::string hex32(std::uint32_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xF];
  return s;
}

// "truncated data: the header describes ..., but the data ends at byte N (M data bytes)".
inline std::string truncation(const gzip_stream& in, const idx_header& h, std::uint64_t have) {
  return "truncated data: the header describes " + h.describe() + ", " +
         std::to_string(h.data_bytes()) + " bytes after the " + std::to_string(h.header_bytes) +
         "-byte header, but the data ends " + in.where(h.header_bytes + have) + " (" +
         std::to_string(have) + " data bytes)";
}

// Reads and checks the header. What it claims is checked before anything is allocated for the
// data: against `max_bytes` (the caller's cap on the data) and, for a plain file, against the
// file's size, so that a few bytes claiming gigabytes are reported as what they are.
inline idx_header read_header(gzip_stream& in, std::uint64_t max_bytes) {
  unsigned char magic[4];
  const std::size_t got = in.read(magic, 4);
  if (got == 0) in.fail("the file is empty (an IDX file starts with a 4-byte magic number)");
  if (got < 4)
    in.fail("truncated header: the file ends " + in.where(got) +
            ", inside the 4-byte magic number");
  const std::uint32_t m = big_endian_u32(magic);
  if (magic[0] != 0 || magic[1] != 0)
    in.fail("wrong magic number " + hex32(m) + " " + in.where(0) +
            ": an IDX file starts with two zero bytes, a type code and the number of dimensions "
            "(e.g. 0x00000803 for MNIST images, 0x00000801 for labels)" +
            (magic[0] == 0x1f && magic[1] == 0x8b ? "; this looks like gzip data inside a gzip file"
                                                  : ""));
  const auto type = static_cast<idx_type>(magic[2]);
  if (idx_element_size(type) == 0)
    in.fail("wrong magic number " + hex32(m) + " " + in.where(0) + ": unknown type code 0x" +
            hex32(magic[2]).substr(8) +
            " in byte 2 (expected 0x08, 0x09, 0x0B, 0x0C, 0x0D or 0x0E)");
  const int ndims = magic[3];
  if (ndims == 0)
    in.fail("wrong magic number " + hex32(m) + " " + in.where(0) + ": zero dimensions in byte 3");
  idx_header h;
  h.type = type;
  h.header_bytes = 4 + 4 * static_cast<std::uint64_t>(ndims);
  std::vector<unsigned char> raw(static_cast<std::size_t>(4 * ndims));
  const std::size_t dims_got = in.read(raw.data(), raw.size());
  if (dims_got < raw.size())
    in.fail("truncated header: the magic number announces " + std::to_string(ndims) +
            " dimensions (" + std::to_string(h.header_bytes) + " header bytes) but the file ends " +
            in.where(4 + dims_got));
  // Every partial product is kept below 2^63 / 16, so that neither the element count, nor the
  // elements of one example, nor their bytes can overflow, even when another dimension is 0.
  constexpr std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() / 32;
  for (int i = 0; i < ndims; ++i) {
    const std::uint32_t d = big_endian_u32(raw.data() + 4 * i);
    h.dims.push_back(d);
    if (i > 0) {
      if (d != 0 && h.per_example > limit / d)
        in.fail("the dimensions in the header (" + h.shape() + "...) are too large");
      h.per_example *= d;
    }
  }
  if (h.dims[0] != 0 && h.per_example > limit / h.dims[0])
    in.fail("the dimensions in the header (" + h.shape() + ") are too large");
  h.elements = static_cast<std::uint64_t>(h.dims[0]) * h.per_example;
  if (h.data_bytes() > static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()))
    in.fail("the header's dimensions " + h.shape() + " are too large for this machine");
  if (h.data_bytes() > max_bytes)
    in.fail("the header describes " + h.describe() + ", " + std::to_string(h.data_bytes()) +
            " data bytes, more than the limit of " + std::to_string(max_bytes) +
            " bytes (pass a larger max_bytes to read a larger dataset)");
  if (!in.compressed() &&
      h.data_bytes() > in.file_size() - std::min(in.file_size(), h.header_bytes))
    in.fail(truncation(in, h, in.file_size() - std::min(in.file_size(), h.header_bytes)));
  return h;
}

// Reads `n` data bytes that start `done` bytes into the data, or reports the truncation.
inline void read_data(gzip_stream& in, const idx_header& h, void* out, std::size_t n,
                      std::uint64_t done) {
  const std::size_t got = in.read(out, n);
  if (got < n) in.fail(truncation(in, h, done + got));
}

// The whole data, read into memory that grows as the data arrives: a gzip file cannot say how
// much it holds until it has been decompressed, and one whose header claims more than it has
// must be reported as truncated, not allocated for. (A plain file's claim was checked against
// its size in read_header.)
inline std::vector<std::uint8_t> read_all_data(gzip_stream& in, const idx_header& h) {
  const auto n = static_cast<std::size_t>(h.data_bytes());
  std::vector<std::uint8_t> out;
  if (!in.compressed()) {
    out.resize(n);
    read_data(in, h, out.data(), n, 0);
    return out;
  }
  while (out.size() < n) {
    const std::size_t done = out.size();
    const std::size_t next = std::min(n, std::max<std::size_t>(std::size_t{1} << 20, 2 * done));
    out.resize(next);
    read_data(in, h, out.data() + done, next - done, done);
  }
  return out;
}

// How much decompressed data after the end expect_end reads to say how much there is: a gzip
// bomb (a few kilobytes that inflate to terabytes) is refused after this much, not after all of
// it has been decompressed.
inline constexpr std::uint64_t max_idx_excess_counted = std::uint64_t{1} << 20;

// Refuses data after what the header describes: the file must end there (for a gzip file, the
// decompressed data must be exactly the size the header declares). Nothing is allocated for the
// excess, and at most max_idx_excess_counted bytes of it are decompressed.
inline void expect_end(gzip_stream& in, const idx_header& h) {
  unsigned char extra[4096];
  std::uint64_t more = 0;
  for (std::size_t r; more <= max_idx_excess_counted && (r = in.read(extra, sizeof extra)) > 0;)
    more += r;
  if (more == 0) return;
  const std::uint64_t end = h.header_bytes + h.data_bytes();
  std::string how_much;
  if (!in.compressed())
    how_much = std::to_string(in.file_size() > end ? in.file_size() - end : more);
  else if (more > max_idx_excess_counted)
    how_much = "more than " + std::to_string(max_idx_excess_counted);
  else
    how_much = std::to_string(more);
  in.fail("unexpected data after the end: the header describes " + h.describe() + " (" +
          std::to_string(end) + " bytes in all) but " + how_much + " more bytes follow " +
          in.where(end) +
          (in.compressed() && more > max_idx_excess_counted
               ? " (decompressed no further: the data inflates to more than the header declares)"
               : ""));
}

template <class S>
S from_big_endian(S v) {
  if constexpr (std::endian::native == std::endian::little && sizeof(S) > 1) {
    unsigned char b[sizeof(S)];
    std::memcpy(b, &v, sizeof(S));
    std::reverse(b, b + sizeof(S));
    std::memcpy(&v, b, sizeof(S));
  }
  return v;
}

// What is left of a budget of data bytes after `used` of them.
inline std::uint64_t remaining(std::uint64_t budget, std::uint64_t used) {
  return budget > used ? budget - used : 0;
}

}  // namespace detail

/// The default cap on the data bytes (decompressed, as the header counts them) that the IDX
/// readers accept: 2 GiB, some forty times Fashion-MNIST's training images. A header claiming
/// more is refused before anything is allocated; pass a larger `max_bytes` to read more.
inline constexpr std::uint64_t default_max_idx_bytes = std::uint64_t{1} << 31;

/// Reads any IDX file (gzip-compressed or plain): its type, dimensions and elements. Throws
/// format_error for a malformed file or one whose data exceeds `max_bytes`, file_error (a
/// std::system_error) when it cannot be opened or read or is not a regular file.
inline IdxArray read_idx(const std::filesystem::path& file,
                         std::uint64_t max_bytes = default_max_idx_bytes) {
  detail::gzip_stream in("grove::io::read_idx", file);
  const auto h = detail::read_header(in, max_bytes);
  IdxArray out;
  out.type = h.type;
  out.dims = h.dims;
  out.bytes = detail::read_all_data(in, h);
  detail::expect_end(in, h);
  const std::size_t es = idx_element_size(h.type);
  for (std::size_t i = 0; es > 1 && i < out.bytes.size(); i += es)
    std::reverse(out.bytes.data() + i, out.bytes.data() + i + es);
  return out;
}

/// Reads an IDX file of images (unsigned bytes, shape count x rows x cols, or any count x ...) as
/// a (rows * cols) x count matrix: one column per image, its pixels in the file's row-major order
/// (as JAX's `images.reshape(count, -1)` row i), each multiplied by `scale` (1/255 by default, so
/// values are in [0, 1]). A file of 0 images gives a (rows * cols) x 0 matrix. Throws as read_idx.
template <class T = float>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> read_idx_images(
    const std::filesystem::path& file, std::type_identity_t<T> scale = T(1) / T(255),
    std::uint64_t max_bytes = default_max_idx_bytes) {
  static_assert(std::is_floating_point_v<T>,
                "grove::io::read_idx_images: T must be float or double");
  detail::gzip_stream in("grove::io::read_idx_images", file);
  const auto h = detail::read_header(in, max_bytes);
  if (h.type != idx_type::u8)
    in.fail(std::string("expected unsigned-byte pixels (type 0x08), the header says ") +
            idx_type_name(h.type));
  if (h.dims.size() < 2)
    in.fail(
        "expected images (at least 2 dimensions: count x pixels, usually count x rows x cols), the "
        "header has " +
        std::to_string(h.dims.size()) + " dimension (shape " + h.shape() + ")");
  const auto count = static_cast<Eigen::Index>(h.dims[0]);
  const auto pixels = static_cast<Eigen::Index>(h.per_example);
  // The bytes first, then the matrix: nothing the size of the claim is allocated before the data
  // is there.
  const std::vector<std::uint8_t> bytes = detail::read_all_data(in, h);
  detail::expect_end(in, h);
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> images(pixels, count);
  if (images.size() > 0)
    images = Eigen::Map<const Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic>>(
                 bytes.data(), pixels, count)
                 .template cast<T>() *
             scale;
  return images;
}

/// Reads an IDX file of labels (one dimension, integers) and checks that each is in [0,
/// num_classes). Throws grove::argument_error for num_classes <= 0, otherwise as read_idx.
inline Eigen::VectorXi read_idx_labels(const std::filesystem::path& file, int num_classes = 10,
                                       std::uint64_t max_bytes = default_max_idx_bytes) {
  const char* function = "grove::io::read_idx_labels";
  if (num_classes <= 0)
    throw grove::argument_error(std::string(function) + ": num_classes must be positive, got " +
                                std::to_string(num_classes));
  detail::gzip_stream in(function, file);
  const auto h = detail::read_header(in, max_bytes);
  if (h.type == idx_type::f32 || h.type == idx_type::f64)
    in.fail(std::string("expected integer labels, the header says ") + idx_type_name(h.type));
  if (h.dims.size() != 1)
    in.fail("expected labels (1 dimension), the header has " + std::to_string(h.dims.size()) +
            " dimensions (shape " + h.shape() + ")");
  const std::vector<std::uint8_t> raw = detail::read_all_data(in, h);
  detail::expect_end(in, h);
  const std::size_t es = idx_element_size(h.type);
  Eigen::VectorXi labels(static_cast<Eigen::Index>(h.dims[0]));
  for (Eigen::Index i = 0; i < labels.size(); ++i) {
    const std::uint8_t* p = raw.data() + static_cast<std::size_t>(i) * es;
    std::int64_t v = 0;
    switch (h.type) {
      case idx_type::u8:
        v = *p;
        break;
      case idx_type::i8:
        v = static_cast<std::int8_t>(*p);
        break;
      case idx_type::i16: {
        std::int16_t s;
        std::memcpy(&s, p, 2);
        v = detail::from_big_endian(s);
        break;
      }
      default: {
        std::int32_t s;
        std::memcpy(&s, p, 4);
        v = detail::from_big_endian(s);
        break;
      }
    }
    if (v < 0 || v >= num_classes)
      in.fail("label " + std::to_string(v) + " of example " + std::to_string(i) + " (" +
              in.where(h.header_bytes + static_cast<std::uint64_t>(i) * es) + ") is outside [0, " +
              std::to_string(num_classes) + ")");
    labels(i) = static_cast<int>(v);
  }
  return labels;
}

/// Images and their labels. images: features x count (one column per example).
template <class T = float>
struct Dataset {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> images;
  Eigen::VectorXi labels;
  Eigen::Index size() const { return labels.size(); }
};

namespace detail {
// An images file and its labels file within a budget of data bytes, which it reduces by what it
// read.
template <class T>
Dataset<T> read_idx_dataset(const std::filesystem::path& images_file,
                            const std::filesystem::path& labels_file, int num_classes, T scale,
                            std::uint64_t& budget) {
  Dataset<T> d;
  d.images = read_idx_images<T>(images_file, scale, budget);
  budget = remaining(budget, static_cast<std::uint64_t>(d.images.size()));
  d.labels = read_idx_labels(labels_file, num_classes, budget);
  budget = remaining(budget, static_cast<std::uint64_t>(d.labels.size()));
  if (d.images.cols() != d.labels.size())
    throw format_error("grove::io::read_idx_dataset", labels_file,
                       "has " + std::to_string(d.labels.size()) + " labels but " +
                           quoted_path(images_file) + " has " + std::to_string(d.images.cols()) +
                           " images");
  return d;
}
}  // namespace detail

/// An images file and its labels file, checked to have as many examples; the two together may
/// hold at most default_max_idx_bytes of data (read_idx_images and read_idx_labels take a cap of
/// their own). Throws as read_idx_images and read_idx_labels, and format_error when the counts
/// differ.
template <class T = float>
Dataset<T> read_idx_dataset(const std::filesystem::path& images_file,
                            const std::filesystem::path& labels_file, int num_classes = 10,
                            std::type_identity_t<T> scale = T(1) / T(255)) {
  std::uint64_t budget = default_max_idx_bytes;
  return detail::read_idx_dataset<T>(images_file, labels_file, num_classes, scale, budget);
}

/// The training and test sets of MNIST or Fashion-MNIST (the same file names), from a directory
/// holding train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
/// t10k-labels-idx1-ubyte, each gzip-compressed (.gz) or plain. The Debian package
/// dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist.
template <class T = float>
struct MnistSplits {
  Dataset<T> train, test;
};

/// The path of `name` (.gz first, then plain) in `dir`: the first that exists and is not a
/// directory (a FIFO or a device is found here and refused when it is read). file_error
/// (ENOENT) naming both when neither exists; file_error (ENOTDIR) when `dir` is not a directory;
/// file_error with the system's own error (EACCES for a directory the user may not read, ELOOP,
/// EIO...) when whether a file exists cannot be told.
inline std::filesystem::path find_idx_file(const std::filesystem::path& dir,
                                           const std::string& name) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    const bool exists = std::filesystem::exists(dir, ec);
    throw file_error(std::make_error_code(exists ? std::errc::not_a_directory
                                                 : std::errc::no_such_file_or_directory),
                     "grove::io: " + detail::quoted_path(dir) +
                         (exists ? " is not a directory" : " does not exist"));
  }
  for (const auto& candidate : {dir / (name + ".gz"), dir / name}) {
    const auto st = std::filesystem::status(candidate, ec);
    if (std::filesystem::exists(st) && !std::filesystem::is_directory(st)) return candidate;
    // Not "missing" unless the system says so: a directory the user may not search (EACCES), a
    // link loop (ELOOP) or an I/O error is reported as what it is.
    if (ec && st.type() != std::filesystem::file_type::not_found)
      throw file_error(ec, "grove::io: cannot look for " + name + ".gz or " + name + " in " +
                               detail::quoted_path(dir) + ": cannot read " +
                               detail::quoted_path(candidate));
  }
  throw file_error(
      std::make_error_code(std::errc::no_such_file_or_directory),
      "grove::io: " + detail::quoted_path(dir) + " has neither " + name + ".gz nor " + name);
}

/// Reads the four files of `dir` (see MnistSplits), which together may hold at most `max_bytes`
/// of data. Throws as read_idx_dataset and find_idx_file.
template <class T = float>
MnistSplits<T> load_mnist(const std::filesystem::path& dir, int num_classes = 10,
                          std::uint64_t max_bytes = default_max_idx_bytes) {
  // All four found before any is read, so that a missing file is reported at once.
  const auto train_images = find_idx_file(dir, "train-images-idx3-ubyte");
  const auto train_labels = find_idx_file(dir, "train-labels-idx1-ubyte");
  const auto test_images = find_idx_file(dir, "t10k-images-idx3-ubyte");
  const auto test_labels = find_idx_file(dir, "t10k-labels-idx1-ubyte");
  const T scale = T(1) / T(255);
  MnistSplits<T> out;
  out.train =
      detail::read_idx_dataset<T>(train_images, train_labels, num_classes, scale, max_bytes);
  out.test = detail::read_idx_dataset<T>(test_images, test_labels, num_classes, scale, max_bytes);
  return out;
}

}  // namespace grove::io
