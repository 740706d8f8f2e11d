// grove/tree/detail/node_data.hpp: the data a TreeDef keeps for a node besides its kind (JAX's
// node_data): the values of a registered struct's static fields, which a TreeDef compares,
// hashes and prints as JAX prints a dataclass's meta fields. Also the structure hash itself,
// which gives the same value in every process (it mixes names and values, never addresses).
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove::detail {

// --- hashing -------------------------------------------------------------------------------------

// 64-bit FNV-1a over words, finished with a murmur3 mix: cheap, allocation-free and the same on
// every machine. TreeDef::hash and the collectives' agreement check both use it.
struct structure_hasher {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void mix(std::uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ull;
    h ^= h >> 31;
  }
  void mix(std::string_view s) {
    mix(static_cast<std::uint64_t>(s.size()));
    std::uint64_t w = 0;
    std::size_t k = 0;
    for (char c : s) {
      w = (w << 8) | static_cast<unsigned char>(c);
      if (++k == 8) {
        mix(w);
        w = 0;
        k = 0;
      }
    }
    if (k) mix(w);
  }
  std::uint64_t value() const {
    std::uint64_t x = h;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
  }
};

// Markers that keep the hashed stream unambiguous.
enum : std::uint64_t {
  hash_mark_node = 0x4e4f'4445'0000'0000ull,
  hash_mark_key = 0x4b45'5900'0000'0000ull,
  hash_mark_static = 0x5354'4154'0000'0000ull,
};

// --- one static value: equality, hash, Python repr -----------------------------------------------

template <class V>
concept python_string =
    std::is_convertible_v<const V&, std::string_view> && !std::is_arithmetic_v<V>;
template <class V>
concept std_hashable = requires(const V& v) {
  { std::hash<V>{}(v) } -> std::convertible_to<std::size_t>;
};
template <class V>
concept streamable_value = requires(std::ostream& os, const V& v) {
  os << v;
};

// Arithmetic values and strings hash by value, identically in every process; other types with a
// std::hash use it (as stable as that hash is); the rest add only their presence, so equal values
// still hash equally.
template <class V>
void hash_static_value(structure_hasher& h, const V& v) {
  if constexpr (std::is_same_v<V, bool>) {
    h.mix(hash_mark_static | 'b');
    h.mix(v ? 1u : 0u);
  } else if constexpr (std::is_integral_v<V> || std::is_enum_v<V>) {
    h.mix(hash_mark_static | 'i');
    if constexpr (std::is_enum_v<V>)
      h.mix(static_cast<std::uint64_t>(static_cast<std::underlying_type_t<V>>(v)));
    else
      h.mix(static_cast<std::uint64_t>(v));
  } else if constexpr (std::is_floating_point_v<V>) {
    h.mix(hash_mark_static | 'f');
    const double d = v == 0 ? 0.0 : static_cast<double>(v);  // -0.0 == 0.0
    std::uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof bits);
    h.mix(bits);
  } else if constexpr (python_string<V>) {
    h.mix(hash_mark_static | 's');
    h.mix(std::string_view(v));
  } else if constexpr (std_hashable<V>) {
    h.mix(hash_mark_static | 'h');
    h.mix(static_cast<std::uint64_t>(std::hash<V>{}(v)));
  } else {
    h.mix(hash_mark_static | 'o');
  }
}

// What Python's repr prints for the value: 'text', 2, 0.5, True; other streamable types through
// operator<<, the rest as <object>.
template <class V>
void write_static_value(std::ostream& os, const V& v) {
  if constexpr (std::is_same_v<V, bool>) {
    os << (v ? "True" : "False");
  } else if constexpr (std::is_same_v<V, char>) {
    write_python_string(os, std::string_view(&v, 1));
  } else if constexpr (std::is_integral_v<V>) {
    os << +v;
  } else if constexpr (std::is_enum_v<V>) {
    os << +static_cast<std::underlying_type_t<V>>(v);
  } else if constexpr (std::is_floating_point_v<V>) {
    if (std::isnan(v)) {
      os << "nan";
    } else if (std::isinf(v)) {
      os << (v < 0 ? "-inf" : "inf");
    } else {
      // The shortest digits that read back as the same value, laid out as Python's repr lays
      // out a float: positional for decimal exponents -4 to 15 (0.0001, 1000000000000000.0),
      // else scientific with a two-digit exponent at least (1e-05, 1e+16).
      char buf[64];
      const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
      const std::string_view text(buf, static_cast<std::size_t>(r.ptr - buf));
      const std::size_t e_pos = text.find('e');
      int exponent = 0;
      std::from_chars(text.data() + e_pos + (text[e_pos + 1] == '+' ? 2 : 1),
                      text.data() + text.size(), exponent);
      if (exponent < -4 || exponent >= 16) {
        os << text;
      } else {
        std::string_view mantissa = text.substr(0, e_pos);
        if (mantissa.front() == '-') {
          os << '-';
          mantissa.remove_prefix(1);
        }
        std::string digits(mantissa.substr(0, 1));  // the digits without the point
        if (mantissa.size() > 2) digits += mantissa.substr(2);
        const auto n = static_cast<int>(digits.size());
        if (exponent < 0) {
          os << "0." << std::string(static_cast<std::size_t>(-exponent - 1), '0') << digits;
        } else if (n <= exponent + 1) {
          os << digits << std::string(static_cast<std::size_t>(exponent + 1 - n), '0') << ".0";
        } else {
          const auto point = static_cast<std::size_t>(exponent + 1);
          os << std::string_view(digits).substr(0, point) << '.'
             << std::string_view(digits).substr(point);
        }
      }
    }
  } else if constexpr (python_string<V>) {
    write_python_string(os, std::string_view(v));
  } else if constexpr (streamable_value<V>) {
    os << v;
  } else {
    os << "<object>";
  }
}

// The static values of a node as a Python tuple: ('conv1', 2), ('conv1',), ().
template <class Get, std::size_t... I>
void write_static_tuple(std::ostream& os, Get&& get, std::index_sequence<I...>) {
  os << '(';
  std::size_t n = 0;
  ((os << (n++ ? ", " : ""),
    ::grove::detail::write_static_value(os, get(std::integral_constant<std::size_t, I>{}))),
   ...);
  if (n == 1) os << ',';
  os << ')';
}

// --- the static fields of a registered struct ---------------------------------------------------

template <class T>
inline constexpr std::size_t num_static_v = 0;
template <class T>
requires requires {
  node_traits<T>::num_static;
}
inline constexpr std::size_t num_static_v<T> = node_traits<T>::num_static;

template <class T>
inline constexpr bool has_static_fields = num_static_v<T> != 0;

template <class T, std::size_t I>
decltype(auto) static_at(const T& t) {
  return node_traits<T>::template static_field<I>(t);
}

template <class T>
std::string static_values_text(const T& t) {
  std::ostringstream os;
  ::grove::detail::write_static_tuple(
      os,
      [&](auto i) -> decltype(auto) {
        return ::grove::detail::static_at<T, decltype(i)::value>(t);
      },
      std::make_index_sequence<num_static_v<T>>{});
  return os.str();
}

template <class A, class B>
bool static_values_equal(const A& a, const B& b) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return ((::grove::detail::static_at<A, I>(a) == ::grove::detail::static_at<B, I>(b)) && ...);
  }
  (std::make_index_sequence<num_static_v<A>>{});
}

template <class T>
void hash_static_values(structure_hasher& h, const T& t) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (::grove::detail::hash_static_value(
         h, static_cast<const std::remove_cvref_t<decltype(::grove::detail::static_at<T, I>(t))>&>(
                ::grove::detail::static_at<T, I>(t))),
     ...);
  }
  (std::make_index_sequence<num_static_v<T>>{});
}

// --- node data in a TreeDef ----------------------------------------------------------------------

// The type-erased node data a TreeDef holds for a struct with static fields. Shared, immutable.
class node_data {
 public:
  virtual ~node_data() = default;
  virtual bool equals(const node_data& other) const = 0;
  virtual void hash(structure_hasher& h) const = 0;
  virtual void print(std::ostream& os) const = 0;
};

// The values of one struct's static fields, in registered order.
template <class Tuple>
class static_values;
template <class... S>
class static_values<std::tuple<S...>> final : public node_data {
 public:
  explicit static_values(std::tuple<S...> v) : values(std::move(v)) {}
  bool equals(const node_data& other) const override {
    const auto* o = dynamic_cast<const static_values*>(&other);
    return o != nullptr && o->values == values;
  }
  void hash(structure_hasher& h) const override {
    std::apply([&](const auto&... v) { (::grove::detail::hash_static_value(h, v), ...); }, values);
  }
  void print(std::ostream& os) const override {
    ::grove::detail::write_static_tuple(
        os, [&](auto i) -> decltype(auto) { return std::get<decltype(i)::value>(values); },
        std::index_sequence_for<S...>{});
  }
  std::tuple<S...> values;
};

// The types of a node's static fields (a registered struct's or a mapped_node's).
template <class T, std::size_t... I>
auto node_static_types(std::index_sequence<I...>) -> std::tuple<
    std::remove_cvref_t<decltype(::grove::detail::static_at<T, I>(std::declval<const T&>()))>...>;
template <class T>
using node_static_types_t =
    decltype(node_static_types<T>(std::make_index_sequence<num_static_v<T>>{}));

// The node data for a value of T: nullptr when T has no static fields.
template <class T>
std::shared_ptr<const node_data> make_node_data(const T& t) {
  if constexpr (num_static_v<T> == 0) {
    (void)t;
    return nullptr;
  } else {
    using values = node_static_types_t<T>;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::make_shared<const static_values<values>>(
          values(::grove::detail::static_at<T, I>(t)...));
    }
    (std::make_index_sequence<num_static_v<T>>{});
  }
}

// Whether stored node data holds the same static values as t.
template <class T>
bool node_data_matches(const node_data* data, const T& t) {
  if constexpr (num_static_v<T> == 0) {
    (void)t;
    return data == nullptr;
  } else {
    const auto* stored = dynamic_cast<const static_values<node_static_types_t<T>>*>(data);
    if (stored == nullptr) return false;
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return ((std::get<I>(stored->values) == ::grove::detail::static_at<T, I>(t)) && ...);
    }
    (std::make_index_sequence<num_static_v<T>>{});
  }
}

}  // namespace grove::detail
