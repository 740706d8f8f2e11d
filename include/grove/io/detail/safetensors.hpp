// grove/io/detail/safetensors.hpp: the safetensors container, independent of pytrees: dtypes,
// parsing and validating the JSON header, and the byte order of the data.
//
// A safetensors file is
//   bytes [0, 8)          N, the header's length, an unsigned 64-bit little-endian integer;
//   bytes [8, 8 + N)      a JSON object: for each tensor name {"dtype", "shape", "data_offsets"},
//                         and optionally "__metadata__", an object of string values;
//   bytes [8 + N, end)    the data buffer; data_offsets [begin, end) are relative to its start.
// The tensors must cover the buffer exactly: no overlap, no hole, nothing after the last one.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grove/io/error.hpp"

namespace grove::io::detail {

// --- dtypes ------------------------------------------------------------------------------------

// Every dtype of the safetensors specification with a whole number of bytes per element. grove
// reads and writes BOOL, the integers, F32 and F64; the others (F16, BF16, F8_*) are recognised,
// so that a header using them is valid, but have no C++ leaf type to load into.
enum class dtype : std::uint8_t {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};

struct dtype_info {
  dtype id;
  std::string_view name;   // as the header spells it: "F32"
  std::uint8_t size;       // bytes per element
  std::string_view numpy;  // the name numpy and JAX use: "float32"
};

inline constexpr dtype_info dtype_table[] = {
    {dtype::BOOL, "BOOL", 1, "bool"},
    {dtype::U8, "U8", 1, "uint8"},
    {dtype::I8, "I8", 1, "int8"},
    {dtype::F8_E5M2, "F8_E5M2", 1, "float8_e5m2"},
    {dtype::F8_E4M3, "F8_E4M3", 1, "float8_e4m3fn"},
    {dtype::I16, "I16", 2, "int16"},
    {dtype::U16, "U16", 2, "uint16"},
    {dtype::F16, "F16", 2, "float16"},
    {dtype::BF16, "BF16", 2, "bfloat16"},
    {dtype::I32, "I32", 4, "int32"},
    {dtype::U32, "U32", 4, "uint32"},
    {dtype::F32, "F32", 4, "float32"},
    {dtype::F64, "F64", 8, "float64"},
    {dtype::I64, "I64", 8, "int64"},
    {dtype::U64, "U64", 8, "uint64"},
};

constexpr const dtype_info& info(dtype d) {
  return dtype_table[static_cast<std::size_t>(d)];
}

inline const dtype_info* find_dtype(std::string_view name) {
  for (const auto& d : dtype_table)
    if (d.name == name) return &d;
  return nullptr;
}

inline std::string known_dtypes() {
  std::string out;
  for (const auto& d : dtype_table) {
    if (!out.empty()) out += ", ";
    out += d.name;
  }
  return out;
}

// safetensors' own reader refuses headers longer than this; so does grove, before allocating.
inline constexpr std::uint64_t max_header_size = 100'000'000;

// The prefix of grove's own entries in __metadata__; users' keys may not start with it.
inline constexpr std::string_view reserved_prefix = "grove.";
inline constexpr std::string_view version_key = "grove.version";
inline constexpr std::string_view treedef_key = "grove.treedef";
// "grove.key_layout:" + tensor name -> "partitionable" or "legacy", for each grove::random::Key.
inline constexpr std::string_view key_layout_prefix = "grove.key_layout:";

// --- messages ----------------------------------------------------------------------------------

// A name as it appears in messages: JSON-quoted, so that control characters stay visible.
inline std::string json_quoted(std::string_view name) {
  return nlohmann::json(std::string(name))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

inline std::string shape_str(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

// Where a file is being read from, for error messages.
struct reading {
  std::string_view function;
  const std::filesystem::path& file;
  [[noreturn]] void fail(const std::string& problem) const {
    throw format_error(function, file, problem);
  }
};

// --- the header ----------------------------------------------------------------------------------

struct tensor_entry {
  std::string name;
  dtype type = dtype::U8;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  // data_offsets, relative to the start of the data buffer
  std::uint64_t end = 0;
};

struct header {
  std::vector<tensor_entry> tensors;  // in the header's order
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;  // file offset of the data buffer: 8 + N
  std::uint64_t data_size = 0;

  const tensor_entry* find(std::string_view name) const {
    for (const auto& t : tensors)
      if (t.name == name) return &t;
    return nullptr;
  }
};

using ordered_json = nlohmann::ordered_json;

inline std::string json_type(const ordered_json& v) {
  if (v.is_number_unsigned() || v.is_number_integer()) return "an integer";
  if (v.is_number_float()) return "a non-integer number";
  const std::string t = v.type_name();
  return (t == "array" || t == "object") ? "an " + t : "a " + t;
}

// The text after nlohmann's "[json.exception.parse_error.101] " prefix.
inline std::string json_message(const std::exception& e) {
  std::string_view what = e.what();
  if (const auto close = what.find("] ");
      what.starts_with("[json.exception.") && close != std::string_view::npos)
    what.remove_prefix(close + 2);
  return std::string(what);
}

// Parses the JSON text; rejects duplicate keys in any object (JSON allows them, but a file whose
// tensor appears twice has no single meaning).
inline ordered_json parse_json(std::string_view text, const reading& ctx) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  auto on_event = [&](int, ordered_json::parse_event_t event, ordered_json& parsed) {
    switch (event) {
      case ordered_json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case ordered_json::parse_event_t::key:
        if (!open_objects.empty() && !open_objects.back().insert(parsed.get<std::string>()).second)
          ctx.fail("the JSON header has the key " + json_quoted(parsed.get<std::string>()) +
                   " twice in one object");
        break;
      case ordered_json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return ordered_json::parse(text.begin(), text.end(), on_event);
  } catch (const ordered_json::parse_error& e) {
    ctx.fail("the header is not valid JSON (near file byte " +
             std::to_string(8 + (e.byte > 0 ? e.byte - 1 : 0)) + "): " + json_message(e));
  } catch (const ordered_json::exception& e) {  // a number too large for a double, say
    ctx.fail("the header is not valid JSON: " + json_message(e));
  }
}

inline std::uint64_t checked_uint(const ordered_json& v, const std::string& what,
                                  const reading& ctx) {
  if (!v.is_number_unsigned())
    ctx.fail(what + " must be a non-negative integer, but is " + json_type(v) + " (" + v.dump() +
             ")");
  return v.get<std::uint64_t>();
}

// The number of bytes a tensor of this dtype and shape holds, or fails if it overflows 64 bits.
inline std::uint64_t tensor_bytes(const tensor_entry& t, const reading& ctx) {
  std::uint64_t n = info(t.type).size;
  if (std::find(t.shape.begin(), t.shape.end(), std::uint64_t{0}) != t.shape.end()) return 0;
  for (const auto dim : t.shape)
    if (__builtin_mul_overflow(n, dim, &n))
      ctx.fail("tensor " + json_quoted(t.name) + ": shape " + shape_str(t.shape) + " of " +
               std::string(info(t.type).name) + " has more than 2^64 bytes");
  return n;
}

inline tensor_entry parse_tensor(const std::string& name, const ordered_json& entry,
                                 const header& h, const reading& ctx) {
  const std::string who = "tensor " + json_quoted(name);
  if (!entry.is_object())
    ctx.fail(who + ": its entry is " + json_type(entry) +
             ", not an object with dtype, shape and data_offsets");
  for (const auto& [field, value] : entry.items()) {
    (void)value;
    if (field != "dtype" && field != "shape" && field != "data_offsets")
      ctx.fail(who + ": unknown field " + json_quoted(field) +
               " (a tensor has only dtype, shape and data_offsets)");
  }
  for (const char* field : {"dtype", "shape", "data_offsets"})
    if (!entry.contains(field)) ctx.fail(who + ": no \"" + field + "\"");

  tensor_entry t;
  t.name = name;
  const auto& dt = entry["dtype"];
  if (!dt.is_string()) ctx.fail(who + ": dtype must be a string, but is " + json_type(dt));
  const auto* d = find_dtype(dt.get_ref<const std::string&>());
  if (!d)
    ctx.fail(who + ": unknown dtype " + json_quoted(dt.get_ref<const std::string&>()) +
             " (safetensors dtypes: " + known_dtypes() + ")");
  t.type = d->id;

  const auto& shape = entry["shape"];
  if (!shape.is_array()) ctx.fail(who + ": shape must be an array, but is " + json_type(shape));
  for (std::size_t i = 0; i < shape.size(); ++i)
    t.shape.push_back(checked_uint(shape[i], who + ": shape[" + std::to_string(i) + "]", ctx));

  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2)
    ctx.fail(who + ": data_offsets must be an array [begin, end], but is " + offsets.dump());
  t.begin = checked_uint(offsets[0], who + ": data_offsets[0]", ctx);
  t.end = checked_uint(offsets[1], who + ": data_offsets[1]", ctx);
  const std::string range =
      "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
  if (t.begin > t.end) ctx.fail(who + ": " + range + " end before they begin");
  if (t.end > h.data_size)
    ctx.fail(who + ": " + range + " run past the end of the data, which has " +
             std::to_string(h.data_size) + " bytes (file bytes " + std::to_string(h.data_start) +
             " to " + std::to_string(h.data_start + h.data_size) + ")");
  const std::uint64_t need = tensor_bytes(t, ctx);
  if (need != t.end - t.begin)
    ctx.fail(who + ": shape " + shape_str(t.shape) + " of " + std::string(d->name) + " needs " +
             std::to_string(need) + " bytes, but " + range + " hold " +
             std::to_string(t.end - t.begin));
  return t;
}

// The tensors must tile the data buffer: sorted by offset, each begins where the previous ended.
inline void check_tiling(const header& h, const reading& ctx) {
  std::vector<std::size_t> order(h.tensors.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = h.tensors[a];
    const auto& y = h.tensors[b];
    return std::tie(x.begin, x.end) < std::tie(y.begin, y.end);
  });
  auto range = [](const tensor_entry& t) {
    // (Built with append: GCC 12 warns falsely under -Wrestrict about "[" + std::string.)
    std::string out = "[";
    out.append(std::to_string(t.begin)).append(", ").append(std::to_string(t.end)).append(")");
    return out;
  };
  std::uint64_t covered = 0;
  const tensor_entry* previous = nullptr;
  for (const auto i : order) {
    const auto& t = h.tensors[i];
    if (t.begin < covered)
      ctx.fail("tensors " + json_quoted(previous->name) + " (data bytes " + range(*previous) +
               ") and " + json_quoted(t.name) + " (data bytes " + range(t) + ") overlap");
    if (t.begin > covered)
      ctx.fail("data bytes [" + std::to_string(covered) + ", " + std::to_string(t.begin) +
               ") (file bytes " + std::to_string(h.data_start + covered) +
               " on) belong to no tensor; safetensors forbids holes in the data");
    covered = t.end;
    if (t.end > t.begin) previous = &t;
  }
  if (covered != h.data_size)
    ctx.fail("the data has " + std::to_string(h.data_size - covered) +
             " bytes after the last tensor (file bytes " + std::to_string(h.data_start + covered) +
             " to " + std::to_string(h.data_start + h.data_size) +
             "); safetensors forbids trailing data");
}

// grove's own metadata: each "grove.key_layout:NAME" names a U32 [2] tensor and a known layout.
inline void check_grove_metadata(const header& h, const reading& ctx) {
  for (const auto& [key, value] : h.metadata) {
    if (!key.starts_with(key_layout_prefix)) continue;
    const std::string name = key.substr(key_layout_prefix.size());
    if (value != "partitionable" && value != "legacy")
      ctx.fail("__metadata__ " + json_quoted(key) + " is " + json_quoted(value) +
               "; a key layout is \"partitionable\" or \"legacy\"");
    const auto* t = h.find(name);
    if (!t)
      ctx.fail("__metadata__ " + json_quoted(key) +
               " gives the key layout of a tensor the file does not have");
    if (t->type != dtype::U32 || t->shape != std::vector<std::uint64_t>{2})
      ctx.fail("__metadata__ " + json_quoted(key) + " says tensor " + json_quoted(name) +
               " is a random key, but it is " + std::string(info(t->type).name) + " " +
               shape_str(t->shape) + ", not U32 [2]");
  }
}

// Parses and validates the whole header: its JSON, every tensor entry, the tiling of the data
// buffer (of `data_size` bytes at file offset `data_start`) and grove's metadata.
inline header parse_header(std::string_view text, std::uint64_t data_start, std::uint64_t data_size,
                           const reading& ctx) {
  if (text.empty() || text.front() != '{')
    ctx.fail("the header (file bytes 8 to " + std::to_string(data_start) +
             ") does not start with '{'");
  const ordered_json root = parse_json(text, ctx);
  if (!root.is_object()) ctx.fail("the JSON header is " + json_type(root) + ", not an object");
  header h;
  h.data_start = data_start;
  h.data_size = data_size;
  h.tensors.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      if (!entry.is_object())
        ctx.fail("__metadata__ is " + json_type(entry) + ", not an object of strings");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          ctx.fail("__metadata__ " + json_quoted(key) + " is " + json_type(value) +
                   "; safetensors metadata values must be strings");
        h.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    h.tensors.push_back(parse_tensor(name, entry, h, ctx));
  }
  check_tiling(h, ctx);
  check_grove_metadata(h, ctx);
  return h;
}

// --- byte order ----------------------------------------------------------------------------------

// safetensors data is little-endian. On a big-endian machine each element's bytes are reversed
// on the way in and out; on a little-endian one this is a no-op the compiler removes.
inline void to_little_endian(std::byte* data, std::size_t count, std::size_t element_size) {
  if constexpr (std::endian::native == std::endian::little) {
    (void)data, (void)count, (void)element_size;
  } else {
    if (element_size == 1) return;
    for (std::size_t i = 0; i < count; ++i)
      std::reverse(data + i * element_size, data + (i + 1) * element_size);
  }
}
inline void from_little_endian(std::byte* data, std::size_t count, std::size_t element_size) {
  to_little_endian(data, count, element_size);
}

inline std::uint64_t load_u64_le(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}
inline void store_u64_le(std::uint64_t v, std::byte* p) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}

}  // namespace grove::io::detail
