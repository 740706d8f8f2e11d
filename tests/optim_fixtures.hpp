// Helpers shared by grove::optim's tests: a pytree with every kind of leaf (a struct node, a
// dict, matrices, arrays, a scalar), gradients that change from step to step, and the tree's
// elements as one vector, for the hand-written oracles.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <grove/optim.hpp>
#include <grove/tree.hpp>
#include <grove/tree/eigen.hpp>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace optim_test {

struct Layer {
  Eigen::MatrixXd w;
  Eigen::VectorXd b;
  double s = 0;
};
GROVE_NODE(Layer, w, b, s);

// (a struct with a matrix, a vector and a scalar; a dict of arrays)
using Tree = std::tuple<Layer, std::map<std::string, Eigen::ArrayXd>>;

inline constexpr Eigen::Index tree_elements = 3 * 2 + 3 + 1 + 4 + 2;

// Element i of a tree at step t: values of both signs and several magnitudes.
inline double value(int i, int t, double scale) {
  return scale * std::sin(1.3 * i + 0.7 * t + 0.2) * (1.0 + 0.25 * ((i + t) % 3));
}

inline Tree make_tree(int t, double scale = 1.0) {
  Tree tree{Layer{Eigen::MatrixXd(3, 2), Eigen::VectorXd(3), 0.0},
            {{"a", Eigen::ArrayXd(4)}, {"b", Eigen::ArrayXd(2)}}};
  Eigen::VectorXd flat(tree_elements);
  for (int i = 0; i < tree_elements; ++i) flat[i] = value(i, t, scale);
  grove::unravel_into(flat.data(), tree);
  return tree;
}

inline Tree params0() {
  return make_tree(100, 0.8);
}
inline Tree grads_at(int t) {
  return make_tree(t, 1.5);
}

// The tree's elements in leaf order.
inline Eigen::VectorXd flat(const Tree& t) {
  return grove::ravel(t).first;
}
inline Tree from_flat(const Eigen::VectorXd& v) {
  Tree t = params0();
  grove::unravel_into(v.data(), t);
  return t;
}

// Relative-or-absolute agreement to 1e-12 of every element.
inline bool close(const Eigen::VectorXd& a, const Eigen::VectorXd& b, double tol = 1e-12) {
  if (a.size() != b.size()) return false;
  for (Eigen::Index i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= tol * std::max(1.0, std::abs(b[i])))) return false;
  return true;
}

// Whether two trees of one type hold the same values, bit for bit, leaf by leaf.
template <class T>
bool same_leaves(const T& a, const T& b) {
  bool same = true;
  grove::tree_for_each(
      [&](const auto& x, const auto& y) {
        if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(x)>>)
          same = same && x == y;
        else
          same = same && x.size() == y.size() && (x.array() == y.array()).all();
      },
      a, b);
  return same;
}

}  // namespace optim_test
