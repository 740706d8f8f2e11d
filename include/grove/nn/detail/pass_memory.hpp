// grove/nn/detail/pass_memory.hpp: the memory that nn's passes keep in a Workspace between
// calls: the model's dense chain as the engine runs it, the layers' buffer, each thread's GEMM
// scratch and the places of the sequences being run, and the pass's precision. The Workspace owns
// it privately (Eigen's gemm_blocking_space is the model: scratch the product owns, which its user
// only holds); nn's passes reach it through detail::workspace_access, and the layers through
// their layer_context, so nothing here is part of what a user touches.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <vector>

#include "grove/nn/dense.hpp"
#include "grove/nn/detail/gemm.hpp"
#include "grove/nn/grad_listener.hpp"

namespace grove::nn::detail {

// One dense layer of a model's chain (see grove/nn/model.hpp) and the activation after it, as
// the engine runs them: the activation's kernels behind function pointers, called once per
// thread's slice of each column, so that the indirection costs nothing measurable.
template <class T>
struct chain_entry {
  const Dense<T>* layer = nullptr;
  // Where a pass writes the layer: its gradients (value_and_grad), or, in the fused SGD step, the
  // layer itself (the same object as `layer`, as the caller passed it: mutable).
  Dense<T>* grad = nullptr;
  const void* act = nullptr;
  void (*forward)(const void*, const T*, T*, Index) = nullptr;
  void (*forward_train)(const void*, T*, T*, Index) = nullptr;
};

template <class A, class T>
void act_forward(const void* act, const T* z, T* a, Index n) {
  static_cast<const A*>(act)->forward(z, a, n);
}
template <class A, class T>
void act_forward_train(const void* act, T* zd, T* a, Index n) {
  static_cast<const A*>(act)->forward_train(zd, a, n);
}

// Where child i of a sequence (grove/nn/layers.hpp) keeps its output and its own memory within
// the sequence's memory, for a batch of `batch` columns: [out_0][saved_0][out_1][saved_1]...
// [saved_last][g0][g1], with g0 and g1 the gradients between the children (the widest output
// each), used in turn.
struct child_place {
  Index in = 0, out = 0;
  Index output_at = -1;  // -1 for the last child, which writes the sequence's output
  Index saved_at = 0, saved = 0;
};

// What a Workspace keeps for the passes besides the engine's own buffers.
template <class T>
struct pass_memory {
  std::vector<chain_entry<T>> chain;  // the model's dense chain, when it is one
  Vector<T> buffer;                   // the layers' outputs, gradients and saved values
  Matrix<T> predictions;              // apply's output, for the losses' passes
  // Per thread: the places of the children of the sequences being run, innermost last.
  std::vector<std::vector<child_place>> places;
  std::vector<GemmScratch<T>> scratch;  // per thread: the products' packing buffers
  // The pass's precision policy, as the products and the output apply it. Set for one pass by
  // detail::policy_scope (grove/nn/precision.hpp); outside a pass they have the defaults.
  Precision products = Precision::full;
  bool round_output = false;
  // Told of each gradient as the engine's backward pass finishes it (Workspace::set_grad_listener).
  grad_listener<T>* listener = nullptr;

  // Makes room for n elements of buffer (keeping a larger one).
  void reserve_buffer(Index n) {
    if (buffer.size() < n) buffer.resize(n);
  }
  std::size_t bytes() const {
    std::size_t n = static_cast<std::size_t>(buffer.size() + predictions.size()) * sizeof(T);
    for (const auto& s : scratch) n += s.bytes();
    return n;
  }
};

}  // namespace grove::nn::detail
