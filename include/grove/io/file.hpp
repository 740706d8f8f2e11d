// grove/io/file.hpp: the file access every grove reader and writer shares, public so that other
// layers' readers (grove::data's) follow the same rules as checkpoints:
//
//   grove::io::input_file in("x.npy", "grove::data::load_npy");   // regular files only
//   in.read_at(0, buffer, 10);                                    // false if the file ends first
//
//   grove::io::atomic_writer out("x.npy", "grove::data::save_npy");
//   out.write(bytes, n);
//   out.commit();                            // the old file stays whole until this rename
//
// POSIX only.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

#include "grove/io/detail/atomic_file.hpp"

namespace grove::io {

/// A file opened for reading, only if it is a regular file (or a symbolic link to one): a FIFO
/// with no writer or a device cannot hang the open, and is refused with file_error (EINVAL); a
/// directory with file_error (EISDIR); a missing or unreadable file with the system's own code.
/// `function` names the caller in every message.
class input_file {
 public:
  input_file(const std::filesystem::path& path, std::string_view function)
      : path_(path), function_(function) {
    auto opened = detail::open_for_reading(path, function);
    fd_ = std::move(opened.fd);
    size_ = opened.size;
  }

  /// The file's size when it was opened.
  std::uint64_t size() const noexcept { return size_; }
  const std::filesystem::path& path() const noexcept { return path_; }

  /// Reads exactly `n` bytes at `offset` into `out`; false if the file ends first. file_error
  /// when the system cannot read it.
  bool read_at(std::uint64_t offset, void* out, std::uint64_t n) const {
    auto* p = static_cast<std::byte*>(out);
    while (n > 0) {
      const auto chunk =
          static_cast<std::size_t>(std::min<std::uint64_t>(n, std::uint64_t{1} << 30));
      const ssize_t got = ::pread(fd_.get(), p, chunk, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        detail::throw_errno(errno, function_ + ": cannot read " + detail::quoted_path(path_));
      }
      if (got == 0) return false;
      p += got;
      offset += static_cast<std::uint64_t>(got);
      n -= static_cast<std::uint64_t>(got);
    }
    return true;
  }

 private:
  std::filesystem::path path_;
  std::string function_;
  detail::unique_fd fd_;
  std::uint64_t size_ = 0;
};

/// Writes a file under a temporary name in its target's directory; commit() syncs it and renames
/// it over the target, so a reader sees the old contents or the new ones, never a mix. Until
/// then the target is untouched; if commit() is never reached (an error, an exception), the
/// destructor removes the temporary file. Only a missing target, a regular file or a symbolic
/// link to one is replaced: anything else is refused with file_error before a byte is written.
class atomic_writer {
 public:
  atomic_writer(const std::filesystem::path& path, std::string_view function)
      : file_(path, function) {}
  /// Appends `n` bytes (buffered).
  void write(const void* data, std::size_t n) { file_.write(data, n); }
  /// Makes the file durable and puts it in place of the target.
  void commit() { file_.commit(); }

 private:
  detail::atomic_file file_;
};

}  // namespace grove::io
