// grove/data/npz.hpp: numpy's .npz archives (np.savez, np.savez_compressed): zip files of .npy
// arrays, read and written by name.
//
//   auto arrays = grove::data::load_npz("data.npz");          // numpy's keys: "x", not "x.npy"
//   Eigen::MatrixXf x = arrays.at("x").as_matrix<float>();
//   grove::data::save_npz("out.npz", {{"x", grove::data::to_npy(x)}}, {.compress = true});
//
// Needs libzip (link grove::npz, or libzip::zip; Debian: libzip-dev). Every entry is read as
// grove/data/npy.hpp reads a .npy file, with the same errors.
//
// Errors: file_error when the archive cannot be opened or read or is not a regular file;
// format_error, naming the archive and the entry, for what is not a zip archive (or a corrupt
// one: libzip's reason, a CRC mismatch), an encrypted entry, an entry whose name does not end in
// ".npy", two entries of the same name, an entry that is not a valid .npy file, and data past
// the cap: max_bytes (default_max_npz_bytes, 2 GiB) bounds the entries' uncompressed bytes
// together. An entry's declared size is checked against what is left of it before the entry is
// opened, and its data is read into memory that grows as it inflates, never past the size it
// declared (an entry that inflates to more is refused after one byte more), so neither a
// forged size nor a zip bomb allocates more than the archive really holds up to the cap.
//
// Memory: each entry once, as it inflates, then its data moves into its NpyArray. The archive
// itself is read through its file, not loaded whole.
#pragma once

#include <zip.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grove/data/npy.hpp"
#include "grove/error.hpp"
#include "grove/io/error.hpp"
#include "grove/io/file.hpp"

namespace grove::data {

/// The default cap on an archive's uncompressed bytes that load_npz accepts: 2 GiB, as
/// io::default_max_idx_bytes. Pass a larger max_bytes to read more.
inline constexpr std::uint64_t default_max_npz_bytes = std::uint64_t{1} << 31;

/// How save_npz writes an archive.
struct npz_options {
  /// Deflate every entry (np.savez_compressed) rather than store it (np.savez).
  bool compress = false;
};

namespace detail {

// A read-only, seekable libzip source over an io::input_file, so that the archive is read
// through the descriptor input_file opened (a regular file, never a FIFO), not loaded whole. An
// exception from the file (a read error) is kept and rethrown once libzip has returned.
struct npz_file_source {
  const io::input_file* file = nullptr;
  std::uint64_t offset = 0;
  zip_error_t error{};
  std::exception_ptr failure;

  static zip_int64_t callback(void* state, void* data, zip_uint64_t length, zip_source_cmd_t cmd) {
    auto& s = *static_cast<npz_file_source*>(state);
    const std::uint64_t size = s.file->size();
    switch (cmd) {
      case ZIP_SOURCE_OPEN:
        s.offset = 0;
        return 0;
      case ZIP_SOURCE_READ: {
        const std::uint64_t n = std::min<std::uint64_t>(length, size - std::min(size, s.offset));
        try {
          if (n > 0 && !s.file->read_at(s.offset, data, n)) {
            zip_error_set(&s.error, ZIP_ER_READ, EIO);  // the file shrank
            return -1;
          }
        } catch (...) {
          s.failure = std::current_exception();
          zip_error_set(&s.error, ZIP_ER_READ, EIO);
          return -1;
        }
        s.offset += n;
        return static_cast<zip_int64_t>(n);
      }
      case ZIP_SOURCE_CLOSE:
      case ZIP_SOURCE_FREE:
        return 0;
      case ZIP_SOURCE_STAT: {
        auto* st = ZIP_SOURCE_GET_ARGS(zip_stat_t, data, length, &s.error);
        if (st == nullptr) return -1;
        zip_stat_init(st);
        st->size = size;
        st->valid |= ZIP_STAT_SIZE;
        return sizeof(zip_stat_t);
      }
      case ZIP_SOURCE_ERROR:
        return zip_error_to_data(&s.error, data, length);
      case ZIP_SOURCE_SEEK: {
        const zip_int64_t to =
            zip_source_seek_compute_offset(s.offset, size, data, length, &s.error);
        if (to < 0) return -1;
        s.offset = static_cast<std::uint64_t>(to);
        return 0;
      }
      case ZIP_SOURCE_TELL:
        return static_cast<zip_int64_t>(s.offset);
      case ZIP_SOURCE_SUPPORTS:
        return zip_source_make_command_bitmap(
            ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT, ZIP_SOURCE_ERROR,
            ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL, ZIP_SOURCE_SUPPORTS, -1);
      default:
        zip_error_set(&s.error, ZIP_ER_OPNOTSUPP, 0);
        return -1;
    }
  }
};

struct zip_discarder {
  void operator()(zip_t* z) const noexcept { zip_discard(z); }
};
struct zip_file_closer {
  void operator()(zip_file_t* f) const noexcept { zip_fclose(f); }
};
struct zip_source_freer {
  void operator()(zip_source_t* s) const noexcept { zip_source_free(s); }
};

// libzip's message for an error, owned.
inline std::string zip_message(zip_error_t* error) {
  const char* m = zip_error_strerror(error);
  return m ? m : "unknown error";
}

// Reads one entry (index i of z, whose stat is st) into memory that grows as it inflates, at most
// `budget` bytes and never more than it declares; refuses one that inflates to more.
inline std::vector<std::byte> read_npz_entry(zip_t* z, zip_uint64_t i, const zip_stat_t& st,
                                             const npy_where& where, const npz_file_source& src) {
  std::unique_ptr<zip_file_t, zip_file_closer> f(zip_fopen_index(z, i, 0));
  if (!f) {
    if (src.failure) std::rethrow_exception(src.failure);
    where.fail("cannot open it (libzip: " + zip_message(zip_get_error(z)) + ")");
  }
  const std::uint64_t declared = st.size;
  std::vector<std::byte> out;
  auto read_some = [&](std::byte* p, std::uint64_t n) {
    const zip_int64_t got = zip_fread(f.get(), p, n);
    if (got < 0) {
      if (src.failure) std::rethrow_exception(src.failure);
      where.fail("corrupt data after " + std::to_string(out.size()) +
                 " uncompressed bytes (libzip: " + zip_message(zip_file_get_error(f.get())) + ")");
    }
    return static_cast<std::uint64_t>(got);
  };
  while (out.size() < declared) {
    const std::size_t done = out.size();
    const std::size_t next = static_cast<std::size_t>(std::min<std::uint64_t>(
        declared, std::max<std::uint64_t>(std::uint64_t{1} << 20, 2 * std::uint64_t{done})));
    out.resize(next);
    std::size_t filled = done;
    while (filled < next) {
      const std::uint64_t got = read_some(out.data() + filled, next - filled);
      if (got == 0) {
        out.resize(filled);
        where.fail("truncated: it declares " + std::to_string(declared) +
                   " uncompressed bytes but inflates to " + std::to_string(filled));
      }
      filled += static_cast<std::size_t>(got);
    }
  }
  // One byte more: an entry that inflates past its declared size is refused after one byte, and
  // reaching its end makes libzip check its CRC.
  std::byte extra[1];
  if (read_some(extra, 1) != 0)
    where.fail("it inflates to more than the " + std::to_string(declared) +
               " bytes it declares (decompressed no further)");
  return out;
}

}  // namespace detail

/// Reads every array of an .npz archive (np.savez or np.savez_compressed), by numpy's key: the
/// entry's name without ".npy". Each array is as read_npy gives it; convert with as_matrix or
/// as_tensor. The entries' uncompressed bytes together may be at most `max_bytes`. Throws
/// format_error for an archive or entry that is malformed or over the cap (see the top of this
/// header), file_error when the archive cannot be opened or read or is not a regular file.
inline std::map<std::string, NpyArray, std::less<>> load_npz(
    const std::filesystem::path& file, std::uint64_t max_bytes = default_max_npz_bytes) {
  constexpr std::string_view function = "grove::data::load_npz";
  io::input_file in(file, function);
  auto fail = [&](const std::string& problem) { throw io::format_error(function, file, problem); };
  // libzip would open an empty file as an empty archive; numpy's np.load refuses it.
  if (in.size() == 0)
    fail("the file is empty (an .npz file is a zip archive; one of no arrays is 22 bytes)");
  detail::npz_file_source src;
  src.file = &in;
  zip_error_init(&src.error);
  zip_error_t error;
  zip_error_init(&error);
  std::unique_ptr<zip_source_t, detail::zip_source_freer> source(
      zip_source_function_create(&detail::npz_file_source::callback, &src, &error));
  if (!source) {
    zip_error_fini(&error);
    throw std::bad_alloc();
  }
  std::unique_ptr<zip_t, detail::zip_discarder> z(
      zip_open_from_source(source.get(), ZIP_RDONLY | ZIP_CHECKCONS, &error));
  if (!z) {
    const std::string m = detail::zip_message(&error);
    zip_error_fini(&error);
    zip_error_fini(&src.error);
    if (src.failure) std::rethrow_exception(src.failure);
    fail("not a valid zip archive (libzip: " + m + ")");
  }
  (void)source.release();  // z owns it now
  zip_error_fini(&error);
  std::map<std::string, NpyArray, std::less<>> out;
  const zip_int64_t count = zip_get_num_entries(z.get(), 0);
  std::uint64_t used = 0;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z.get(), index, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE))
      fail("cannot read entry " + std::to_string(i) + " of the central directory (libzip: " +
           detail::zip_message(zip_get_error(z.get())) + ")");
    const std::string name = st.name ? st.name : "";
    const std::string where_name = "entry " + detail::quote_text(name) + ": ";
    if (name.size() < 4 || name.compare(name.size() - 4, 4, ".npy") != 0)
      fail(where_name + "not a .npy file (an .npz archive holds NAME.npy entries only)");
    std::string key = name.substr(0, name.size() - 4);
    if (out.contains(key)) fail(where_name + "a second entry of that name");
    if ((st.valid & ZIP_STAT_ENCRYPTION_METHOD) && st.encryption_method != ZIP_EM_NONE)
      fail(where_name + "encrypted; grove reads unencrypted archives only");
    if (st.size > max_bytes - used)
      fail(where_name + "it declares " + std::to_string(st.size) + " uncompressed bytes, " +
           (used > 0
                ? "which with the " + std::to_string(used) + " bytes of the entries before it is "
                : "") +
           "more than the limit of " + std::to_string(max_bytes) +
           " bytes (pass a larger max_bytes to read a larger archive)");
    const detail::npy_where where{function, file, where_name, "entry"};
    auto bytes = detail::read_npz_entry(z.get(), index, st, where, src);
    used += bytes.size();
    out.emplace(std::move(key), detail::npy_from_bytes(std::move(bytes), where));
  }
  zip_error_fini(&src.error);
  return out;
}

namespace detail {

// save_npz, for a map of any ordering.
template <class Map>
void save_npz_entries(const std::filesystem::path& file, const Map& arrays, npz_options options) {
  constexpr std::string_view function = "grove::data::save_npz";
  auto refuse = [&](const std::string& problem) {
    throw grove::argument_error(std::string(function) + ": " + problem);
  };
  std::vector<std::vector<std::byte>> files;
  files.reserve(arrays.size());
  for (const auto& [key, array] : arrays) {
    if (key.find('\0') != std::string::npos)
      refuse("the key " + quote_text(key) + " has a NUL byte");
    if (key.size() > 65535 - 4) refuse("the key " + quote_text(key) + " is too long for zip");
    const auto h = checked_npy_array(array, std::string(function) + ": array " + quote_text(key));
    files.push_back(npy_file_bytes(array, h));
  }
  zip_error_t error;
  zip_error_init(&error);
  auto zip_failed = [&](const std::string& what, const std::string& why) {
    throw io::format_error(function, file, what + " (libzip: " + why + ")");
  };
  if (arrays.empty()) {
    // libzip writes no archive at all for no entries: numpy's (and zipfile's) empty archive is
    // the end-of-central-directory record alone.
    static constexpr unsigned char empty[22] = {'P', 'K', 5, 6};
    io::atomic_writer out(file, function);
    out.write(empty, sizeof empty);
    out.commit();
    return;
  }
  std::unique_ptr<zip_source_t, zip_source_freer> archive(
      zip_source_buffer_create(nullptr, 0, 0, &error));
  if (!archive) throw std::bad_alloc();
  std::unique_ptr<zip_t, zip_discarder> z(
      zip_open_from_source(archive.get(), ZIP_TRUNCATE, &error));
  if (!z) {
    const std::string m = zip_message(&error);
    zip_error_fini(&error);
    zip_failed("cannot start the archive in memory", m);
  }
  zip_error_fini(&error);
  zip_source_keep(archive.get());  // z holds one reference, `archive` the other: it outlives z
  std::size_t n = 0;
  for (const auto& [key, array] : arrays) {
    const auto& bytes = files[n++];
    zip_source_t* s =
        zip_source_buffer(z.get(), bytes.empty() ? nullptr : bytes.data(), bytes.size(), 0);
    if (s == nullptr) throw std::bad_alloc();
    const std::string name = key + ".npy";
    const zip_int64_t i = zip_file_add(z.get(), name.c_str(), s, ZIP_FL_ENC_UTF_8);
    if (i < 0) {
      zip_source_free(s);
      zip_failed("cannot add " + quote_text(name), zip_strerror(z.get()));
    }
    const auto index = static_cast<zip_uint64_t>(i);
    // A fixed time, so that the same arrays make the same archive.
    if (zip_set_file_compression(z.get(), index, options.compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                 0) != 0 ||
        zip_file_set_mtime(z.get(), index, std::time_t{946684800}, 0) != 0)
      zip_failed("cannot add " + quote_text(name), zip_strerror(z.get()));
  }
  if (zip_close(z.get()) != 0) zip_failed("cannot build the archive", zip_strerror(z.get()));
  (void)z.release();  // zip_close freed it
  zip_stat_t st;
  zip_stat_init(&st);
  if (zip_source_stat(archive.get(), &st) != 0 || zip_source_open(archive.get()) != 0)
    zip_failed("cannot read the archive back from memory",
               zip_error_strerror(zip_source_error(archive.get())));
  io::atomic_writer out(file, function);
  std::vector<std::byte> chunk(std::size_t{1} << 20);
  for (;;) {
    const zip_int64_t got = zip_source_read(archive.get(), chunk.data(), chunk.size());
    if (got < 0) {
      zip_source_close(archive.get());
      zip_failed("cannot read the archive back from memory",
                 zip_error_strerror(zip_source_error(archive.get())));
    }
    if (got == 0) break;
    out.write(chunk.data(), static_cast<std::size_t>(got));
  }
  zip_source_close(archive.get());
  out.commit();
}

}  // namespace detail

/// Writes arrays as an .npz archive that np.load reads: each array as the .npy file save_npy
/// writes, named KEY.npy, stored (np.savez) or, with {.compress = true}, deflated
/// (np.savez_compressed). The archive is built in memory and replaced atomically, only if it is
/// missing or a regular file. Throws grove::argument_error for an array whose parts disagree or
/// a key with a NUL byte or longer than a zip name can be, file_error when the target is not a
/// regular file or cannot be written.
inline void save_npz(const std::filesystem::path& file,
                     const std::map<std::string, NpyArray, std::less<>>& arrays,
                     npz_options options = {}) {
  detail::save_npz_entries(file, arrays, options);
}

/// The same, for a map of another ordering (std::map<std::string, NpyArray>).
template <class Compare>
void save_npz(const std::filesystem::path& file,
              const std::map<std::string, NpyArray, Compare>& arrays, npz_options options = {}) {
  detail::save_npz_entries(file, arrays, options);
}

}  // namespace grove::data
