// N-D Eigen tensors as leaves: shape, size, tree_size, ravel, tree_map, tree_leaves and printing
// for Eigen::Tensor (either storage order), Eigen::TensorFixedSize and Eigen::TensorMap.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <grove/tree/tensor.hpp>
#include <tuple>
#include <type_traits>
#include <vector>

namespace tensor_test {

using T3 = Eigen::Tensor<float, 3>;                    // column-major (Eigen's default)
using R4 = Eigen::Tensor<double, 4, Eigen::RowMajor>;  // row-major
using F234 = Eigen::TensorFixedSize<float, Eigen::Sizes<2, 3, 4>>;

struct Holder {
  T3 t;
  F234 fixed;
  Eigen::MatrixXf m;
  float s = 0;
};
GROVE_NODE(Holder, t, fixed, m, s);

// A value that differs at every index, from the index alone: the oracle for element order.
float value3(Eigen::Index i, Eigen::Index j, Eigen::Index k) {
  return static_cast<float>(100 * i + 10 * j + k) + 0.5f;
}

Holder holder() {
  Holder h;
  h.t.resize(2, 3, 5);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j)
      for (Eigen::Index k = 0; k < 5; ++k) h.t(i, j, k) = value3(i, j, k);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j)
      for (Eigen::Index k = 0; k < 4; ++k) h.fixed(i, j, k) = -value3(i, j, k);
  h.m.resize(2, 2);
  h.m << 1, 2, 3, 4;
  h.s = 9.0f;
  return h;
}

}  // namespace tensor_test

using namespace tensor_test;

TEST_CASE("tensors are leaves, not nodes", "[tree][tensor]") {
  static_assert(grove::detail::eigen_tensor<T3> && grove::detail::eigen_tensor<R4> &&
                grove::detail::eigen_tensor<F234>);
  static_assert(!grove::detail::eigen_tensor<Eigen::MatrixXf> &&
                !grove::detail::eigen_tensor<float>);
  static_assert(!grove::detail::is_node<T3> && !grove::detail::is_node<F234>);
  const Holder h = holder();
  CHECK(grove::tree_structure(h).num_leaves() == 4);
  CHECK(grove::tree_structure(std::tuple<T3, R4, float>{}).str() == "PyTreeDef((*, *, *))");
  const auto leaves = grove::tree_leaves(h);
  REQUIRE(leaves.size() == 4);
  // tree_leaves points at the tree's own leaves.
  CHECK(std::get<const T3*>(leaves[0]) == &h.t);
  CHECK(std::get<const F234*>(leaves[1]) == &h.fixed);
}

TEST_CASE("shape and size of tensors: dimension 0 first, whatever the storage order",
          "[tree][tensor]") {
  T3 a(2, 3, 5);
  R4 b(4, 1, 2, 3);
  F234 c;
  Eigen::Tensor<float, 0> z;
  CHECK(grove::shape(a) == std::array<Eigen::Index, 3>{2, 3, 5});
  CHECK(grove::shape(b) == std::array<Eigen::Index, 4>{4, 1, 2, 3});
  CHECK(grove::shape(c) == std::array<Eigen::Index, 3>{2, 3, 4});
  static_assert(std::is_same_v<decltype(grove::shape(z)), std::array<Eigen::Index, 0>>);
  CHECK(grove::size(a) == 30);
  CHECK(grove::size(b) == 24);
  CHECK(grove::size(c) == 24);
  CHECK(grove::size(z) == 1);
  static_assert(std::is_same_v<grove::scalar_t<R4>, double>);
  static_assert(std::is_same_v<grove::scalar_t<F234>, float>);
  // An empty dimension: no elements.
  CHECK(grove::size(T3(2, 0, 3)) == 0);

  CHECK(grove::tree_size(holder()) == 30 + 24 + 4 + 1);
  auto shapes = grove::tree_map([](const auto& x) { return grove::shape(x); }, holder());
  CHECK(grove::to_string(shapes) == "Holder(t=(2, 3, 5), fixed=(2, 3, 4), m=(2, 2), s=())");
  Eigen::Tensor<double, 0> z0;
  z0.setZero();
  CHECK(grove::to_string(std::tuple<T3, R4, Eigen::Tensor<double, 0>>{a, b, z0}) ==
        "(float32[2,3,5], float64[4,1,2,3], float64[])");
}

TEST_CASE("ravel writes tensors in their storage order and unravels them back", "[tree][tensor]") {
  std::tuple<T3, Eigen::Tensor<float, 3, Eigen::RowMajor>, float> tree;
  auto& [col, row, s] = tree;
  col.resize(2, 3, 5);
  row.resize(2, 3, 5);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j)
      for (Eigen::Index k = 0; k < 5; ++k) {
        col(i, j, k) = value3(i, j, k);
        row(i, j, k) = -value3(i, j, k);
      }
  s = 7.0f;
  auto [flat, unravel] = grove::ravel(tree);
  REQUIRE(flat.size() == 61);
  // Column-major: (i, j, k) at i + 2 (j + 3 k); row-major: at (i 3 + j) 5 + k.
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j)
      for (Eigen::Index k = 0; k < 5; ++k) {
        CHECK(flat(i + 2 * (j + 3 * k)) == value3(i, j, k));
        CHECK(flat(30 + (i * 3 + j) * 5 + k) == -value3(i, j, k));
      }
  CHECK(flat(60) == 7.0f);

  Eigen::VectorXf changed = flat * 2;
  const auto back = unravel(changed);
  CHECK(std::get<0>(back).dimensions() == col.dimensions());
  CHECK(std::get<0>(back)(1, 2, 4) == 2 * value3(1, 2, 4));
  CHECK(std::get<1>(back)(1, 0, 3) == -2 * value3(1, 0, 3));
  CHECK(std::get<2>(back) == 14.0f);

  // ravel_into / unravel_into over a struct with a fixed-size tensor, a matrix and a scalar.
  Holder h = holder();
  std::vector<float> buffer(static_cast<std::size_t>(grove::tree_size(h)));
  grove::ravel_into(h, buffer.data());
  Holder zero = holder();
  zero.t.setZero();
  zero.fixed.setZero();
  zero.m.setZero();
  zero.s = 0;
  grove::unravel_into(buffer.data(), zero);
  for (Eigen::Index i = 0; i < 2; ++i)
    for (Eigen::Index j = 0; j < 3; ++j) {
      for (Eigen::Index k = 0; k < 5; ++k) CHECK(zero.t(i, j, k) == value3(i, j, k));
      for (Eigen::Index k = 0; k < 4; ++k) CHECK(zero.fixed(i, j, k) == -value3(i, j, k));
    }
  CHECK(zero.m == h.m);
  CHECK(zero.s == 9.0f);
}

TEST_CASE("tree_map over tensors: expressions are evaluated into the leaf's type",
          "[tree][tensor]") {
  const Holder h = holder();
  // x * 2.0f is a lazy Eigen expression for every leaf kind here; the result holds values.
  auto doubled = grove::tree_map([](const auto& x) { return x * 2.0f; }, h);
  static_assert(std::is_same_v<decltype(doubled), Holder>);
  CHECK(doubled.t(1, 2, 3) == 2 * value3(1, 2, 3));
  CHECK(doubled.fixed(0, 1, 2) == -2 * value3(0, 1, 2));
  CHECK(doubled.m(1, 0) == 6.0f);
  CHECK(doubled.s == 18.0f);

  // Two trees at once; the sum of two tensors is an expression too.
  auto sum = grove::tree_map([](const auto& a, const auto& b) { return a + b; },
                             std::tuple<T3>{h.t}, std::tuple<T3>{doubled.t});
  static_assert(std::is_same_v<decltype(sum), std::tuple<T3>>);
  CHECK(std::get<0>(sum)(1, 1, 1) == 3 * value3(1, 1, 1));

  // A function that returns another type: a tensor of another scalar.
  auto as_double = grove::tree_map(
      [](const T3& x) { return Eigen::Tensor<double, 3>(x.cast<double>()); }, std::vector<T3>{h.t});
  static_assert(std::is_same_v<decltype(as_double), std::vector<Eigen::Tensor<double, 3>>>);
  CHECK(as_double[0](0, 2, 4) == static_cast<double>(value3(0, 2, 4)));

  // tree_for_each writes through to the tree's tensors.
  Holder g = holder();
  grove::tree_for_each(
      [](auto& x) {
        if constexpr (grove::detail::eigen_tensor<std::remove_cvref_t<decltype(x)>>) x.setZero();
      },
      g);
  CHECK(g.t(1, 2, 4) == 0.0f);
  CHECK(g.fixed(1, 2, 3) == 0.0f);
  CHECK(g.m(1, 1) == 4.0f);
}

TEST_CASE("tensor maps are leaves over outside memory", "[tree][tensor]") {
  float data[6] = {1, 2, 3, 4, 5, 6};
  Eigen::TensorMap<Eigen::Tensor<float, 2>> view(data, 2, 3);
  std::tuple<Eigen::TensorMap<Eigen::Tensor<float, 2>>> tree{view};
  CHECK(grove::shape(std::get<0>(tree)) == std::array<Eigen::Index, 2>{2, 3});
  CHECK(grove::tree_size(tree) == 6);
  CHECK(grove::to_string(tree) == "(float32[2,3],)");
  Eigen::VectorXf flat(6);
  grove::ravel_into(tree, flat.data());
  CHECK(flat(5) == 6.0f);
}
