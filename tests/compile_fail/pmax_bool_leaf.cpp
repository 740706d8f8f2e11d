// pmax compares numbers: a bool leaf is refused with grove's message.
#include <Eigen/Core>
#include <grove/parallel.hpp>
#include <vector>

int main() {
  grove::parallel::SingleDevice one;
  std::vector<Eigen::Matrix<bool, Eigen::Dynamic, 1>> masks{
      Eigen::Matrix<bool, Eigen::Dynamic, 1>::Constant(3, true)};
  grove::parallel::pmax_inplace(masks, one);
  return 0;
}
