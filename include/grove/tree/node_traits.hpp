// grove/tree/node_traits.hpp: which C++ types are pytree nodes, and how their children are
// reached, named and rebuilt. Everything that is not a node is a leaf.
//
// Built-in nodes (as in JAX):
//   std::tuple, std::pair, std::array     -> tuple  `(*, *)`
//   std::vector, std::deque, std::list    -> list   `[*, *]`
//   std::map, std::unordered_map (string or integer keys)
//                                         -> dict   `{'a': *}`, children in sorted key order
//   std::monostate, std::nullopt_t        -> None   (a node without children)
//   std::optional                         -> None when empty; when engaged, its value (no node)
//   a struct registered with GROVE_NODE   -> CustomNode(Name[()], [...]), keys `.field`
//   ... with GROVE_NODE_STATIC            -> CustomNode(Name[(static values...)], [...])
//   a container whose node_traits a user specializes -> CustomNode(Name[None], [...])
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "grove/tree/detail/field_count.hpp"
#include "grove/tree/key_path.hpp"

namespace grove {

/// The kind of a node, which decides how a TreeDef prints it.
enum class node_kind : std::uint8_t { leaf, none, tuple, list, dict, custom };

/// Static facts about a registered struct or custom container: its name, its leaf fields' names
/// and its static fields' names (empty for containers). Its address identifies the node type in a
/// TreeDef (equality); its name stands for it in TreeDef::hash, so hashes agree across processes.
struct node_info {
  std::string_view name;
  const std::string_view* fields = nullptr;
  std::size_t num_fields = 0;
  bool is_struct = false;
  const std::string_view* static_fields = nullptr;
  std::size_t num_static_fields = 0;
};

/// The customization point. The primary template says "leaf"; each specialization describes a
/// node. To make a custom container a node, specialize it with (see README, "Custom nodes"):
///
///   template <> struct grove::node_traits<MyList> {
///     static constexpr grove::node_kind kind = grove::node_kind::custom;
///     static constexpr std::string_view name = "MyList";
///     using child_type = double;
///     static std::size_t size(const MyList& l);
///     template <class Self> static decltype(auto) child(Self&& l, std::size_t i);
///     template <class U> using rebind = MyList2<U>;  // the container holding U children
///     template <class U, class Make> static rebind<U> build(std::size_t n, Make&& make);
///     static grove::KeyEntry key(const MyList&, std::size_t i);  // optional
///   };
template <class T>
struct node_traits {};

namespace detail {

template <class T>
struct type_tag {};

// --- is T an instance of a class template? ---------------------------------------------------
template <class T, template <class...> class Tm>
inline constexpr bool is_instance_v = false;
template <template <class...> class Tm, class... A>
inline constexpr bool is_instance_v<Tm<A...>, Tm> = true;

// same_or_instance<X, Name>() is true when Name is the type X, or a class template of which X is
// an instance. Overload resolution picks the form that fits what Name is, which lets GROVE_NODE
// register plain structs and class templates with the same line.
template <class X, class T>
constexpr bool same_or_instance() {
  return std::is_same_v<X, T>;
}
template <class X, template <class...> class Tm>
constexpr bool same_or_instance() {
  return is_instance_v<X, Tm>;
}

// --- registered structs ------------------------------------------------------------------------
// A list of member pointers. GROVE_NODE's macros emit a leading placeholder (a template argument
// list has no trailing comma to absorb the one each field brings), which is dropped here.
template <auto Placeholder, auto... Members>
struct member_list {
  static constexpr std::size_t size = sizeof...(Members);
  static constexpr std::tuple<decltype(Members)...> members{Members...};
};

template <class Self, const node_info* Info, class Data, class Static>
struct struct_fields {
  using self = Self;
  static constexpr const node_info* info = Info;
  static constexpr std::size_t arity = Data::size;
  static constexpr std::size_t num_static = Static::size;
  static constexpr auto members = Data::members;
  static constexpr auto static_members = Static::members;
};

// Whether a GROVE_NODE registration lists every field of an aggregate (which is what can be
// counted; for other types the rule is documented).
template <class T, std::size_t Listed>
constexpr bool lists_every_field() {
  if constexpr (std::is_aggregate_v<T>)
    return Listed >= ::grove::detail::count_fields<T>();
  else
    return true;
}

// How many of a registration's field names (a sentinel-terminated array) are `name`: the
// compile-time check that no field is listed twice, or both as a leaf and as a static field.
template <std::size_t N>
constexpr std::size_t count_field_name(const std::string_view (&names)[N], std::string_view name) {
  std::size_t n = 0;
  for (std::size_t i = 0; i + 1 < N; ++i) n += names[i] == name ? 1 : 0;
  return n;
}

// The standard types grove makes nodes itself. They are excluded before the ADL lookup below,
// whose cost grows with the depth of nested template arguments (std::vector<T> names T twice,
// through std::allocator<T>): without this, deeply nested containers compile in exponential time.
template <class T>
inline constexpr bool is_std_array = false;
template <class T, std::size_t N>
inline constexpr bool is_std_array<std::array<T, N>> = true;
template <class T>
inline constexpr bool builtin_node =
    is_instance_v<T, std::vector> || is_instance_v<T, std::deque> || is_instance_v<T, std::list> ||
    is_instance_v<T, std::map> || is_instance_v<T, std::unordered_map> ||
    is_instance_v<T, std::tuple> || is_instance_v<T, std::pair> ||
    is_instance_v<T, std::optional> || is_std_array<T> || std::is_same_v<T, std::monostate> ||
    std::is_same_v<T, std::nullopt_t>;

template <class T>
concept registered_struct = std::is_class_v<T> && !builtin_node<T> && requires {
  grove_node_fields(type_tag<T>{});
};

template <class T>
using struct_fields_of = decltype(grove_node_fields(type_tag<T>{}));

template <class MemberPtr>
struct member_type;
template <class C, class M>
struct member_type<M C::*> {
  using type = M;
};

}  // namespace detail

// --- the built-in nodes -------------------------------------------------------------------------

template <class... Ts>
struct node_traits<std::tuple<Ts...>> {
  static constexpr node_kind kind = node_kind::tuple;
  static constexpr std::size_t arity = sizeof...(Ts);
  template <std::size_t I, class Self>
  static constexpr decltype(auto) child(Self&& t) {
    return std::get<I>(std::forward<Self>(t));
  }
  static KeyEntry key(std::size_t i) { return SequenceKey{i}; }
  template <class... Cs>
  using rebind = std::tuple<Cs...>;
};

template <class A, class B>
struct node_traits<std::pair<A, B>> {
  static constexpr node_kind kind = node_kind::tuple;
  static constexpr std::size_t arity = 2;
  template <std::size_t I, class Self>
  static constexpr decltype(auto) child(Self&& t) {
    return std::get<I>(std::forward<Self>(t));
  }
  static KeyEntry key(std::size_t i) { return SequenceKey{i}; }
  template <class... Cs>
  using rebind = std::pair<Cs...>;
};

namespace detail {
template <class... Cs>
struct array_rebind {
  static_assert(sizeof...(Cs) == 0 ||
                    (std::is_same_v<std::tuple_element_t<0, std::tuple<Cs...>>, Cs> && ...),
                "grove: a std::array node's children must all map to the same type");
  using type = std::array<std::tuple_element_t<0, std::tuple<Cs..., void*>>, sizeof...(Cs)>;
};
}  // namespace detail

template <class T, std::size_t N>
struct node_traits<std::array<T, N>> {
  static constexpr node_kind kind = node_kind::tuple;
  static constexpr std::size_t arity = N;
  template <std::size_t I, class Self>
  static constexpr decltype(auto) child(Self&& t) {
    return std::get<I>(std::forward<Self>(t));
  }
  static KeyEntry key(std::size_t i) { return SequenceKey{i}; }
  template <class... Cs>
  using rebind = typename detail::array_rebind<Cs...>::type;
};

template <>
struct node_traits<std::monostate> {
  static constexpr node_kind kind = node_kind::none;
  static constexpr std::size_t arity = 0;
  template <std::size_t I, class Self>
  static void child(Self&&);  // never called: None has no children
  static KeyEntry key(std::size_t i) { return SequenceKey{i}; }
  template <class... Cs>
  using rebind = std::monostate;
};

template <>
struct node_traits<std::nullopt_t> {
  static constexpr node_kind kind = node_kind::none;
  static constexpr std::size_t arity = 0;
  template <std::size_t I, class Self>
  static void child(Self&&);  // never called: None has no children
  static KeyEntry key(std::size_t i) { return SequenceKey{i}; }
  template <class... Cs>
  using rebind = std::nullopt_t;
};

namespace detail {

// What std::vector, std::deque and std::list share as list nodes. `iterable` tells the walkers to
// step through the children with the container's iterators (std::list has no operator[]).
template <class C, class T, template <class...> class Same>
struct std_sequence_traits {
  static constexpr node_kind kind = node_kind::list;
  static constexpr bool iterable = true;
  using child_type = T;
  static std::size_t size(const C& c) { return c.size(); }
  template <class Self>
  static decltype(auto) child(Self&& c, std::size_t i) {
    return *std::next(std::forward<Self>(c).begin(), static_cast<std::ptrdiff_t>(i));
  }
  static KeyEntry key(const C&, std::size_t i) { return SequenceKey{i}; }
  template <class U>
  using rebind = Same<U>;
  template <class U, class Make>
  static Same<U> build(std::size_t n, Make&& make) {
    Same<U> out;
    if constexpr (requires { out.reserve(n); }) out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) out.push_back(make(i));
    return out;
  }
};

template <class K>
inline constexpr bool dict_key_ok = std::is_same_v<K, std::string> || std::is_integral_v<K>;

}  // namespace detail

template <class T, class Alloc>
struct node_traits<std::vector<T, Alloc>>
    : detail::std_sequence_traits<std::vector<T, Alloc>, T, std::vector> {
  template <class Self>
  static decltype(auto) child(Self&& v, std::size_t i) {
    return std::forward<Self>(v)[i];
  }
};

template <class T, class Alloc>
struct node_traits<std::deque<T, Alloc>>
    : detail::std_sequence_traits<std::deque<T, Alloc>, T, std::deque> {
  template <class Self>
  static decltype(auto) child(Self&& v, std::size_t i) {
    return std::forward<Self>(v)[i];
  }
};

/// A std::list is a list node; its children are reached by iterating, never by index.
template <class T, class Alloc>
struct node_traits<std::list<T, Alloc>>
    : detail::std_sequence_traits<std::list<T, Alloc>, T, std::list> {};

template <class K, class V, class Compare, class Alloc>
struct node_traits<std::map<K, V, Compare, Alloc>> {
  static_assert(detail::dict_key_ok<K>,
                "grove: a std::map is a pytree node only with std::string or integer keys");
  static constexpr node_kind kind = node_kind::dict;
  static constexpr bool sorted = true;  // iterating visits the keys in order
  using key_type = K;
  using child_type = V;
  template <class U>
  using rebind = std::map<K, U, Compare>;
};

/// A std::unordered_map is a dict node like std::map: its children come in sorted key order, as
/// JAX sorts a dict's keys. Every walk over it sorts its keys (one buffer per node and walk).
template <class K, class V, class Hash, class Eq, class Alloc>
struct node_traits<std::unordered_map<K, V, Hash, Eq, Alloc>> {
  static_assert(
      detail::dict_key_ok<K>,
      "grove: a std::unordered_map is a pytree node only with std::string or integer keys");
  static constexpr node_kind kind = node_kind::dict;
  static constexpr bool sorted = false;
  using key_type = K;
  using child_type = V;
  template <class U>
  using rebind = std::unordered_map<K, U, Hash, Eq>;
};

template <class T>
struct node_traits<std::optional<T>> {
  static constexpr node_kind kind = node_kind::none;  // when empty; an engaged one is its value
  static constexpr bool is_optional = true;
  using child_type = T;
  template <class U>
  using rebind = std::optional<U>;
};

namespace detail {

template <class T, class Members, std::size_t... I>
auto member_types(std::index_sequence<I...>) -> std::tuple<std::remove_cvref_t<
    typename member_type<std::remove_cvref_t<std::tuple_element_t<I, Members>>>::type>...>;

// The types of a registered struct's leaf fields and of its static fields, in registered order.
template <class T>
using field_types_t =
    decltype(member_types<T, std::remove_cvref_t<decltype(struct_fields_of<T>::members)>>(
        std::make_index_sequence<struct_fields_of<T>::arity>{}));
template <class T>
using static_types_t =
    decltype(member_types<T, std::remove_cvref_t<decltype(struct_fields_of<T>::static_members)>>(
        std::make_index_sequence<struct_fields_of<T>::num_static>{}));

}  // namespace detail

/// A registered struct after tree_map changed its leaves' types so that the struct itself can no
/// longer hold them (say, a Dense<float> whose matrices became shapes). It keeps the struct's
/// name and field names, so key paths (`.w`) and TreeDefs stay those of the original; the
/// children are in `fields`, in the registered order, and the static fields' values in `statics`.
template <class Original, class... Children>
struct mapped_node {
  std::tuple<Children...> fields;
  detail::static_types_t<Original> statics{};
  template <std::size_t I>
  constexpr auto& get() {
    return std::get<I>(fields);
  }
  template <std::size_t I>
  constexpr const auto& get() const {
    return std::get<I>(fields);
  }
  friend bool operator==(const mapped_node&, const mapped_node&) = default;
};

namespace detail {

// Whether a registered class template Tm<A...> can be rebuilt holding Cs...: either its fields
// are exactly its type parameters (template <class W, class B> struct Layer { W w; B b; }), or it
// has one arithmetic parameter that the new leaves' common arithmetic scalar replaces
// (Dense<float> -> Dense<double>). Its static fields must keep their types, since they are copied.
// Anything else becomes a mapped_node.
template <class T>
struct template_of {
  static constexpr bool value = false;
};
template <template <class...> class Tm, class... A>
struct template_of<Tm<A...>> {
  static constexpr bool value = true;
  template <class... B>
  using with = Tm<B...>;
  using args = std::tuple<A...>;
};

template <class T>
struct scalar_of {
  using type = void;
};
template <class T>
requires std::is_arithmetic_v<T>
struct scalar_of<T> {
  using type = T;
};
template <class T>
requires requires {
  typename T::Scalar;
}
struct scalar_of<T> {
  using type = typename T::Scalar;
};

template <class T, class Candidate, class... Cs>
constexpr bool holds() {
  return std::is_same_v<field_types_t<Candidate>, std::tuple<Cs...>> &&
         std::is_same_v<static_types_t<Candidate>, static_types_t<T>>;
}

template <class T, class... Cs>
struct struct_rebind {
  static auto pick() {
    if constexpr (holds<T, T, Cs...>()) {
      return type_tag<T>{};
    } else if constexpr (template_of<T>::value) {
      using args = typename template_of<T>::args;
      if constexpr (std::is_same_v<args, field_types_t<T>> &&
                    sizeof...(Cs) == std::tuple_size_v<args>) {
        using candidate = typename template_of<T>::template with<Cs...>;
        if constexpr (holds<T, candidate, Cs...>())
          return type_tag<candidate>{};
        else
          return type_tag<mapped_node<T, Cs...>>{};
      } else if constexpr (std::tuple_size_v<args> == 1 && sizeof...(Cs) > 0) {
        using old_scalar = std::tuple_element_t<0, args>;
        using new_scalar = typename scalar_of<std::tuple_element_t<0, std::tuple<Cs...>>>::type;
        if constexpr (std::is_arithmetic_v<old_scalar> && std::is_arithmetic_v<new_scalar> &&
                      !std::is_same_v<old_scalar, new_scalar>) {
          using candidate = typename template_of<T>::template with<new_scalar>;
          if constexpr (holds<T, candidate, Cs...>()) {
            return type_tag<candidate>{};
          } else {
            return type_tag<mapped_node<T, Cs...>>{};
          }
        } else {
          return type_tag<mapped_node<T, Cs...>>{};
        }
      } else {
        return type_tag<mapped_node<T, Cs...>>{};
      }
    } else {
      return type_tag<mapped_node<T, Cs...>>{};
    }
  }
  template <class X>
  static X unwrap(type_tag<X>);
  using type = decltype(unwrap(pick()));
};

}  // namespace detail

/// A struct registered with GROVE_NODE or GROVE_NODE_STATIC: a static node whose children are the
/// leaf fields and whose node data (JAX's meta fields) are the static fields' values.
template <detail::registered_struct T>
struct node_traits<T> {
  using fields = detail::struct_fields_of<T>;
  static constexpr node_kind kind = node_kind::custom;
  static constexpr std::size_t arity = fields::arity;
  static constexpr std::size_t num_static = fields::num_static;
  static constexpr const node_info* info = fields::info;
  template <std::size_t I, class Self>
  static constexpr decltype(auto) child(Self&& t) {
    return (std::forward<Self>(t).*std::get<I>(fields::members));
  }
  template <std::size_t I, class Self>
  static constexpr decltype(auto) static_field(Self&& t) {
    return (std::forward<Self>(t).*std::get<I>(fields::static_members));
  }
  static KeyEntry key(std::size_t i) { return GetAttrKey{info->fields[i]}; }
  template <class... Cs>
  using rebind = typename detail::struct_rebind<T, Cs...>::type;
};

template <class Original, class... Children>
struct node_traits<mapped_node<Original, Children...>> {
  static constexpr node_kind kind = node_kind::custom;
  static constexpr std::size_t arity = sizeof...(Children);
  static constexpr std::size_t num_static = node_traits<Original>::num_static;
  static constexpr const node_info* info = node_traits<Original>::info;
  template <std::size_t I, class Self>
  static constexpr decltype(auto) child(Self&& t) {
    return std::get<I>(std::forward<Self>(t).fields);
  }
  template <std::size_t I, class Self>
  static constexpr decltype(auto) static_field(Self&& t) {
    return std::get<I>(std::forward<Self>(t).statics);
  }
  static KeyEntry key(std::size_t i) { return GetAttrKey{info->fields[i]}; }
  template <class... Cs>
  using rebind = typename detail::struct_rebind<Original, Cs...>::type;
};

// --- classification used by the algorithms -----------------------------------------------------
namespace detail {

template <class T>
concept is_node = requires {
  node_traits<T>::kind;
};
template <class T>
concept static_node = is_node<T> && requires {
  node_traits<T>::arity;
};
template <class T>
concept optional_node = is_node<T> && requires {
  node_traits<T>::is_optional;
};
template <class T>
concept dict_node = is_node<T> && !optional_node<T> && requires {
  typename node_traits<T>::key_type;
};
template <class T>
concept sequence_node = is_node<T> && !static_node<T> && !optional_node<T> && !dict_node<T>;

// The identity of a custom node type in a TreeDef; nullptr for built-in kinds.
template <class T>
inline constexpr node_info custom_container_info{node_traits<T>::name, nullptr, 0, false};

template <class T>
constexpr const node_info* info_of() {
  if constexpr (requires { node_traits<T>::info; })
    return node_traits<T>::info;
  else if constexpr (node_traits<T>::kind == node_kind::custom)
    return &custom_container_info<T>;
  else
    return nullptr;
}

// Whether two node types are the same kind of node (the prefix rule's compile-time part).
template <class A, class B>
constexpr bool same_node_shape() {
  if constexpr (static_node<A> && static_node<B>) {
    return node_traits<A>::kind == node_traits<B>::kind &&
           node_traits<A>::arity == node_traits<B>::arity && info_of<A>() == info_of<B>();
  } else if constexpr (sequence_node<A> && sequence_node<B>) {
    return node_traits<A>::kind == node_traits<B>::kind && info_of<A>() == info_of<B>();
  } else if constexpr (dict_node<A> && dict_node<B>) {
    return std::is_same_v<typename node_traits<A>::key_type, typename node_traits<B>::key_type>;
  } else {
    return false;
  }
}

}  // namespace detail
}  // namespace grove

// GROVE_NODE and GROVE_NODE_STATIC, which register a struct as a node.
#include "grove/tree/node_macros.hpp"
