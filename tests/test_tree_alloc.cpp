// tree_flatten allocates per buffer, not per node: one growing buffer for the leaves, one for the
// TreeDef's nodes, one for dict keys. This executable counts every allocation (alloc_counter.hpp).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "alloc_counter.hpp"
#include "tree_fixtures.hpp"

TEST_CASE("tree_flatten allocates O(log n) times, not per node", "[tree][alloc]") {
  // 4,000 structs in a map of vectors: about 14,000 nodes.
  std::map<std::string, std::vector<std::tuple<int, fixtures::Point>>> tree;
  for (int k = 0; k < 40; ++k) tree[std::to_string(1000 + k)].resize(100);
  g_counting = true;
  const auto before_structure = g_allocations.load();
  auto def = grove::tree_structure(tree);
  const auto after_structure = g_allocations.load();
  REQUIRE(def.num_nodes() > 14000);
  auto [leaves, def2] = grove::tree_flatten(tree);
  const auto after_flatten = g_allocations.load();
  CHECK(leaves.size() == 12000);
  // Geometric growth of three buffers: a few dozen allocations for ~14k nodes (and some: the
  // counter counts).
  CHECK(after_structure > before_structure);
  CHECK(after_structure - before_structure < 64);
  CHECK(after_flatten - after_structure < 96);
  // tree_for_each allocates nothing at all.
  const auto before_visit = g_allocations.load();
  long sum = 0;
  grove::tree_for_each([&](const auto& leaf) { sum += static_cast<long>(leaf); }, tree);
  CHECK(g_allocations.load() == before_visit);
  g_counting = false;
}
