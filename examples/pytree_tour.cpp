// A tour of grove's pytrees for a JAX user: the jax.tree_util walk-through, in C++.
#include <Eigen/Core>
#include <grove/grove.hpp>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

namespace tour {

// A user struct becomes a pytree node with one line.
struct Point {
  double x;
  double y;
};
GROVE_NODE(Point, x, y);

// Class templates too: MLP parameters, as in the JAX walk-through.
template <class T>
struct Dense {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> w;  // (out, in)
  Eigen::Matrix<T, Eigen::Dynamic, 1> b;               // (out,)
};
GROVE_NODE(Dense, w, b);

// A struct of containers and arrays, registered the same way.
struct Experiment {
  std::vector<std::optional<int>> counts;  // an empty optional is JAX's None
  Eigen::ArrayXXf weights;
  std::tuple<int, std::tuple<double, std::string>> nested;
  Point origin;
  std::map<std::string, float> rates;  // children in key order, like a dict
};
GROVE_NODE(Experiment, counts, weights, nested, origin, rates);

}  // namespace tour

int main() {
  using tour::Dense;

  std::cout << "== A heterogeneous tree and its leaves, in JAX's order\n";
  tour::Experiment experiment{{1, std::nullopt, 3},
                              Eigen::ArrayXXf::Constant(2, 2, 0.5f),
                              {4, {5.5, "six"}},
                              {7.0, 8.0},
                              {{"lr", 0.1f}, {"decay", 0.9f}}};
  std::cout << "tree:   " << grove::to_string(experiment) << '\n';
  std::cout << "leaves: ";
  for (const auto& leaf : grove::tree_leaves(experiment)) {
    // A tree with several leaf types gives a variant of pointers per leaf.
    std::visit([](const auto* p) { std::cout << grove::to_string(*p) << "  "; }, leaf);
  }
  std::cout << "\nstructure: " << grove::tree_structure(experiment) << '\n';

  std::cout << "\n== MLP parameters for layer sizes [784, 512, 512, 10]\n";
  const std::vector<Eigen::Index> sizes{784, 512, 512, 10};
  std::vector<Dense<float>> params;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i)
    params.push_back({Eigen::MatrixXf::Constant(sizes[i + 1], sizes[i], 0.01f),
                      Eigen::VectorXf::Zero(sizes[i + 1])});
  // tree_map(lambda p: p.shape, params)
  auto shapes = grove::tree_map([](const auto& p) { return grove::shape(p); }, params);
  std::cout << "shapes:    " << grove::to_string(shapes) << '\n';
  std::cout << "structure: " << grove::tree_structure(params) << '\n';
  std::cout << "leaves:    " << grove::tree_leaves(params).size()
            << ", elements: " << grove::tree_size(params) << '\n';

  std::cout << "\n== Every array scaled by 10: tree_map(lambda p: 10 * p, params)\n";
  auto scaled = grove::tree_map([](const auto& p) { return 10 * p; }, params);
  std::cout << "w[0](0, 0): " << params[0].w(0, 0) << " -> " << scaled[0].w(0, 0) << '\n';

  std::cout << "\n== Key paths\n";
  for (const auto& [path, leaf] : grove::tree_leaves_with_path(params)) {
    // Dense<float> has two leaf types (a matrix and a vector): each leaf is a variant of pointers.
    std::visit(
        [&](const auto* p) {
          std::cout << grove::keystr(path) << "  (" << grove::keystr(path, "/") << ")  "
                    << grove::to_string(*p) << '\n';
        },
        leaf);
  }

  std::cout << "\n== Flatten, change the leaves, unflatten\n";
  auto [leaves, treedef] = grove::tree_flatten(params);
  std::cout << "treedef: " << treedef << "\n  " << treedef.num_leaves() << " leaves, "
            << treedef.num_nodes() << " nodes\n";
  std::vector<std::variant<Eigen::MatrixXf, Eigen::VectorXf>> halved;
  for (const auto& leaf : leaves)
    std::visit(
        [&](const auto* p) {
          halved.emplace_back(std::in_place_type<std::decay_t<decltype(*p)>>, *p / 2);
        },
        leaf);
  // The TreeDef remembers the C++ type: unflatten gives back a std::vector<Dense<float>>.
  std::vector<Dense<float>> rebuilt = grove::tree_unflatten(treedef, halved);
  std::cout << "rebuilt w[0](0, 0): " << rebuilt[0].w(0, 0) << '\n';

  std::cout << "\n== Structure errors say where\n";
  std::vector<Dense<float>> fewer(params.begin(), params.begin() + 2);
  try {
    grove::tree_map([](const auto& a, const auto& b) { return a + b; }, params, fewer);
  } catch (const grove::tree_error& e) {
    std::cout << e.what() << '\n';
  }
  return 0;
}
