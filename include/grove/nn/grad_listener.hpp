// grove/nn/grad_listener.hpp: hearing of a training pass's gradients as each becomes final.
//
// A backward pass computes the layers' gradients from the last layer to the first. A listener set
// on the pass's Workspace is told of each gradient leaf as soon as it is final, while the pass
// goes on with the layers before it: grove::parallel::train_step starts summing them over the
// devices that way, so that the reduction overlaps the backward pass (PyTorch DDP's buckets).
//
//   struct Sizes final : nn::grad_listener<float> {
//     std::vector<std::size_t> seen;
//     void ready(std::span<float> g) noexcept override { seen.push_back(g.size()); }
//   };
//   Sizes sizes;
//   ws.set_grad_listener(&sizes);          // until set_grad_listener(nullptr)
//   nn::value_and_grad_into(params, X, Y, grads, ws);
//   // sizes.seen: the last layer's w and b, then the layer's before it, ... the first layer's
//
// Which passes tell it: value_and_grad_into on the fused engine (the walk-through's networks, and
// models that are a chain of dense layers and activations; see grove/nn/model.hpp). A model that
// runs layer by layer tells it nothing: its gradients are all final when the call returns.
#pragma once

#include <span>

namespace grove::nn {

/// Told, during value_and_grad_into's backward pass, of each gradient leaf (a dense layer's w,
/// then its b) once it is final, from the last layer to the first, and asked between the pass's
/// products to let what it started go on. Both are called on the thread that called
/// value_and_grad_into, inside the pass's thread team: they must not throw (keep an error and
/// raise it after the call), and the team waits for them, so they should be short. The leaf's
/// memory is the caller's `grads`: the listener may read it and change it in place (the pass does
/// not read it again).
template <class T>
class grad_listener {
 public:
  virtual void ready(std::span<T> grads) noexcept = 0;
  virtual void progress() noexcept {}

 protected:
  grad_listener() = default;
  grad_listener(const grad_listener&) = default;
  grad_listener& operator=(const grad_listener&) = default;
  ~grad_listener() = default;
};

}  // namespace grove::nn
