// A user's program that needs only the tree core: no Eigen, no OpenMP, no MPI on the machine.
#include <grove/tree.hpp>
#include <iostream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#if __has_include(<Eigen/Core>) && defined(GROVE_CONSUMER_EXPECT_NO_EIGEN)
#error "the tree-only consumer must be built without Eigen's include path"
#endif

int main() {
  std::map<std::string, std::tuple<double, std::vector<int>>> tree{{"a", {1.5, {1, 2}}}};
  auto doubled = grove::tree_map([](const auto& x) { return x * 2; }, tree);
  std::cout << "consumer ok: " << grove::tree_structure(doubled) << '\n';
  return std::get<0>(doubled.at("a")) == 3.0 ? 0 : 1;
}
