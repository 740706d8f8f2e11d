// A function that cannot take the tree's leaves.
#include <grove/tree.hpp>
#include <string>
#include <vector>

int main() {
  auto out = grove::tree_map([](const std::string& s) { return s.size(); }, std::vector<int>{1, 2});
  return static_cast<int>(out.size());
}
