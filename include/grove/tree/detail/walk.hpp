// grove/tree/detail/walk.hpp: the recursions behind the tree operations. Every algorithm walks
// a tree by its static type: static nodes (tuples, structs) unroll at compile time, dynamic
// nodes (vectors, maps, optionals, custom containers) loop at run time.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/tree/error.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"
#include "grove/tree/treedef.hpp"

namespace grove::detail {

// --- is_leaf predicates --------------------------------------------------------------------------

// The predicate used when the caller gives none: nothing but the leaves are leaves.
struct no_leaf_pred {};

enum class leaf_mode { never, always, runtime };

// How a predicate treats subtrees of type T: it is consulted only for the types it accepts; one
// returning std::true_type makes T a leaf at compile time, one returning bool decides per value.
template <class Pred, class T>
constexpr leaf_mode pred_mode() {
  if constexpr (std::is_same_v<Pred, no_leaf_pred> || !std::is_invocable_v<const Pred&, const T&>) {
    return leaf_mode::never;
  } else {
    using R = std::invoke_result_t<const Pred&, const T&>;
    if constexpr (std::is_same_v<R, std::true_type>)
      return leaf_mode::always;
    else if constexpr (std::is_same_v<R, std::false_type>)
      return leaf_mode::never;
    else {
      static_assert(std::is_convertible_v<R, bool>, "grove: an is_leaf predicate must return bool");
      return leaf_mode::runtime;
    }
  }
}

// T is a leaf for every value (not a node, or the predicate always says leaf).
template <class T, class Pred>
constexpr bool static_leaf() {
  return !is_node<T> || pred_mode<Pred, T>() == leaf_mode::always;
}

// --- type lists ---------------------------------------------------------------------------------
template <class... Ts>
struct type_list {};

template <class List, class T>
struct append_unique;
template <class... Ts, class T>
struct append_unique<type_list<Ts...>, T> {
  using type =
      std::conditional_t<(std::is_same_v<T, Ts> || ...), type_list<Ts...>, type_list<Ts..., T>>;
};
template <class A, class B>
struct merge_unique;
template <class A>
struct merge_unique<A, type_list<>> {
  using type = A;
};
template <class A, class T, class... Ts>
struct merge_unique<A, type_list<T, Ts...>> {
  using type = typename merge_unique<typename append_unique<A, T>::type, type_list<Ts...>>::type;
};

// The distinct leaf types of T, in order of first appearance.
template <class T, class Pred>
struct leaf_types;
template <class T, class Pred>
using leaf_types_t = typename leaf_types<T, Pred>::type;

template <class Acc, class Pred, class... Cs>
struct fold_leaf_types {
  using type = Acc;
};
template <class Acc, class Pred, class C, class... Cs>
struct fold_leaf_types<Acc, Pred, C, Cs...> {
  using type = typename fold_leaf_types<typename merge_unique<Acc, leaf_types_t<C, Pred>>::type,
                                        Pred, Cs...>::type;
};

template <class T, std::size_t... I>
auto static_child_types(std::index_sequence<I...>) -> type_list<
    std::remove_cvref_t<decltype(node_traits<T>::template child<I>(std::declval<const T&>()))>...>;
template <class T>
using static_child_types_t =
    decltype(static_child_types<T>(std::make_index_sequence<node_traits<T>::arity>{}));

template <class Acc, class Pred, class List>
struct fold_list;
template <class Acc, class Pred, class... Cs>
struct fold_list<Acc, Pred, type_list<Cs...>> {
  using type = typename fold_leaf_types<Acc, Pred, Cs...>::type;
};

template <class T, class Pred>
struct leaf_types {
  static auto compute() {
    if constexpr (static_leaf<T, Pred>()) {
      return type_list<T>{};
    } else {
      using self =
          std::conditional_t<pred_mode<Pred, T>() == leaf_mode::runtime, type_list<T>, type_list<>>;
      if constexpr (static_node<T>)
        return typename fold_list<self, Pred, static_child_types_t<T>>::type{};
      else
        return
            typename merge_unique<self,
                                  leaf_types_t<typename node_traits<T>::child_type, Pred>>::type{};
    }
  }
  using type = decltype(compute());
};

// Every subtree type of T (nodes and leaves), for flatten_up_to.
template <class T>
struct subtree_types;
template <class Acc, class List>
struct fold_subtrees {
  using type = Acc;
};
template <class Acc, class C, class... Cs>
struct fold_subtrees<Acc, type_list<C, Cs...>> {
  using type =
      typename fold_subtrees<typename merge_unique<Acc, typename subtree_types<C>::type>::type,
                             type_list<Cs...>>::type;
};
template <class T>
struct subtree_types {
  static auto compute() {
    if constexpr (!is_node<T>)
      return type_list<T>{};
    else if constexpr (static_node<T>)
      return typename fold_subtrees<type_list<T>, static_child_types_t<T>>::type{};
    else
      return typename fold_subtrees<type_list<T>,
                                    type_list<typename node_traits<T>::child_type>>::type{};
  }
  using type = decltype(compute());
};

// A pointer to one leaf: a plain pointer when the tree has one leaf type, else a variant.
template <class List, bool Const>
struct leaf_pointer;
template <bool Const>
struct leaf_pointer<type_list<>, Const> {
  using type = const void*;
};
template <class L, bool Const>
struct leaf_pointer<type_list<L>, Const> {
  using type = std::conditional_t<Const, const L*, L*>;
};
template <class L1, class L2, class... Ls, bool Const>
struct leaf_pointer<type_list<L1, L2, Ls...>, Const> {
  using type = std::conditional_t<Const, std::variant<const L1*, const L2*, const Ls*...>,
                                  std::variant<L1*, L2*, Ls*...>>;
};

// --- evaluation of leaf results ------------------------------------------------------------------

// A function given to tree_map may return an Eigen expression (x * 2); the tree must hold the
// evaluated matrix, never an expression that points at temporaries. Anything with a PlainObject
// type that is not that type is such an expression, Eigen::Map and Eigen::Ref included: they are
// evaluated too unless the function returns exactly the leaf type it was given.
template <class R>
struct evaluated {
  using type = R;
};
template <class R>
requires requires {
  typename R::PlainObject;
} &&(!std::is_same_v<typename R::PlainObject, R>)struct evaluated<R> {
  using type = typename R::PlainObject;
};

template <class Leaf, class R>
using leaf_result_t =
    std::conditional_t<std::is_same_v<std::remove_cvref_t<R>, std::remove_cvref_t<Leaf>>,
                       std::remove_cvref_t<R>, typename evaluated<std::remove_cvref_t<R>>::type>;

// --- structure mismatches ----------------------------------------------------------------------

// Thrown inside the recursions and caught by the public functions, which add both structures to
// the message. Each level of the recursion adds its key on the way out.
struct structure_mismatch {
  KeyPath reversed_path;
  std::size_t tree_index = 0;  // which tree differs from the first (0-based)
  std::string what;            // "different lengths of list"
  std::string detail = {};     // "3 in tree 1, 2 in tree 2"
};

template <class F>
decltype(auto) with_key(F&& body, auto&& make_key) {
  try {
    return body();
  } catch (structure_mismatch& e) {
    e.reversed_path.push_back(make_key());
    throw;
  }
}

// Whether any subtree of T is checked at run time (and may therefore throw a mismatch).
template <class T, class Pred>
constexpr bool may_mismatch() {
  if constexpr (static_leaf<T, Pred>())
    return false;
  else if constexpr (pred_mode<Pred, T>() == leaf_mode::runtime)
    return true;
  else if constexpr (static_node<T>) {
    return []<class... Cs>(type_list<Cs...>) {
      return (may_mismatch<Cs, Pred>() || ...);
    }(static_child_types_t<T>{});
  } else {
    return true;
  }
}

template <class T>
std::string kind_name() {
  switch (node_traits<T>::kind) {
    case node_kind::tuple:
      return "tuple";
    case node_kind::list:
      return "list";
    case node_kind::dict:
      return "dict";
    case node_kind::none:
      return "None";
    case node_kind::custom:
      return std::string(info_of<T>()->name);
    default:
      return "leaf";
  }
}

// The prefix rule's compile-time part: at a node of the first tree, every other tree must have a
// node of the same kind (or, for optionals and None, a type that can be None).
template <class First, class Other>
constexpr bool compatible_node() {
  if constexpr (optional_node<First> || optional_node<Other>)
    return true;  // checked at run time
  else if constexpr (is_node<Other>)
    return same_node_shape<First, Other>();
  else
    return false;
}

template <class K>
auto dict_key_of(const K& k) {
  if constexpr (std::is_same_v<K, std::string>)
    return DictKey{k};
  else
    return DictKey{static_cast<std::int64_t>(k)};
}

inline std::string describe_keys(const auto& map) {
  std::ostringstream os;
  os << '{';
  bool first = true;
  for (const auto& kv : map) {
    if (!first) os << ", ";
    first = false;
    write_dict_key(os, ::grove::detail::dict_key_of(kv.first));
  }
  os << '}';
  return os.str();
}

// Unwraps engaged optionals in the other trees where the first tree's optional is engaged.
template <class T>
decltype(auto) unwrap_other(T&& t, std::size_t index) {
  if constexpr (optional_node<std::remove_cvref_t<T>>) {
    if (!t.has_value())
      throw structure_mismatch{{},
                               index,
                               "a value where another tree has None",
                               "a value in tree 1, None in tree " + std::to_string(index + 1)};
    return *std::forward<T>(t);
  } else {
    return std::forward<T>(t);
  }
}

template <class T>
bool is_none_value(const T& t) {
  if constexpr (optional_node<T>)
    return !t.has_value();
  else if constexpr (is_node<T>)
    return node_traits<T>::kind == node_kind::none;
  else
    return false;
}

// Where the first tree has None (an empty optional), every other tree must have None too.
template <class... Rest>
void require_none(const Rest&... rest) {
  std::size_t index = 1;
  ((::grove::detail::is_none_value(rest)
        ? void()
        : throw structure_mismatch{{},
                                   index,
                                   "None where another tree has a value",
                                   "None in tree 1, a value in tree " + std::to_string(index + 1)},
    ++index),
   ...);
  (void)index;  // unused when there is no other tree
}

template <class First, class... Rest, std::size_t... I>
void check_dynamic_children(const First& first, std::index_sequence<I...>, const Rest&... rest) {
  using traits = node_traits<First>;
  if constexpr (dict_node<First>) {
    auto check = [&](const auto& other, std::size_t index) {
      bool same = other.size() == first.size();
      if (same) {
        auto it = other.begin();
        for (const auto& kv : first) {
          if (!(it->first == kv.first)) {
            same = false;
            break;
          }
          ++it;
        }
      }
      if (!same)
        throw structure_mismatch{{},
                                 index,
                                 "different key sets of dict",
                                 ::grove::detail::describe_keys(first) + " in tree 1, " +
                                     ::grove::detail::describe_keys(other) + " in tree " +
                                     std::to_string(index + 1)};
    };
    (check(rest, I + 1), ...);
  } else {
    const std::size_t n = traits::size(first);
    auto check = [&](const auto& other, std::size_t index) {
      const std::size_t m = node_traits<std::remove_cvref_t<decltype(other)>>::size(other);
      if (m != n)
        throw structure_mismatch{{},
                                 index,
                                 "different lengths of " + kind_name<First>(),
                                 std::to_string(n) + " in tree 1, " + std::to_string(m) +
                                     " in tree " + std::to_string(index + 1)};
    };
    (check(rest, I + 1), ...);
  }
}

template <class T>
KeyEntry sequence_key(const T& t, std::size_t i) {
  if constexpr (requires { node_traits<T>::key(t, i); })
    return node_traits<T>::key(t, i);
  else
    return FlattenedIndexKey{i};
}

// --- visiting the children of one node --------------------------------------------------------

// Calls g(make_key, child, other_children...) for each child of `first`, with the matching
// children of the other trees (which have passed the structure checks). make_key() builds the
// child's KeyEntry on demand, so that paths cost nothing unless used.
template <class G, class First, class... Rest>
void zip_children(G&& g, First&& first, Rest&&... rest) {
  using T = std::remove_cvref_t<First>;
  using traits = node_traits<T>;
  if constexpr (static_node<T>) {
    auto one = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
      g([] { return traits::key(I); }, traits::template child<I>(std::forward<First>(first)),
        node_traits<std::remove_cvref_t<Rest>>::template child<I>(std::forward<Rest>(rest))...);
    };
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (one(std::integral_constant<std::size_t, I>{}), ...);
    }
    (std::make_index_sequence<traits::arity>{});
  } else if constexpr (dict_node<T>) {
    ::grove::detail::check_dynamic_children(first, std::index_sequence_for<Rest...>{}, rest...);
    auto its = std::make_tuple(rest.begin()...);
    for (auto& kv : first) {
      std::apply(
          [&](auto&... it) {
            g([&] { return KeyEntry{::grove::detail::dict_key_of(kv.first)}; }, kv.second,
              (it++)->second...);
          },
          its);
    }
  } else {
    ::grove::detail::check_dynamic_children(first, std::index_sequence_for<Rest...>{}, rest...);
    const std::size_t n = traits::size(first);
    for (std::size_t i = 0; i < n; ++i) {
      g([&] { return ::grove::detail::sequence_key(first, i); }, traits::child(first, i),
        node_traits<std::remove_cvref_t<Rest>>::child(rest, i)...);
    }
  }
}

// --- for_each over leaves (with the prefix rule for the other trees) --------------------------

template <class Pred, class F, class First, class... Rest>
void zip_leaves(const Pred& pred, F& f, First&& first, Rest&&... rest) {
  using T = std::remove_cvref_t<First>;
  constexpr leaf_mode mode = pred_mode<Pred, T>();
  if constexpr (static_leaf<T, Pred>()) {
    f(std::forward<First>(first), std::forward<Rest>(rest)...);
  } else {
    if constexpr (mode == leaf_mode::runtime) {
      if (pred(std::as_const(first))) {
        f(std::forward<First>(first), std::forward<Rest>(rest)...);
        return;
      }
    }
    if constexpr (optional_node<T>) {
      if (!first.has_value()) {
        ::grove::detail::require_none(rest...);
        return;
      }
      std::size_t index = 0;
      ::grove::detail::zip_leaves(
          pred, f, *std::forward<First>(first),
          ::grove::detail::unwrap_other(std::forward<Rest>(rest), ++index)...);
    } else {
      static_assert(
          (compatible_node<T, std::remove_cvref_t<Rest>>() && ...),
          "grove: the trees' structures differ: where the first tree has a node, another tree "
          "has a leaf or a node of another kind");
      auto visit = [&](auto make_key, auto&&... children) {
        if constexpr (may_mismatch<T, Pred>()) {
          ::grove::detail::with_key(
              [&] {
                ::grove::detail::zip_leaves(pred, f, std::forward<decltype(children)>(children)...);
              },
              make_key);
        } else {
          ::grove::detail::zip_leaves(pred, f, std::forward<decltype(children)>(children)...);
        }
      };
      ::grove::detail::zip_children(visit, std::forward<First>(first), std::forward<Rest>(rest)...);
    }
  }
}

// --- map -------------------------------------------------------------------------------------

template <class Pred, class F, class First, class... Rest>
auto map_tree(const Pred& pred, F& f, const First& first, const Rest&... rest);

template <class Pred, class F, class First, class... Rest>
using map_result_t = decltype(::grove::detail::map_tree(
    std::declval<const Pred&>(), std::declval<F&>(), std::declval<const First&>(),
    std::declval<const Rest&>()...));

template <class Result, class... Cs>
struct node_builder;

template <std::size_t I, class T>
using static_child_t =
    std::remove_cvref_t<decltype(node_traits<T>::template child<I>(std::declval<const T&>()))>;
template <class Pred, class F, std::size_t I, class T, class... Rest>
struct mapped_child {
  using type = map_result_t<Pred, F, static_child_t<I, T>, static_child_t<I, Rest>...>;
};

template <class Pred, class F, class T, class... Rest>
auto map_static_node(const Pred& pred, F& f, const T& first, const Rest&... rest) {
  using traits = node_traits<T>;
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    using Result =
        typename traits::template rebind<typename mapped_child<Pred, F, I, T, Rest...>::type...>;
    auto child = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
      if constexpr (may_mismatch<T, Pred>()) {
        return ::grove::detail::with_key(
            [&] {
              return ::grove::detail::map_tree(pred, f, traits::template child<J>(first),
                                               node_traits<Rest>::template child<J>(rest)...);
            },
            [] { return traits::key(J); });
      } else {
        return ::grove::detail::map_tree(pred, f, traits::template child<J>(first),
                                         node_traits<Rest>::template child<J>(rest)...);
      }
    };
    // Braced initialisation evaluates the children left to right, in leaf order.
    if constexpr (is_instance_v<Result, std::tuple> || requires { Result::fields; }) {
      if constexpr (requires { Result::fields; })
        return Result{{child(std::integral_constant<std::size_t, I>{})...}};
      else
        return Result{child(std::integral_constant<std::size_t, I>{})...};
    } else if constexpr (std::is_same_v<Result, std::nullopt_t>) {
      return std::nullopt;
    } else if constexpr (requires { Result{child(std::integral_constant<std::size_t, I>{})...}; }) {
      return Result{child(std::integral_constant<std::size_t, I>{})...};
    } else {
      static_assert(
          std::is_default_constructible_v<Result>,
          "grove: cannot rebuild a registered struct: make it an aggregate whose fields are the "
          "registered ones in order, or give it a default constructor");
      Result out{};
      ((node_traits<Result>::template child<I>(out) =
            child(std::integral_constant<std::size_t, I>{})),
       ...);
      return out;
    }
  }
  (std::make_index_sequence<traits::arity>{});
}

template <class Pred, class F, class First, class... Rest>
auto map_node(const Pred& pred, F& f, const First& first, const Rest&... rest) {
  using T = First;
  using traits = node_traits<T>;
  if constexpr (optional_node<T>) {
    using C =
        map_result_t<Pred, F, typename traits::child_type,
                     std::remove_cvref_t<decltype(::grove::detail::unwrap_other(rest, 0))>...>;
    using Result = typename traits::template rebind<C>;
    if (!first.has_value()) {
      ::grove::detail::require_none(rest...);
      return Result{};
    }
    std::size_t index = 0;
    return Result{::grove::detail::map_tree(pred, f, *first,
                                            ::grove::detail::unwrap_other(rest, ++index)...)};
  } else {
    static_assert(
        (compatible_node<T, Rest>() && ...),
        "grove: the trees' structures differ: where the first tree has a node, another tree has a "
        "leaf or a node of another kind");
    if constexpr (static_node<T>) {
      return ::grove::detail::map_static_node(pred, f, first, rest...);
    } else if constexpr (dict_node<T>) {
      ::grove::detail::check_dynamic_children(first, std::index_sequence_for<Rest...>{}, rest...);
      using C = map_result_t<Pred, F, typename traits::child_type,
                             typename node_traits<Rest>::child_type...>;
      typename traits::template rebind<C> out;
      auto its = std::make_tuple(rest.begin()...);
      for (const auto& kv : first) {
        std::apply(
            [&](auto&... it) {
              out.emplace_hint(
                  out.end(), kv.first,
                  ::grove::detail::with_key(
                      [&] {
                        return ::grove::detail::map_tree(pred, f, kv.second, (it++)->second...);
                      },
                      [&] { return KeyEntry{::grove::detail::dict_key_of(kv.first)}; }));
            },
            its);
      }
      return out;
    } else {
      ::grove::detail::check_dynamic_children(first, std::index_sequence_for<Rest...>{}, rest...);
      using C = map_result_t<Pred, F, typename traits::child_type,
                             typename node_traits<Rest>::child_type...>;
      return traits::template build<C>(traits::size(first), [&](std::size_t i) {
        return ::grove::detail::with_key(
            [&] {
              return ::grove::detail::map_tree(pred, f, traits::child(first, i),
                                               node_traits<Rest>::child(rest, i)...);
            },
            [&] { return ::grove::detail::sequence_key(first, i); });
      });
    }
  }
}

template <class Pred, class F, class First, class... Rest>
auto map_tree(const Pred& pred, F& f, const First& first, const Rest&... rest) {
  using T = First;
  if constexpr (static_leaf<T, Pred>()) {
    static_assert(
        std::is_invocable_v<F&, const First&, const Rest&...>,
        "grove: the function given to tree_map cannot be called with this leaf (and the other "
        "trees' matching subtrees); make it accept every leaf type of the tree");
    using R = leaf_result_t<First, std::invoke_result_t<F&, const First&, const Rest&...>>;
    return R(f(first, rest...));
  } else if constexpr (pred_mode<Pred, T>() == leaf_mode::runtime) {
    using R = decltype(::grove::detail::map_node(pred, f, first, rest...));
    static_assert(
        std::is_same_v<leaf_result_t<First, std::invoke_result_t<F&, const First&, const Rest&...>>,
                       R>,
        "grove: where an is_leaf predicate decides at run time, the mapped function must return "
        "the "
        "same type for the node as mapping its leaves would give");
    if (pred(first)) return R(f(first, rest...));
    return ::grove::detail::map_node(pred, f, first, rest...);
  } else {
    return ::grove::detail::map_node(pred, f, first, rest...);
  }
}

// --- flatten -----------------------------------------------------------------------------------

template <class Pred, class T, class Sink>
void flatten_into(const Pred& pred, T&& t, TreeDef<>& def, Sink& sink) {
  using U = std::remove_cvref_t<T>;
  if constexpr (static_leaf<U, Pred>()) {
    def.add_leaf();
    sink(std::forward<T>(t));
  } else {
    if constexpr (pred_mode<Pred, U>() == leaf_mode::runtime) {
      if (pred(std::as_const(t))) {
        def.add_leaf();
        sink(std::forward<T>(t));
        return;
      }
    }
    if constexpr (optional_node<U>) {
      if (t.has_value())
        ::grove::detail::flatten_into(pred, *std::forward<T>(t), def, sink);
      else
        def.close(def.open(node_kind::none, nullptr), 0);
    } else {
      const std::size_t index = def.open(node_traits<U>::kind, info_of<U>());
      std::size_t arity = 0;
      if constexpr (dict_node<U>) {
        auto& arena = def.keys_for_building();
        def.set_key_offset(index, arena.size());
        for (const auto& kv : t) append_key(arena, kv.first);
      }
      ::grove::detail::zip_children(
          [&](auto, auto&& child) {
            ++arity;
            ::grove::detail::flatten_into(pred, std::forward<decltype(child)>(child), def, sink);
          },
          std::forward<T>(t));
      def.close(index, arity);
    }
  }
}

// --- unflatten -----------------------------------------------------------------------------------

// Reads leaves in order from a range, converting each to the leaf type the position needs.
template <class It>
struct leaf_source {
  It it;
  It end;
  std::size_t taken = 0;

  template <class L>
  L take() {
    if (it == end) throw tree_error("grove::tree_unflatten: too few leaves");
    ++taken;
    return convert<L>(*it++);
  }

  template <class L, class V>
  static L convert(V&& v) {
    using VV = std::remove_cvref_t<V>;
    if constexpr (is_instance_v<VV, std::variant>) {
      return std::visit(
          [](auto&& alt) -> L { return convert<L>(std::forward<decltype(alt)>(alt)); },
          std::forward<V>(v));
    } else if constexpr (std::is_convertible_v<V, L>) {
      return L(std::forward<V>(v));
    } else if constexpr (std::is_pointer_v<VV>) {
      if constexpr (std::is_convertible_v<decltype(*v), L>)
        return L(*v);
      else
        throw tree_error(
            "grove::tree_unflatten: a leaf's type cannot fill its position in the tree");
    } else {
      throw tree_error("grove::tree_unflatten: a leaf's type cannot fill its position in the tree");
    }
  }
};

template <class T, class Source>
T build_tree(const TreeDef<>& def, std::size_t& pos, Source& src) {
  const auto& rec = def.nodes()[pos];
  auto mismatch = [&](const std::string& what) {
    throw tree_error("grove::tree_unflatten: the TreeDef does not describe this C++ type: " + what +
                     " at node " + std::to_string(pos) + " of " + def.str());
  };
  if constexpr (!is_node<T>) {
    if (rec.kind != node_kind::leaf) mismatch("expected a leaf");
    ++pos;
    return src.template take<T>();
  } else {
    if (rec.kind == node_kind::leaf) {
      // A node type at a leaf position: an is_leaf predicate made it a leaf when flattening.
      if constexpr (std::is_constructible_v<T, T>) {
        ++pos;
        return src.template take<T>();
      }
    }
    using traits = node_traits<T>;
    if constexpr (optional_node<T>) {
      if (rec.kind == node_kind::none) {
        ++pos;
        return T{};
      }
      return T{build_tree<typename traits::child_type>(def, pos, src)};
    } else {
      if (rec.kind != traits::kind || rec.info != info_of<T>()) mismatch("node kinds differ");
      const std::size_t arity = rec.arity;
      ++pos;
      if constexpr (static_node<T>) {
        if (arity != traits::arity) mismatch("arities differ");
        return [&]<std::size_t... I>(std::index_sequence<I...>) {
          using children = static_child_types_t<T>;
          return [&]<class... Cs>(type_list<Cs...>) -> T {
            if constexpr (std::is_same_v<T, std::nullopt_t>)
              return std::nullopt;
            else if constexpr (requires { T::fields; })
              return T{{build_tree<Cs>(def, pos, src)...}};
            else if constexpr (requires { T{build_tree<Cs>(def, pos, src)...}; })
              return T{build_tree<Cs>(def, pos, src)...};
            else {
              T out{};
              ((traits::template child<I>(out) = build_tree<Cs>(def, pos, src)), ...);
              return out;
            }
          }(children{});
        }
        (std::make_index_sequence<traits::arity>{});
      } else if constexpr (dict_node<T>) {
        using K = typename traits::key_type;
        T out;
        std::size_t key_pos = rec.key_offset;
        for (std::size_t k = 0; k < arity; ++k) {
          DictKey key = read_key(def.key_arena(), key_pos);
          K real_key{};
          if constexpr (std::is_same_v<K, std::string>) {
            auto* s = std::get_if<std::string>(&key.key);
            if (!s) mismatch("an integer dict key where the map has string keys");
            real_key = *s;
          } else {
            auto* v = std::get_if<std::int64_t>(&key.key);
            if (!v) mismatch("a string dict key where the map has integer keys");
            real_key = static_cast<K>(*v);
          }
          out.emplace_hint(out.end(), std::move(real_key),
                           build_tree<typename traits::child_type>(def, pos, src));
        }
        return out;
      } else {
        return traits::template build<typename traits::child_type>(arity, [&](std::size_t) {
          return build_tree<typename traits::child_type>(def, pos, src);
        });
      }
    }
  }
}

// The C++ type a T-shaped tree has when its leaves are replaced by values of type V.
template <class V>
struct constant_fn {
  template <class... A>
  V operator()(const A&...) const;
};
template <class T, class V>
using rebind_leaves_t = map_result_t<no_leaf_pred, constant_fn<V>, T>;

// --- paths ---------------------------------------------------------------------------------------

template <class Pred, class T, class F>
void leaves_with_path(const Pred& pred, T&& t, KeyPath& path, F& f) {
  using U = std::remove_cvref_t<T>;
  if constexpr (static_leaf<U, Pred>()) {
    f(std::as_const(path), std::forward<T>(t));
  } else {
    if constexpr (pred_mode<Pred, U>() == leaf_mode::runtime) {
      if (pred(std::as_const(t))) {
        f(std::as_const(path), std::forward<T>(t));
        return;
      }
    }
    if constexpr (optional_node<U>) {
      if (t.has_value()) ::grove::detail::leaves_with_path(pred, *std::forward<T>(t), path, f);
    } else {
      ::grove::detail::zip_children(
          [&](auto make_key, auto&& child) {
            path.push_back(make_key());
            ::grove::detail::leaves_with_path(pred, std::forward<decltype(child)>(child), path, f);
            path.pop_back();
          },
          std::forward<T>(t));
    }
  }
}

}  // namespace grove::detail
