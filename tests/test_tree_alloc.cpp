// tree_flatten allocates per buffer, not per node: one growing buffer for the leaves, one for the
// TreeDef's nodes, one for dict keys. This executable counts every operator new.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <map>
#include <new>
#include <string>
#include <tuple>
#include <vector>

#include "tree_fixtures.hpp"

namespace {
std::atomic<long> allocations{0};
}

// Every form of operator new counts, and every form of delete frees what malloc gave.
void* operator new(std::size_t n) {
  ++allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++allocations;
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

TEST_CASE("tree_flatten allocates O(log n) times, not per node", "[tree][alloc]") {
  // 4,000 structs in a map of vectors: about 14,000 nodes.
  std::map<std::string, std::vector<std::tuple<int, fixtures::Point>>> tree;
  for (int k = 0; k < 40; ++k) tree[std::to_string(1000 + k)].resize(100);
  const auto before_structure = allocations.load();
  auto def = grove::tree_structure(tree);
  const auto after_structure = allocations.load();
  REQUIRE(def.num_nodes() > 14000);
  auto [leaves, def2] = grove::tree_flatten(tree);
  const auto after_flatten = allocations.load();
  CHECK(leaves.size() == 12000);
  // Geometric growth of three buffers: a few dozen allocations for ~14k nodes.
  CHECK(after_structure - before_structure < 64);
  CHECK(after_flatten - after_structure < 96);
  // tree_for_each allocates nothing at all.
  const auto before_visit = allocations.load();
  long sum = 0;
  grove::tree_for_each([&](const auto& leaf) { sum += static_cast<long>(leaf); }, tree);
  CHECK(allocations.load() == before_visit);
}
