// grove/tree/detail/map.hpp: tree_map's recursion. Static nodes (tuples, structs) unroll at
// compile time, dynamic ones (sequences, dicts, optionals, custom containers) loop at run time;
// each node is rebuilt around its mapped children with the C++ type node_traits::rebind names,
// after the prefix rule's checks (mismatch.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "grove/tree/detail/eigen_tensor.hpp"
#include "grove/tree/detail/field_count.hpp"
#include "grove/tree/detail/leaf_predicates.hpp"
#include "grove/tree/detail/mismatch.hpp"
#include "grove/tree/detail/node_data.hpp"
#include "grove/tree/detail/traversal.hpp"
#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove::detail {

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

// Eigen's tensor expressions (x * 2.0f over an Eigen::Tensor leaf) have no PlainObject; one of
// the leaf's scalar that the leaf's type can be built from is evaluated into the leaf's type.
template <class Leaf, class R>
struct evaluated_for {
  using type = typename evaluated<R>::type;
};
template <class Leaf, class R>
requires eigen_tensor_owner<Leaf> &&(!eigen_tensor<R>)&&requires {
  typename R::Scalar;
}
&&std::is_same_v<typename R::Scalar, typename Leaf::Scalar>&&
    std::is_constructible_v<Leaf, const R&> struct evaluated_for<Leaf, R> {
  using type = Leaf;
};

template <class Leaf, class R>
using leaf_result_t = std::conditional_t<
    std::is_same_v<std::remove_cvref_t<R>, std::remove_cvref_t<Leaf>>, std::remove_cvref_t<R>,
    typename evaluated_for<std::remove_cvref_t<Leaf>, std::remove_cvref_t<R>>::type>;

// --- rebuilding a registered struct -----------------------------------------------------------

// Registered structs and mapped_nodes: the nodes with named fields and static fields.
template <class T>
concept registered_node = requires {
  node_traits<T>::num_static;
};

// Whether a registered aggregate lists its fields in declaration order, which makes positional
// braced initialisation name the same fields as assignment by name. Members are laid out in
// declaration order (later ones at higher addresses), so the addresses of the registered members
// of one value, compared once per type, tell.
template <class T>
bool registered_in_declaration_order() {
  static const bool ordered = [] {
    const T probe{};
    const char* last = nullptr;
    bool ascending = true;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((ascending =
            ascending && (last == nullptr || reinterpret_cast<const char*>(std::addressof(
                                                 node_traits<T>::template child<I>(probe))) > last),
        last = reinterpret_cast<const char*>(
            std::addressof(node_traits<T>::template child<I>(probe)))),
       ...);
    }
    (std::make_index_sequence<node_traits<T>::arity>{});
    return ascending;
  }();
  return ordered;
}

// Builds a registered struct (or mapped_node) Result: child_at(integral_constant<I>) gives leaf
// field I, static_at(integral_constant<J>) static field J, each called once, the children in
// registered (leaf) order. A struct is assigned field by field, by name, after value-initialising
// it: the registered order is the leaf order and never the declaration order. An aggregate that
// lists all its fields in declaration order, without static fields, is braced-initialised
// instead, which names the same fields and moves each child straight into place.
template <class Result, class StaticAt, class ChildAt>
Result build_struct(StaticAt&& static_at, ChildAt&& child_at) {
  using R = node_traits<Result>;
  return [&]<std::size_t... I, std::size_t... J>(std::index_sequence<I...>,
                                                 std::index_sequence<J...>) {
    if constexpr (is_instance_v<Result, mapped_node>) {
      return Result{{child_at(std::integral_constant<std::size_t, I>{})...},
                    {static_at(std::integral_constant<std::size_t, J>{})...}};
    } else {
      static_assert(std::is_default_constructible_v<Result>,
                    "grove: cannot rebuild a registered struct: grove value-initialises it and "
                    "assigns each registered field by name, so give it a default constructor");
      if constexpr (std::is_aggregate_v<Result> && R::num_static == 0 &&
                    ::grove::detail::count_fields<Result>() == R::arity &&
                    requires { Result{child_at(std::integral_constant<std::size_t, I>{})...}; }) {
        if (::grove::detail::registered_in_declaration_order<Result>())
          return Result{child_at(std::integral_constant<std::size_t, I>{})...};
      }
      Result out{};
      ((R::template child<I>(out) = child_at(std::integral_constant<std::size_t, I>{})), ...);
      ((R::template static_field<J>(out) = static_at(std::integral_constant<std::size_t, J>{})),
       ...);
      return out;
    }
  }
  (std::make_index_sequence<R::arity>{}, std::make_index_sequence<R::num_static>{});
}

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
    // Braced initialisation and comma folds evaluate the children left to right, in leaf order.
    if constexpr (registered_node<Result>) {
      ::grove::detail::check_static_fields(first, rest...);
      return ::grove::detail::build_struct<Result>(
          [&](auto j) -> decltype(auto) {
            return ::grove::detail::static_at<T, decltype(j)::value>(first);
          },
          child);
    } else if constexpr (std::is_same_v<Result, std::nullopt_t>) {
      return std::nullopt;
    } else {
      return Result{child(std::integral_constant<std::size_t, I>{})...};
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
    // Tree i + 1 is numbered from the pack index: a counter incremented in the argument list
    // would be indeterminately sequenced (and GCC's -Wsequence-point rejects it).
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return Result{::grove::detail::map_tree(pred, f, *first,
                                              ::grove::detail::unwrap_other(rest, I + 1)...)};
    }
    (std::index_sequence_for<Rest...>{});
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
      const auto entries = ::grove::detail::dict_entries(first);
      auto others = std::make_tuple(::grove::detail::dict_entries(rest)...);
      auto its = std::apply([](auto&... o) { return std::make_tuple(o.begin()...); }, others);
      for (const auto& kv : entries) {
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
      sequence_cursor<const T> mine(first);
      std::tuple<sequence_cursor<const Rest>...> theirs(rest...);
      return traits::template build<C>(traits::size(first), [&](std::size_t i) {
        return ::grove::detail::with_key(
            [&] {
              return std::apply(
                  [&](auto&... cursor) {
                    return ::grove::detail::map_tree(pred, f, mine.next(), cursor.next()...);
                  },
                  theirs);
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

// The C++ type a T-shaped tree has when its leaves are replaced by values of type V.
template <class V>
struct constant_fn {
  template <class... A>
  V operator()(const A&...) const;
};
template <class T, class V>
using rebind_leaves_t = map_result_t<no_leaf_pred, constant_fn<V>, T>;

}  // namespace grove::detail
