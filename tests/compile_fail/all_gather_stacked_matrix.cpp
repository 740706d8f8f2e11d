// Stacking an Eigen matrix leaf would need three dimensions: all_gather refuses it with grove's
// message (tiled, or a tensor leaf, is the way).
#include <Eigen/Core>
#include <grove/parallel.hpp>

int main() {
  grove::parallel::SingleDevice one;
  const Eigen::MatrixXf m = Eigen::MatrixXf::Zero(2, 3);
  const auto stacked = grove::parallel::all_gather(m, one);
  return static_cast<int>(stacked.size());
}
