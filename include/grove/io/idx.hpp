// grove/io/idx.hpp: IDX files, the format of MNIST and Fashion-MNIST, gzip-compressed or plain.
//
//   auto [train, test] = grove::io::load_mnist<float>("/usr/share/datasets/fashion-mnist");
//   // train.images: 784 x 60000 (one column per image, pixels in row-major order, in [0, 1])
//   // train.labels: 60000 labels in [0, 10)
//
// Needs zlib (link ZLIB::ZLIB; Debian: zlib1g-dev). Whether a file is gzip-compressed is decided
// by its first bytes, not its name.
//
// Errors: a file that cannot be opened or read raises std::system_error; a malformed one raises
// grove::io::format_error, whose message names the function, the file, what is wrong and where:
// a wrong magic number, an unknown type code, a truncated header or data (with the offset where
// the data ends and how much the header promised), bytes after the data, corrupt gzip data,
// images and labels of different counts, a label outside the class range.
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

// A gzip or plain file read through zlib, which tells a format_error from an I/O error and knows
// the offset in the (decompressed) data.
class idx_stream {
 public:
  idx_stream(const char* function, std::filesystem::path file)
      : function_(function), file_(std::move(file)) {
    errno = 0;
    f_ = gzopen(file_.c_str(), "rb");
    if (!f_) {
      const int e = errno ? errno : ENOMEM;
      throw std::system_error(e, std::generic_category(),
                              std::string(function_) + ": cannot open " + file_.string());
    }
    gzbuffer(f_, 1 << 17);
  }
  ~idx_stream() {
    if (f_) gzclose_r(f_);
  }
  idx_stream(const idx_stream&) = delete;
  idx_stream& operator=(const idx_stream&) = delete;

  // Reads up to n bytes; fewer only at the end of the data. Corrupt or truncated gzip data is a
  // format_error; a failing read a system_error.
  std::size_t read(void* out, std::size_t n) {
    auto* p = static_cast<unsigned char*>(out);
    std::size_t got = 0;
    while (got < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
      errno = 0;
      const int r = gzread(f_, p + got, chunk);
      if (r < 0) check_error();
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
      if (static_cast<unsigned>(r) < chunk) {
        check_error();  // zlib reports a truncated or corrupt stream after the short read
        if (gzeof(f_)) break;
      }
    }
    offset_ += got;
    return got;
  }

  std::uint64_t offset() const { return offset_; }
  bool compressed() const { return gzdirect(f_) == 0; }
  const std::filesystem::path& file() const { return file_; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw format_error(function_, file_, problem);
  }

  // "at offset N" (of the decompressed data, for a gzip file).
  std::string where(std::uint64_t offset) const {
    return "at byte " + std::to_string(offset) + (compressed() ? " of the decompressed data" : "");
  }

 private:
  void check_error() {
    int code = Z_OK;
    const char* message = gzerror(f_, &code);
    if (code == Z_OK || code == Z_STREAM_END) return;
    if (code == Z_ERRNO) {
      const int e = errno ? errno : EIO;
      throw std::system_error(e, std::generic_category(),
                              std::string(function_) + ": cannot read " + file_.string());
    }
    std::string what = message ? message : "unknown zlib error";
    const std::string prefix = file_.string() + ": ";  // zlib puts the path first
    if (what.compare(0, prefix.size(), prefix) == 0) what.erase(0, prefix.size());
    if (code == Z_BUF_ERROR)
      fail("the gzip stream is truncated (" + what + ") after " + std::to_string(offset_) +
           " bytes of decompressed data");
    fail("corrupt gzip data (" + what + ") after " + std::to_string(offset_) +
         " bytes of decompressed data");
  }

  const char* function_;
  std::filesystem::path file_;
  gzFile f_ = nullptr;
  std::uint64_t offset_ = 0;
};

struct idx_header {
  idx_type type = idx_type::u8;
  std::vector<std::size_t> dims;
  std::uint64_t header_bytes = 0;
  std::uint64_t elements = 1;

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

inline idx_header read_header(idx_stream& in) {
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
  for (int i = 0; i < ndims; ++i) {
    const std::uint32_t d = big_endian_u32(raw.data() + 4 * i);
    h.dims.push_back(d);
    if (d != 0 && h.elements > std::numeric_limits<std::uint64_t>::max() / 16 / d)
      in.fail("the dimensions in the header are too large");
    h.elements *= d;
  }
  if (h.data_bytes() > static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()))
    in.fail("the header's dimensions " + h.shape() + " are too large for this machine");
  return h;
}

// Reads `n` data bytes that start `done` bytes into the data, or reports the truncation.
inline void read_data(idx_stream& in, const idx_header& h, void* out, std::size_t n,
                      std::uint64_t done) {
  const std::size_t got = in.read(out, n);
  if (got < n) {
    const std::uint64_t have = done + got;
    in.fail("truncated data: the header describes " + h.describe() + ", " +
            std::to_string(h.data_bytes()) + " bytes after the " + std::to_string(h.header_bytes) +
            "-byte header, but the data ends " + in.where(h.header_bytes + have) + " (" +
            std::to_string(have) + " data bytes)");
  }
}

inline void expect_end(idx_stream& in, const idx_header& h) {
  unsigned char extra[256];
  const std::size_t got = in.read(extra, sizeof extra);
  if (got > 0) {
    std::uint64_t more = got;
    for (std::size_t r; (r = in.read(extra, sizeof extra)) > 0;) more += r;
    in.fail("unexpected data after the end: the header describes " + h.describe() + " (" +
            std::to_string(h.header_bytes + h.data_bytes()) + " bytes in all) but " +
            std::to_string(more) + " more bytes follow, from " +
            in.where(h.header_bytes + h.data_bytes()));
  }
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

}  // namespace detail

/// Reads any IDX file (gzip-compressed or plain): its type, dimensions and elements.
inline IdxArray read_idx(const std::filesystem::path& file) {
  detail::idx_stream in("grove::io::read_idx", file);
  const auto h = detail::read_header(in);
  IdxArray out;
  out.type = h.type;
  out.dims = h.dims;
  out.bytes.resize(static_cast<std::size_t>(h.data_bytes()));
  detail::read_data(in, h, out.bytes.data(), out.bytes.size(), 0);
  detail::expect_end(in, h);
  const std::size_t es = idx_element_size(h.type);
  for (std::size_t i = 0; es > 1 && i < out.bytes.size(); i += es)
    std::reverse(out.bytes.data() + i, out.bytes.data() + i + es);
  return out;
}

/// Reads an IDX file of images (unsigned bytes, shape count x rows x cols, or any count x ...) as
/// a (rows * cols) x count matrix: one column per image, its pixels in the file's row-major order
/// (as JAX's `images.reshape(count, -1)` row i), each multiplied by `scale` (1/255 by default, so
/// values are in [0, 1]).
template <class T = float>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> read_idx_images(
    const std::filesystem::path& file, std::type_identity_t<T> scale = T(1) / T(255)) {
  static_assert(std::is_floating_point_v<T>,
                "grove::io::read_idx_images: T must be float or double");
  detail::idx_stream in("grove::io::read_idx_images", file);
  const auto h = detail::read_header(in);
  if (h.type != idx_type::u8)
    in.fail(std::string("expected unsigned-byte pixels (type 0x08), the header says ") +
            idx_type_name(h.type));
  if (h.dims.size() < 2)
    in.fail(
        "expected images (at least 2 dimensions: count x pixels, usually count x rows x cols), the "
        "header has " +
        std::to_string(h.dims.size()) + " dimension (shape " + h.shape() + ")");
  const auto count = static_cast<Eigen::Index>(h.dims[0]);
  const auto pixels = static_cast<Eigen::Index>(h.elements / std::max<std::uint64_t>(1, h.dims[0]));
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> images(pixels, count);
  // In chunks of images, converting as they arrive.
  const Eigen::Index per_chunk =
      std::max<Eigen::Index>(1, (Eigen::Index{1} << 20) / std::max<Eigen::Index>(1, pixels));
  std::vector<std::uint8_t> buffer(static_cast<std::size_t>(std::min(per_chunk, count) * pixels));
  for (Eigen::Index first = 0; first < count; first += per_chunk) {
    const Eigen::Index n = std::min(per_chunk, count - first);
    detail::read_data(in, h, buffer.data(), static_cast<std::size_t>(n * pixels),
                      static_cast<std::uint64_t>(first * pixels));
    images.middleCols(first, n) =
        Eigen::Map<const Eigen::Matrix<std::uint8_t, Eigen::Dynamic, Eigen::Dynamic>>(buffer.data(),
                                                                                      pixels, n)
            .template cast<T>() *
        scale;
  }
  detail::expect_end(in, h);
  return images;
}

/// Reads an IDX file of labels (one dimension, integers) and checks that each is in [0,
/// num_classes).
inline Eigen::VectorXi read_idx_labels(const std::filesystem::path& file, int num_classes = 10) {
  const char* function = "grove::io::read_idx_labels";
  if (num_classes <= 0)
    throw std::invalid_argument(std::string(function) + ": num_classes must be positive, got " +
                                std::to_string(num_classes));
  detail::idx_stream in(function, file);
  const auto h = detail::read_header(in);
  if (h.type == idx_type::f32 || h.type == idx_type::f64)
    in.fail(std::string("expected integer labels, the header says ") + idx_type_name(h.type));
  if (h.dims.size() != 1)
    in.fail("expected labels (1 dimension), the header has " + std::to_string(h.dims.size()) +
            " dimensions (shape " + h.shape() + ")");
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(h.data_bytes()));
  detail::read_data(in, h, raw.data(), raw.size(), 0);
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

/// An images file and its labels file, checked to have as many examples.
template <class T = float>
Dataset<T> read_idx_dataset(const std::filesystem::path& images_file,
                            const std::filesystem::path& labels_file, int num_classes = 10,
                            std::type_identity_t<T> scale = T(1) / T(255)) {
  Dataset<T> d{read_idx_images<T>(images_file, scale), read_idx_labels(labels_file, num_classes)};
  if (d.images.cols() != d.labels.size())
    throw format_error("grove::io::read_idx_dataset", labels_file,
                       "has " + std::to_string(d.labels.size()) + " labels but " +
                           images_file.string() + " has " + std::to_string(d.images.cols()) +
                           " images");
  return d;
}

/// The training and test sets of MNIST or Fashion-MNIST (the same file names), from a directory
/// holding train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
/// t10k-labels-idx1-ubyte, each gzip-compressed (.gz) or plain. The Debian package
/// dataset-fashion-mnist installs them in /usr/share/datasets/fashion-mnist.
template <class T = float>
struct MnistSplits {
  Dataset<T> train, test;
};

/// The path of `name` (.gz first, then plain) in `dir`; std::system_error (ENOENT) naming both
/// when neither exists.
inline std::filesystem::path find_idx_file(const std::filesystem::path& dir,
                                           const std::string& name) {
  std::error_code ec;
  for (const auto& candidate : {dir / (name + ".gz"), dir / name})
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  throw std::system_error(
      std::make_error_code(std::errc::no_such_file_or_directory),
      "grove::io: " + dir.string() + " has neither " + name + ".gz nor " + name);
}

template <class T = float>
MnistSplits<T> load_mnist(const std::filesystem::path& dir, int num_classes = 10) {
  // All four found before any is read, so that a missing file is reported at once.
  const auto train_images = find_idx_file(dir, "train-images-idx3-ubyte");
  const auto train_labels = find_idx_file(dir, "train-labels-idx1-ubyte");
  const auto test_images = find_idx_file(dir, "t10k-images-idx3-ubyte");
  const auto test_labels = find_idx_file(dir, "t10k-labels-idx1-ubyte");
  return {read_idx_dataset<T>(train_images, train_labels, num_classes),
          read_idx_dataset<T>(test_images, test_labels, num_classes)};
}

}  // namespace grove::io
