// grove/optim/detail/state.hpp: the checks of an optimizer state's own values (counts, a
// schedule's value) that a step makes before it changes anything. A state comes from init, or
// from a checkpoint that may hold anything; a count a step cannot advance, or a learning rate
// that is not finite, is refused with an error naming the state's leaf by its key path.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>

#include "grove/error.hpp"
#include "grove/tree.hpp"

namespace grove::optim::detail {

/// What a transformation's check of its state throws: the message around the leaf's key path,
/// which only the entry point the user called (step, update) knows. That entry point turns it
/// into grove::argument_error (see naming_state_leaf); it never reaches the user.
struct state_leaf_error {
  const void* leaf;
  std::string before;  // the message before the leaf's key path
  std::string after;   // and after it
};

/// The largest count a step can advance (it adds one).
inline constexpr std::int64_t max_count = std::numeric_limits<std::int64_t>::max();

/// Refuses a count a step cannot advance: negative (init starts at 0, and a bias correction or
/// a schedule at a negative count is NaN or meaningless) or INT64_MAX (one more overflows).
inline void check_count(const std::int64_t& count) {
  if (count < 0 || count == max_count)
    throw state_leaf_error{&count, "the optimizer state's leaf ",
                           " is " + std::to_string(count) + ", outside [0, " +
                               std::to_string(max_count) + "): a step adds 1 to it"};
}

/// The key path of the leaf at `address` in `tree` (keystr), or "?" when it is not there.
template <class Tree>
std::string path_of_leaf(const Tree& tree, const void* address) {
  for (const auto& [path, leaf] : tree_leaves_with_path(tree)) {
    const void* at = nullptr;
    if constexpr (std::is_pointer_v<std::remove_cvref_t<decltype(leaf)>>)
      at = leaf;
    else
      at = std::visit([](const auto* p) -> const void* { return p; }, leaf);
    if (at == address) return path.empty() ? std::string("(the root)") : keystr(path);
  }
  return "?";
}

/// f(), with a state_leaf_error thrown inside turned into grove::argument_error whose message
/// starts with `who` and names the leaf by its key path in `state` (the tree f works on).
template <class State, class F>
decltype(auto) naming_state_leaf(const char* who, const State& state, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const state_leaf_error& e) {
    throw argument_error(std::string(who) + ": " + e.before + path_of_leaf(state, e.leaf) +
                         e.after);
  }
}

}  // namespace grove::optim::detail
