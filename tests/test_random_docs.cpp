// The code snippet of docs/random.md (the README's grove::random tour), compiled, with its printed
// output checked. Keep the body of `tour` identical to the snippet.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include "grove/random.hpp"

namespace {

void tour(std::ostream& out) {
  // --- snippet: docs/random.md ---
  namespace gr = grove::random;

  const gr::Key key = gr::key(0);                  // jax.random.key(0)
  out << gr::uniform(key, 3).transpose() << '\n';  // jax.random.uniform(key, (3,))

  auto [w_key, b_key] = gr::split(key);         // w_key, b_key = jax.random.split(key)
  Eigen::MatrixXf w = gr::normal(w_key, 2, 3);  // jax.random.normal(w_key, (2, 3))
  Eigen::VectorXf b = gr::uniform(b_key, 2, -0.1f, 0.1f);
  out << w.rows() << 'x' << w.cols() << ' ' << b.size() << '\n';

  // Numbers from JAX before 0.5 (the legacy counter layout):
  out << gr::normal(gr::legacy_key(0), 1) << '\n';  // jax.random.normal(key, (1,))

  // Shuffle the columns (examples) of a data matrix with a key of its own:
  Eigen::MatrixXf X = Eigen::MatrixXf::Zero(4, 6);
  X.row(0) << 0, 1, 2, 3, 4, 5;
  const auto order = gr::permutation(gr::fold_in(key, 1), X.cols());
  Eigen::MatrixXf shuffled = X(Eigen::all, order);
  out << shuffled.row(0) << '\n';
  // --- end of snippet ---
}

}  // namespace

TEST_CASE("docs: the grove::random tour compiles and prints JAX's numbers", "[random][docs]") {
  std::ostringstream out;
  tour(out);
  std::istringstream lines(out.str());
  std::string uniform, shapes, legacy_normal, shuffled;
  std::getline(lines, uniform);
  std::getline(lines, shapes);
  std::getline(lines, legacy_normal);
  std::getline(lines, shuffled);
  CHECK(uniform == "0.947667  0.97858 0.332291");  // JAX: [0.947667, 0.9785799, 0.33229148]
  CHECK(shapes == "2x3 2");
  CHECK(legacy_normal == "-0.205842");  // JAX < 0.5: [-0.20584226]
  // The shuffled row holds each of 0 .. 5 once.
  std::istringstream values(shuffled);
  int seen = 0;
  for (int v; values >> v;) seen |= 1 << v;
  CHECK(seen == 0b111111);
}
