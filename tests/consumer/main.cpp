// A user's program: includes grove and its checkpoints (linking grove::checkpoint, which brings
// nlohmann-json), maps a tree of Eigen arrays, prints its structure.
#include <grove/grove.hpp>
#include <grove/io/checkpoint.hpp>
#include <iostream>
#include <tuple>

int main() {
  std::tuple<Eigen::VectorXf, std::tuple<float, float>> tree{Eigen::VectorXf::Ones(3), {1.f, 2.f}};
  auto doubled = grove::tree_map([](const auto& x) { return x * 2; }, tree);
  std::cout << "consumer ok: " << grove::tree_structure(doubled) << '\n';
  return std::get<0>(doubled).sum() == 6.0f ? 0 : 1;
}
