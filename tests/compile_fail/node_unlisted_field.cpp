// A registration that leaves out fields of an aggregate does not compile: rebuilding the struct
// would lose them (name would come back "" and stride 0).
#include <grove/tree.hpp>
#include <string>

struct Conv {
  double w;
  std::string name;
  int stride;
};
GROVE_NODE(Conv, w);

int main() {
  const Conv conv{};
  return static_cast<int>(grove::tree_leaves(conv).size());
}
