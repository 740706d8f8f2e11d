// tree_all over arrays: an array has no single truth value.
#include <Eigen/Core>
#include <grove/grove.hpp>
#include <vector>

int main() {
  std::vector<Eigen::VectorXf> v{Eigen::VectorXf::Ones(3)};
  return grove::tree_all(v) ? 0 : 1;
}
