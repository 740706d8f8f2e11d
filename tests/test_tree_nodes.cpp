// Nodes and leaves, registration, leaf order and None: jax.tree_util's documented behaviour; the
// standard containers (deque and list as lists, unordered_map as a dict, the others leaves).
#include <catch2/catch.hpp>

#include <deque>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <variant>
#include <vector>

#include "tree_fixtures.hpp"

using Catch::Matchers::Contains;
using fixtures::Bag;
using fixtures::Layer;
using fixtures::Point;

namespace {
// Leaf values of a tree whose leaves are all ints, through the pointers tree_leaves returns.
template <class Tree>
std::vector<int> int_leaves(const Tree& tree) {
  std::vector<int> out;
  for (const int* p : grove::tree_leaves(tree)) out.push_back(*p);
  return out;
}
}  // namespace

TEST_CASE("leaves come depth first, left to right, maps in key order", "[tree][nodes]") {
  // jax.tree_util.tree_leaves([1, (2, None), {'b': 3, 'a': 4}]) == [1, 2, 4, 3]
  using T = std::tuple<int, std::tuple<int, std::monostate>, std::map<std::string, int>>;
  T tree{1, {2, {}}, {{"b", 3}, {"a", 4}}};
  CHECK(int_leaves(tree) == std::vector<int>{1, 2, 4, 3});
  CHECK(grove::tree_structure(tree).str() == "PyTreeDef((*, (*, None), {'a': *, 'b': *}))");
}

TEST_CASE("leaves are pointers into the tree", "[tree][nodes]") {
  std::vector<int> v{1, 2, 3};
  auto leaves = grove::tree_leaves(v);
  REQUIRE(leaves.size() == 3);
  CHECK(leaves[1] == &v[1]);
  *leaves[1] = 20;  // a non-const tree gives mutable pointers
  CHECK(v[1] == 20);
  const auto& cv = v;
  static_assert(std::is_same_v<decltype(grove::tree_leaves(cv))::value_type, const int*>);
}

TEST_CASE("heterogeneous leaves come as variants of pointers", "[tree][nodes]") {
  std::tuple<int, std::string, double> tree{1, "two", 3.0};
  auto leaves = grove::tree_leaves(tree);
  static_assert(
      std::is_same_v<decltype(leaves)::value_type, std::variant<int*, std::string*, double*>>);
  REQUIRE(leaves.size() == 3);
  CHECK(*std::get<int*>(leaves[0]) == 1);
  CHECK(*std::get<std::string*>(leaves[1]) == "two");
  CHECK(*std::get<double*>(leaves[2]) == 3.0);
}

TEST_CASE("None is a node without children", "[tree][nodes]") {
  // tree_leaves([None, 1]) == [1]; None counts as a node.
  std::tuple<std::monostate, int> t{std::monostate{}, 1};
  CHECK(int_leaves(t) == std::vector<int>{1});
  auto def = grove::tree_structure(t);
  CHECK(def.num_leaves() == 1);
  CHECK(def.num_nodes() == 3);
  CHECK(def.str() == "PyTreeDef((None, *))");
  CHECK(grove::tree_structure(std::tuple<std::monostate>{}).str() == "PyTreeDef((None,))");
  CHECK(grove::tree_structure(std::monostate{}).str() == "PyTreeDef(None)");
  CHECK(grove::tree_structure(std::nullopt).str() == "PyTreeDef(None)");
}

TEST_CASE("an empty optional is None, an engaged one is its value", "[tree][nodes]") {
  std::vector<std::optional<int>> v{1, std::nullopt, 3};
  CHECK(grove::tree_structure(v).str() == "PyTreeDef([*, None, *])");
  std::vector<int> values;
  for (const int* p : grove::tree_leaves(v)) values.push_back(*p);
  CHECK(values == std::vector<int>{1, 3});
  std::optional<std::tuple<int, int>> engaged{std::make_tuple(1, 2)};
  CHECK(grove::tree_structure(engaged).str() == "PyTreeDef((*, *))");
  auto mapped = grove::tree_map([](int x) { return x * 10; }, v);
  CHECK(mapped == std::vector<std::optional<int>>{10, std::nullopt, 30});
}

TEST_CASE("built-in node kinds print as JAX prints them", "[tree][nodes]") {
  CHECK(grove::tree_structure(1).str() == "PyTreeDef(*)");
  CHECK(grove::tree_structure(std::vector<int>{}).str() == "PyTreeDef([])");
  CHECK(grove::tree_structure(std::tuple<>{}).str() == "PyTreeDef(())");
  CHECK(grove::tree_structure(std::tuple<int>{}).str() == "PyTreeDef((*,))");
  CHECK(grove::tree_structure(std::pair<int, double>{}).str() == "PyTreeDef((*, *))");
  CHECK(grove::tree_structure(std::array<int, 3>{}).str() == "PyTreeDef((*, *, *))");
  CHECK(grove::tree_structure(std::map<std::string, int>{}).str() == "PyTreeDef({})");
  CHECK(grove::tree_structure(std::map<int, int>{{2, 0}, {1, 0}}).str() ==
        "PyTreeDef({1: *, 2: *})");
  using LL = std::vector<std::tuple<int, int>>;
  CHECK(grove::tree_structure(LL{{1, 2}, {3, 4}}).str() == "PyTreeDef([(*, *), (*, *)])");
  std::tuple<int, std::monostate, int> t{};
  CHECK(grove::tree_structure(t).str() == "PyTreeDef((*, None, *))");
}

TEST_CASE("strings and arithmetic values are leaves", "[tree][nodes]") {
  std::vector<std::string> words{"a", "bc"};
  CHECK(grove::tree_structure(words).str() == "PyTreeDef([*, *])");
  CHECK(grove::tree_structure(std::string("abc")).str() == "PyTreeDef(*)");
  CHECK(grove::tree_structure(true).num_leaves() == 1);
}

TEST_CASE("GROVE_NODE registers structs with key paths .field", "[tree][nodes]") {
  Point p{1.5, 2.5};
  CHECK(grove::tree_structure(p).str() == "PyTreeDef(CustomNode(Point[()], [*, *]))");
  auto with_paths = grove::tree_leaves_with_path(p);
  REQUIRE(with_paths.size() == 2);
  CHECK(grove::keystr(with_paths[0].first) == ".x");
  CHECK(*with_paths[1].second == 2.5);
  // Fields come in the registered order, not the declaration order.
  fixtures::Reordered r{7, "seven"};
  auto leaves = grove::tree_leaves(r);
  CHECK(*std::get<std::string*>(leaves[0]) == "seven");
  CHECK(*std::get<int*>(leaves[1]) == 7);
  // Rebuilding a non-aggregate goes through its default constructor and the fields.
  auto doubled = grove::tree_map([](const auto& x) { return x + x; }, r);
  static_assert(std::is_same_v<decltype(doubled), fixtures::Reordered>);
  CHECK(doubled == fixtures::Reordered{14, "sevenseven"});
}

TEST_CASE("class templates register with the same line", "[tree][nodes]") {
  Layer<int> layer{1, 2};
  CHECK(grove::tree_structure(layer).str() == "PyTreeDef(CustomNode(Layer[()], [*, *]))");
  // Layer's fields are its template parameters, so a new leaf type rebuilds Layer<new type>.
  auto as_double = grove::tree_map([](int x) { return x / 2.0; }, layer);
  static_assert(std::is_same_v<decltype(as_double), Layer<double>>);
  CHECK(as_double == Layer<double>{0.5, 1.0});
  // Two instances of one template have the same structure, as in JAX.
  CHECK(grove::tree_structure(layer) == grove::tree_structure(as_double));
}

TEST_CASE("custom containers registered through node_traits", "[tree][nodes]") {
  Bag<int> bag{{1, 2, 3}};
  CHECK(grove::tree_structure(bag).str() == "PyTreeDef(CustomNode(Bag[None], [*, *, *]))");
  auto paths = grove::tree_leaves_with_path(bag);
  CHECK(grove::keystr(paths[2].first) == "[<flat index 2>]");
  auto strs = grove::tree_map([](int x) { return std::to_string(x); }, bag);
  static_assert(std::is_same_v<decltype(strs), Bag<std::string>>);
  CHECK(strs.items == std::vector<std::string>{"1", "2", "3"});
  auto [leaves, def] = grove::tree_flatten(bag);
  CHECK(grove::tree_unflatten(def, leaves) == bag);
}

TEST_CASE("a heterogeneous tree flattens in JAX's order", "[tree][nodes]") {
  struct Unregistered {
    int a;
  };
  // [1, 'a', (2.0, None), {'k': [3]}, Point(4, 5)] plus an unregistered struct, which is a leaf.
  using T = std::tuple<int, std::string, std::tuple<double, std::monostate>,
                       std::map<std::string, std::vector<int>>, Point, Unregistered>;
  T tree{1, "a", {2.0, {}}, {{"k", {3}}}, {4, 5}, {6}};
  auto [leaves, def] = grove::tree_flatten(tree);
  CHECK(leaves.size() == 7);
  CHECK(def.str() == "PyTreeDef((*, *, (*, None), {'k': [*]}, CustomNode(Point[()], [*, *]), *))");
  CHECK(std::get<Unregistered*>(leaves[6])->a == 6);
  CHECK(grove::to_string(std::get<0>(tree)) == "1");
}

TEST_CASE("std::deque and std::list are lists", "[tree][nodes]") {
  const std::deque<int> dq{1, 2, 3};
  const std::list<int> ls{4, 5, 6};
  CHECK(grove::tree_structure(dq).str() == "PyTreeDef([*, *, *])");
  CHECK(grove::tree_structure(ls) == grove::tree_structure(std::vector<int>{0, 0, 0}));
  std::vector<int> order;
  for (const int* p : grove::tree_leaves(ls)) order.push_back(*p);
  CHECK(order == std::vector<int>{4, 5, 6});
  CHECK(grove::keystr(grove::tree_leaves_with_path(ls)[2].first) == "[2]");
  const auto strs = grove::tree_map([](int v) { return std::to_string(v); }, ls);
  static_assert(std::is_same_v<decltype(strs), const std::list<std::string>>);
  CHECK(strs == std::list<std::string>{"4", "5", "6"});
  CHECK(grove::tree_map([](int a, int b) { return a * b; }, dq, ls) == std::deque<int>{4, 10, 18});
  auto [leaves, def] = grove::tree_flatten(ls);
  CHECK(grove::tree_unflatten(def, leaves) == ls);
  CHECK(grove::tree_unflatten(grove::tree_structure(dq), std::vector<int>{7, 8, 9}) ==
        std::deque<int>{7, 8, 9});
  std::list<int> mutable_list{1, 2};
  grove::tree_for_each([](int& v) { v *= 3; }, mutable_list);
  CHECK(mutable_list == std::list<int>{3, 6});
  CHECK_THROWS_WITH(grove::tree_map([](int a, int b) { return a + b; }, ls, std::list<int>{1}),
                    Contains("different lengths of list at the root: 3 in tree 1, 1 in tree 2"));
}

TEST_CASE("std::unordered_map is a dict with sorted keys", "[tree][nodes]") {
  // jax.tree_util.tree_leaves({'b': 2, 'a': 1, 'c': 3}) == [1, 2, 3]
  const std::unordered_map<std::string, int> m{{"b", 2}, {"a", 1}, {"c", 3}};
  CHECK(grove::tree_structure(m).str() == "PyTreeDef({'a': *, 'b': *, 'c': *})");
  std::vector<int> order;
  for (const int* p : grove::tree_leaves(m)) order.push_back(*p);
  CHECK(order == std::vector<int>{1, 2, 3});
  const auto paths = grove::tree_leaves_with_path(m);
  CHECK(grove::keystr(paths[1].first) == "['b']");
  // The same structure as the std::map with those keys.
  const std::map<std::string, int> sorted{{"a", 0}, {"b", 0}, {"c", 0}};
  CHECK(grove::tree_structure(m) == grove::tree_structure(sorted));
  CHECK(grove::tree_structure(m).hash() == grove::tree_structure(sorted).hash());
  int counter = 0;
  const auto numbered = grove::tree_map([&](int) { return counter++; }, m);
  static_assert(std::is_same_v<decltype(numbered), const std::unordered_map<std::string, int>>);
  CHECK(numbered.at("a") == 0);
  CHECK(numbered.at("b") == 1);
  CHECK(numbered.at("c") == 2);
  // With a std::map as the other tree.
  const auto sums = grove::tree_map([](int a, int b) { return a + b; }, m,
                                    std::map<std::string, int>{{"a", 10}, {"b", 20}, {"c", 30}});
  CHECK(sums == std::unordered_map<std::string, int>{{"a", 11}, {"b", 22}, {"c", 33}});
  auto [leaves, def] = grove::tree_flatten(m);
  CHECK(*leaves[0] == 1);
  CHECK(grove::tree_unflatten(def, leaves) == m);
  // Integer keys sort numerically: {-1: *, 2: *, 10: *}.
  const std::unordered_map<int, double> im{{10, 1.0}, {-1, 2.0}, {2, 3.0}};
  CHECK(grove::tree_structure(im).str() == "PyTreeDef({-1: *, 2: *, 10: *})");
  CHECK_THROWS_WITH(
      grove::tree_map([](int a, int b) { return a + b; }, m,
                      std::unordered_map<std::string, int>{{"a", 1}, {"d", 2}, {"c", 3}}),
      Contains("different key sets of dict at the root: {'a', 'b', 'c'} in tree 1, "
               "{'a', 'c', 'd'} in tree 2"));
  const auto prefix = grove::tree_structure(sorted);
  auto parts = prefix.flatten_up_to(m);
  CHECK(*std::get<const int*>(parts[2]) == 3);
}

TEST_CASE("other standard containers stay leaves", "[tree][nodes]") {
  CHECK(grove::tree_structure(std::set<int>{1, 2}).str() == "PyTreeDef(*)");
  CHECK(grove::tree_structure(std::multimap<std::string, int>{{"a", 1}}).str() == "PyTreeDef(*)");
  CHECK(grove::tree_structure(std::string("abc")).str() == "PyTreeDef(*)");
}

// --- reduce without an initializer, empty trees, is_leaf ------------------------------------
