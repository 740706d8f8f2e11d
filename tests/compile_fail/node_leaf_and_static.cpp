// A field that is both a leaf and a static field does not compile: it would be reported as both.
#include <grove/tree.hpp>

struct T {
  double x;
  int n;
};
GROVE_NODE_STATIC(T, (x, n), (n));

int main() {
  const T value{};
  return static_cast<int>(grove::tree_leaves(value).size());
}
