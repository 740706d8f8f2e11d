// grove/tree/detail/leaf_predicates.hpp: what is a leaf where (the is_leaf predicates, decided at
// compile time or per value) and the type lists computed from a tree's type: its distinct leaf
// types, its subtree types, and the pointer type tree_leaves returns.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#include <variant>

#include "grove/tree/node_traits.hpp"

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

}  // namespace grove::detail
