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
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grove/io/error.hpp"

namespace grove::io::detail {

// --- dtypes ------------------------------------------------------------------------------------

// Every dtype the safetensors specification names, in its order. All of them are valid in a
// header (so inspect() lists any file); grove loads BOOL, the integers, F16, BF16, F32 and F64
// into leaves, and the others (F4, F6_*, F8_*, C64) have no C++ leaf type to load into. F4 and
// F6 pack elements into bits: a tensor of them must fill a whole number of bytes.
enum class dtype : std::uint8_t {
  BOOL,
  F4,
  F6_E2M3,
  F6_E3M2,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  C64,
  F64,
  I64,
  U64
};

// What a dtype holds, for the conversions a load may make.
enum class dtype_kind : std::uint8_t { boolean, signed_integer, unsigned_integer, floating, other };

struct dtype_info {
  dtype id;
  std::string_view name;   // as the header spells it: "F32"
  std::uint8_t bits;       // bits per element (safetensors' bitsize)
  std::string_view numpy;  // the name numpy, ml_dtypes and JAX use: "float32"
  dtype_kind kind;
  std::uint8_t size;  // bytes per element, for the whole-byte dtypes (0 for F4 and F6)
};

inline constexpr dtype_info dtype_table[] = {
    {dtype::BOOL, "BOOL", 8, "bool", dtype_kind::boolean, 1},
    {dtype::F4, "F4", 4, "float4_e2m1fn", dtype_kind::other, 0},
    {dtype::F6_E2M3, "F6_E2M3", 6, "float6_e2m3fn", dtype_kind::other, 0},
    {dtype::F6_E3M2, "F6_E3M2", 6, "float6_e3m2fn", dtype_kind::other, 0},
    {dtype::U8, "U8", 8, "uint8", dtype_kind::unsigned_integer, 1},
    {dtype::I8, "I8", 8, "int8", dtype_kind::signed_integer, 1},
    {dtype::F8_E5M2, "F8_E5M2", 8, "float8_e5m2", dtype_kind::other, 1},
    {dtype::F8_E4M3, "F8_E4M3", 8, "float8_e4m3fn", dtype_kind::other, 1},
    {dtype::F8_E8M0, "F8_E8M0", 8, "float8_e8m0fnu", dtype_kind::other, 1},
    {dtype::I16, "I16", 16, "int16", dtype_kind::signed_integer, 2},
    {dtype::U16, "U16", 16, "uint16", dtype_kind::unsigned_integer, 2},
    {dtype::F16, "F16", 16, "float16", dtype_kind::floating, 2},
    {dtype::BF16, "BF16", 16, "bfloat16", dtype_kind::floating, 2},
    {dtype::I32, "I32", 32, "int32", dtype_kind::signed_integer, 4},
    {dtype::U32, "U32", 32, "uint32", dtype_kind::unsigned_integer, 4},
    {dtype::F32, "F32", 32, "float32", dtype_kind::floating, 4},
    {dtype::C64, "C64", 64, "complex64", dtype_kind::other, 8},
    {dtype::F64, "F64", 64, "float64", dtype_kind::floating, 8},
    {dtype::I64, "I64", 64, "int64", dtype_kind::signed_integer, 8},
    {dtype::U64, "U64", 64, "uint64", dtype_kind::unsigned_integer, 8},
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
// The most dimensions grove reads in a tensor's shape. The specification sets no limit; numpy
// allows 64 and PyTorch fewer, so this refuses no real file, while a header of 100 MB of "1,"
// cannot make a shape of 50 million dimensions (400 MB).
inline constexpr std::size_t max_rank = 1024;

// The prefix of grove's own entries in __metadata__; users' keys may not start with it.
inline constexpr std::string_view reserved_prefix = "grove.";
inline constexpr std::string_view version_key = "grove.version";
inline constexpr std::string_view treedef_key = "grove.treedef";
// "grove.key_layout:" + tensor name -> "partitionable" or "legacy", for each grove::random::Key.
inline constexpr std::string_view key_layout_prefix = "grove.key_layout:";

// --- messages ----------------------------------------------------------------------------------

// A name as it appears in messages: JSON-quoted, so that control characters stay visible, and
// cut after its first 64 bytes (then followed by "..."), since a name read from a file is the
// attacker's and may be megabytes long.
inline std::string json_quoted(std::string_view name) {
  constexpr std::size_t shown = 64;
  std::string out = nlohmann::json(std::string(name.substr(0, shown)))
                        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (name.size() > shown) out += "...";
  return out;
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
  std::uint32_t shard = 0;  // in a sharded checkpoint, the file that holds it (header::shards)
};

// One file of a sharded checkpoint, as the index names it.
struct shard_info {
  std::string name;              // as the index's weight_map spells it, relative to the index
  std::uint64_t data_start = 0;  // the file offset of its data buffer
};

struct header {
  std::vector<tensor_entry> tensors;  // in the header's order
  std::map<std::string, std::string> metadata;
  std::unordered_map<std::string, std::size_t> index;  // tensor name -> position in tensors
  std::uint64_t data_start = 0;                        // file offset of the data buffer: 8 + N
  std::uint64_t data_size = 0;
  // Empty for one file; for a sharded checkpoint (the tensors of all its files in one header),
  // the files, indexed by tensor_entry::shard.
  std::vector<shard_info> shards;

  const tensor_entry* find(const std::string& name) const {
    const auto it = index.find(name);
    return it == index.end() ? nullptr : &tensors[it->second];
  }
};

// The number of bytes a tensor of this dtype and shape holds, or fails if it overflows 64 bits
// or (for the sub-byte dtypes) does not fill a whole number of bytes.
inline std::uint64_t tensor_bytes(const tensor_entry& t, const reading& ctx) {
  if (std::find(t.shape.begin(), t.shape.end(), std::uint64_t{0}) != t.shape.end()) return 0;
  std::uint64_t n = 1;
  for (const auto dim : t.shape)
    if (__builtin_mul_overflow(n, dim, &n))
      ctx.fail("tensor " + json_quoted(t.name) + ": shape " + shape_str(t.shape) + " of " +
               std::string(info(t.type).name) + " has more than 2^64 bytes");
  const unsigned bits = info(t.type).bits;
  if (bits % 8 == 0) {
    if (__builtin_mul_overflow(n, std::uint64_t{bits / 8u}, &n))
      ctx.fail("tensor " + json_quoted(t.name) + ": shape " + shape_str(t.shape) + " of " +
               std::string(info(t.type).name) + " has more than 2^64 bytes");
    return n;
  }
  // n * bits / 8 without overflowing: n = 8q + r.
  const std::uint64_t q = n / 8, r = n % 8;
  if ((r * bits) % 8 != 0)
    ctx.fail("tensor " + json_quoted(t.name) + ": shape " + shape_str(t.shape) + " of " +
             std::string(info(t.type).name) + " (" + std::to_string(bits) +
             " bits each) does not fill a whole number of bytes");
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(q, std::uint64_t{bits}, &bytes))
    ctx.fail("tensor " + json_quoted(t.name) + ": shape " + shape_str(t.shape) + " of " +
             std::string(info(t.type).name) + " has more than 2^64 bytes");
  return bytes + r * bits / 8;
}

// The text after nlohmann's "[json.exception.parse_error.101] " prefix, at most 160 characters
// of it (nlohmann quotes the last token read, which can be the attacker's whole string).
inline std::string json_message(const std::exception& e) {
  std::string_view what = e.what();
  if (const auto close = what.find("] ");
      what.starts_with("[json.exception.") && close != std::string_view::npos)
    what.remove_prefix(close + 2);
  constexpr std::size_t shown = 160;
  if (what.size() > shown) return std::string(what.substr(0, shown)) + "...";
  return std::string(what);
}

// Parses the JSON header as nlohmann's parser reads it (SAX events), building the tensor entries
// and the metadata directly and checking each against the safetensors schema as it arrives:
//   { NAME: {"dtype": STRING, "shape": [UINT...], "data_offsets": [UINT, UINT]}...,
//     "__metadata__": {KEY: STRING...} or null }
// Anything else is refused at its first event. So the nesting never gets deeper than the schema
// (three levels): a header nesting 100,000 levels fails at the second. Time is linear in the
// header, and memory is the entries themselves (no JSON document is built). Duplicate keys in any
// object are refused (JSON allows them, but a file whose tensor appears twice has no single
// meaning). Messages never quote more than 64 characters of the header.
class header_parser {
 public:
  using json = nlohmann::json;

  header_parser(header& h, const reading& ctx) : h_(h), ctx_(ctx) {}

  bool null() { return value(kind::null, "null"); }
  bool boolean(bool v) { return value(kind::boolean, v ? "true" : "false"); }
  bool number_integer(json::number_integer_t v) { return value(kind::integer, std::to_string(v)); }
  bool number_unsigned(json::number_unsigned_t v) {
    if (state_ == state::shape) {
      if (current_.shape.size() == max_rank)
        ctx_.fail(who() + ": shape has more than " + std::to_string(max_rank) +
                  " dimensions, more than grove reads");
      current_.shape.push_back(v);
      return true;
    }
    if (state_ == state::offsets) {
      if (offsets_seen_ == 2)
        ctx_.fail(who() +
                  ": data_offsets must be an array [begin, end], but has more than 2 elements");
      (offsets_seen_ == 0 ? current_.begin : current_.end) = v;
      ++offsets_seen_;
      return true;
    }
    return value(kind::integer, std::to_string(v));
  }
  bool number_float(json::number_float_t, const json::string_t& text) {
    return value(kind::floating, cut(text));
  }
  bool string(json::string_t& v) {
    if (state_ == state::metadata) {
      h_.metadata.emplace(std::move(key_), std::move(v));
      return true;
    }
    if (state_ == state::tensor && field_ == field::dtype) {
      const auto* d = find_dtype(v);
      if (!d)
        ctx_.fail(who() + ": unknown dtype " + json_quoted(v) +
                  " (safetensors dtypes: " + known_dtypes() + ")");
      current_.type = d->id;
      return true;
    }
    return value(kind::string, json_quoted(v));
  }
  bool binary(json::binary_t&) { return value(kind::string, "binary"); }  // not in JSON text

  bool start_object(std::size_t) {
    switch (state_) {
      case state::top:
        state_ = state::root;
        return true;
      case state::root:
        if (key_ == "__metadata__") {
          state_ = state::metadata;
        } else {
          state_ = state::tensor;
          current_ = tensor_entry{};
          current_.name = std::move(key_);
          fields_ = 0;
        }
        return true;
      default:
        return value(kind::object, "");
    }
  }
  bool key(json::string_t& k) {
    switch (state_) {
      case state::root:
        if (k == "__metadata__") {
          if (metadata_seen_) twice(k);
          metadata_seen_ = true;
        } else if (!h_.index.emplace(k, h_.tensors.size()).second) {
          twice(k);
        }
        break;
      case state::metadata:
        if (h_.metadata.count(k)) twice(k);
        break;
      case state::tensor: {
        field f;
        if (k == "dtype")
          f = field::dtype;
        else if (k == "shape")
          f = field::shape;
        else if (k == "data_offsets")
          f = field::data_offsets;
        else
          ctx_.fail(who() + ": unknown field " + json_quoted(k) +
                    " (a tensor has only dtype, shape and data_offsets)");
        const auto bit = 1u << static_cast<unsigned>(f);
        if (fields_ & bit) twice(k);
        fields_ |= bit;
        field_ = f;
        break;
      }
      default:
        break;  // keys arrive only in objects, and the other states hold none
    }
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    switch (state_) {
      case state::root:
        state_ = state::done;
        break;
      case state::metadata:
        state_ = state::root;
        break;
      default:  // state::tensor: the only other object
        finish_tensor();
        state_ = state::root;
        break;
    }
    return true;
  }
  bool start_array(std::size_t) {
    if (state_ == state::tensor && field_ == field::shape) {
      state_ = state::shape;
      return true;
    }
    if (state_ == state::tensor && field_ == field::data_offsets) {
      state_ = state::offsets;
      offsets_seen_ = 0;
      return true;
    }
    return value(kind::array, "");
  }
  bool end_array() {
    if (state_ == state::offsets && offsets_seen_ != 2)
      ctx_.fail(who() + ": data_offsets must be an array [begin, end], but has " +
                std::to_string(offsets_seen_) + " element" + (offsets_seen_ == 1 ? "" : "s"));
    state_ = state::tensor;  // shape and data_offsets are the only arrays
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (dynamic_cast<const json::parse_error*>(&e))
      ctx_.fail("the header is not valid JSON (near file byte " +
                std::to_string(8 + (position > 0 ? position - 1 : 0)) + "): " + json_message(e));
    ctx_.fail("the header is not valid JSON: " + json_message(e));  // a number too large, say
  }

 private:
  enum class state : std::uint8_t { top, root, metadata, tensor, shape, offsets, done };
  enum class field : std::uint8_t { dtype, shape, data_offsets };
  enum class kind : std::uint8_t { null, boolean, integer, floating, string, array, object };

  static const char* kind_name(kind k) {
    switch (k) {
      case kind::null:
        return "a null";
      case kind::boolean:
        return "a boolean";
      case kind::integer:
        return "an integer";
      case kind::floating:
        return "a non-integer number";
      case kind::string:
        return "a string";
      case kind::array:
        return "an array";
      case kind::object:
        return "an object";
    }
    return "a value";
  }
  static std::string cut(std::string_view text) {
    return text.size() > 64 ? std::string(text.substr(0, 64)) + "..." : std::string(text);
  }

  std::string who() const { return "tensor " + json_quoted(current_.name); }
  [[noreturn]] void twice(const std::string& k) const {
    ctx_.fail("the JSON header has the key " + json_quoted(k) + " twice in one object");
  }

  // A value where the schema has no room for one of its kind (`text`: the value, for scalars).
  bool value(kind k, const std::string& text) {
    const std::string type = kind_name(k);
    const std::string shown = text.empty() ? "" : " (" + text + ")";
    switch (state_) {
      case state::top:
        ctx_.fail("the JSON header is " + type + ", not an object");
      case state::root:
        if (key_ == "__metadata__") {
          if (k == kind::null) return true;  // "__metadata__": null is no metadata
          ctx_.fail("__metadata__ is " + type + ", not an object of strings");
        }
        ctx_.fail("tensor " + json_quoted(key_) + ": its entry is " + type +
                  ", not an object with dtype, shape and data_offsets");
      case state::metadata:
        ctx_.fail("__metadata__ " + json_quoted(key_) + " is " + type +
                  "; safetensors metadata values must be strings");
      case state::tensor:
        if (field_ == field::dtype) ctx_.fail(who() + ": dtype must be a string, but is " + type);
        if (field_ == field::shape) ctx_.fail(who() + ": shape must be an array, but is " + type);
        ctx_.fail(who() + ": data_offsets must be an array [begin, end], but is " + type + shown);
      case state::shape:
        ctx_.fail(who() + ": shape[" + std::to_string(current_.shape.size()) +
                  "] must be a non-negative integer, but is " + type + shown);
      case state::offsets:
        ctx_.fail(who() + ": data_offsets[" + std::to_string(offsets_seen_) +
                  "] must be a non-negative integer, but is " + type + shown);
      case state::done:
        break;
    }
    ctx_.fail("the header is not valid JSON: a value after its end");
  }

  void finish_tensor() {
    static constexpr const char* names[] = {"dtype", "shape", "data_offsets"};
    for (unsigned f = 0; f < 3; ++f)
      if (!(fields_ & (1u << f))) ctx_.fail(who() + ": no \"" + names[f] + "\"");
    const tensor_entry& t = current_;
    const std::string range =
        "data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) + "]";
    if (t.begin > t.end) ctx_.fail(who() + ": " + range + " end before they begin");
    if (t.end > h_.data_size)
      ctx_.fail(who() + ": " + range + " run past the end of the data, which has " +
                std::to_string(h_.data_size) + " bytes (file bytes " +
                std::to_string(h_.data_start) + " to " +
                std::to_string(h_.data_start + h_.data_size) + ")");
    const std::uint64_t need = tensor_bytes(t, ctx_);
    if (need != t.end - t.begin)
      ctx_.fail(who() + ": shape " + shape_str(t.shape) + " of " + std::string(info(t.type).name) +
                " needs " + std::to_string(need) + " bytes, but " + range + " hold " +
                std::to_string(t.end - t.begin));
    h_.tensors.push_back(std::move(current_));
  }

  header& h_;
  const reading& ctx_;
  state state_ = state::top;
  std::string key_;  // the last key read
  tensor_entry current_;
  field field_ = field::dtype;
  unsigned fields_ = 0;  // the fields of current_ seen, one bit each
  unsigned offsets_seen_ = 0;
  bool metadata_seen_ = false;
};

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

// Refuses anything but whitespace after a JSON text's value. nlohmann's lexer takes a NUL byte
// for the end of the input, so a text the parser accepted may hold a NUL and anything at all
// after its value: the first NUL is then the first byte after the value and the whitespace that
// follows it (a NUL inside a string, or before the value ends, is a parse error). `what` names
// the text ("the header", "the index"), `first_byte` is the text's offset in its file.
inline void check_nothing_after_json(std::string_view text, std::uint64_t first_byte,
                                     std::string_view what, const reading& ctx) {
  const auto nul = text.find('\0');
  if (nul == std::string_view::npos) return;
  ctx.fail(std::string(what) + "'s JSON is followed by a NUL byte at file byte " +
           std::to_string(first_byte + nul) + " (and " + std::to_string(text.size() - nul - 1) +
           " more bytes); only whitespace may follow the JSON value (safetensors pads with "
           "spaces)");
}

// Parses and validates the whole header: its JSON, every tensor entry, the tiling of the data
// buffer (of `data_size` bytes at file offset `data_start`) and grove's metadata.
inline header parse_header(std::string_view text, std::uint64_t data_start, std::uint64_t data_size,
                           const reading& ctx) {
  if (text.empty() || text.front() != '{')
    ctx.fail("the header (file bytes 8 to " + std::to_string(data_start) +
             ") does not start with '{'");
  header h;
  h.data_start = data_start;
  h.data_size = data_size;
  header_parser parser(h, ctx);
  nlohmann::json::sax_parse(text.begin(), text.end(), &parser);
  check_nothing_after_json(text, 8, "the header", ctx);
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
