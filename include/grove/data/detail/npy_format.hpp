// grove/data/detail/npy_format.hpp: the pieces of numpy's .npy format that grove's readers and
// writers share: dtypes (numpy's descr strings), a strict parser of the header (exactly numpy's
// dict literal), the writer of numpy's own header bytes, and element conversion, whose messages
// give the element's index in numpy's order.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace grove::data::detail {

// At most the first 64 characters of text read from a file, quoted, with what is not printable
// ASCII escaped: a message never carries a whole attacker-supplied input.
inline std::string quote_text(std::string_view s) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 64; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 0xF];
    }
  }
  out += '\'';
  if (s.size() > 64) out += "...";
  return out;
}

// --- dtypes --------------------------------------------------------------------------------------

inline constexpr char npy_native_order = std::endian::native == std::endian::little ? '<' : '>';

// numpy's limits: a header longer than this is refused (numpy's own max_header_size), and an
// array of more dimensions than numpy 2 allows (NPY_MAXDIMS) cannot be described.
inline constexpr std::size_t npy_max_header_size = 10000;
inline constexpr std::size_t npy_max_dims = 64;

// A numeric dtype: byte order ('<', '>', or '|' for one-byte types), kind and size in bytes.
struct npy_dtype {
  char order = npy_native_order;
  char kind = 'f';  // 'b' bool, 'i' signed, 'u' unsigned, 'f' floating, 'c' complex
  int size = 8;

  std::string descr() const {
    std::string s{order, kind};
    return s + std::to_string(size);
  }
  // Whether the bytes must be reversed to be read on this machine.
  bool swapped() const { return size > 1 && order != npy_native_order; }
  // numpy's name: "float64", "int8", "bool", "complex128".
  std::string name() const {
    switch (kind) {
      case 'b':
        return "bool";
      case 'i':
        return "int" + std::to_string(8 * size);
      case 'u':
        return "uint" + std::to_string(8 * size);
      case 'f':
        return "float" + std::to_string(8 * size);
      default:
        return "complex" + std::to_string(8 * size);
    }
  }
  std::string describe() const { return name() + " ('" + descr() + "')"; }
};

// Parses a descr string: an optional byte order ('<', '>', '=', '|', '!'), a kind and a size,
// as numpy writes dtype.str. On failure returns false and says why in `problem`.
inline bool parse_npy_descr(std::string_view text, npy_dtype& out, std::string& problem) {
  std::string_view s = text;
  char order = 0;
  if (!s.empty() && std::string_view("<>=|!").find(s[0]) != std::string_view::npos) {
    order = s[0];
    s.remove_prefix(1);
  }
  const std::string what = "dtype " + quote_text(text);
  if (s.empty()) {
    problem = "an empty dtype " + quote_text(text);
    return false;
  }
  const char kind = s[0];
  switch (kind) {
    case 'O':
      problem = what +
                " is an object array: its elements are pickled Python objects, which grove never "
                "unpickles (numpy needs allow_pickle=True for them); save numbers instead";
      return false;
    case 'U':
    case 'S':
    case 'a':
      problem = what + " is an array of strings; grove reads numbers only";
      return false;
    case 'V':
      problem = what + " is an array of raw bytes (void); grove reads numbers only";
      return false;
    case 'M':
    case 'm':
      problem = what +
                " is an array of datetimes or timedeltas; grove reads numbers only (save "
                "a.astype(np.int64) for the raw counts)";
      return false;
    case 'b':
    case 'i':
    case 'u':
    case 'f':
    case 'c':
      break;
    default:
      problem = "unknown " + what + " (grove reads b1, i1-i8, u1-u8, f2, f4, f8, c8 and c16)";
      return false;
  }
  s.remove_prefix(1);
  int size = 0;
  if (s.empty() || s.size() > 3 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    problem = "unknown " + what + ": the kind must be followed by the size in bytes";
    return false;
  }
  for (char c : s) size = 10 * size + (c - '0');
  bool valid = false;
  switch (kind) {
    case 'b':
      valid = size == 1;
      break;
    case 'i':
    case 'u':
      valid = size == 1 || size == 2 || size == 4 || size == 8;
      break;
    case 'f':
      valid = size == 2 || size == 4 || size == 8;
      break;
    default:
      valid = size == 8 || size == 16;
      break;
  }
  if (!valid) {
    problem = "unsupported " + what +
              ((kind == 'f' || kind == 'c') && size > 8
                   ? " (numpy's long double, whose layout depends on the machine: save float64 "
                     "instead)"
                   : " (grove reads b1, i1-i8, u1-u8, f2, f4, f8, c8 and c16)");
    return false;
  }
  npy_dtype d;
  d.kind = kind;
  d.size = size;
  if (size == 1)
    d.order = '|';
  else if (order == '<' || order == '>')
    d.order = order;
  else if (order == '!')
    d.order = '>';
  else
    d.order = npy_native_order;  // '=', '|' (numpy reads it as native) or none
  out = d;
  return true;
}

// --- the header ----------------------------------------------------------------------------------

struct npy_header {
  npy_dtype dtype;
  std::vector<std::int64_t> shape;
  bool fortran_order = false;
  std::int64_t elements = 1;  // the product of the shape

  std::uint64_t data_bytes() const {
    return static_cast<std::uint64_t>(elements) * static_cast<std::uint64_t>(dtype.size);
  }
};

// "(3, 4)", "(3,)", "()": a shape as Python writes a tuple.
inline std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ',';
  return s + ")";
}

// Sets h.elements from h.shape; returns "" or the problem when the data's bytes (or the product
// of the nonzero dimensions, so that a zero cannot hide an overflow) would not fit this machine's
// sizes.
inline std::string count_npy_elements(npy_header& h) {
  const auto limit = static_cast<std::uint64_t>(std::numeric_limits<std::ptrdiff_t>::max()) /
                     static_cast<std::uint64_t>(h.dtype.size);
  std::uint64_t product = 1;
  bool zero = false;
  for (const auto d : h.shape) {
    if (d == 0) {
      zero = true;
      continue;
    }
    if (d < 0 || static_cast<std::uint64_t>(d) > limit / product)
      return "the shape " + shape_string(h.shape) + " of " + h.dtype.describe() +
             " elements has more bytes than this machine can address";
    product *= static_cast<std::uint64_t>(d);
  }
  h.elements = zero ? 0 : static_cast<std::int64_t>(product);
  return {};
}

// A strict parser of the header numpy writes: a Python dict literal with exactly the keys
// 'descr' (a string), 'fortran_order' (True or False) and 'shape' (a tuple of non-negative
// integers), in any order, with Python's optional trailing commas and blanks, then only blanks.
// `offset` is where the header starts in the file, for messages. Returns "" or the problem.
class npy_header_parser {
 public:
  npy_header_parser(std::string_view text, std::uint64_t offset, bool python2_longs)
      : text_(text), offset_(offset), python2_longs_(python2_longs) {}

  std::string parse(npy_header& out) {
    skip_blanks();
    if (!eat('{')) return expected("'{' (the header is a Python dict literal)");
    bool seen_descr = false, seen_order = false, seen_shape = false;
    for (;;) {
      skip_blanks();
      if (eat('}')) break;
      const std::size_t key_at = pos_;
      std::string key;
      if (auto p = string_literal(key); !p.empty()) return p;
      skip_blanks();
      if (!eat(':')) return expected("':' after the key " + quote_text(key));
      skip_blanks();
      std::string problem;
      if (key == "descr") {
        if (seen_descr) return at(key_at, "the key 'descr' appears twice");
        seen_descr = true;
        problem = descr(out.dtype);
      } else if (key == "fortran_order") {
        if (seen_order) return at(key_at, "the key 'fortran_order' appears twice");
        seen_order = true;
        problem = boolean(out.fortran_order);
      } else if (key == "shape") {
        if (seen_shape) return at(key_at, "the key 'shape' appears twice");
        seen_shape = true;
        problem = shape(out.shape);
      } else {
        return at(key_at, "unknown key " + quote_text(key) +
                              " (numpy's header has exactly 'descr', 'fortran_order' and 'shape')");
      }
      if (!problem.empty()) return problem;
      skip_blanks();
      if (eat(',')) continue;
      if (eat('}')) break;
      return expected("',' or '}' after the value of " + quote_text(key));
    }
    skip_blanks();
    if (pos_ != text_.size()) return at(pos_, "unexpected text after the header's closing '}'");
    if (!seen_descr || !seen_order || !seen_shape)
      return std::string("the header has no ") +
             (!seen_descr   ? "'descr'"
              : !seen_order ? "'fortran_order'"
                            : "'shape'") +
             " key (numpy's header has exactly 'descr', 'fortran_order' and 'shape')";
    return count_npy_elements(out);
  }

 private:
  std::string at(std::size_t pos, const std::string& problem) const {
    return "malformed header: " + problem + " at byte " + std::to_string(offset_ + pos) +
           " (header text there: " + quote_text(text_.substr(std::min(pos, text_.size()))) + ")";
  }
  std::string expected(const std::string& what) const { return at(pos_, "expected " + what); }

  void skip_blanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool peek(char c) const { return pos_ < text_.size() && text_[pos_] == c; }

  // A Python string literal in single or double quotes, of printable ASCII without escapes.
  std::string string_literal(std::string& out) {
    if (!peek('\'') && !peek('"')) return expected("a string in quotes");
    const char quote = text_[pos_++];
    const std::size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      const auto c = static_cast<unsigned char>(text_[pos_]);
      if (c == '\n') break;  // Python's strings end on their line
      if (c == '\\') return at(pos_, "an escape sequence in a string (numpy writes none)");
      if (c < 0x20 || c >= 0x7f) return at(pos_, "a byte that is not printable ASCII in a string");
      ++pos_;
    }
    if (pos_ == text_.size() || text_[pos_] != quote)
      return at(start - 1, "an unterminated string");
    out.assign(text_.substr(start, pos_ - start));
    ++pos_;
    return {};
  }

  // A dtype grove does not read: not a malformed header, so said without that prefix.
  std::string unsupported(std::size_t pos, const std::string& problem) const {
    return problem + " (the header's 'descr' at byte " + std::to_string(offset_ + pos) + ")";
  }

  std::string descr(npy_dtype& out) {
    if (peek('['))
      return unsupported(pos_,
                         "a structured dtype (the descr is a list of fields); grove reads arrays "
                         "of numbers only: save each field as an array of its own");
    if (peek('('))
      return unsupported(
          pos_, "a sub-array dtype (the descr is a tuple); grove reads arrays of plain numbers");
    if (peek('{'))
      return unsupported(pos_, "a dtype given as a dict; grove reads arrays of plain numbers");
    const std::size_t start = pos_;
    std::string text;
    if (auto p = string_literal(text); !p.empty()) return p;
    std::string problem;
    if (!parse_npy_descr(text, out, problem)) return unsupported(start, problem);
    return {};
  }

  std::string boolean(bool& out) {
    auto word = [&](std::string_view w) {
      if (text_.substr(pos_, w.size()) != w) return false;
      const std::size_t end = pos_ + w.size();
      if (end < text_.size()) {
        const char c = text_[end];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
          return false;
      }
      pos_ = end;
      return true;
    };
    if (word("True")) {
      out = true;
      return {};
    }
    if (word("False")) {
      out = false;
      return {};
    }
    return expected("True or False for 'fortran_order'");
  }

  // A non-negative decimal integer as Python writes one (no leading zeros, no sign); with
  // python2_longs, an optional 'L' suffix (headers written by numpy under Python 2).
  std::string integer(std::int64_t& out) {
    const std::size_t start = pos_;
    if (peek('-') || peek('+'))
      return at(pos_, "a signed dimension in 'shape' (dimensions are non-negative)");
    std::uint64_t v = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto d = static_cast<std::uint64_t>(text_[pos_] - '0');
      if (v > (static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) - d) / 10)
        return at(start, "a dimension larger than 2^63 - 1 in 'shape'");
      v = 10 * v + d;
      ++pos_;
    }
    if (pos_ == start) return expected("a dimension (a non-negative integer) in 'shape'");
    if (text_[start] == '0' && v != 0)
      return at(start, "a dimension with a leading zero in 'shape' (not a Python integer)");
    if (python2_longs_ && (peek('L') || peek('l'))) ++pos_;
    out = static_cast<std::int64_t>(v);
    return {};
  }

  std::string shape(std::vector<std::int64_t>& out) {
    out.clear();
    if (peek('['))
      return at(pos_, "a list for 'shape' (numpy's shape is a tuple: (3, 4), (3,) or ())");
    if (!eat('(')) return expected("a tuple for 'shape': (3, 4), (3,) or ()");
    bool comma_after_last = false;
    for (;;) {
      skip_blanks();
      if (eat(')')) break;
      if (out.size() == npy_max_dims)
        return at(pos_, "more than " + std::to_string(npy_max_dims) + " dimensions in 'shape'");
      std::int64_t d = 0;
      if (auto p = integer(d); !p.empty()) return p;
      out.push_back(d);
      skip_blanks();
      comma_after_last = eat(',');
      if (comma_after_last) continue;
      if (eat(')')) break;
      return expected("',' or ')' in 'shape'");
    }
    if (out.size() == 1 && !comma_after_last)
      return at(pos_ - 1, "a 'shape' of one dimension without its comma: (" +
                              std::to_string(out[0]) +
                              ") is an integer in Python, not a tuple; numpy writes (" +
                              std::to_string(out[0]) + ",)");
    return {};
  }

  std::string_view text_;
  std::uint64_t offset_;
  bool python2_longs_;
  std::size_t pos_ = 0;
};

// The bytes before a .npy file's data, exactly as numpy 1.24's np.save writes them: the magic
// string, the version (1.0 unless the header needs 2.0's 4-byte length), the header length,
// the dict with its keys sorted, the spare blanks numpy leaves to let the first axis grow, and
// blanks and a newline up to a multiple of 64 bytes.
inline std::string npy_header_bytes(const std::string& descr,
                                    const std::vector<std::int64_t>& shape, bool fortran_order) {
  std::string dict = "{'descr': '" + descr +
                     "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                     ", 'shape': " + shape_string(shape) + ", }";
  if (!shape.empty()) {
    const auto growth = std::to_string(shape[fortran_order ? shape.size() - 1 : 0]).size();
    dict.append(21 - std::min<std::size_t>(growth, 21), ' ');
  }
  const std::size_t hlen = dict.size() + 1;
  std::size_t prefix = 10;
  std::size_t pad = 64 - (prefix + hlen) % 64;
  int major = 1;
  if (hlen + pad > 65535) {
    prefix = 12;
    pad = 64 - (prefix + hlen) % 64;
    major = 2;
  }
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t total = hlen + pad;
  for (std::size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((total >> (8 * i)) & 0xFF);
  out += dict;
  out.append(pad, ' ');
  out += '\n';
  return out;
}

// --- element types -------------------------------------------------------------------------------

template <class T>
inline constexpr bool is_npy_complex =
    std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>;
template <class T>
inline constexpr bool is_npy_floating =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Eigen::half>;
// The integers std::in_range takes: not bool, not the character types.
template <class T>
inline constexpr bool is_npy_integer =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
    !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
    !std::is_same_v<T, char32_t>;
template <class T>
inline constexpr bool is_npy_element =
    is_npy_complex<T> || is_npy_floating<T> || is_npy_integer<T> || std::is_same_v<T, bool>;

// The dtype grove writes for T, in this machine's byte order.
template <class T>
npy_dtype npy_dtype_of() {
  static_assert(is_npy_element<T>,
                "grove: a .npy element is bool, a signed or unsigned integer, float, double, "
                "Eigen::half, std::complex<float> or std::complex<double>");
  npy_dtype d;
  d.size = static_cast<int>(sizeof(T));
  d.order = sizeof(T) == 1 ? '|' : npy_native_order;
  if constexpr (std::is_same_v<T, bool>)
    d.kind = 'b';
  else if constexpr (is_npy_integer<T>)
    d.kind = std::is_signed_v<T> ? 'i' : 'u';
  else if constexpr (is_npy_complex<T>)
    d.kind = 'c';
  else
    d.kind = 'f';
  return d;
}

// T's name as C++ spells it, for messages.
template <class T>
std::string cpp_type_name() {
  if constexpr (std::is_same_v<T, bool>) return "bool";
  if constexpr (std::is_same_v<T, float>) return "float";
  if constexpr (std::is_same_v<T, double>) return "double";
  if constexpr (std::is_same_v<T, Eigen::half>) return "Eigen::half";
  if constexpr (std::is_same_v<T, std::complex<float>>) return "std::complex<float>";
  if constexpr (std::is_same_v<T, std::complex<double>>) return "std::complex<double>";
  if constexpr (is_npy_integer<T>)
    return std::string(std::is_signed_v<T> ? "std::int" : "std::uint") +
           std::to_string(8 * sizeof(T)) + "_t";
  return "this type";
}

// numpy's index of the k-th element of the data ("[1, 2]"), whose order is C's or Fortran's.
inline std::string npy_index(std::uint64_t k, const std::vector<std::int64_t>& shape,
                             bool fortran_order) {
  std::vector<std::uint64_t> index(shape.size());
  for (std::size_t n = 0; n < shape.size(); ++n) {
    const std::size_t axis = fortran_order ? n : shape.size() - 1 - n;
    const auto extent = static_cast<std::uint64_t>(shape[axis]);
    index[axis] = extent ? k % extent : 0;
    k = extent ? k / extent : 0;
  }
  std::string s = "[";
  for (std::size_t i = 0; i < index.size(); ++i) s += (i ? ", " : "") + std::to_string(index[i]);
  return s + "]";
}

// Reads one element of type S that the data holds at p, swapping its bytes (each half of a
// complex number on its own) when the file's byte order is not this machine's.
template <class S>
S load_element(const std::byte* p, bool swap) {
  if constexpr (std::is_same_v<S, bool>) {
    // numpy reads any nonzero byte as True; a bool may only hold 0 or 1.
    return std::to_integer<unsigned char>(*p) != 0;
  }
  S v;
  if (!swap) {
    std::memcpy(&v, p, sizeof(S));
    return v;
  }
  unsigned char b[sizeof(S)];
  std::memcpy(b, p, sizeof(S));
  constexpr std::size_t part = is_npy_complex<S> ? sizeof(S) / 2 : sizeof(S);
  for (std::size_t at = 0; at < sizeof(S); at += part) std::reverse(b + at, b + at + part);
  std::memcpy(&v, b, sizeof(S));
  return v;
}

// The element the file holds as the element asked for: false when an integer does not fit T.
template <class T, class S>
bool convert_element(const S& v, T& out) {
  if constexpr (std::is_same_v<S, Eigen::half>) {
    return convert_element(static_cast<float>(v), out);  // exact
  } else if constexpr (std::is_same_v<S, bool>) {
    out = static_cast<T>(v ? 1 : 0);
    return true;
  } else if constexpr (is_npy_complex<T>) {
    using R = typename T::value_type;
    if constexpr (is_npy_complex<S>)
      out = T(static_cast<R>(v.real()), static_cast<R>(v.imag()));
    else
      out = T(static_cast<R>(v), R(0));
    return true;
  } else if constexpr (std::is_same_v<T, bool>) {
    static_assert(is_npy_integer<S>);
    if (v != 0 && v != 1) return false;
    out = v != 0;
    return true;
  } else if constexpr (is_npy_integer<T>) {
    static_assert(is_npy_integer<S>);
    if (!std::in_range<T>(v)) return false;
    out = static_cast<T>(v);
    return true;
  } else {
    static_assert(!is_npy_complex<S>);
    out = static_cast<T>(v);
    return true;
  }
}

// Why an array of dtype d cannot be read as T at all ("" when it can): a floating-point T takes
// every real dtype; std::complex every dtype; an integer or bool T only bool and integer dtypes.
template <class T>
std::string npy_refusal(const npy_dtype& d) {
  const std::string what = "the array is " + d.describe();
  if (d.kind == 'c' && !is_npy_complex<T>)
    return what + ", which grove does not read as " + cpp_type_name<T>() +
           ": load it as std::complex<double> or std::complex<float>";
  if (d.kind == 'f' && !is_npy_floating<T> && !is_npy_complex<T>)
    return what + ", which grove does not round to " + cpp_type_name<T>() +
           ": load it as float or double (and convert), or save it with an integer dtype "
           "(a.astype(np.int64))";
  return {};
}

// Converts the data of an array (shape, order, dtype as the file gives them) into `out`, laid
// out in column-major order over numpy's axes: out[i0 + n0 * (i1 + n1 * (i2 + ...))] is
// a[i0, i1, i2, ...], which is an Eigen matrix's (i, j) and a column-major Eigen tensor's
// (i, j, k). Returns "" or the problem (with numpy's index of the element that does not fit).
template <class T>
std::string convert_column_major(const npy_dtype& dtype, const std::vector<std::int64_t>& shape,
                                 bool fortran_order, const std::byte* data, std::uint64_t count,
                                 T* out) {
  if (auto refused = npy_refusal<T>(dtype); !refused.empty()) return refused;
  const bool swap = dtype.swapped();
  const auto size = static_cast<std::size_t>(dtype.size);
  std::string problem;
  auto run = [&](auto tag) {
    using S = decltype(tag);
    if constexpr ((is_npy_integer<T> || std::is_same_v<T, bool>)&&!is_npy_integer<S> &&
                  !std::is_same_v<S, bool>) {
      return;  // refused above
    } else if constexpr (is_npy_complex<S> && !is_npy_complex<T>) {
      return;  // refused above
    } else {
      auto fail = [&](std::uint64_t k, const S& v) {
        if constexpr (is_npy_integer<S>)
          problem = "element " + npy_index(k, shape, fortran_order) + " is " + std::to_string(v) +
                    ", which " + cpp_type_name<T>() + " cannot hold";
      };
      // In the file's order: element k goes to `at` in out, which for a C-order file is
      // advanced over the reversed axes like an odometer.
      if (fortran_order || shape.size() <= 1) {
        for (std::uint64_t k = 0; k < count; ++k) {
          const S v = load_element<S>(data + k * size, swap);
          if (!convert_element(v, out[k])) return fail(k, v);
        }
        return;
      }
      const std::size_t n = shape.size();
      std::vector<std::uint64_t> stride(n), index(n, 0);
      std::uint64_t s = 1;
      for (std::size_t a = 0; a < n; ++a) {
        stride[a] = s;
        s *= static_cast<std::uint64_t>(shape[a]);
      }
      std::uint64_t at = 0;
      for (std::uint64_t k = 0; k < count; ++k) {
        const S v = load_element<S>(data + k * size, swap);
        if (!convert_element(v, out[at])) return fail(k, v);
        for (std::size_t a = n; a-- > 0;) {
          at += stride[a];
          if (++index[a] < static_cast<std::uint64_t>(shape[a])) break;
          at -= stride[a] * index[a];
          index[a] = 0;
        }
      }
    }
  };
  switch (dtype.kind) {
    case 'b':
      run(bool{});
      break;
    case 'i':
      if (size == 1) run(std::int8_t{});
      if (size == 2) run(std::int16_t{});
      if (size == 4) run(std::int32_t{});
      if (size == 8) run(std::int64_t{});
      break;
    case 'u':
      if (size == 1) run(std::uint8_t{});
      if (size == 2) run(std::uint16_t{});
      if (size == 4) run(std::uint32_t{});
      if (size == 8) run(std::uint64_t{});
      break;
    case 'f':
      if (size == 2) run(Eigen::half{});
      if (size == 4) run(float{});
      if (size == 8) run(double{});
      break;
    default:
      if (size == 8) run(std::complex<float>{});
      if (size == 16) run(std::complex<double>{});
      break;
  }
  return problem;
}

}  // namespace grove::data::detail
