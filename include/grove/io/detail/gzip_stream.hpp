// grove/io/detail/gzip_stream.hpp: a plain or gzip-compressed file read as one stream of bytes,
// for the readers of formats that come either way (IDX): regular files only, zlib's inflate as it
// is read, corrupt or truncated data told apart from a refusal of the operating system.
#pragma once

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "grove/io/detail/atomic_file.hpp"
#include "grove/io/error.hpp"

namespace grove::io::detail {

// A plain or gzip-compressed file, opened only if it is a regular file (never blocking on a FIFO
// or a device), decompressed with zlib's inflate as it is read. It tells a format_error (corrupt
// or truncated data) from a file_error (the OS refused) and knows the offset in the
// (decompressed) data.
//
// gzip: the stream must end properly, its CRC-32 and length trailer checked by inflate; a file
// cut anywhere, even inside the 8-byte trailer, is truncated. Several gzip members one after the
// other (`cat a.gz b.gz`, valid gzip by RFC 1952) are read as one stream; anything else after a
// member's end is refused as trailing garbage, since a reader that ignored it would accept a
// damaged or appended-to file.
class gzip_stream {
 public:
  gzip_stream(const char* function, std::filesystem::path file)
      : function_(function), file_(std::move(file)) {
    auto opened = open_for_reading(file_, function_);
    fd_ = std::move(opened.fd);
    file_size_ = opened.size;
    input_.resize(1 << 17);
    // Whether the file is gzip is decided by its first two bytes, whatever its name.
    while (have_ < 2 && fill()) {
    }
    compressed_ = have_ >= 2 && input_[next_] == 0x1f && input_[next_ + 1] == 0x8b;
    if (compressed_) {
      z_.next_in = input_.data() + next_;
      z_.avail_in = static_cast<uInt>(have_);
      if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) throw std::bad_alloc();
      z_open_ = true;
    }
  }
  ~gzip_stream() {
    if (z_open_) inflateEnd(&z_);
  }
  gzip_stream(const gzip_stream&) = delete;
  gzip_stream& operator=(const gzip_stream&) = delete;

  // Reads up to n bytes; fewer only at the end of the data. Corrupt or truncated gzip data is a
  // format_error; a failing read a file_error.
  std::size_t read(void* out, std::size_t n) {
    auto* p = static_cast<unsigned char*>(out);
    const std::size_t got = compressed_ ? inflate_some(p, n) : read_plain(p, n);
    offset_ += got;
    return got;
  }

  std::uint64_t offset() const { return offset_; }
  bool compressed() const { return compressed_; }
  // The file's size on disk (compressed, for a gzip file) when it was opened.
  std::uint64_t file_size() const { return file_size_; }
  const std::filesystem::path& file() const { return file_; }

  [[noreturn]] void fail(const std::string& problem) const {
    throw format_error(function_, file_, problem);
  }

  // "at offset N" (of the decompressed data, for a gzip file).
  std::string where(std::uint64_t offset) const {
    return "at byte " + std::to_string(offset) + (compressed() ? " of the decompressed data" : "");
  }

 private:
  // Reads more of the file into input_ (after what is still unread there); false at its end.
  bool fill() {
    if (next_ > 0 && have_ > 0) std::memmove(input_.data(), input_.data() + next_, have_);
    next_ = 0;
    if (have_ == input_.size()) return true;
    for (;;) {
      const ssize_t r = ::read(fd_.get(), input_.data() + have_, input_.size() - have_);
      if (r < 0) {
        if (errno == EINTR) continue;
        throw_errno(errno, std::string(function_) + ": cannot read " + quoted_path(file_));
      }
      if (r == 0) return false;
      have_ += static_cast<std::size_t>(r);
      consumed_ += static_cast<std::uint64_t>(r);
      return true;
    }
  }

  std::size_t read_plain(unsigned char* p, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      if (have_ == 0 && !fill()) break;
      const std::size_t k = std::min(n - got, have_);
      std::memcpy(p + got, input_.data() + next_, k);
      next_ += k;
      have_ -= k;
      got += k;
    }
    return got;
  }

  std::size_t inflate_some(unsigned char* p, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      if (member_ended_) {
        // After a member's end: the file's end, or another member.
        if (z_.avail_in < 2) {
          sync_from_zlib();
          while (have_ < 2 && fill()) {
          }
          sync_to_zlib();
        }
        if (z_.avail_in == 0) break;
        if (z_.avail_in < 2 || z_.next_in[0] != 0x1f || z_.next_in[1] != 0x8b) {
          const std::uint64_t at = consumed_ - z_.avail_in;
          fail("the gzip stream ends at file byte " + std::to_string(at) + ", but " +
               std::to_string(file_size_ > at ? file_size_ - at : z_.avail_in) +
               " more bytes follow that are not another gzip member (trailing garbage)");
        }
        if (inflateReset(&z_) != Z_OK) fail("corrupt gzip data (cannot restart inflate)");
        member_ended_ = false;
      }
      if (z_.avail_in == 0) {
        sync_from_zlib();
        if (!fill())
          fail("the gzip stream is truncated (unexpected end of file) after " +
               std::to_string(offset_ + got) + " bytes of decompressed data");
        sync_to_zlib();
      }
      const auto chunk = static_cast<uInt>(std::min<std::size_t>(n - got, 1u << 30));
      z_.next_out = p + got;
      z_.avail_out = chunk;
      const int r = inflate(&z_, Z_NO_FLUSH);
      got += chunk - z_.avail_out;
      if (r == Z_STREAM_END) {
        member_ended_ = true;
      } else if (r == Z_MEM_ERROR) {
        throw std::bad_alloc();
      } else if (r == Z_DATA_ERROR || r == Z_NEED_DICT || r == Z_STREAM_ERROR) {
        fail("corrupt gzip data (" + std::string(z_.msg ? z_.msg : "unknown zlib error") +
             ") after " + std::to_string(offset_ + got) + " bytes of decompressed data");
      }
      // Z_OK, or Z_BUF_ERROR (no progress without more input): go round, reading more.
    }
    return got;
  }

  // input_ and zlib share the unread bytes: next_/have_ describe them for fill(), z_.next_in and
  // z_.avail_in for inflate.
  void sync_from_zlib() {
    next_ = static_cast<std::size_t>(z_.next_in - input_.data());
    have_ = z_.avail_in;
  }
  void sync_to_zlib() {
    z_.next_in = input_.data() + next_;
    z_.avail_in = static_cast<uInt>(have_);
  }

  const char* function_;
  std::filesystem::path file_;
  unique_fd fd_;
  std::uint64_t file_size_ = 0;
  std::vector<unsigned char> input_;
  std::size_t next_ = 0, have_ = 0;  // the unread bytes of input_: [next_, next_ + have_)
  std::uint64_t consumed_ = 0;       // bytes of the file read into input_ so far
  bool compressed_ = false;
  z_stream z_{};
  bool z_open_ = false;
  bool member_ended_ = false;
  std::uint64_t offset_ = 0;
};

}  // namespace grove::io::detail
