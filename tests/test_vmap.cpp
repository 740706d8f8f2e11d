// grove::vmap (grove/vmap.hpp): mapped axes, scalars and pytrees as arguments and results, and
// its errors. batched_predict against vmap(predict) is in test_nn.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <grove/vmap.hpp>
#include <tuple>
#include <utility>

using Catch::Matchers::Contains;

TEST_CASE("vmap: axes, scalars, pytrees and errors", "[vmap]") {
  const Eigen::MatrixXd A = Eigen::MatrixXd::Random(3, 4);
  const Eigen::VectorXd v = Eigen::VectorXd::LinSpaced(4, 1, 4);
  // Dot products of columns with the elements of v: scalars stack into a vector.
  auto f = [](const Eigen::VectorXd& col, double s) { return s * col.sum(); };
  const Eigen::VectorXd dots = grove::vmap(f)(A, v);
  for (int j = 0; j < 4; ++j) CHECK(dots(j) == Approx(v(j) * A.col(j).sum()));
  // Rows (axis 0), results stacked as rows (out_axes 0).
  auto twice = [](const Eigen::VectorXd& row) -> Eigen::VectorXd { return 2 * row; };
  const Eigen::MatrixXd rows = grove::vmap(twice, grove::in_axes(0), 0)(A);
  CHECK(rows == (2 * A).eval());
  // A pytree argument mapped leaf by leaf, and a pytree result.
  std::tuple<Eigen::MatrixXd, Eigen::VectorXd> tree{A, v};
  auto g = [](const std::tuple<Eigen::VectorXd, double>& t) {
    return std::pair<double, Eigen::VectorXd>{std::get<1>(t), std::get<0>(t) * std::get<1>(t)};
  };
  const auto [first, second] = grove::vmap(g)(tree);
  CHECK(first == v);
  CHECK(second.col(3) == (A.col(3) * 4).eval());
  // Errors.
  auto h = [](const Eigen::VectorXd& a, const Eigen::VectorXd& b) { return a.sum() + b.sum(); };
  CHECK_THROWS_WITH(
      grove::vmap(h)(A, Eigen::MatrixXd::Zero(3, 5)),
      Contains(
          "inconsistent sizes for the mapped axes: argument 0 has 4 examples, argument 1 has 5"));
  CHECK_THROWS_WITH(grove::vmap(twice, grove::in_axes(2))(A),
                    Contains("out of range for a 2-D argument"));
  CHECK_THROWS_WITH(grove::vmap(twice)(Eigen::MatrixXd::Zero(3, 0)), Contains("no examples"));
}
