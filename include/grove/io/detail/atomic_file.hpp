// grove/io/detail/atomic_file.hpp: POSIX file descriptors, opening a regular file for reading
// without blocking on a FIFO or a device, and replacing a file atomically (temporary file, fsync,
// rename, fsync of the directory). Used by checkpoints, the IDX reader and
// grove::io::write_atomically.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "grove/io/error.hpp"

namespace grove::io::detail {

[[noreturn]] inline void throw_errno(int err, const std::string& what) {
  throw file_error(err, std::generic_category(), what);
}

// A path as messages show it: whole up to 256 characters (every path a person types, and the
// temporary directories of test runners), else its first 256 and "...", so that a generated
// name kilobytes long cannot make a message unbounded. Names read from a file's contents are
// quoted to 64 characters where they are read (safetensors.hpp).
inline std::string quoted_path(const std::filesystem::path& path) {
  std::string s = path.string();
  if (s.size() > 256) s = s.substr(0, 256) + "...";
  return s;
}

// What kind of file a mode is, for messages: "a directory", "a FIFO", "a character device"...
inline const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// Closes a descriptor when it goes out of scope (unless released).
class unique_fd {
 public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) reset(std::exchange(other.fd_, -1));
    return *this;
  }
  ~unique_fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  void reset(int fd) noexcept {
    close();
    fd_ = fd;
  }
  // Closes now and reports close's error (NFS, for one, reports write errors only here).
  int close() noexcept {
    const int fd = std::exchange(fd_, -1);
    return fd >= 0 ? ::close(fd) : 0;
  }

 private:
  int fd_;
};

// --- reading -------------------------------------------------------------------------------------

// An open regular file and its size when it was opened.
struct regular_file {
  unique_fd fd;
  std::uint64_t size = 0;
};

// Opens `file` for reading, only if it is a regular file (or a symbolic link to one). It is
// opened non-blocking, so that a FIFO with no writer or a device cannot hang the open, checked
// with fstat (the descriptor's own file, so nothing can be swapped in between), and only then
// made blocking again for reading. A directory raises file_error(EISDIR), any other special file
// file_error(EINVAL), a missing or unreadable one file_error with the OS's code.
inline regular_file open_for_reading(const std::filesystem::path& file, std::string_view function) {
  const std::string who = std::string(function) + ": cannot ";
  regular_file out;
  out.fd.reset(::open(file.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (out.fd.get() < 0) throw_errno(errno, who + "open " + quoted_path(file));
  struct stat st {};
  if (::fstat(out.fd.get(), &st) != 0) throw_errno(errno, who + "stat " + quoted_path(file));
  if (S_ISDIR(st.st_mode)) throw_errno(EISDIR, who + "read " + quoted_path(file));
  if (!S_ISREG(st.st_mode))
    throw_errno(EINVAL, who + "read " + quoted_path(file) + ", " + file_kind(st.st_mode) +
                            ", not a regular file");
  const int flags = ::fcntl(out.fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(out.fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0)
    throw_errno(errno, who + "read " + quoted_path(file));
  out.size = static_cast<std::uint64_t>(st.st_size);
  return out;
}

// --- writing atomically --------------------------------------------------------------------------

// Writes a file under a temporary name in the target's directory; commit() makes it durable and
// renames it over the target. Until then the target is untouched, and if commit() is never
// reached (an error, an exception) the destructor removes the temporary file.
class atomic_file {
 public:
  atomic_file(std::filesystem::path target, std::string_view function)
      : named_(std::move(target)), function_(function) {
    if (!named_.has_filename())
      throw grove::argument_error(function_ + ": " + quoted_path(named_) +
                                  " names a directory, not a file");
    target_ = replaceable_target(named_);
    dir_ = target_.parent_path();
    if (dir_.empty()) dir_ = ".";
    static std::atomic<unsigned> counter{0};
    const auto pid = static_cast<unsigned long>(::getpid());
    const auto t =
        static_cast<unsigned long>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int attempt = 0;; ++attempt) {
      std::string name = ".";
      // At most 100 bytes of the name, so that the temporary name fits NAME_MAX (255) whenever
      // the target's own name does.
      name.append(target_.filename().string().substr(0, 100))
          .append(".tmp-")
          .append(std::to_string(pid));
      name.append("-")
          .append(std::to_string(counter++))
          .append("-")
          .append(std::to_string(t % 1000003));
      temp_ = dir_ / name;
      // 0666 before the umask: the checkpoint gets the permissions of any newly created file.
      const int fd = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd >= 0) {
        fd_.reset(fd);
        break;
      }
      if (errno != EEXIST || attempt == 100)
        throw_errno(errno, context() + ": creating a temporary file in " + quoted_path(dir_));
    }
    created_ = true;
    buffer_.reserve(buffer_size);
  }
  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;

  ~atomic_file() {
    if (created_) {
      fd_.close();
      ::unlink(temp_.c_str());
    }
  }

  const std::filesystem::path& temp_path() const { return temp_; }

  void write(const void* data, std::size_t n) {
    const auto* p = static_cast<const std::byte*>(data);
    if (buffer_.size() + n > buffer_size) flush();
    if (n >= buffer_size)
      write_all(p, n);
    else
      buffer_.insert(buffer_.end(), p, p + n);
  }

  void commit() {
    flush();
    if (::fsync(fd_.get()) != 0)
      throw_errno(errno, context() + ": flushing " + quoted_path(temp_) + " to disk");
    if (fd_.close() != 0) throw_errno(errno, context() + ": closing " + quoted_path(temp_));
    // Again, just before the rename: the path may have become a directory or a device meanwhile.
    (void)replaceable_target(target_);
    if (::rename(temp_.c_str(), target_.c_str()) != 0)
      throw_errno(errno,
                  context() + ": renaming " + quoted_path(temp_) + " to " + quoted_path(target_));
    created_ = false;
    // Make the rename itself durable. Some file systems cannot sync a directory (EINVAL); there
    // the rename is as durable as they make it.
    unique_fd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() >= 0 && ::fsync(dir.get()) != 0 && errno != EINVAL && errno != ENOTSUP)
      throw_errno(errno, context() + ": the new file is in place, but syncing its directory " +
                             quoted_path(dir_) + " failed, so it may not survive a crash");
  }

 private:
  static constexpr std::size_t buffer_size = std::size_t{1} << 20;

  std::string context() const { return function_ + ": cannot save " + quoted_path(named_); }

  // The file the rename will replace: target_ itself when it is missing or a regular file; the
  // file a symbolic link points to when it points to a regular file (the link stays a link, as
  // when an editor saves through it). Anything else (a directory, a device, a FIFO, a socket, a
  // link to one of them or to nothing) is refused with file_error, before anything is written:
  // renaming over it would put a regular file in its place.
  std::filesystem::path replaceable_target(const std::filesystem::path& path) const {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return path;
      throw_errno(errno, context());
    }
    if (S_ISREG(st.st_mode)) return path;
    if (S_ISDIR(st.st_mode)) throw_errno(EISDIR, context() + ": it is a directory");
    if (!S_ISLNK(st.st_mode))
      throw_errno(EINVAL, context() + ": it is " + file_kind(st.st_mode) +
                              ", and grove replaces only regular files");
    if (::stat(path.c_str(), &st) != 0)
      throw_errno(errno, context() +
                             ": it is a symbolic link to nothing (or to what cannot be "
                             "reached), and grove replaces only regular files");
    if (S_ISDIR(st.st_mode)) throw_errno(EISDIR, context() + ": it is a link to a directory");
    if (!S_ISREG(st.st_mode))
      throw_errno(EINVAL, context() + ": it is a symbolic link to " + file_kind(st.st_mode) +
                              ", and grove replaces only regular files");
    std::error_code ec;
    auto resolved = std::filesystem::canonical(path, ec);
    if (ec) throw_errno(ec.value(), context() + ": resolving its symbolic link");
    return resolved;
  }

  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  void write_all(const std::byte* p, std::size_t n) {
    while (n > 0) {
      const ssize_t put = ::write(fd_.get(), p, std::min<std::size_t>(n, std::size_t{1} << 30));
      if (put < 0) {
        if (errno == EINTR) continue;
        throw_errno(errno, context() + ": writing " + quoted_path(temp_));
      }
      if (put == 0) throw_errno(EIO, context() + ": writing " + quoted_path(temp_));
      p += put;
      n -= static_cast<std::size_t>(put);
    }
  }

  std::filesystem::path named_;  // the path the caller gave, for messages
  std::filesystem::path target_, dir_, temp_;
  std::string function_;
  unique_fd fd_;
  bool created_ = false;
  std::vector<std::byte> buffer_;
};

}  // namespace grove::io::detail
