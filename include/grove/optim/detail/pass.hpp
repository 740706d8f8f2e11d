// grove/optim/detail/pass.hpp: the passes over the leaves that every optimizer step is made of:
// the fused elementwise pass (one read of the gradients, the parameters and the state, one write),
// the reduction behind global_norm, and a plain elementwise loop, each shared among the threads
// of one team.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <type_traits>

#include "grove/detail/threads.hpp"
#include "grove/error.hpp"
#include "grove/optim/detail/leaf.hpp"
#include "grove/tree.hpp"

namespace grove::optim::detail {

using ::grove::detail::Range;

/// Elements per thread below which a leaf is not shared among threads: smaller leaves cost less
/// than the team's synchronisation.
inline constexpr Index min_per_thread = Index{1} << 15;
/// Elements transformed together in the fused pass: small enough that the chunk and the state it
/// reads stay in L1 between the transformations of a chain.
inline constexpr Index chunk_size = 1024;

template <class Tree>
Index total_elements(const Tree& tree) {
  Index n = 0;
  tree_for_each([&](const auto& leaf) { n += leaf_size(leaf); }, tree);
  return n;
}

inline int threads_for(Index total) {
  return static_cast<int>(
      std::min<Index>(::grove::detail::max_threads(), std::max<Index>(1, total / min_per_thread)));
}

inline Range leaf_share(Index n, int tid, int team) {
  if (n < min_per_thread) return tid == 0 ? Range{0, n} : Range{};
  return ::grove::detail::share(n, tid, team, 16);
}

/// A leaf's shape as numpy prints it: (rows, cols) for an Eigen matrix or array, () for a scalar.
template <class L>
std::string shape_string(const L& leaf) {
  if constexpr (std::is_arithmetic_v<L>) {
    (void)leaf;
    return "()";
  } else {
    return "(" + std::to_string(leaf.rows()) + ", " + std::to_string(leaf.cols()) + ")";
  }
}

template <class A, class B>
bool same_shape(const A& a, const B& b) {
  if constexpr (std::is_arithmetic_v<A> || std::is_arithmetic_v<B>)
    return leaf_size(a) == leaf_size(b);
  else
    return a.rows() == b.rows() && a.cols() == b.cols();
}

/// Throws grove::shape_error (message starting with `who`) unless every numeric leaf of `others`
/// has the shape of the matching leaf of `first`, the parameters: the same number of rows and of
/// columns, not only of elements (a (3, 2) gradient of a (2, 3) parameter would otherwise be
/// applied in memory order). The first of `others` is named `second` in the message (the
/// gradients, the updates), the rest "the optimizer state". Also checks the structures (a
/// grove::tree_error from the tree core), before any thread starts. Allocates only to throw.
template <class First, class... Others>
void check_shapes(const char* who, const char* second, const First& first,
                  const Others&... others) {
  std::size_t leaf = 0;
  tree_for_each(
      [&](const auto& f, const auto&... o) {
        std::size_t position = 0;
        [[maybe_unused]] auto check = [&](const auto& x) {
          using X = std::remove_cvref_t<decltype(x)>;
          const char* name = position++ == 0 ? second : "the optimizer state";
          if constexpr (numeric_leaf<X>()) {
            if (!same_shape(x, f)) {
              std::string path = "?";
              std::size_t k = 0;
              for (const auto& entry : tree_leaves_with_path(first))
                if (k++ == leaf) path = entry.first.empty() ? "the root" : keystr(entry.first);
              throw shape_error(std::string(who) + ": leaf " + std::to_string(leaf) +
                                " (in tree_leaves order) at " + path + " has shape " +
                                shape_string(x) + " in " + name + " and " + shape_string(f) +
                                " in the parameters");
            }
          }
        };
        (check(o), ...);
        ++leaf;
      },
      first, others...);
}

/// A chunk of updates as a plain array the caller owns (the scratch of the fused pass).
template <class S>
using chunk_map = Eigen::Map<Eigen::Array<S, Eigen::Dynamic, 1>>;

template <class U>
constexpr bool direct_chunk() {
  return bool(std::remove_cvref_t<U>::Flags & Eigen::DirectAccessBit);
}
// A direct chunk times a scalar (what clip_by_global_norm and scale make).
template <class U>
struct scaled_chunk : std::false_type {};
template <class S, class X, class C>
struct scaled_chunk<Eigen::CwiseBinaryOp<Eigen::internal::scalar_product_op<S, S>, X, C>>
    : std::bool_constant<
          direct_chunk<X>() &&
          std::is_same_v<std::remove_cvref_t<C>,
                         Eigen::CwiseNullaryOp<Eigen::internal::scalar_constant_op<S>,
                                               Eigen::Array<S, Eigen::Dynamic, 1>>>> {};

/// `u` itself when reading it again costs little (a load, a multiply), else u evaluated into
/// `scratch`: for transformations that read their incoming updates more than once.
template <class U, class S>
decltype(auto) reusable(const U& u, chunk_map<S>& scratch) {
  if constexpr (direct_chunk<U>() || scaled_chunk<std::remove_cvref_t<U>>::value) {
    return u;
  } else {
    scratch = u;
    return chunk_map<S>(scratch.data(), scratch.size());
  }
}

/// The fused pass of transformation t: for every chunk of every leaf, e = t.apply(ctx, the
/// gradients' chunk, the parameters' chunk, offset, scratch, state leaves...), an Eigen expression
/// of the updates, which the pass evaluates once: out's chunk = e (an update) or += e (a step,
/// where out is the parameters). Elementwise work of consecutive transformations thus runs in one
/// loop; a transformation that must store its result (a moment, a masked choice) stores it in the
/// state or in the chunk's scratch.
template <bool InPlace, class T, class Ctx, class Out, class Params, class Grads, class... Bufs>
void fused_pass(const T& t, const Ctx& ctx, Out& out, const Params& params, const Grads& grads,
                Bufs&... bufs) {
  const int threads = threads_for(total_elements(params));
  ::grove::detail::parallel(threads, [&](int tid, int team) {
    tree_for_each(
        [&](auto& o, const auto& p, const auto& g, auto&... b) {
          using S = ::grove::scalar_t<std::remove_cvref_t<decltype(o)>>;
          auto of = flat(o);
          const auto pf = flat(p);
          const auto gf = flat(g);
          const Range r = leaf_share(of.size(), tid, team);
          alignas(64) S buffer[chunk_size];
          for (Index at = r.begin; at < r.end; at += chunk_size) {
            const Index len = std::min(chunk_size, r.end - at);
            chunk_map<S> scratch(buffer, len);
            const auto e =
                t.apply(ctx, gf.segment(at, len), pf.segment(at, len), at, scratch, b...);
            if constexpr (InPlace)
              of.segment(at, len) += e;
            else
              of.segment(at, len) = e;
          }
        },
        out, params, grads, bufs...);
  });
}

/// kernel(begin, size, leaves...) on every leaf tuple of the trees, each leaf's elements shared
/// among the threads of one team.
template <class Kernel, class First, class... Trees>
void for_each_leaf(Kernel&& kernel, First& first, Trees&... trees) {
  const int threads = threads_for(total_elements(first));
  ::grove::detail::parallel(threads, [&](int tid, int team) {
    tree_for_each(
        [&](auto& f, auto&... leaves) {
          const Range r = leaf_share(leaf_size(f), tid, team);
          if (!r.empty()) kernel(r.begin, r.size(), f, leaves...);
        },
        first, trees...);
  });
}

/// Elements per block of the sum of squares. Each block is summed on its own and the blocks are
/// added in leaf order, so the result does not depend on the number of threads.
inline constexpr Index norm_block = 8192;
inline constexpr Index norm_blocks_per_round = 256;

/// The sum of the squares of x[0, n), in double: 16 independent accumulators (one SIMD lane each,
/// so the compiler vectorizes the loop without reassociating a sum), added in a fixed order.
template <class S>
double block_sum_of_squares(const S* x, Index n) {
  constexpr Index lanes = 16;
  double acc[lanes] = {};
  Index i = 0;
  for (; i + lanes <= n; i += lanes)
    for (Index j = 0; j < lanes; ++j) {
      const double e = static_cast<double>(x[i + j]);
      acc[j] += e * e;
    }
  for (Index j = 0; i + j < n; ++j) {
    const double e = static_cast<double>(x[i + j]);
    acc[j] += e * e;
  }
  double total = 0;
  for (Index j = 0; j < lanes; ++j) total += acc[j];
  return total;
}

/// The sum of the squares of every element of the tree, accumulated in double.
template <class Tree>
double sum_of_squares(const Tree& tree) {
  Index blocks = 0;
  tree_for_each(
      [&](const auto& leaf) { blocks += (leaf_size(leaf) + norm_block - 1) / norm_block; }, tree);
  double total = 0;
  for (Index first = 0; first < blocks; first += norm_blocks_per_round) {
    const Index count = std::min(norm_blocks_per_round, blocks - first);
    std::array<double, norm_blocks_per_round> partial{};
    const int threads = threads_for(count * norm_block);
    ::grove::detail::parallel(threads, [&](int tid, int team) {
      Index k = 0;
      tree_for_each(
          [&](const auto& leaf) {
            const auto f = flat(leaf);
            for (Index at = 0; at < f.size(); at += norm_block, ++k) {
              if (k < first || k >= first + count || (k - first) % team != tid) continue;
              const Index len = std::min(norm_block, f.size() - at);
              partial[static_cast<std::size_t>(k - first)] =
                  block_sum_of_squares(f.data() + at, len);
            }
          },
          tree);
    });
    for (Index i = 0; i < count; ++i) total += partial[static_cast<std::size_t>(i)];
  }
  return total;
}

/// Whether every element of the tree is finite (neither infinite nor NaN).
template <class Tree>
bool all_finite(const Tree& tree) {
  bool finite = true;
  tree_for_each(
      [&](const auto& leaf) {
        if (finite) finite = flat(leaf).allFinite();
      },
      tree);
  return finite;
}

}  // namespace grove::optim::detail
