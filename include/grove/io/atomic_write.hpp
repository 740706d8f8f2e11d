// grove/io/atomic_write.hpp: replace a file's contents atomically, as grove's checkpoints do.
//
//   grove::io::write_atomically("metrics.csv", csv_text);
//
// A reader sees the old contents or the new ones, never a mix, and a crash or a full disk never
// destroys the old file. POSIX only.
#pragma once

#include <filesystem>
#include <string_view>

#include "grove/io/detail/atomic_file.hpp"

namespace grove::io {

/// Writes `contents` to `path`: to a temporary file in the same directory, fsync'ed, renamed over
/// `path`, and the directory fsync'ed. If anything fails, `path` keeps its previous contents (or
/// stays absent) and the temporary file is removed. Throws std::system_error when the file cannot
/// be written (its code() says why) and std::invalid_argument when `path` names a directory.
inline void write_atomically(const std::filesystem::path& path, std::string_view contents) {
  detail::atomic_file file(path, "grove::io::write_atomically");
  file.write(contents.data(), contents.size());
  file.commit();
}

}  // namespace grove::io
