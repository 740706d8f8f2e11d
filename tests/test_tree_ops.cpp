// tree_map and friends: the prefix rule, error messages, key paths, is_leaf, reduce, broadcast,
// transpose.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "tree_fixtures.hpp"

using Catch::Matchers::Contains;
using fixtures::Point;

TEST_CASE("tree_map keeps the input's type when f keeps the leaf type", "[tree][map]") {
  std::vector<std::tuple<int, Point>> tree{{1, {2, 3}}, {4, {5, 6}}};
  auto out = grove::tree_map([](auto x) { return x * 10; }, tree);
  static_assert(std::is_same_v<decltype(out), decltype(tree)>);
  CHECK(std::get<0>(out[1]) == 40);
  CHECK(std::get<1>(out[0]) == Point{20, 30});
}

TEST_CASE("tree_map rebuilds std containers around new leaf types", "[tree][map]") {
  std::map<std::string, std::vector<int>> tree{{"a", {1, 2}}, {"b", {3}}};
  auto out = grove::tree_map([](int x) { return std::to_string(x); }, tree);
  static_assert(std::is_same_v<decltype(out), std::map<std::string, std::vector<std::string>>>);
  CHECK(out.at("a") == std::vector<std::string>{"1", "2"});
}

TEST_CASE("a registered struct that cannot hold the new types becomes a mapped_node",
          "[tree][map]") {
  Point p{1, 2};
  auto out = grove::tree_map([](double x) { return std::to_string(x).substr(0, 3); }, p);
  static_assert(std::is_same_v<decltype(out), grove::mapped_node<Point, std::string, std::string>>);
  CHECK(out.get<0>() == "1.0");
  // It keeps Point's identity: same structure, same key paths, same printing.
  CHECK(grove::tree_structure(out) == grove::tree_structure(p));
  CHECK(grove::keystr(grove::tree_leaves_with_path(out)[1].first) == ".y");
  CHECK(grove::to_string(out) == "Point(x='1.0', y='2.0')");
  // Mapping back to the original types gives a Point again.
  auto back = grove::tree_map([](const std::string& s) { return std::stod(s); }, out);
  static_assert(std::is_same_v<decltype(back), Point>);
  CHECK(back == p);
}

TEST_CASE("tree_map visits leaves in leaf order", "[tree][map]") {
  std::tuple<int, std::map<std::string, int>, std::vector<int>> tree{
      0, {{"z", 0}, {"a", 0}}, {0, 0}};
  std::vector<std::string> order;
  int counter = 0;
  auto numbered = grove::tree_map([&](int) { return counter++; }, tree);
  CHECK(std::get<0>(numbered) == 0);
  CHECK(std::get<1>(numbered).at("a") == 1);
  CHECK(std::get<1>(numbered).at("z") == 2);
  CHECK(std::get<2>(numbered) == std::vector<int>{3, 4});
}

TEST_CASE("n-ary tree_map with the prefix rule", "[tree][map]") {
  // tree_map(f, [1, 2], [(3, 4), 5]): at leaf 1 of the first tree, f gets the subtree (3, 4).
  std::tuple<int, int> first{1, 2};
  std::tuple<std::tuple<int, int>, int> second{{3, 4}, 5};
  auto out = grove::tree_map(
      [](int a, const auto& b) {
        if constexpr (std::is_same_v<std::decay_t<decltype(b)>, int>)
          return a + b;
        else
          return a + std::get<0>(b) + std::get<1>(b);
      },
      first, second);
  CHECK(out == std::tuple<int, int>{8, 7});

  std::vector<int> a{1, 2, 3};
  std::vector<double> b{0.5, 0.25, 0.125};
  auto sum = grove::tree_map([](int x, double y) { return x + y; }, a, b);
  CHECK(sum == std::vector<double>{1.5, 2.25, 3.125});
}

TEST_CASE("structure errors name the key path and both structures", "[tree][map][errors]") {
  std::vector<std::vector<int>> a{{1}, {1, 2, 3}};
  std::vector<std::vector<int>> b{{1}, {1, 2}};
  auto add = [](int x, int y) { return x + y; };
  CHECK_THROWS_AS(grove::tree_map(add, a, b), grove::tree_error);
  CHECK_THROWS_WITH(
      grove::tree_map(add, a, b),
      Contains("different lengths of list at key path [1]: 3 in tree 1, 2 in tree 2") &&
          Contains("tree 1: PyTreeDef([[*], [*, *, *]])") &&
          Contains("tree 2: PyTreeDef([[*], [*, *]])"));
  // tree_error is an invalid_argument, as JAX raises ValueError.
  CHECK_THROWS_AS(grove::tree_map(add, a, b), std::invalid_argument);

  std::map<std::string, std::vector<int>> m1{{"a", {1}}, {"b", {2}}};
  std::map<std::string, std::vector<int>> m2{{"a", {1}}, {"c", {2}}};
  CHECK_THROWS_WITH(
      grove::tree_map(add, m1, m2),
      Contains(
          "different key sets of dict at the root: {'a', 'b'} in tree 1, {'a', 'c'} in tree 2"));

  std::map<std::string, std::vector<int>> m3{{"a", {1}}, {"b", {2, 3}}};
  CHECK_THROWS_WITH(grove::tree_map(add, m1, m3), Contains("at key path ['b']"));

  std::vector<std::optional<int>> o1{1, std::nullopt};
  std::vector<std::optional<int>> o2{1, 2};
  CHECK_THROWS_WITH(grove::tree_map(add, o1, o2),
                    Contains("None where another tree has a value at key path [1]"));
  CHECK_THROWS_WITH(grove::tree_map(add, o2, o1),
                    Contains("a value where another tree has None at key path [1]"));

  std::vector<Point> p1{{1, 2}};
  std::vector<Point> p2{{1, 2}, {3, 4}};
  CHECK_THROWS_WITH(grove::tree_map([](double x, double y) { return x + y; }, p1, p2),
                    Contains("tree 1: PyTreeDef([CustomNode(Point[()], [*, *])])"));
  // Nothing half-done is returned and the inputs are untouched.
  CHECK(p1.size() == 1);
}

TEST_CASE("tree_for_each updates leaves in place", "[tree][for_each]") {
  std::vector<std::tuple<double, Point>> params{{1, {2, 3}}};
  std::vector<std::tuple<double, Point>> grads{{10, {20, 30}}};
  grove::tree_for_each([](double& p, double g) { p -= 0.1 * g; }, params, grads);
  CHECK(std::get<0>(params[0]) == Approx(0.0));
  CHECK(std::get<1>(params[0]).y == Approx(0.0));
  std::vector<std::tuple<double, Point>> short_grads{};
  CHECK_THROWS_WITH(
      grove::tree_for_each([](double&, double) {}, params, short_grads),
      Contains(
          "grove::tree_for_each: pytree structure error: different lengths of list at the root"));
}

TEST_CASE("key paths and keystr in both forms", "[tree][paths]") {
  using Tree = std::vector<std::map<std::string, std::tuple<int, Point>>>;
  Tree tree{{{"bias", {1, {2, 3}}}}};
  auto [with_paths, def] = grove::tree_flatten_with_path(tree);
  REQUIRE(with_paths.size() == 3);
  CHECK(grove::keystr(with_paths[0].first) == "[0]['bias'][0]");
  CHECK(grove::keystr(with_paths[2].first) == "[0]['bias'][1].y");
  CHECK(grove::keystr(with_paths[2].first, "/") == "0/bias/1/y");
  CHECK(grove::keystr(with_paths[2].first, ".") == "0.bias.1.y");
  CHECK(def.num_leaves() == 3);
  CHECK(grove::keystr(grove::KeyPath{grove::DictKey{std::int64_t{3}}}) == "[3]");
  CHECK(grove::keystr(grove::KeyPath{grove::DictKey{std::string("it's")}}) == "[\"it's\"]");
  CHECK(grove::keystr(grove::KeyPath{}) == "");

  auto named = grove::tree_map_with_path(
      [](const grove::KeyPath& path, const auto& leaf) {
        return grove::keystr(path, "/") + "=" + std::to_string(leaf);
      },
      tree);
  CHECK(std::get<1>(named[0].at("bias")).get<0>() == "0/bias/1/x=2.000000");
}

TEST_CASE("is_leaf stops the descent", "[tree][is_leaf]") {
  std::vector<std::tuple<int, int>> tree{{1, 2}, {3, 4}};
  // Compile-time: every pair is a leaf.
  auto pairs = grove::tree_leaves(
      tree, grove::treat_as_leaf([](const std::tuple<int, int>&) { return std::true_type{}; }));
  static_assert(std::is_same_v<decltype(pairs)::value_type, std::tuple<int, int>*>);
  CHECK(pairs.size() == 2);
  auto def = grove::tree_structure(
      tree, grove::treat_as_leaf([](const std::tuple<int, int>&) { return std::true_type{}; }));
  CHECK(def.str() == "PyTreeDef([*, *])");
  // Run time: only the pairs whose first element is 1.
  auto first_is_one =
      grove::treat_as_leaf([](const std::tuple<int, int>& t) { return std::get<0>(t) == 1; });
  CHECK(grove::tree_structure(tree, first_is_one).str() == "PyTreeDef([*, (*, *)])");
  auto swapped = grove::tree_map(
      [](const auto& x) {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, int>)
          return x;
        else
          return std::tuple<int, int>{std::get<1>(x), std::get<0>(x)};
      },
      tree, first_is_one);
  // The first pair was a leaf (swapped), the second was descended into (kept).
  CHECK(swapped == std::vector<std::tuple<int, int>>{{2, 1}, {3, 4}});
}

TEST_CASE("tree_reduce, tree_all, tree_any", "[tree][reduce]") {
  std::tuple<int, std::vector<int>, std::map<std::string, int>> tree{1, {2, 3}, {{"a", 4}}};
  CHECK(grove::tree_reduce([](int acc, int x) { return acc + x; }, tree, 0) == 10);
  // The fold runs left to right in leaf order.
  CHECK(grove::tree_reduce([](std::string acc, int x) { return acc + std::to_string(x); }, tree,
                           std::string()) == "1234");
  CHECK(grove::tree_all(std::vector<bool>{true, true}));
  CHECK_FALSE(grove::tree_all(std::vector<bool>{true, false}));
  CHECK(grove::tree_all(std::vector<bool>{}));
  CHECK(grove::tree_any(std::tuple<bool, std::vector<bool>>{false, {false, true}}));
  CHECK_FALSE(grove::tree_any(std::vector<bool>{}));
  CHECK(grove::tree_all(grove::tree_map([](int x) { return x > 0; }, tree)));
}

TEST_CASE("tree_broadcast copies prefix leaves down to the full structure", "[tree][broadcast]") {
  std::tuple<int, double> prefix{1, 2.5};
  std::tuple<std::vector<std::string>, std::map<std::string, std::string>> full{{"a", "b"},
                                                                                {{"k", "v"}}};
  auto out = grove::tree_broadcast(prefix, full);
  static_assert(
      std::is_same_v<decltype(out), std::tuple<std::vector<int>, std::map<std::string, double>>>);
  CHECK(std::get<0>(out) == std::vector<int>{1, 1});
  CHECK(std::get<1>(out).at("k") == 2.5);
}

TEST_CASE("None inside optionals, and keys as Python's repr quotes them", "[tree][none]") {
  // Cases the differential test against JAX and optree found (oracle_trees_vs_jax_optree).
  using Opt = std::optional<std::monostate>;
  // An engaged optional<monostate> is None, like an empty one, everywhere.
  const std::tuple<Opt, int> engaged{std::monostate{}, 1}, empty{std::nullopt, 2};
  CHECK(grove::tree_structure(engaged).flatten_up_to(engaged).size() == 1);
  const auto sum = grove::tree_map([](int a, int b) { return a + b; }, engaged, empty);
  CHECK(std::get<1>(sum) == 3);
  // tree_map over three trees whose first holds an optional.
  const std::tuple<std::optional<int>, int> a{4, 1}, b{5, 2}, c{6, 3};
  const auto three = grove::tree_map([](int x, int y, int z) { return x + y + z; }, a, b, c);
  CHECK(*std::get<0>(three) == 15);
  CHECK(std::get<1>(three) == 6);
  // Control characters in keys: \r and \x01 as Python writes them.
  const std::map<std::string, int> keys{{"cr\r", 1}, {std::string("\x01"), 2}};
  const auto paths = grove::tree_leaves_with_path(keys);
  CHECK(grove::keystr(paths[0].first) == "['\\x01']");
  CHECK(grove::keystr(paths[1].first) == "['cr\\r']");
  CHECK(grove::tree_structure(keys).str() == "PyTreeDef({'\\x01': *, 'cr\\r': *})");
}

TEST_CASE("tree_transpose keeps each position's leaf type", "[tree][transpose]") {
  // jax.tree_util.tree_transpose's documented example, with an int and a double per pair.
  const std::vector<std::tuple<int, double>> tree{{1, 2.5}, {3, 4.5}, {5, 6.5}};
  const auto outer = grove::tree_structure(std::vector<int>{0, 0, 0});
  const auto inner = grove::tree_structure(std::tuple<int, double>{});
  const auto out = grove::tree_transpose(outer, inner, tree);
  static_assert(
      std::is_same_v<decltype(out), const std::tuple<std::vector<int>, std::vector<double>>>);
  CHECK(std::get<0>(out) == std::vector<int>{1, 3, 5});
  CHECK(std::get<1>(out) == std::vector<double>{2.5, 4.5, 6.5});
  // No outer leaves: every column is an empty list.
  const std::vector<std::tuple<int, double>> none;
  const auto empty = grove::tree_transpose(grove::tree_structure(std::vector<int>{}), inner, none);
  CHECK(std::get<0>(empty).empty());
  CHECK(std::get<1>(empty).empty());
  // A leaf whose type is not the one inner's C++ type gives its position is refused, not
  // converted.
  const auto ints = grove::tree_structure(std::tuple<int, int>{});
  CHECK_THROWS_WITH(grove::tree_transpose(outer, ints, tree),
                    Contains("leaf 1 of outer leaf 0 has another C++ type"));
}

TEST_CASE("tree_transpose turns a list of pairs into a pair of lists", "[tree][transpose]") {
  std::vector<std::pair<int, int>> tree{{1, 2}, {3, 4}, {5, 6}};
  auto outer = grove::tree_structure(std::vector<int>{0, 0, 0});
  auto inner = grove::tree_structure(std::pair<int, int>{});
  auto out = grove::tree_transpose(outer, inner, tree);
  static_assert(std::is_same_v<decltype(out), std::pair<std::vector<int>, std::vector<int>>>);
  CHECK(out.first == std::vector<int>{1, 3, 5});
  CHECK(out.second == std::vector<int>{2, 4, 6});
  auto wrong = grove::tree_structure(std::vector<int>{0, 0});
  CHECK_THROWS_WITH(grove::tree_transpose(wrong, inner, tree),
                    Contains("is not outer.compose(inner)"));
}

TEST_CASE("flatten_up_to reports a mismatch as tree_map does, naming prefix and tree",
          "[treedef][prefix][errors]") {
  const auto prefix = grove::tree_structure(std::vector<std::optional<int>>{1, std::nullopt});
  std::vector<std::optional<int>> swapped{std::nullopt, 2};
  CHECK_THROWS_WITH(prefix.flatten_up_to(swapped),
                    Contains("grove::tree_flatten_up_to: pytree structure error: None in the "
                             "prefix but a value in the tree at key path [1]: None in the prefix, "
                             "a value in the tree"));
  // A prefix leaf takes the whole subtree, None included, as in JAX.
  std::vector<std::optional<int>> both_none{std::nullopt, std::nullopt};
  CHECK(prefix.flatten_up_to(both_none).size() == 1);
  const auto dict = grove::tree_structure(std::map<std::string, int>{{"a", 0}, {"b", 0}});
  std::map<std::string, int> other{{"a", 0}, {"c", 0}};
  CHECK_THROWS_WITH(dict.flatten_up_to(other),
                    Contains("different key sets of dict at the root: {'a', 'b'} in the prefix, "
                             "{'a', 'c'} in the tree"));
  const auto tuple = grove::tree_structure(std::tuple<std::tuple<int>, int>{});
  std::tuple<int, int> flat{};
  CHECK_THROWS_WITH(tuple.flatten_up_to(flat),
                    Contains("a node in the prefix but a leaf in the tree at key path [0]: tuple "
                             "in the prefix, leaf in the tree"));
}

// --- standard containers as nodes -------------------------------------------------------------

TEST_CASE("tree_reduce without an initializer starts from the first leaf", "[tree][reduce]") {
  // functools.reduce(operator.add, [1, 2, 3, 4]) == 10, which is what JAX's tree_reduce does.
  const std::tuple<int, std::vector<int>, std::map<std::string, int>> tree{1, {2, 3}, {{"a", 4}}};
  CHECK(grove::tree_reduce([](int acc, int x) { return acc + x; }, tree) == 10);
  // Left to right: ((("a" + "b") + "c")).
  const std::vector<std::string> words{"a", "b", "c"};
  CHECK(grove::tree_reduce([](std::string acc, const std::string& x) { return acc + x; }, words) ==
        "abc");
  // reduce(lambda a, b: a - b, [10, 1, 2]) == 7: the first leaf is the start, not an operand.
  CHECK(grove::tree_reduce([](int a, int b) { return a - b; }, std::vector<int>{10, 1, 2}) == 7);
  // Leaf types int and double: the accumulator is their common type.
  const auto mixed =
      grove::tree_reduce([](double a, auto b) { return a + b; }, std::tuple<int, double>{1, 0.5});
  static_assert(std::is_same_v<decltype(mixed), const double>);
  CHECK(mixed == 1.5);
  // With is_leaf: each pair is one leaf.
  const std::vector<std::tuple<int, int>> pairs{{1, 2}, {3, 4}};
  const auto first_pair = grove::tree_reduce(
      [](const std::tuple<int, int>& a, const std::tuple<int, int>&) { return a; }, pairs,
      grove::treat_as_leaf([](const std::tuple<int, int>&) { return std::true_type{}; }));
  CHECK(first_pair == std::tuple<int, int>{1, 2});
  // An empty tree: JAX raises TypeError (reduce of an empty iterable with no initial value).
  CHECK_THROWS_AS(grove::tree_reduce([](int a, int b) { return a + b; }, std::vector<int>{}),
                  grove::tree_error);
  CHECK_THROWS_WITH(
      grove::tree_reduce([](int a, int b) { return a + b; }, std::vector<std::optional<int>>{{}}),
      "grove::tree_reduce: the tree has no leaves and no initial value was given");
  // With an initializer, an empty tree gives the initializer.
  CHECK(grove::tree_reduce([](int a, int b) { return a + b; }, std::vector<int>{}, 5) == 5);
}

TEST_CASE("tree_map over trees without leaves", "[tree][map]") {
  // jax.tree_util.tree_map(f, []) == [], tree_map(f, ()) == (), tree_map(f, None) is None; f is
  // never called.
  int calls = 0;
  auto f = [&](int x) {
    ++calls;
    return std::to_string(x);
  };
  const auto list = grove::tree_map(f, std::vector<int>{});
  static_assert(std::is_same_v<decltype(list), const std::vector<std::string>>);
  CHECK(list.empty());
  CHECK(grove::tree_map(f, std::tuple<>{}) == std::tuple<>{});
  CHECK(grove::tree_map(f, std::monostate{}) == std::monostate{});
  CHECK(grove::tree_map(f, std::optional<int>{}) == std::nullopt);
  CHECK(grove::tree_map(f, std::map<std::string, int>{}).empty());
  CHECK(calls == 0);
  // The other trees must still match: tree_map(f, [], [1]) raises in JAX.
  CHECK_THROWS_WITH(
      grove::tree_map([](int a, int b) { return a + b; }, std::vector<int>{}, std::vector<int>{1}),
      Contains("different lengths of list at the root: 0 in tree 1, 1 in tree 2"));
}
