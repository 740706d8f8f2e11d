// The README's quickstart, compiled as an example (tests/readme_snippets.cmake checks that the
// README shows this very code).
#include <Eigen/Core>
#include <grove/grove.hpp>
#include <iostream>
#include <vector>

namespace app {
template <class T>
struct Dense {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> w;
  Eigen::Matrix<T, Eigen::Dynamic, 1> b;
};
GROVE_NODE(Dense, w, b);  // now a pytree node with key paths .w and .b
}  // namespace app

int main() {
  std::vector<app::Dense<float>> params{
      {Eigen::MatrixXf::Ones(512, 784), Eigen::VectorXf::Zero(512)},
      {Eigen::MatrixXf::Ones(10, 512), Eigen::VectorXf::Zero(10)}};

  auto shapes = grove::tree_map([](const auto& p) { return grove::shape(p); }, params);
  std::cout << grove::to_string(shapes) << '\n';
  // [Dense(w=(512, 784), b=(512,)), Dense(w=(10, 512), b=(10,))]

  auto scaled =
      grove::tree_map([](const auto& p) { return 10 * p; }, params);  // same type as params
  grove::tree_for_each([](auto& p, const auto& s) { p -= 0.01f * s; }, params, scaled);  // in place

  auto [leaves, treedef] = grove::tree_flatten(params);
  std::cout << treedef << '\n';
  // PyTreeDef([CustomNode(Dense[()], [*, *]), CustomNode(Dense[()], [*, *])])
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(params))
    std::cout << grove::keystr(path) << ' ';  // [0].w [0].b [1].w [1].b
  std::cout << '\n' << leaves.size() << " leaves, " << grove::tree_size(params) << " numbers\n";
}
