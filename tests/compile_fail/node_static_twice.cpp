// A static field listed twice does not compile either.
#include <grove/tree.hpp>

struct U {
  double x;
  int n;
};
GROVE_NODE_STATIC(U, (x), (n, n));

int main() {
  const U value{};
  return static_cast<int>(grove::tree_leaves(value).size());
}
