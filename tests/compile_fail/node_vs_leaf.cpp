// A registered struct in the first tree where the second has an unregistered one (a leaf).
#include <grove/tree.hpp>

namespace app {
struct Point {
  double x, y;
};
GROVE_NODE(Point, x, y);
struct RawPoint {
  double x, y;
};
}  // namespace app

int main() {
  auto out = grove::tree_map([](double a, double b) { return a + b; }, app::Point{1, 2},
                             app::RawPoint{3, 4});
  return static_cast<int>(out.x);
}
