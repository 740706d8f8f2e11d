// grove/tree/detail/traversal.hpp: stepping through the children of a dynamic node. A sequence's
// children come through its iterators when it has them (std::list has no operator[]), else by
// index; a dict's come in sorted key order (std::map iterates in that order, an unordered map is
// sorted first).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "grove/tree/key_path.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove::detail {

template <class K>
DictKey dict_key_of(const K& k) {
  if constexpr (std::is_same_v<K, std::string>)
    return DictKey{k};
  else
    return DictKey{static_cast<std::int64_t>(k)};
}

// The entries of a dict that already iterates in key order: the map itself.
template <class M>
struct in_order_entries {
  M& map;
  auto begin() const { return map.begin(); }
  auto end() const { return map.end(); }
};

// The entries of an unordered dict, sorted by key: a buffer of pointers to them.
template <class M>
struct sorted_entries {
  using entry =
      std::conditional_t<std::is_const_v<M>, const typename std::remove_const_t<M>::value_type,
                         typename std::remove_const_t<M>::value_type>;
  struct iterator {
    entry* const* at;
    entry& operator*() const { return **at; }
    entry* operator->() const { return *at; }
    iterator& operator++() {
      ++at;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++at;
      return old;
    }
    friend bool operator==(const iterator&, const iterator&) = default;
  };
  std::vector<entry*> items;
  explicit sorted_entries(M& map) {
    items.reserve(map.size());
    for (auto& kv : map) items.push_back(&kv);
    std::sort(items.begin(), items.end(),
              [](const entry* a, const entry* b) { return a->first < b->first; });
  }
  iterator begin() const { return {items.data()}; }
  iterator end() const { return {items.data() + items.size()}; }
};

/// A dict node's entries in sorted key order.
template <class M>
auto dict_entries(M& map) {
  if constexpr (node_traits<std::remove_const_t<M>>::sorted)
    return in_order_entries<M>{map};
  else
    return sorted_entries<M>(map);
}

// Steps through a sequence node's children in order; next() returns a reference to the next one.
template <class C>
inline constexpr bool iterable_sequence = requires {
  node_traits<std::remove_const_t<C>>::iterable;
};

template <class C, bool Iterable = iterable_sequence<C>>
struct sequence_cursor {
  decltype(std::declval<C&>().begin()) it;
  explicit sequence_cursor(C& c) : it(c.begin()) {}
  decltype(auto) next() { return *it++; }
};
template <class C>
struct sequence_cursor<C, false> {
  C& container;
  std::size_t index = 0;
  explicit sequence_cursor(C& c) : container(c) {}
  decltype(auto) next() { return node_traits<std::remove_const_t<C>>::child(container, index++); }
};

template <class T>
KeyEntry sequence_key(const T& t, std::size_t i) {
  if constexpr (requires { node_traits<T>::key(t, i); })
    return node_traits<T>::key(t, i);
  else
    return FlattenedIndexKey{i};
}

}  // namespace grove::detail
