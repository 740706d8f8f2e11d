// grove/optim/clipping.hpp: optax's clipping transformations (optax/_src/clipping.py): clip each
// element, or scale all updates together so that their global norm is at most max_norm.
#pragma once

#include "grove/optim/detail/check.hpp"
#include "grove/optim/transformation.hpp"

namespace grove::optim {

/// optax.clip: each element clipped to [-max_delta, max_delta]. State: EmptyState.
class Clip : public FusedTransformation<Clip> {
 public:
  explicit Clip(double max_delta) : max_delta_(max_delta) {
    detail::check_non_negative("clip", "max_delta", max_delta);
  }
  template <class P>
  EmptyState init(const P&) const {
    return {};
  }
  double context(const EmptyState&, double) const { return max_delta_; }
  template <class U, class Pc, class Scratch>
  auto apply(double max_delta, const U& u, const Pc&, Index, Scratch&) const {
    using S = typename std::remove_cvref_t<U>::Scalar;
    return u.max(S(-max_delta)).min(S(max_delta));
  }

 private:
  double max_delta_;
};

/// optax.clip(max_delta). Throws grove::argument_error for a max_delta that is negative or not
/// finite.
inline Clip clip(double max_delta) {
  return Clip(max_delta);
}

/// optax.clip_by_global_norm: with g_norm = global_norm(updates), the updates unchanged when
/// g_norm < max_norm, else updates * (max_norm / g_norm) (optax divides each element by g_norm,
/// then multiplies by max_norm; grove multiplies by the quotient, within an ulp). At exactly the
/// threshold the updates are scaled, by 1. The norm is computed in double. Fused into a chain
/// when it comes first (the norm is then one extra read of the gradients); elsewhere a chain runs
/// it on materialised updates. State: EmptyState.
class ClipByGlobalNorm : public FusedTransformation<ClipByGlobalNorm> {
 public:
  static constexpr bool needs_norm = true;
  explicit ClipByGlobalNorm(double max_norm) : max_norm_(max_norm) {
    detail::check_non_negative("clip_by_global_norm", "max_norm", max_norm);
  }
  template <class P>
  EmptyState init(const P&) const {
    return {};
  }
  /// The factor the updates are multiplied by, 1 when they are not clipped.
  struct context_type {
    bool clipped;
    double factor;
  };
  context_type context(const EmptyState&, double norm) const {
    if (norm < max_norm_) return {false, 1.0};
    return {true, max_norm_ / norm};
  }
  template <class U, class Pc, class Scratch>
  auto apply(const context_type& c, const U& u, const Pc&, Index, Scratch&) const {
    using S = typename std::remove_cvref_t<U>::Scalar;
    // The factor is exactly 1 when the updates are not clipped.
    return u * S(c.factor);
  }

 private:
  double max_norm_;
};

/// optax.clip_by_global_norm(max_norm). Throws grove::argument_error for a max_norm that is
/// negative or not finite (clip_by_global_norm(inf) would be no clipping: leave it out).
inline ClipByGlobalNorm clip_by_global_norm(double max_norm) {
  return ClipByGlobalNorm(max_norm);
}

}  // namespace grove::optim
