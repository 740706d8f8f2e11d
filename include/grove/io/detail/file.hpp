// grove/io/detail/file.hpp: POSIX file access for checkpoints: reading a safetensors file whole
// and checked (writing goes through detail/atomic_file.hpp).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "grove/io/detail/atomic_file.hpp"
#include "grove/io/detail/safetensors.hpp"

namespace grove::io::detail {

// --- reading -------------------------------------------------------------------------------------

// Reads exactly n bytes at `offset`; false if the file ends first.
inline bool read_at(int fd, std::uint64_t offset, std::byte* out, std::uint64_t n,
                    const reading& ctx) {
  while (n > 0) {
    const std::size_t chunk =
        static_cast<std::size_t>(std::min<std::uint64_t>(n, std::uint64_t{1} << 30));
    const ssize_t got = ::pread(fd, out, chunk, static_cast<off_t>(offset));
    if (got < 0) {
      if (errno == EINTR) continue;
      throw_errno(errno, std::string(ctx.function) + ": cannot read " + quoted_path(ctx.file));
    }
    if (got == 0) return false;
    out += got;
    offset += static_cast<std::uint64_t>(got);
    n -= static_cast<std::uint64_t>(got);
  }
  return true;
}

struct checkpoint_file {
  header head;
  unique_fd fd;  // the open file, for read_checkpoint_range
};

// Opens a checkpoint (a regular file only: a FIFO or a device is refused without waiting on it)
// and reads its header, parsed and validated against the file's size. The data is not read:
// read_checkpoint_range reads the tensors wanted, once the caller has checked the header against
// what it expects. Nothing is allocated beyond the header's own size and what it describes.
inline checkpoint_file read_checkpoint(const reading& ctx) {
  checkpoint_file out;
  auto opened = open_for_reading(ctx.file, ctx.function);
  out.fd = std::move(opened.fd);
  const std::uint64_t size = opened.size;

  if (size == 0)
    ctx.fail("the file is empty; a safetensors file starts with an 8-byte header length");
  if (size < 8)
    ctx.fail("the file has " + std::to_string(size) +
             " bytes, fewer than the 8 of a safetensors header length");
  std::byte prefix[8];
  if (!read_at(out.fd.get(), 0, prefix, 8, ctx))
    ctx.fail("the file ended while its header length was being read");
  const std::uint64_t n = load_u64_le(prefix);
  if (n > size - 8)
    ctx.fail("the header length (file bytes 0 to 8) is " + std::to_string(n) +
             ", past the end of the file: only " + std::to_string(size - 8) + " bytes follow it");
  if (n > max_header_size)
    ctx.fail("the header length (file bytes 0 to 8) is " + std::to_string(n) +
             ", more than safetensors' limit of " + std::to_string(max_header_size) + " bytes");

  std::string text(static_cast<std::size_t>(n), '\0');
  if (!read_at(out.fd.get(), 8, reinterpret_cast<std::byte*>(text.data()), n, ctx))
    ctx.fail("the file ended while its header was being read (did it shrink meanwhile?)");
  out.head = parse_header(text, 8 + n, size - 8 - n, ctx);
  return out;
}

// Reads data bytes [begin, begin + n) of a checkpoint that read_checkpoint opened (a positioned
// read: the rest of the file is not read).
inline void read_checkpoint_range(const reading& ctx, const checkpoint_file& file,
                                  std::uint64_t begin, std::uint64_t n, std::byte* out) {
  if (!read_at(file.fd.get(), file.head.data_start + begin, out, n, ctx))
    ctx.fail("the file ended while its data was being read (did it shrink meanwhile?)");
}

}  // namespace grove::io::detail
