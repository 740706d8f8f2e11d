// A std::map keyed by double cannot be a pytree node: JAX's dict keys sort; floats do not key well.
#include <grove/tree.hpp>
#include <map>

int main() {
  std::map<double, int> m{{0.5, 1}};
  return static_cast<int>(grove::tree_structure(m).num_leaves());
}
