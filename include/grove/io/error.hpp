// grove/io/error.hpp: the exceptions grove's file readers and writers throw: format_error for a
// malformed or mismatched file, file_error when the operating system refuses.
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "grove/error.hpp"

namespace grove::io {

/// Thrown when a file's contents are malformed, or do not match what the caller asked to read
/// into. what() is `FUNCTION: FILE: PROBLEM`, where PROBLEM says what is wrong and where (the key
/// path, the byte offset, both shapes...). A file that cannot be opened or read at all (missing,
/// a directory, an I/O error) is not a format error: that raises file_error. Both derive from
/// grove::error; format_error is a std::runtime_error, file_error a std::system_error.
///
/// Copying a format_error never throws (its details are shared, as std::runtime_error's message
/// is).
class format_error : public std::runtime_error, public grove::error {
 public:
  format_error(std::string_view function, const std::filesystem::path& file,
               const std::string& problem)
      : std::runtime_error(std::string(function) + ": " + file.string() + ": " + problem),
        details_(std::make_shared<const details>(details{file, problem})) {}

  const char* what() const noexcept override { return std::runtime_error::what(); }

  /// The file that was being read.
  const std::filesystem::path& path() const noexcept { return details_->path; }
  /// What is wrong with it, without the function and file name.
  const std::string& problem() const noexcept { return details_->problem; }

 private:
  struct details {
    std::filesystem::path path;
    std::string problem;
  };
  std::shared_ptr<const details> details_;
};

/// The operating system refused to open, read, write or replace a file (missing, a directory, a
/// special file, no permission, the disk full). code() says why; what() names the function and
/// the file.
class file_error : public std::system_error, public grove::error {
 public:
  using std::system_error::system_error;
  const char* what() const noexcept override { return std::system_error::what(); }
};

}  // namespace grove::io
