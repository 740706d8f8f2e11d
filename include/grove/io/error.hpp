// grove/io/error.hpp: the exception grove's file readers throw for a malformed or mismatched file.
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

namespace grove::io {

/// Thrown when a file's contents are malformed, or do not match what the caller asked to read
/// into. what() is `FUNCTION: FILE: PROBLEM`, where PROBLEM says what is wrong and where (the key
/// path, the byte offset, both shapes...). A file that cannot be opened or read at all (missing,
/// a directory, an I/O error) is not a format error: that raises std::system_error. Both derive
/// from std::runtime_error.
///
/// Copying a format_error never throws (its details are shared, as std::runtime_error's message
/// is).
class format_error : public std::runtime_error {
 public:
  format_error(std::string_view function, const std::filesystem::path& file,
               const std::string& problem)
      : std::runtime_error(std::string(function) + ": " + file.string() + ": " + problem),
        details_(std::make_shared<const details>(details{file, problem})) {}

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

}  // namespace grove::io
