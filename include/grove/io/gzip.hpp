// grove/io/gzip.hpp: a whole file, plain or gzip-compressed, read into memory, for the readers of
// text formats that come either way (grove::data's CSV reader reads `.csv.gz` through it).
//
//   std::string text = grove::io::read_maybe_gzip("data.csv.gz", "my_reader");
//
// Needs zlib (link grove::idx, or ZLIB::ZLIB; Debian: zlib1g-dev). Whether the file is
// compressed is decided by its first two bytes, not its name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "grove/io/detail/gzip_stream.hpp"
#include "grove/io/error.hpp"

namespace grove::io {

/// The most a file read by read_maybe_gzip may hold (after decompression), unless the caller
/// gives another cap: 2 GiB.
inline constexpr std::uint64_t default_max_text_bytes = std::uint64_t{1} << 31;

/// The contents of `path`, decompressed if it is gzip (several members one after the other are
/// one stream; anything else after the last is refused). Regular files only: a FIFO or a device
/// is refused without being waited on (file_error), as are missing and unreadable files. Corrupt
/// or truncated gzip data, and contents of more than `max_bytes` bytes (checked as the data
/// arrives, so that a gzip bomb allocates at most `max_bytes`), raise format_error naming
/// `function` and the file.
inline std::string read_maybe_gzip(const std::filesystem::path& path, const char* function,
                                   std::uint64_t max_bytes = default_max_text_bytes) {
  detail::gzip_stream in(function, path);
  std::string out;
  if (!in.compressed() && in.file_size() <= max_bytes)
    out.reserve(static_cast<std::size_t>(in.file_size()));
  char buffer[1 << 16];
  for (;;) {
    const std::size_t got = in.read(buffer, sizeof buffer);
    if (got == 0) break;
    if (out.size() + got > max_bytes)
      in.fail("holds more than the " + std::to_string(max_bytes) + " bytes" +
              (in.compressed() ? " of decompressed data" : "") + " this reader accepts");
    out.append(buffer, got);
  }
  return out;
}

}  // namespace grove::io
