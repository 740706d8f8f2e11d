// grove/io/detail/atomic_file.hpp: POSIX file descriptors and replacing a file atomically
// (temporary file, fsync, rename, fsync of the directory). Used by checkpoints and by
// grove::io::write_atomically.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace grove::io::detail {

[[noreturn]] inline void throw_errno(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

// Closes a descriptor when it goes out of scope (unless released).
class unique_fd {
 public:
  explicit unique_fd(int fd = -1) noexcept : fd_(fd) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
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

// --- writing atomically --------------------------------------------------------------------------

// Writes a file under a temporary name in the target's directory; commit() makes it durable and
// renames it over the target. Until then the target is untouched, and if commit() is never
// reached (an error, an exception) the destructor removes the temporary file.
class atomic_file {
 public:
  atomic_file(std::filesystem::path target, std::string_view function)
      : target_(std::move(target)), function_(function) {
    if (!target_.has_filename())
      throw std::invalid_argument(function_ + ": " + target_.string() +
                                  " names a directory, not a file");
    dir_ = target_.parent_path();
    if (dir_.empty()) dir_ = ".";
    static std::atomic<unsigned> counter{0};
    const auto pid = static_cast<unsigned long>(::getpid());
    const auto t =
        static_cast<unsigned long>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (int attempt = 0;; ++attempt) {
      std::string name = ".";
      name.append(target_.filename().string()).append(".tmp-").append(std::to_string(pid));
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
        throw_errno(errno, context() + ": creating a temporary file in " + dir_.string());
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
      throw_errno(errno, context() + ": flushing " + temp_.string() + " to disk");
    if (fd_.close() != 0) throw_errno(errno, context() + ": closing " + temp_.string());
    if (::rename(temp_.c_str(), target_.c_str()) != 0)
      throw_errno(errno, context() + ": renaming " + temp_.string() + " to " + target_.string());
    created_ = false;
    // Make the rename itself durable. Some file systems cannot sync a directory (EINVAL); there
    // the rename is as durable as they make it.
    unique_fd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir.get() >= 0 && ::fsync(dir.get()) != 0 && errno != EINVAL && errno != ENOTSUP)
      throw_errno(errno, context() + ": the new file is in place, but syncing its directory " +
                             dir_.string() + " failed, so it may not survive a crash");
  }

 private:
  static constexpr std::size_t buffer_size = std::size_t{1} << 20;

  std::string context() const { return function_ + ": cannot save " + target_.string(); }

  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  void write_all(const std::byte* p, std::size_t n) {
    while (n > 0) {
      const ssize_t put = ::write(fd_.get(), p, std::min<std::size_t>(n, std::size_t{1} << 30));
      if (put < 0) {
        if (errno == EINTR) continue;
        throw_errno(errno, context() + ": writing " + temp_.string());
      }
      if (put == 0) throw_errno(EIO, context() + ": writing " + temp_.string());
      p += put;
      n -= static_cast<std::size_t>(put);
    }
  }

  std::filesystem::path target_, dir_, temp_;
  std::string function_;
  unique_fd fd_;
  bool created_ = false;
  std::vector<std::byte> buffer_;
};

}  // namespace grove::io::detail
