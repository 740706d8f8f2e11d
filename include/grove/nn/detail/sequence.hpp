// grove/nn/detail/sequence.hpp: running a sequence of layers: each child's place in the pass's
// memory, and the forward and backward walks over the children, fused with the epilogues that
// the children offer.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "grove/nn/detail/layer_dispatch.hpp"

namespace grove::nn::detail {

// Calls visit(i, place) for each child in order, given sizes(i, in) = {child i's outputs, its
// own memory} for `in` features; returns {total memory, offset of g0, widest intermediate output}.
template <class Sizes, class Visit>
std::array<Index, 3> layout(std::size_t n, Index in, Index batch, Sizes&& sizes, Visit&& visit) {
  Index at = 0, widest = 0;
  for (std::size_t i = 0; i < n; ++i) {
    child_place c;
    c.in = in;
    const auto [out, saved] = sizes(i, in);
    c.out = out;
    if (i + 1 < n) {
      c.output_at = at;
      at += aligned(c.out * batch);
      widest = std::max(widest, c.out);
    }
    c.saved_at = at;
    c.saved = saved;
    at += aligned(c.saved);
    visit(i, c);
    in = c.out;
  }
  const Index g = at;
  at += 2 * aligned(widest * batch);
  return {at, g, widest};
}

// sizes for layout from a sequence's with_child (see sequence_forward), whichever arguments it
// hands its function.
template <class WithChild>
auto child_sizes(WithChild& with_child, Index batch) {
  return [&with_child, batch](std::size_t i, Index in) {
    std::array<Index, 2> s{};
    with_child(i, [&](const auto& l, auto&&...) {
      s = {output_features(l, in), saved_size(l, in, batch)};
    });
    return s;
  };
}

// The places of a sequence's n children for one pass (forward or backward), computed once on
// entry. They live in the calling thread's stack of places in the workspace, which keeps its
// memory from pass to pass (a child that is a sequence pushes its own above these and pops them
// when it returns; so places are read by value, never by reference); without grove's workspace
// (a layer called outside grove's passes), in memory of their own.
template <class T>
class sequence_places {
 public:
  template <class WithChild>
  sequence_places(std::size_t n, WithChild& with_child, Index in, Index batch,
                  const layer_context& ctx)
      : stack_(stack_of(ctx)), base_(stack_->size()) {
    stack_->resize(base_ + n);
    const auto [total, g_at, widest] =
        layout(n, in, batch, child_sizes(with_child, batch),
               [&](std::size_t i, const child_place& c) { (*stack_)[base_ + i] = c; });
    (void)total;
    g_at_ = g_at;
    widest_ = widest;
  }
  ~sequence_places() { stack_->resize(base_); }
  sequence_places(const sequence_places&) = delete;
  sequence_places& operator=(const sequence_places&) = delete;

  child_place operator[](std::size_t i) const { return (*stack_)[base_ + i]; }
  Index g_at() const { return g_at_; }      // where the gradients between the children start
  Index widest() const { return widest_; }  // the widest output but the last

 private:
  std::vector<child_place>* stack_of(const layer_context& ctx) {
    if (ctx.detail == nullptr) return &own_;
    auto& all = static_cast<pass_memory<T>*>(ctx.detail)->places;
    // (In a team the pass has made one per thread before the team started: see model.hpp.)
    const auto t = static_cast<std::size_t>(ctx.thread);
    if (ctx.threads == 1 && all.size() <= t) all.resize(t + 1);
    return &all[t];
  }

  std::vector<child_place> own_;
  std::vector<child_place>* stack_;
  std::size_t base_;
  Index g_at_ = 0, widest_ = 0;
};

// The context of child i: the sequence's, with the child's own key (fold_in(key, i)).
inline layer_context child_context(const layer_context& ctx, std::size_t i, random::Key& key) {
  layer_context child = ctx;
  if (ctx.key) {
    key = random::fold_in(*ctx.key, static_cast<std::uint32_t>(i));
    child.key = &key;
  }
  return child;
}

// The passes of a sequence of n children, whatever holds them (a tuple or a vector):
// with_child(i, f) calls f(child_layer, its params, its grads or nullptr). A dense layer followed
// by an activation runs as one step: each thread applies the activation (forward), or its
// derivative (backward), to the piece of the product it has just computed, while it is in cache,
// as the fused engine does.
template <class T, class WithChild>
void sequence_forward(std::size_t n, WithChild&& with_child, ConstMatrixMap<T> x, MatrixMap<T> y,
                      std::span<T> saved, const layer_context& ctx) {
  const Index batch = x.cols();
  const sequence_places<T> places(n, with_child, x.rows(), batch, ctx);
  const T* input = x.data();
  auto part = [&](const child_place& c) {
    return saved.subspan(static_cast<std::size_t>(c.saved_at), static_cast<std::size_t>(c.saved));
  };
  auto output_of = [&](const child_place& c) {
    return c.output_at < 0 ? y.data() : saved.data() + c.output_at;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const child_place c = places[i];
    T* out = output_of(c);
    random::Key key;
    const layer_context child = child_context(ctx, i, key);
    bool fused = false;  // child i + 1 runs with child i
    with_child(i, [&](const auto& l, const auto& p, auto*) {
      // A layer that offers forward_then (the dense layer; a user's layer may too) runs the
      // activation after it on each finished block of its output.
      if constexpr (fuses_activation_after<std::remove_cvref_t<decltype(l)>, T,
                                           std::remove_cvref_t<decltype(p)>>) {
        if (i + 1 < n) {
          with_child(i + 1, [&](const auto& act, const auto&, auto*) {
            using A = std::remove_cvref_t<decltype(act)>;
            if constexpr (activation<A>) {
              const child_place next = places[i + 1];
              T* a = output_of(next);
              T* d = saved.data() + next.saved_at;
              const bool training = ctx.training;
              l.template forward_then<T>(p, ConstMatrixMap<T>(input, c.in, batch),
                                         MatrixMap<T>(out, c.out, batch), part(c), child,
                                         [&](Index j, Index begin, Index end) {
                                           const Index at = j * c.out + begin, len = end - begin;
                                           if (training) {
                                             std::copy(out + at, out + at + len, d + at);
                                             act.forward_train(d + at, a + at, len);
                                           } else {
                                             act.forward(out + at, a + at, len);
                                           }
                                         });
              out = a;
              fused = true;
            }
          });
        }
      }
      if (!fused)
        forward_layer<T>(l, p, ConstMatrixMap<T>(input, c.in, batch),
                         MatrixMap<T>(out, c.out, batch), part(c), child);
    });
    input = out;
    if (fused) ++i;  // the activation after it is done
  }
}

template <class T, class WithChild>
void sequence_backward(std::size_t n, WithChild&& with_child, ConstMatrixMap<T> x,
                       ConstMatrixMap<T> y, ConstMatrixMap<T> dy, MatrixMap<T> dx,
                       std::span<T> saved, const layer_context& ctx) {
  const Index batch = x.cols();
  const sequence_places<T> places(n, with_child, x.rows(), batch, ctx);
  T* g[2] = {saved.data() + places.g_at(),
             saved.data() + places.g_at() + aligned(places.widest() * batch)};
  // Where child r reads the gradient of its output, and where it writes that of its input.
  const T* d_out = dy.data();
  auto other = [&](const T* p) { return p == g[0] ? g[1] : g[0]; };
  auto input_of = [&](std::size_t r) -> const T* {
    if (r == 0) return x.data();
    return saved.data() + places[r - 1].output_at;
  };
  auto part = [&](const child_place& c) {
    return saved.subspan(static_cast<std::size_t>(c.saved_at), static_cast<std::size_t>(c.saved));
  };
  for (std::size_t r = n; r-- > 0;) {
    const child_place c = places[r];
    const T* input = input_of(r);
    const T* output = c.output_at < 0 ? y.data() : saved.data() + c.output_at;
    random::Key key;
    const layer_context child = child_context(ctx, r, key);
    bool fused = false;
    with_child(r, [&](const auto& l, const auto& p, auto* gp) {
      // A layer that offers backward_then multiplies its input gradient by the derivative of the
      // activation before it, block by block.
      if constexpr (fuses_activation_before<std::remove_cvref_t<decltype(l)>, T,
                                            std::remove_cvref_t<decltype(p)>,
                                            std::remove_cvref_t<decltype(*gp)>>) {
        if (r > 0) {
          with_child(r - 1, [&](const auto& act, const auto&, auto*) {
            using A = std::remove_cvref_t<decltype(act)>;
            if constexpr (activation<A>) {
              // dx of the dense layer, times f' of the activation before it, in place: the
              // gradient of the activation's input.
              const child_place prev = places[r - 1];
              const bool want = r - 1 > 0 || dx.size() != 0;
              T* d_in = r - 1 == 0 ? dx.data() : other(d_out);
              const T* d = saved.data() + prev.saved_at;
              l.template backward_then<T>(p, ConstMatrixMap<T>(input, c.in, batch),
                                          ConstMatrixMap<T>(output, c.out, batch),
                                          ConstMatrixMap<T>(d_out, c.out, batch), *gp,
                                          MatrixMap<T>(d_in, want ? c.in : 0, want ? batch : 0),
                                          part(c), child, [&](Index j, Index begin, Index end) {
                                            const Index at = j * c.in + begin;
                                            flat_part(d_in, Range{at, at + end - begin}) *=
                                                flat_part(d, Range{at, at + end - begin});
                                          });
              d_out = d_in;
              fused = true;
            }
          });
        }
      }
      if (!fused) {
        const bool want_dx = r > 0 || dx.size() != 0;
        T* d_in = r == 0 ? dx.data() : other(d_out);
        backward_layer<T>(
            l, p, ConstMatrixMap<T>(input, c.in, batch), ConstMatrixMap<T>(output, c.out, batch),
            ConstMatrixMap<T>(d_out, c.out, batch), *gp,
            MatrixMap<T>(d_in, want_dx ? c.in : 0, want_dx ? batch : 0), part(c), child);
        d_out = d_in;
      }
    });
    if (fused) --r;  // the activation before it is done
  }
}

template <class WithChild>
Index sequence_saved_size(std::size_t n, WithChild&& with_child, Index in, Index batch) {
  return layout(n, in, batch, child_sizes(with_child, batch),
                [](std::size_t, const child_place&) {})[0];
}

}  // namespace grove::nn::detail
