// A number has no dimension to scatter along: psum_scatter refuses it with grove's message.
#include <Eigen/Core>
#include <grove/parallel.hpp>
#include <tuple>

int main() {
  grove::parallel::SingleDevice one;
  const std::tuple<Eigen::VectorXf, float> t{Eigen::VectorXf::Zero(1), 1.0f};
  const auto mine = grove::parallel::psum_scatter(t, one);
  return static_cast<int>(std::get<0>(mine));
}
