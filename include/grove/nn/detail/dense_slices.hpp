// grove/nn/detail/dense_slices.hpp: the dense layer's work as one thread of a team does it: its
// slice of each product, and the elementwise work fused after it on that slice while it is in the
// thread's cache. This is the one implementation of dense + activation: the engine's passes over
// a chain (grove/nn/workspace.hpp) and a model's DenseLayer (grove/nn/layers/dense.hpp) both call
// it, each with its own epilogue and its own order between the products, so that both compute the
// same sums in the same order.
#pragma once

#include <Eigen/Core>
#include <algorithm>

#include "grove/nn/detail/gemm.hpp"

namespace grove::nn::detail {

// Makes room in `scratch` for this thread's slice of an m x n x k product (nothing when it has
// none). Called before the products of a pass, so that the products never allocate.
template <class T>
void reserve_slice(GemmScratch<T>& scratch, Index m, Index n, Index k, int tid, int team,
                   Precision precision) {
  const Slice s = slice_of(m, n, k, tid, team);
  if (!s.empty()) scratch.reserve(s.rows.size(), s.cols.size(), k, precision);
}

// y = w x + b for this thread's slice of y (out x batch; the bias is the product's initial
// value: one GEMM, no extra pass), then epilogue(j, begin, end) on each column piece
// [begin, end) of column j of that slice.
template <class T, class Epilogue>
void dense_forward_slice(View<const T> w, const T* b, View<const T> x, View<T> y, int tid, int team,
                         GemmScratch<T>& scratch, Precision precision, Epilogue&& epilogue) {
  const Slice s = slice_of(y.rows, y.cols, x.rows, tid, team);
  if (s.empty()) return;
  for (Index j = s.cols.begin; j < s.cols.end; ++j)
    std::copy(b + s.rows.begin, b + s.rows.end, y.col(j) + s.rows.begin);
  gemm_slice<false, false>(s, w, x, y, T(1), scratch, Into::add, precision);
  for (Index j = s.cols.begin; j < s.cols.end; ++j) epilogue(j, s.rows.begin, s.rows.end);
}

// This thread's slice of dw = alpha dy x^T (dw: out x in) added to dw or replacing it: the weight
// gradient (alpha 1, Into::overwrite), or in a fused SGD step the update of the weights
// themselves (alpha -lr, Into::add).
template <class T>
void dense_weight_grad_slice(View<const T> dy, View<const T> x, View<T> dw, T alpha, Into into,
                             int tid, int team, GemmScratch<T>& scratch, Precision precision) {
  const Slice s = slice_of(dw.rows, dw.cols, x.cols, tid, team);
  gemm_slice<false, true>(s, dy, x, dw, alpha, scratch, into, precision);
}

// This thread's share of db = the row sums of dy (out x batch), each row summed in column order;
// returns the rows it wrote.
template <class T>
Range dense_bias_grad_share(View<const T> dy, T* db, int tid, int team) {
  const Range r = share(dy.rows, tid, team);
  if (!r.empty()) {
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> sums(db + r.begin, r.size());
    sums.setZero();
    for (Index j = 0; j < dy.cols; ++j)
      sums += Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>>(dy.col(j) + r.begin, r.size());
  }
  return r;
}

// This thread's slice of dx = w^T dy (in x batch), then epilogue(j, begin, end) on each column
// piece of it (the derivative of the activation before the layer).
template <class T, class Epilogue>
void dense_input_grad_slice(View<const T> w, View<const T> dy, View<T> dx, int tid, int team,
                            GemmScratch<T>& scratch, Precision precision, Epilogue&& epilogue) {
  const Slice s = slice_of(dx.rows, dx.cols, dy.rows, tid, team);
  if (s.empty()) return;
  gemm_slice<true, false>(s, w, dy, dx, T(1), scratch, Into::overwrite, precision);
  for (Index j = s.cols.begin; j < s.cols.end; ++j) epilogue(j, s.rows.begin, s.rows.end);
}

}  // namespace grove::nn::detail
