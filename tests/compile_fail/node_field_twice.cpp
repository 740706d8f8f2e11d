// A field listed twice does not compile: it would be two leaves, and rebuilding the struct would
// give it one of their values and lose the field left out (tree_map once returned S{x + 10, 0}).
#include <grove/tree.hpp>

struct S {
  double x, y;
};
GROVE_NODE(S, x, x);

int main() {
  const S value{};
  return static_cast<int>(grove::tree_leaves(value).size());
}
