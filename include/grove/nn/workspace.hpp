// grove/nn/workspace.hpp: the fused forward / loss / backward passes of an MLP over a batch, and
// the workspace they run in.
//
// One call is one OpenMP team (see grove/nn/detail/gemm.hpp); each thread computes its slice of
// each product and then, while that slice is in its cache, the elementwise work on it:
//   forward, per layer:  Z = b + W A   (the bias is C's initial value: one GEMM, no extra pass)
//                        A = f(Z), D = f'(Z)   (one pass; D overwrites Z)
//   loss:                per example (column): log-softmax, cross-entropy, dZ = (softmax - y) / B
//   backward, per layer: dW = dZ A_prev^T   (one GEMM)
//                        db = the row sums of dZ
//                        dZ_prev = (W^T dZ) * D_prev   (one GEMM, then one pass)
// with a barrier between layers (each layer's work on a thread's slice is detail/dense_slices.hpp,
// which a model's DenseLayer runs too). The first layer's input gradient is never computed. A
// grad_listener set on the workspace (grove/nn/grad_listener.hpp) is told of each layer's dW and
// db once the team has finished them (one more barrier per layer), before dZ_prev's product. In
// sgd mode the weight gradients are not stored: W -= lr dZ A_prev^T is the GEMM itself, run once
// W's own input gradient is done. After the first call with a network and a batch size (or any
// smaller batch), nothing is allocated.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "grove/detail/bf16.hpp"
#include "grove/nn/activations.hpp"
#include "grove/nn/dense.hpp"
#include "grove/nn/detail/dense_slices.hpp"
#include "grove/nn/detail/gemm.hpp"
#include "grove/nn/detail/pass_memory.hpp"

namespace grove::nn {

namespace detail {
template <class T>
struct engine;
struct workspace_access;

// A chain as the engine sees it.
template <class T>
struct chain_net {
  const chain_entry<T>* entries;
  std::size_t count;
  std::size_t size() const { return count; }
  const Dense<T>& layer(std::size_t l) const { return *entries[l].layer; }
  Dense<T>& grad(std::size_t l) const { return *entries[l].grad; }
  void forward(std::size_t l, const T* z, T* a, Index n) const {
    entries[l].forward(entries[l].act, z, a, n);
  }
  void forward_train(std::size_t l, T* zd, T* a, Index n) const {
    entries[l].forward_train(entries[l].act, zd, a, n);
  }
  void prepare_grads() const {}
};
}  // namespace detail

/// Scratch memory for the batched passes (value_and_grad_into, and the loss / predict functions
/// that take one). It grows to the largest network and batch it has seen and is then reused: a
/// training loop that keeps one Workspace allocates nothing after its first step. Not shared
/// between threads that run passes at the same time.
template <class T>
class Workspace {
 public:
  Workspace() = default;

  /// Bytes held.
  std::size_t bytes() const {
    std::size_t n = 0;
    for (const auto& z : z_) n += static_cast<std::size_t>(z.size());
    for (const auto& a : a_) n += static_cast<std::size_t>(a.size());
    n += static_cast<std::size_t>(da_.size() + column_loss_.size() + bias_.size());
    return n * sizeof(T) + pass_.bytes();
  }

  /// The largest batch the workspace holds without growing.
  Index capacity() const { return capacity_; }

  /// Sets the listener that the training passes on this workspace tell of each gradient as it
  /// becomes final (grove/nn/grad_listener.hpp), or none (nullptr); returns the one it replaces.
  grad_listener<T>* set_grad_listener(grad_listener<T>* listener) {
    grad_listener<T>* const previous = pass_.listener;
    pass_.listener = listener;
    return previous;
  }

 private:
  friend struct detail::engine<T>;
  friend struct detail::workspace_access;

  // Grows to hold a network with these layer widths and `batch` columns; keeps larger buffers.
  void reserve(const std::vector<Index>& widths, Index batch, bool training) {
    const std::size_t layers = widths.size() - 1;
    if (batch > capacity_ || widths != widths_ || (training && a_.size() + 1 < layers)) {
      capacity_ = std::max(capacity_, batch);
      widths_ = widths;
      z_.resize(layers);
      for (std::size_t l = 0; l < layers; ++l) grow(z_[l], widths[l + 1] * capacity_);
      if (training) {
        a_.resize(layers - 1);
        for (std::size_t l = 0; l + 1 < layers; ++l) grow(a_[l], widths[l + 1] * capacity_);
      }
      Index widest_hidden = 0;
      for (std::size_t l = 1; l < layers; ++l) widest_hidden = std::max(widest_hidden, widths[l]);
      if (training) grow(da_, widest_hidden * capacity_);
      grow(column_loss_, capacity_);
      Index widest = 0;
      for (std::size_t l = 1; l < widths.size(); ++l) widest = std::max(widest, widths[l]);
      grow(bias_, widest);
    }
  }
  static void grow(Vector<T>& v, Index n) {
    if (v.size() < n) v.resize(n);
  }

  std::vector<Index> widths_;   // the layer widths the buffers were sized for
  std::vector<Index> current_;  // the widths of the current call
  Index capacity_ = 0;
  std::vector<Vector<T>> z_;     // per layer: Z, then f'(Z), then dZ
  std::vector<Vector<T>> a_;     // per hidden layer: f(Z) (training only; inference works in place)
  Vector<T> da_;                 // W^T dZ before the multiplication by f'
  Vector<T> column_loss_;        // each example's loss
  Vector<T> bias_;               // a bias gradient on its way into a fused update
  detail::pass_memory<T> pass_;  // the chain, the layers' memory, the GEMM scratch, the precision
};

namespace detail {

// How nn's passes (grove/nn/model.hpp, metrics.hpp, precision.hpp) reach a Workspace's memory.
struct workspace_access {
  template <class T>
  static pass_memory<T>& memory(Workspace<T>& ws) {
    return ws.pass_;
  }
};
template <class T>
pass_memory<T>& memory_of(Workspace<T>& ws) {
  return workspace_access::memory(ws);
}

// What the loss pass compares the logits with: integer labels, or a (classes x batch) matrix of
// targets (one-hot, or any probabilities).
template <class I>
struct label_targets {
  const I* data;
  Index stride;
  Index operator[](Index j) const { return static_cast<Index>(data[j * stride]); }
};
template <class T>
struct dense_targets {
  View<const T> y;
};

// One column's log-sum-exp, stable for huge logits: m + log(sum(exp(z - m))).
template <class T>
T log_sum_exp(const T* z, Index n) {
  Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> zc(z, n);
  const T m = zc.maxCoeff();
  if (!std::isfinite(m)) return m;  // +inf stays +inf; NaN propagates
  return m + std::log((zc - m).exp().sum());
}

// Checks targets against the logits' shape before any work (nothing throws inside the team).
template <class I>
void check_targets(const char* function, const label_targets<I>& t, Index classes, Index batch) {
  for (Index j = 0; j < batch; ++j) {
    const auto v = t.data[j * t.stride];
    if (v < 0 || static_cast<Index>(v) >= classes)
      fail(function, "label " + std::to_string(v) + " of example " + std::to_string(j) +
                         " is outside [0, " + std::to_string(classes) + ") (the network has " +
                         std::to_string(classes) + " outputs)");
  }
}
template <class T>
void check_targets(const char* function, const dense_targets<T>& t, Index classes, Index batch) {
  if (t.y.rows != classes || t.y.cols != batch)
    fail_shape(function, "the targets are " + std::to_string(t.y.rows) + "x" +
                             std::to_string(t.y.cols) + " but the outputs are " +
                             std::to_string(classes) + "x" + std::to_string(batch) +
                             " (outputs x batch)");
}

// A network as the engine sees it: a run of dense layers, each but the last followed by an
// activation. uniform_net is a range of Dense layers with one activation for all of them (the
// classic API); a model's chain (grove/nn/model.hpp) has one activation per layer. layer(l) is
// read; grad(l) is written: the gradients in train mode, and in sgd mode the layers themselves
// (grads then points at the parameters, which the caller passed as mutable).
template <class P, class Act, class G = std::remove_const_t<P>>
struct uniform_net {
  P* params;
  G* grads;
  const Act* act;
  std::size_t size() const { return std::ranges::size(*params); }
  decltype(auto) layer(std::size_t l) const { return (*params)[l]; }
  decltype(auto) grad(std::size_t l) const { return (*grads)[l]; }
  template <class T>
  void forward(std::size_t, const T* z, T* a, Index n) const {
    act->forward(z, a, n);
  }
  template <class T>
  void forward_train(std::size_t, T* zd, T* a, Index n) const {
    act->forward_train(zd, a, n);
  }
  void prepare_grads() const;
};

// The softmax cross-entropy of each column of logits, as the engine's loss pass computes it.
struct softmax_ce_columns {
  template <class Targets>
  void check(const char* function, const Targets& t, Index classes, Index batch) const {
    check_targets(function, t, classes, batch);
  }
  template <class Targets, class T>
  T column(const Targets& t, Index j, T* z, Index classes, bool grad, T scale) const;
};

template <class T>
struct engine {
  // predict: logits only. loss: the mean loss. train: the loss and the gradients into `grads`.
  // sgd: the loss, and params -= lr * gradients applied inside the backward pass (the gradients
  // are never stored: each weight update is one GEMM that accumulates -lr dZ A^T into W).
  enum class mode { predict, loss, train, sgd };

  // Shapes of a network applied to a batch with `rows` features, into `w` (which keeps its
  // capacity: no allocation once it has held as many layers); throws naming the problem.
  template <class P>
  static void widths_into(const char* function, const P& params, Index rows,
                          std::vector<Index>& w) {
    if constexpr (requires { params.layer(std::size_t{}); })
      widths_of_net(function, params, rows, w);
    else
      widths_of_net(function, uniform_net<const P, std::nullptr_t>{&params, nullptr, nullptr}, rows,
                    w);
  }
  template <class Net>
  static void widths_of_net(const char* function, const Net& net, Index rows,
                            std::vector<Index>& w) {
    const auto layers = static_cast<Index>(net.size());
    if (layers == 0) fail(function, "the network has no layers");
    w.clear();
    w.push_back(rows);
    for (Index l = 0; l < layers; ++l) {
      const auto& layer = net.layer(static_cast<std::size_t>(l));
      auto shape = [&] {
        return "layer " + std::to_string(l) + "'s w is " + std::to_string(layer.w.rows()) + "x" +
               std::to_string(layer.w.cols());
      };
      if (layer.w.rows() != layer.b.size())
        fail(function, shape() + " but its b has " + std::to_string(layer.b.size()) +
                           " elements (expected " + std::to_string(layer.w.rows()) + ")");
      if (layer.w.cols() != w.back()) {
        if (l == 0)
          fail(function, "the input has " + std::to_string(rows) + " features (rows) but " +
                             shape() + " (expects " + std::to_string(layer.w.cols()) + ")");
        fail(function, shape() + " but layer " + std::to_string(l - 1) + " has " +
                           std::to_string(w.back()) + " outputs");
      }
      if (layer.w.rows() == 0) fail(function, "layer " + std::to_string(l) + " has no outputs");
      w.push_back(layer.w.rows());
    }
  }
  // Checks the network for a batch with `rows` features, without allocating; returns its number
  // of outputs.
  template <class P>
  static Index outputs(const char* function, const P& params, Index rows, Workspace<T>& ws) {
    widths_into(function, params, rows, ws.current_);
    return ws.current_.back();
  }
  template <class P>
  static std::vector<Index> widths(const char* function, const P& params, Index rows) {
    std::vector<Index> w;
    widths_into(function, params, rows, w);
    return w;
  }

  template <class Targets>
  static void check(const char* function, const Targets& t, Index classes, Index batch) {
    check_targets(function, t, classes, batch);
  }
  static void check(const char*, const std::nullptr_t&, Index, Index) {}

  // Loss of column j given its logits z and their log-sum-exp; in training, z becomes dZ.
  template <class I>
  static T column(const label_targets<I>& t, Index j, T* z, Index classes, T lse, bool grad,
                  T scale) {
    const Index label = t[j];
    const T loss = lse - z[label];
    if (grad) {
      Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> zc(z, classes);
      zc = (zc - lse).exp() * scale;
      z[label] -= scale;
    }
    return loss;
  }
  static T column(const dense_targets<T>& t, Index j, T* z, Index classes, T lse, bool grad,
                  T scale) {
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> zc(z, classes);
    Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>> y(t.y.col(j), classes);
    const T loss = -(y * (zc - lse)).sum();
    if (grad) zc = ((zc - lse).exp() * y.sum() - y) * scale;
    return loss;
  }
  static T column(const std::nullptr_t&, Index, T*, Index, T, bool, T) { return T(0); }

  // The passes. `x`: in x batch. `logits`: where predict writes (out x batch). `grads`: where
  // train writes. Returns the mean loss (loss and train modes).
  template <mode M, class Net, class Targets, class Loss>
  static T run(const char* function, const Net& net, View<const T> x, const Targets& targets,
               const Loss& loss, View<T> logits, Workspace<T>& ws, T lr = T(0)) {
    widths_of_net(function, net, x.rows, ws.current_);
    const std::vector<Index>& width = ws.current_;
    const std::size_t L = width.size() - 1;
    const Index batch = x.cols;
    const Index classes = width.back();
    if constexpr (!std::is_same_v<Targets, std::nullptr_t>)
      loss.check(function, targets, classes, batch);
    if (batch == 0)
      return M == mode::predict ? T(0) : std::numeric_limits<T>::quiet_NaN();  // mean of nothing
    constexpr bool training = M == mode::train || M == mode::sgd;
    ws.reserve(width, batch, training);
    if constexpr (M == mode::train) net.prepare_grads();

    const int nt = max_threads();
    const Precision precision = ws.pass_.products;
    grad_listener<T>* const listener = M == mode::train ? ws.pass_.listener : nullptr;
    const bool round_output = ws.pass_.round_output;
    if (static_cast<int>(ws.pass_.scratch.size()) < nt)
      ws.pass_.scratch.resize(static_cast<std::size_t>(nt));
    // Every product's slices, so that the team never allocates.
    for (int tid = 0; tid < nt; ++tid) {
      auto& s = ws.pass_.scratch[static_cast<std::size_t>(tid)];
      for (std::size_t l = 0; l < L; ++l) {
        const Index out = width[l + 1], in = width[l];
        reserve_slice(s, out, batch, in, tid, nt, precision);
        if (training) {
          reserve_slice(s, out, in, batch, tid, nt, precision);
          if (l > 0) reserve_slice(s, in, batch, out, tid, nt, precision);
        }
      }
    }

    // Views of the workspace for this batch.
    auto z_of = [&](std::size_t l) -> View<T> {
      if (M == mode::predict && l + 1 == L) return logits;
      return {ws.z_[l].data(), width[l + 1], batch, width[l + 1]};
    };
    auto a_of = [&](std::size_t l) -> View<const T> {  // the input of layer l
      if (l == 0) return x;
      const T* p = training ? ws.a_[l - 1].data() : ws.z_[l - 1].data();
      return {p, width[l], batch, width[l]};
    };
    auto w_of = [&](std::size_t l) -> View<const T> {
      const auto& w = net.layer(l).w;
      return {w.data(), w.rows(), w.cols(), w.rows()};
    };

    const T scale = T(1) / static_cast<T>(batch);
    parallel(nt, [&](int tid, int team) {
      GemmScratch<T>& scratch = ws.pass_.scratch[static_cast<std::size_t>(tid)];
      // --- forward ---
      for (std::size_t l = 0; l < L; ++l) {
        const Index out = width[l + 1];
        const View<T> z = z_of(l);
        dense_forward_slice(w_of(l), net.layer(l).b.data(), a_of(l), z, tid, team, scratch,
                            precision, [&](Index j, Index begin, Index end) {
                              T* zj = z.col(j) + begin;
                              if (l + 1 == L) {
                                if (round_output) round_output_piece(zj, end - begin);
                              } else if constexpr (training) {
                                net.forward_train(l, zj, ws.a_[l].data() + j * out + begin,
                                                  end - begin);
                              } else {
                                net.forward(l, zj, zj, end - begin);
                              }
                            });
        if (l + 1 < L) barrier(team);
      }
      if constexpr (M != mode::predict) {
        // --- loss, and dZ of the last layer ---
        // When the last product gave each thread whole columns of logits (it is split along its
        // columns), each thread goes on with its own columns without waiting for the others.
        // (The same decision in every thread: a barrier is met by the whole team or by none.)
        const bool own_columns = !rows_split(classes, batch);
        if (!own_columns) barrier(team);
        const View<T> z = z_of(L - 1);
        const Range cols = own_columns ? slice_of(classes, batch, width[L - 1], tid, team).cols
                                       : share(batch, tid, team, 1);
        for (Index j = cols.begin; j < cols.end; ++j) {
          ws.column_loss_[j] = loss.column(targets, j, z.col(j), classes, training, scale);
        }
      }
      if constexpr (training) {
        barrier(team);
        // --- backward ---
        for (std::size_t l = L; l-- > 0;) {
          const Index out = width[l + 1], in = width[l];
          const View<const T> dz{ws.z_[l].data(), out, batch, out};
          if constexpr (M == mode::train) {  // dW = dZ A_prev^T
            dense_weight_grad_slice(dz, a_of(l), View<T>{net.grad(l).w.data(), out, in, out}, T(1),
                                    Into::overwrite, tid, team, scratch, precision);
          } else if (l + 1 < L) {  // W_next -= lr dZ_next A^T, now that W_next's dA is done
            const Index n_out = width[l + 2];
            const View<const T> dz_next{ws.z_[l + 1].data(), n_out, batch, n_out};
            auto& w = net.grad(l + 1).w;  // sgd mode: the layer itself
            dense_weight_grad_slice(dz_next, a_of(l + 1),
                                    View<T>{w.data(), w.rows(), w.cols(), w.rows()}, -lr, Into::add,
                                    tid, team, scratch, precision);
          }
          if constexpr (M == mode::train) {  // db = the sum of dZ's columns, in column order
            dense_bias_grad_share(dz, net.grad(l).b.data(), tid, team);
          } else {  // b -= lr db
            const Range r = dense_bias_grad_share(dz, ws.bias_.data(), tid, team);
            if (!r.empty())
              net.grad(l).b.segment(r.begin, r.size()) -= lr * ws.bias_.segment(r.begin, r.size());
          }
          if (listener) {  // layer l's gradients are final: the listener may start moving them
            barrier(team);
            if (tid == 0) {
              auto& g = net.grad(l);
              listener->ready(std::span<T>(g.w.data(), static_cast<std::size_t>(g.w.size())));
              listener->ready(std::span<T>(g.b.data(), static_cast<std::size_t>(g.b.size())));
            }
          }
          if (l > 0) {  // dZ_prev = (W^T dZ) * f'(Z_prev)
            const View<T> da{ws.da_.data(), in, batch, in};
            const View<T> d = z_of(l - 1);
            dense_input_grad_slice(w_of(l), dz, da, tid, team, scratch, precision,
                                   [&](Index j, Index begin, Index end) {
                                     Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> dj(
                                         d.col(j) + begin, end - begin);
                                     dj *= Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>(
                                         da.col(j) + begin, end - begin);
                                   });
          }
          if (listener && l > 0 && tid == 0) listener->progress();
          if constexpr (M == mode::sgd) {
            if (l == 0) {  // W_0 -= lr dZ_0 X^T (dZ_0 is complete, and nothing reads W_0 any more)
              auto& w = net.grad(0).w;
              dense_weight_grad_slice(dz, x, View<T>{w.data(), w.rows(), w.cols(), w.rows()}, -lr,
                                      Into::add, tid, team, scratch, precision);
            }
          }
          if (l > 0) barrier(team);
        }
      }
    });
    if constexpr (M == mode::predict)
      return T(0);
    else
      return column_loss_sum(ws, batch) / static_cast<T>(batch);
  }

  // The sum of the last run's per-example losses, in example order.
  static T column_loss_sum(const Workspace<T>& ws, Index batch) {
    T total = 0;
    for (Index j = 0; j < batch; ++j) total += ws.column_loss_[j];
    return total;
  }

  // The model's output rounded to bfloat16 (a policy's output dtype), a piece of a column that
  // this thread computed.
  static void round_output_piece(T* z, Index n) {
    if constexpr (std::is_same_v<T, float>) ::grove::detail::round_to_bf16(z, n);
  }

  // Gives grads the network's shapes (allocating only when they differ).
  template <class G, class P>
  static void prepare_grads(G& grads, const P& params) {
    if constexpr (requires { grads.resize(std::size_t{}); })
      grads.resize(std::ranges::size(params));
    if (std::ranges::size(grads) != std::ranges::size(params))
      fail("value_and_grad_into", "grads has " + std::to_string(std::ranges::size(grads)) +
                                      " layers, params " +
                                      std::to_string(std::ranges::size(params)));
    for (std::size_t l = 0; l < std::ranges::size(params); ++l) {
      grads[l].w.resize(params[l].w.rows(), params[l].w.cols());
      grads[l].b.resize(params[l].b.size());
    }
  }
};

template <class P, class Act, class G>
void uniform_net<P, Act, G>::prepare_grads() const {
  using T = std::remove_cvref_t<decltype((*params)[0].b(0))>;
  engine<T>::prepare_grads(*grads, *params);
}

template <class Targets, class T>
T softmax_ce_columns::column(const Targets& t, Index j, T* z, Index classes, bool grad,
                             T scale) const {
  return engine<T>::column(t, j, z, classes, log_sum_exp(z, classes), grad, scale);
}

template <class T, class DX>
constexpr void require_scalar() {
  static_assert(std::is_same_v<typename DX::Scalar, T>,
                "grove::nn: the batch's scalar type must be the parameters' (convert the data with "
                ".cast<T>())");
}

// Calls f(targets) with the targets Y stands for: integer labels (a vector, one per example) or
// a (classes x batch) matrix of floating-point targets. Checks the count against the batch.
template <class T, class DY, class F>
decltype(auto) with_targets(const char* function, const Eigen::DenseBase<DY>& y, Index batch,
                            F&& f) {
  using S = typename DY::Scalar;
  if constexpr (std::is_integral_v<S>) {
    if (y.rows() != 1 && y.cols() != 1)
      fail(function, "integer labels must be a vector, got a " + std::to_string(y.rows()) + "x" +
                         std::to_string(y.cols()) + " matrix");
    if (y.size() != batch)
      fail(function, "got " + std::to_string(y.size()) + " labels for a batch of " +
                         std::to_string(batch) + " examples");
    using Labels = Eigen::Ref<const Eigen::Matrix<S, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;
    if (y.cols() == 1) {
      const Labels labels(y.derived().col(0));
      return f(label_targets<S>{labels.data(), labels.innerStride()});
    }
    const Labels labels(y.derived().row(0).transpose());
    return f(label_targets<S>{labels.data(), labels.innerStride()});
  } else {
    static_assert(std::is_same_v<S, T>,
                  "grove::nn: targets are integer labels, or a (classes x batch) matrix of the "
                  "parameters' scalar type");
    const Eigen::Ref<const Matrix<T>, 0, Eigen::OuterStride<>> targets(y.derived());
    return f(
        dense_targets<T>{{targets.data(), targets.rows(), targets.cols(), targets.outerStride()}});
  }
}

}  // namespace detail
}  // namespace grove::nn
