// TreeDef: counts, printing, equality and hashing, children, compose, unflatten, flatten_up_to,
// and the round-trip property on generated trees.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <unordered_set>
#include <variant>
#include <vector>

#include "tree_fixtures.hpp"

using Catch::Matchers::Contains;
using fixtures::Layer;
using fixtures::Point;

TEST_CASE("num_leaves and num_nodes count as JAX counts", "[treedef]") {
  // [1, (2, None)]: list, leaf, tuple, leaf, None -> 5 nodes, 2 leaves.
  std::tuple<int, std::tuple<int, std::monostate>> t{};
  auto def = grove::tree_structure(t);
  CHECK(def.num_leaves() == 2);
  CHECK(def.num_nodes() == 5);
  CHECK(grove::tree_structure(5).num_nodes() == 1);
  CHECK(grove::tree_structure(std::vector<int>{}).num_leaves() == 0);
}

TEST_CASE("equality and hashing distinguish every structural difference", "[treedef]") {
  auto list2 = grove::tree_structure(std::vector<int>{1, 2});
  auto tuple2 = grove::tree_structure(std::tuple<int, int>{});
  auto list3 = grove::tree_structure(std::vector<int>{1, 2, 3});
  auto dict_ab = grove::tree_structure(std::map<std::string, int>{{"a", 1}, {"b", 2}});
  auto dict_ac = grove::tree_structure(std::map<std::string, int>{{"a", 1}, {"c", 2}});
  auto point = grove::tree_structure(Point{});
  auto layer = grove::tree_structure(Layer<double>{});
  auto pair = grove::tree_structure(std::pair<double, double>{});
  std::vector<grove::TreeDef<>> all{list2, tuple2, list3, dict_ab, dict_ac, point, layer, pair};
  for (std::size_t i = 0; i < all.size(); ++i)
    for (std::size_t j = 0; j < all.size(); ++j) {
      INFO(all[i] << " vs " << all[j]);
      // std::pair and std::tuple are both JAX tuples, so they are equal.
      const bool same =
          i == j || (all[i].str() == "PyTreeDef((*, *))" && all[j].str() == "PyTreeDef((*, *))");
      CHECK((all[i] == all[j]) == same);
    }
  // Same structure from different values and C++ types: equal, same hash.
  auto other_list = grove::tree_structure(std::vector<std::string>{"x", "y"});
  CHECK(other_list == list2);
  CHECK(other_list.hash() == list2.hash());
  std::unordered_set<std::size_t> hashes;
  for (const auto& d : all) hashes.insert(d.hash());
  CHECK(hashes.size() >= all.size() - 1);  // pair == tuple2
}

TEST_CASE("children and compose", "[treedef]") {
  std::tuple<std::vector<int>, std::map<std::string, int>, int> t{{1, 2}, {{"k", 3}}, 4};
  auto def = grove::tree_structure(t);
  auto kids = def.children();
  REQUIRE(kids.size() == 3);
  CHECK(kids[0].str() == "PyTreeDef([*, *])");
  CHECK(kids[1].str() == "PyTreeDef({'k': *})");
  CHECK(kids[2].str() == "PyTreeDef(*)");
  CHECK(grove::tree_structure(5).children().empty());

  auto outer = grove::tree_structure(std::vector<int>{0, 0});
  auto inner = grove::tree_structure(std::map<std::string, std::pair<int, int>>{{"a", {}}});
  auto composed = outer.compose(inner);
  CHECK(composed.str() == "PyTreeDef([{'a': (*, *)}, {'a': (*, *)}])");
  CHECK(composed.num_leaves() == 4);
  CHECK(composed.num_nodes() == 9);
  // The typed compose knows the composed C++ type.
  static_assert(
      std::is_same_v<decltype(composed),
                     grove::TreeDef<std::vector<std::map<std::string, std::pair<int, int>>>>>);
  std::vector<std::map<std::string, std::pair<int, int>>> value{{{"a", {1, 2}}}, {{"a", {3, 4}}}};
  CHECK(grove::tree_structure(value) == composed);
}

TEST_CASE("unflatten gives back the TreeDef's C++ type", "[treedef][unflatten]") {
  using Tree = std::tuple<int, std::vector<int>, std::map<std::string, int>>;
  Tree tree{1, {2, 3}, {{"a", 4}}};
  auto [leaves, def] = grove::tree_flatten(tree);
  std::vector<int> values{10, 20, 30, 40};
  Tree rebuilt = grove::tree_unflatten(def, values);
  CHECK(rebuilt == Tree{10, {20, 30}, {{"a", 40}}});
  // From the leaf pointers themselves.
  CHECK(def.unflatten(leaves) == tree);
  // Values of another type give a tree of that type with the same structure.
  auto strings = grove::tree_unflatten(def, std::vector<std::string>{"a", "b", "c", "d"});
  static_assert(std::is_same_v<decltype(strings), std::tuple<std::string, std::vector<std::string>,
                                                             std::map<std::string, std::string>>>);
  CHECK(std::get<2>(strings).at("a") == "d");
}

TEST_CASE("unflatten with the wrong number of leaves says expected vs got",
          "[treedef][unflatten][errors]") {
  auto def = grove::tree_structure(std::vector<int>{1, 2, 3});
  CHECK_THROWS_AS(grove::tree_unflatten(def, std::vector<int>{1, 2}), grove::tree_error);
  CHECK_THROWS_WITH(grove::tree_unflatten(def, std::vector<int>{1, 2}),
                    Contains("PyTreeDef([*, *, *]) has 3 leaves but 2 were given"));
}

TEST_CASE("unflatten of heterogeneous leaves from variants", "[treedef][unflatten]") {
  std::tuple<int, std::string, Point> tree{1, "s", {2, 3}};
  auto [leaves, def] = grove::tree_flatten(tree);
  auto copy = grove::tree_unflatten(def, leaves);
  CHECK(copy == tree);
  // A leaf of the wrong type for its position is an error, not a silent conversion.
  auto swapped = leaves;
  std::swap(swapped[0], swapped[1]);
  CHECK_THROWS_AS(grove::tree_unflatten(def, swapped), grove::tree_error);
}

TEST_CASE("flatten_up_to returns the subtrees at the prefix's leaves", "[treedef][prefix]") {
  std::tuple<std::vector<int>, std::map<std::string, int>> tree{{1, 2}, {{"a", 3}}};
  auto prefix = grove::tree_structure(std::tuple<int, int>{});
  auto parts = prefix.flatten_up_to(tree);
  REQUIRE(parts.size() == 2);
  CHECK(*std::get<std::vector<int>*>(parts[0]) == std::vector<int>{1, 2});
  auto bad_prefix = grove::tree_structure(std::tuple<std::vector<int>, int>{{0, 0, 0}, 0});
  CHECK_THROWS_WITH(
      bad_prefix.flatten_up_to(tree),
      Contains("different numbers of children at key path [0]: 3 in the prefix, 2 in the tree"));
  auto deeper = grove::tree_structure(std::tuple<std::tuple<int, int>, int>{});
  CHECK_THROWS_AS(deeper.flatten_up_to(tree), grove::tree_error);
}

namespace {

// Generated trees for the round-trip property: random lengths, keys, Nones and values.
using Generated =
    std::vector<std::map<std::string, std::tuple<int, std::vector<std::optional<double>>, Point>>>;

Generated generate(std::mt19937& rng) {
  std::uniform_int_distribution<int> len(0, 4), val(-100, 100), coin(0, 3);
  Generated tree(static_cast<std::size_t>(len(rng)));
  for (auto& m : tree) {
    const int keys = len(rng);
    for (int k = 0; k < keys; ++k) {
      std::vector<std::optional<double>> inner(static_cast<std::size_t>(len(rng)));
      for (auto& o : inner)
        if (coin(rng) != 0) o = val(rng) / 4.0;
      m["key" + std::to_string(val(rng))] = {val(rng), std::move(inner),
                                             Point{val(rng) * 1.0, val(rng) * 0.5}};
    }
  }
  return tree;
}

}  // namespace

TEST_CASE("unflatten(flatten(t)) == t on many generated trees", "[treedef][property]") {
  std::mt19937 rng(20261130);
  for (int trial = 0; trial < 500; ++trial) {
    const Generated tree = generate(rng);
    auto [leaves, def] = grove::tree_flatten(tree);
    CHECK(leaves.size() == def.num_leaves());
    const Generated back = grove::tree_unflatten(def, leaves);
    REQUIRE(back == tree);
    // The structure is a function of the tree alone.
    CHECK(grove::tree_structure(back) == def);
    // Mapping with the identity and flattening again gives the same leaves.
    const auto same = grove::tree_map([](const auto& x) { return x; }, tree);
    CHECK(same == tree);
  }
}

TEST_CASE("TreeDef::is_leaf is JAX's treedef_is_leaf: one node", "[treedef]") {
  // treedef_is_leaf(t) is t.num_nodes == 1: a leaf, None, (), [] and {} are all "leaves".
  CHECK(grove::tree_structure(1).is_leaf());
  CHECK(grove::tree_structure(std::monostate{}).is_leaf());
  CHECK(grove::tree_structure(std::tuple<>{}).is_leaf());
  CHECK(grove::tree_structure(std::vector<int>{}).is_leaf());
  CHECK(grove::tree_structure(std::map<std::string, int>{}).is_leaf());
  CHECK(grove::tree_structure(statics::Tag{1}).is_leaf());
  CHECK_FALSE(grove::tree_structure(std::vector<int>{1}).is_leaf());
  CHECK_FALSE(grove::tree_structure(fixtures::Point{}).is_leaf());
}

// --- the hash ----------------------------------------------------------------------------------

namespace {
// The documented hash stream, written out independently: FNV-1a over words with a murmur3
// finish, each node as (mark | kind, arity, registered name), dict keys as (mark | 's', bytes).
struct reference_hash {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void word(std::uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ull;
    h ^= h >> 31;
  }
  void text(const std::string& s) {
    word(s.size());
    std::uint64_t w = 0;
    std::size_t k = 0;
    for (char c : s) {
      w = (w << 8) | static_cast<unsigned char>(c);
      if (++k == 8) {
        word(w);
        w = 0;
        k = 0;
      }
    }
    if (k) word(w);
  }
  void node(grove::node_kind kind, std::uint64_t arity) {
    word(0x4e4f'4445'0000'0000ull | static_cast<std::uint64_t>(kind));
    word(arity);
  }
  std::uint64_t value() const {
    std::uint64_t x = h;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
  }
};
}  // namespace

TEST_CASE("TreeDef::hash mixes names and values, never addresses", "[treedef][hash]") {
  // {'k': Point(*, *)} hashed from its description: the same in every process.
  reference_hash r;
  r.node(grove::node_kind::dict, 1);
  r.word(0x4b45'5900'0000'0000ull | 's');
  r.text("k");
  r.node(grove::node_kind::custom, 2);
  r.text("Point");
  r.node(grove::node_kind::leaf, 0);
  r.node(grove::node_kind::leaf, 0);
  const std::map<std::string, fixtures::Point> tree{{"k", {}}};
  CHECK(grove::tree_structure(tree).hash() == r.value());
  // The allocation-free structure hash (used by the collectives) is the same number.
  CHECK(grove::detail::structure_hash(tree) == r.value());
  const std::vector<statics::Conv> convs{{1, "a", 2}, {2, "b", 3}};
  CHECK(grove::detail::structure_hash(convs) == grove::tree_structure(convs).hash());
  const std::unordered_map<int, std::deque<double>> um{{3, {1, 2}}, {1, {}}};
  CHECK(grove::detail::structure_hash(um) == grove::tree_structure(um).hash());
}
