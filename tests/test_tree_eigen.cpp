// Eigen arrays as leaves: expressions evaluated, shapes, sizes, ravel.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <grove/tree/eigen.hpp>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "tree_fixtures.hpp"

namespace mlp {
template <class T>
struct Dense {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> w;
  Eigen::Matrix<T, Eigen::Dynamic, 1> b;
};
GROVE_NODE(Dense, w, b);
}  // namespace mlp

using Catch::Matchers::Contains;

TEST_CASE("Eigen objects are leaves, expressions are evaluated", "[tree][eigen]") {
  std::tuple<Eigen::MatrixXf, Eigen::ArrayXd> tree{Eigen::MatrixXf::Constant(2, 3, 1.5f),
                                                   Eigen::ArrayXd::LinSpaced(4, 0, 3)};
  CHECK(grove::tree_structure(tree).str() == "PyTreeDef((*, *))");
  // x * 2 is an Eigen expression; the tree holds the evaluated arrays, of the input's types.
  auto doubled = grove::tree_map([](const auto& x) { return x * 2; }, tree);
  static_assert(std::is_same_v<decltype(doubled), decltype(tree)>);
  CHECK(std::get<0>(doubled)(1, 2) == 3.0f);
  CHECK(std::get<1>(doubled)(3) == 6.0);
  // A sum of two trees' leaves, also an expression.
  auto sum = grove::tree_map([](const auto& a, const auto& b) { return a + b; }, tree, doubled);
  CHECK(std::get<0>(sum)(0, 0) == 4.5f);
}

TEST_CASE("Maps over outside memory are leaves; an identity map keeps them", "[tree][eigen]") {
  float data[4] = {1, 2, 3, 4};
  std::vector<Eigen::Map<Eigen::VectorXf>> views{Eigen::Map<Eigen::VectorXf>(data, 4)};
  auto scaled = grove::tree_map([](const auto& m) { return m * 10; }, views);
  static_assert(std::is_same_v<decltype(scaled), std::vector<Eigen::VectorXf>>);
  CHECK(scaled[0](3) == 40.0f);
  grove::tree_for_each([](auto& m) { m *= 2; }, views);
  CHECK(data[2] == 6.0f);
}

TEST_CASE("shapes of MLP params, as in the JAX walk-through", "[tree][eigen]") {
  std::vector<std::size_t> sizes{784, 512, 512, 10};
  std::vector<mlp::Dense<float>> params;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i)
    params.push_back({Eigen::MatrixXf::Zero(static_cast<Eigen::Index>(sizes[i + 1]),
                                            static_cast<Eigen::Index>(sizes[i])),
                      Eigen::VectorXf::Zero(static_cast<Eigen::Index>(sizes[i + 1]))});
  auto shapes = grove::tree_map([](const auto& p) { return grove::shape(p); }, params);
  CHECK(grove::to_string(shapes) ==
        "[Dense(w=(512, 784), b=(512,)), Dense(w=(512, 512), b=(512,)), Dense(w=(10, 512), "
        "b=(10,))]");
  CHECK(grove::to_string(params) ==
        "[Dense(w=float32[512,784], b=float32[512]), Dense(w=float32[512,512], b=float32[512]), "
        "Dense(w=float32[10,512], b=float32[10])]");
  CHECK(grove::tree_structure(params).str() ==
        "PyTreeDef([CustomNode(Dense[()], [*, *]), CustomNode(Dense[()], [*, *]), "
        "CustomNode(Dense[()], [*, *])])");
  CHECK(grove::tree_size(params) == 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10);
  CHECK(grove::shape(3.0) == std::array<Eigen::Index, 0>{});
  CHECK(grove::size(3.0f) == 1);
  // float -> double rebuilds Dense<double>.
  auto as_double = grove::tree_map([](const auto& p) { return p.template cast<double>(); }, params);
  static_assert(std::is_same_v<decltype(as_double), std::vector<mlp::Dense<double>>>);
}

namespace size_check {
template <class T>
concept has_grove_size = requires(const T& t) {
  grove::size(t);
};
// A user's unqualified call with both namespaces' names in scope: std::size, not an ambiguity.
using namespace grove;
using namespace std;
inline std::size_t unqualified(const vector<int>& v) {
  return size(v);
}
}  // namespace size_check

TEST_CASE("grove::size takes leaves only and leaves std::size alone", "[tree][eigen]") {
  STATIC_REQUIRE(size_check::has_grove_size<Eigen::MatrixXf>);
  STATIC_REQUIRE(size_check::has_grove_size<double>);
  STATIC_REQUIRE_FALSE(size_check::has_grove_size<std::vector<int>>);
  STATIC_REQUIRE_FALSE(size_check::has_grove_size<std::string>);
  CHECK(size_check::unqualified(std::vector<int>(3)) == 3);
  CHECK(grove::size(Eigen::MatrixXf(2, 3)) == 6);
}

TEST_CASE("ravel and unravel round-trip in leaf order", "[tree][eigen][ravel]") {
  std::map<std::string, std::tuple<Eigen::MatrixXd, double, Eigen::Vector3d>> tree;
  Eigen::MatrixXd m(2, 2);
  m << 1, 2, 3, 4;
  tree["a"] = {m, 5.0, Eigen::Vector3d(6, 7, 8)};
  tree["b"] = {Eigen::MatrixXd::Constant(1, 2, 9.0), 10.0, Eigen::Vector3d(11, 12, 13)};
  auto [flat, unravel] = grove::ravel(tree);
  REQUIRE(flat.size() == 4 + 1 + 3 + 2 + 1 + 3);
  // Leaf order, each matrix in Eigen's column-major storage order.
  Eigen::VectorXd expected(14);
  expected << 1, 3, 2, 4, 5, 6, 7, 8, 9, 9, 10, 11, 12, 13;
  CHECK(flat == expected);
  auto back = unravel(flat * 2);
  CHECK(std::get<0>(back.at("a"))(0, 1) == 4.0);
  CHECK(std::get<1>(back.at("b")) == 20.0);
  CHECK(std::get<2>(back.at("b"))(2) == 26.0);
  CHECK_THROWS_WITH(unravel(Eigen::VectorXd(3)),
                    Contains("expects a vector of 14 elements, got 3"));

  // The allocation-free forms.
  std::vector<double> buffer(static_cast<std::size_t>(grove::tree_size(tree)));
  grove::ravel_into(tree, buffer.data());
  CHECK(buffer[13] == 13.0);
  buffer[0] = -1;
  grove::unravel_into(buffer.data(), tree);
  CHECK(std::get<0>(tree.at("a"))(0, 0) == -1.0);
}
