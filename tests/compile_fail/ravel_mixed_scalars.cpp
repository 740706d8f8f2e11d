// ravel needs one scalar type.
#include <Eigen/Core>
#include <grove/grove.hpp>
#include <tuple>

int main() {
  std::tuple<Eigen::VectorXf, Eigen::VectorXd> t{Eigen::VectorXf::Ones(2),
                                                 Eigen::VectorXd::Ones(2)};
  auto [flat, unravel] = grove::ravel(t);
  return static_cast<int>(flat.size());
}
