// A bare TreeDef<> does not know which C++ type to build.
#include <grove/tree.hpp>
#include <vector>

int main() {
  grove::TreeDef<> def = grove::tree_structure(std::vector<int>{1, 2});
  auto out = grove::tree_unflatten(def, std::vector<int>{3, 4});
  return static_cast<int>(out.size());
}
