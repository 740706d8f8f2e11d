// grove/tree/key_path.hpp: key paths (JAX's SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey)
// and keystr, which prints them in JAX's format or in a simple separated form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace grove {

/// The position of a child in a sequence node (std::vector, std::tuple, std::pair, std::array);
/// printed `[0]`.
struct SequenceKey {
  std::size_t idx = 0;
  friend bool operator==(const SequenceKey&, const SequenceKey&) = default;
};

/// The key of a child in a dict node (std::map); printed `['a']` for a string key, `[1]` for an
/// integer key.
struct DictKey {
  std::variant<std::string, std::int64_t> key;
  friend bool operator==(const DictKey&, const DictKey&) = default;
};

/// The field of a registered struct (GROVE_NODE); printed `.w`.
struct GetAttrKey {
  std::string_view name;
  friend bool operator==(const GetAttrKey& a, const GetAttrKey& b) { return a.name == b.name; }
};

/// The position of a child in a custom container that does not name its keys; printed
/// `[<flat index 0>]`, as JAX prints it.
struct FlattenedIndexKey {
  std::size_t key = 0;
  friend bool operator==(const FlattenedIndexKey&, const FlattenedIndexKey&) = default;
};

/// One step of a key path.
using KeyEntry = std::variant<SequenceKey, DictKey, GetAttrKey, FlattenedIndexKey>;
/// The steps from the root of a tree to one of its subtrees.
using KeyPath = std::vector<KeyEntry>;

namespace detail {

// Whether Python's str.isprintable() is false for a non-ASCII code point, for the code points
// that a key or a name may plausibly hold: the C1 controls, the no-break and other spaces (Zs),
// the line and paragraph separators, the soft hyphen and other common format characters (Cf) and
// the private use area. Unassigned and rarer format code points are taken as printable.
constexpr bool python_unprintable(char32_t c) {
  return (c >= 0x80 && c <= 0xa0) || c == 0xad || c == 0x1680 || c == 0x180e ||
         (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f) ||
         (c >= 0x205f && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f) || c == 0x3000 ||
         (c >= 0xe000 && c <= 0xf8ff) || c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb);
}

// Decodes the UTF-8 sequence at s[i] into c and returns its length, or 0 if it is not valid.
inline std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& c) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char lead = b(0);
  const std::size_t n = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : lead >= 0xc0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  c = lead & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    c = (c << 6) | (b(k) & 0x3f);
  }
  return n;
}

inline void write_python_string(std::ostream& os, std::string_view s) {
  // Python's repr of a str: single quotes unless the text holds a single quote and no double one;
  // \t, \n, \r, and \xNN / \uNNNN for the other control and unprintable characters.
  const bool use_double =
      s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char quote = use_double ? '"' : '\'';
  static constexpr char hex[] = "0123456789abcdef";
  os << quote;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      os << '\\' << c;
    } else if (c == '\n') {
      os << "\\n";
    } else if (c == '\t') {
      os << "\\t";
    } else if (c == '\r') {
      os << "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      os << "\\x" << hex[u >> 4] << hex[u & 15];
    } else if (u < 0x80) {
      os << c;
    } else {
      char32_t cp = 0;
      const std::size_t n = decode_utf8(s, i, cp);
      if (n == 0) {
        os << c;  // not UTF-8: a Python str cannot hold it; the byte as it is
      } else if (python_unprintable(cp)) {
        if (cp <= 0xff)
          os << "\\x";
        else
          os << "\\u" << hex[(cp >> 12) & 15] << hex[(cp >> 8) & 15];
        os << hex[(cp >> 4) & 15] << hex[cp & 15];
        i += n - 1;
      } else {
        os << s.substr(i, n);
        i += n - 1;
      }
    }
  }
  os << quote;
}

inline void write_dict_key(std::ostream& os, const DictKey& k) {
  if (const auto* s = std::get_if<std::string>(&k.key))
    write_python_string(os, *s);
  else
    os << std::get<std::int64_t>(k.key);
}

}  // namespace detail

inline std::ostream& operator<<(std::ostream& os, const KeyEntry& entry) {
  std::visit(
      [&](const auto& k) {
        using K = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<K, SequenceKey>)
          os << '[' << k.idx << ']';
        else if constexpr (std::is_same_v<K, DictKey>) {
          os << '[';
          detail::write_dict_key(os, k);
          os << ']';
        } else if constexpr (std::is_same_v<K, GetAttrKey>)
          os << '.' << k.name;
        else
          os << "[<flat index " << k.key << ">]";
      },
      entry);
  return os;
}

/// The simple form of one key: the index, the dict key or the field name, without decoration.
inline std::string simple_key(const KeyEntry& entry) {
  return std::visit(
      [](const auto& k) -> std::string {
        using K = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<K, SequenceKey>)
          return std::to_string(k.idx);
        else if constexpr (std::is_same_v<K, DictKey>) {
          if (const auto* s = std::get_if<std::string>(&k.key)) return *s;
          return std::to_string(std::get<std::int64_t>(k.key));
        } else if constexpr (std::is_same_v<K, GetAttrKey>)
          return std::string(k.name);
        else
          return std::to_string(k.key);
      },
      entry);
}

/// A key path as JAX's `jax.tree_util.keystr` prints it: `[0].w['bias']`.
inline std::string keystr(const KeyPath& path) {
  std::ostringstream os;
  for (const auto& entry : path) os << entry;
  return os.str();
}

/// The simple form, like `keystr(path, simple=True, separator=separator)`: `0/w/bias`.
inline std::string keystr(const KeyPath& path, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i != 0) out += separator;
    out += simple_key(path[i]);
  }
  return out;
}

}  // namespace grove
