// Registered structs keep every field where it belongs: every registration order of a 3-field
// struct and of a class template through tree_map, tree_unflatten, tree_transpose and ravel;
// static fields (JAX's meta_fields) through every operation; their mismatches and printing.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <grove/tree/eigen.hpp>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include "tree_fixtures.hpp"

using Catch::Matchers::Contains;

namespace perm {

// A struct with fields declared x, y, z, registered in the order `order` names.
#define PERM_STRUCT(Name, a, b, c)                                    \
  struct Name {                                                       \
    double x = 0, y = 0, z = 0;                                       \
    static constexpr const char* order = #a #b #c;                    \
    friend bool operator==(const Name&, const Name&) = default;       \
  };                                                                  \
  GROVE_NODE(Name, a, b, c);                                          \
  template <class T>                                                  \
  struct Name##T {                                                    \
    T x{}, y{}, z{};                                                  \
    static constexpr const char* order = #a #b #c;                    \
    friend bool operator==(const Name##T&, const Name##T&) = default; \
  };                                                                  \
  GROVE_NODE(Name##T, a, b, c)

PERM_STRUCT(Pxyz, x, y, z);
PERM_STRUCT(Pxzy, x, z, y);
PERM_STRUCT(Pyxz, y, x, z);
PERM_STRUCT(Pyzx, y, z, x);
PERM_STRUCT(Pzxy, z, x, y);
PERM_STRUCT(Pzyx, z, y, x);

// The field a letter of the registration order names.
template <class S>
auto& field(S& s, char name) {
  return name == 'x' ? s.x : name == 'y' ? s.y : s.z;
}
template <class S>
const auto& field(const S& s, char name) {
  return name == 'x' ? s.x : name == 'y' ? s.y : s.z;
}
template <class S>
S make(double x, double y, double z) {
  S s;
  s.x = x;
  s.y = y;
  s.z = z;
  return s;
}

}  // namespace perm

TEMPLATE_TEST_CASE("a registered struct is rebuilt by field name, whatever the registration order",
                   "[tree][fields]", perm::Pxyz, perm::Pxzy, perm::Pyxz, perm::Pyzx, perm::Pzxy,
                   perm::Pzyx) {
  using S = TestType;
  const std::string order = S::order;
  const S s = perm::make<S>(1, 2, 3);
  // The registration order is the leaf order.
  std::vector<double> leaves;
  for (const double* p : grove::tree_leaves(s)) leaves.push_back(*p);
  REQUIRE(leaves.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(leaves[i] == perm::field(s, order[i]));
  auto paths = grove::tree_leaves_with_path(s);
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(grove::keystr(paths[i].first) == std::string(".") + order[i]);

  // tree_map, one tree: the identity gives the struct back; a function of the leaf, field by field.
  CHECK(grove::tree_map([](double v) { return v; }, s) == s);
  CHECK(grove::tree_map([](double v) { return 10 * v; }, s) == perm::make<S>(10, 20, 30));
  // Leaves are visited in leaf order.
  int counter = 0;
  const S numbered = grove::tree_map([&](double) { return double(counter++); }, s);
  for (std::size_t i = 0; i < 3; ++i) CHECK(perm::field(numbered, order[i]) == double(i));

  // tree_map, two trees: matching fields meet.
  const S t = perm::make<S>(100, 200, 300);
  CHECK(grove::tree_map([](double a, double b) { return b - a; }, s, t) ==
        perm::make<S>(99, 198, 297));

  // A struct that cannot hold the new leaf type: a mapped_node whose fields follow leaf order.
  const auto names = grove::tree_map([](double v) { return std::to_string(int(v)); }, s);
  CHECK(names.template get<0>() == std::to_string(int(perm::field(s, order[0]))));
  CHECK(names.template get<2>() == std::to_string(int(perm::field(s, order[2]))));
  const S back = grove::tree_map([](const std::string& v) { return std::stod(v); }, names);
  CHECK(back == s);

  // tree_unflatten: leaf i fills the i-th registered field.
  const auto def = grove::tree_structure(s);
  const S filled = grove::tree_unflatten(def, std::vector<double>{7, 8, 9});
  for (std::size_t i = 0; i < 3; ++i) CHECK(perm::field(filled, order[i]) == 7.0 + double(i));
  auto [ptrs, def2] = grove::tree_flatten(s);
  CHECK(grove::tree_unflatten(def2, ptrs) == s);

  // tree_transpose: a list of structs becomes a struct of lists, field by field.
  const std::vector<S> rows{perm::make<S>(1, 2, 3), perm::make<S>(4, 5, 6)};
  const auto cols = grove::tree_transpose(grove::tree_structure(std::vector<int>{0, 0}), def, rows);
  const std::vector<std::vector<double>> by_leaf{cols.template get<0>(), cols.template get<1>(),
                                                 cols.template get<2>()};
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(by_leaf[i] ==
          std::vector<double>{perm::field(rows[0], order[i]), perm::field(rows[1], order[i])});

  // ravel lays the fields out in leaf order; unravel puts each value back in its field.
  auto [flat, unravel] = grove::ravel(s);
  REQUIRE(flat.size() == 3);
  for (Eigen::Index i = 0; i < 3; ++i)
    CHECK(flat[i] == perm::field(s, order[static_cast<std::size_t>(i)]));
  CHECK(unravel(flat) == s);
  Eigen::VectorXd other(3);
  other << 4, 5, 6;
  const S un = unravel(other);
  for (std::size_t i = 0; i < 3; ++i) CHECK(perm::field(un, order[i]) == 4.0 + double(i));
}

TEMPLATE_TEST_CASE("a registered class template is rebuilt by field name", "[tree][fields]",
                   perm::PxyzT<float>, perm::PxzyT<float>, perm::PyxzT<float>, perm::PyzxT<float>,
                   perm::PzxyT<float>, perm::PzyxT<float>) {
  using S = TestType;
  const std::string order = S::order;
  const S s = perm::make<S>(1, 2, 3);
  CHECK(grove::tree_map([](float v) { return v; }, s) == s);
  // A new scalar rebuilds the template around it (PxyzT<float> -> PxyzT<double>), by name.
  const auto d = grove::tree_map([](float v) { return double(v) / 4; }, s);
  static_assert(!std::is_same_v<std::remove_cvref_t<decltype(d)>, S>);
  CHECK(d.x == 0.25);
  CHECK(d.y == 0.5);
  CHECK(d.z == 0.75);
  const S t = perm::make<S>(10, 20, 30);
  const auto sum = grove::tree_map([](float a, float b) { return a + b; }, s, t);
  CHECK(sum == perm::make<S>(11, 22, 33));
  const auto def = grove::tree_structure(s);
  const S filled = grove::tree_unflatten(def, std::vector<float>{7, 8, 9});
  for (std::size_t i = 0; i < 3; ++i) CHECK(perm::field(filled, order[i]) == 7.0f + float(i));
  // tree_transpose: a struct of lists (a mapped_node, since the template cannot hold vectors).
  const std::vector<S> rows{perm::make<S>(1, 2, 3), perm::make<S>(4, 5, 6)};
  const auto cols = grove::tree_transpose(grove::tree_structure(std::vector<int>{0, 0}), def, rows);
  const std::vector<std::vector<float>> by_leaf{cols.template get<0>(), cols.template get<1>(),
                                                cols.template get<2>()};
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(by_leaf[i] ==
          std::vector<float>{perm::field(rows[0], order[i]), perm::field(rows[1], order[i])});
  auto [flat, unravel] = grove::ravel(s);
  for (Eigen::Index i = 0; i < 3; ++i)
    CHECK(flat[i] == perm::field(s, order[static_cast<std::size_t>(i)]));
  CHECK(unravel(flat) == s);
}

// --- static fields --------------------------------------------------------------------------

using statics::Conv;

// README's example of static fields.
namespace readme {
struct Conv {
  Eigen::MatrixXf w;
  std::string name;
  int stride = 1;
};
GROVE_NODE_STATIC(Conv, (w), (name, stride));
}  // namespace readme

TEST_CASE("README's Conv with static fields", "[tree][static]") {
  const readme::Conv conv{Eigen::MatrixXf::Ones(3, 3), "conv1", 2};
  CHECK(grove::tree_structure(conv).str() == "PyTreeDef(CustomNode(Conv[('conv1', 2)], [*]))");
  const auto doubled = grove::tree_map([](const auto& w) { return 2 * w; }, conv);
  static_assert(std::is_same_v<decltype(doubled), const readme::Conv>);
  CHECK(doubled.w == Eigen::MatrixXf::Constant(3, 3, 2));
  CHECK(doubled.name == "conv1");
  CHECK(doubled.stride == 2);
  CHECK(grove::to_string(conv) == "Conv(w=float32[3,3], name='conv1', stride=2)");
}

TEST_CASE("static fields are node data: printed, compared and hashed", "[tree][static]") {
  // JAX: register_dataclass(Conv, data_fields=['w'], meta_fields=['name', 'stride']) prints the
  // meta values as a tuple: PyTreeDef(CustomNode(Conv[('conv1', 2)], [*])).
  const Conv a{1.5, "conv1", 2};
  CHECK(grove::tree_structure(a).str() == "PyTreeDef(CustomNode(Conv[('conv1', 2)], [*]))");
  CHECK(grove::tree_leaves(a).size() == 1);
  CHECK(grove::tree_structure(statics::Norm{true, 0.5, {1, 2}}).str() ==
        "PyTreeDef(CustomNode(Norm[(0.5, True)], [[*, *]]))");
  CHECK(grove::tree_structure(statics::Norm{false, 1.0, {}}).str() ==
        "PyTreeDef(CustomNode(Norm[(1.0, False)], [[]]))");
  CHECK(grove::tree_structure(statics::Scaled<double>{2, "m"}).str() ==
        "PyTreeDef(CustomNode(Scaled[('m',)], [*]))");
  CHECK(grove::tree_structure(statics::Tag{7}).str() == "PyTreeDef(CustomNode(Tag[(7,)], []))");
  // Floats as Python's repr lays them out: positional for exponents -4 to 15, else scientific
  // (found different from JAX by the differential test, oracle_trees_vs_jax_optree).
  CHECK(grove::tree_structure(statics::Norm{true, 1e-4, {}}).str() ==
        "PyTreeDef(CustomNode(Norm[(0.0001, True)], [[]]))");
  CHECK(grove::tree_structure(statics::Norm{true, 1e-5, {}}).str() ==
        "PyTreeDef(CustomNode(Norm[(1e-05, True)], [[]]))");
  CHECK(grove::tree_structure(statics::Norm{true, 1e15, {}}).str() ==
        "PyTreeDef(CustomNode(Norm[(1000000000000000.0, True)], [[]]))");
  CHECK(grove::tree_structure(statics::Norm{true, 1e16, {}}).str() ==
        "PyTreeDef(CustomNode(Norm[(1e+16, True)], [[]]))");
  CHECK(grove::tree_structure(statics::Norm{true, -123.25, {}}).str() ==
        "PyTreeDef(CustomNode(Norm[(-123.25, True)], [[]]))");
  CHECK(grove::tree_structure(statics::Tag{7}).num_leaves() == 0);
  // to_string shows every field, the static ones after the leaves, as a dataclass's repr does.
  CHECK(grove::to_string(a) == "Conv(w=1.5, name='conv1', stride=2)");
  CHECK(grove::to_string(statics::Tag{7}) == "Tag(id=7)");

  // Equal static values: equal structures, equal hashes, whatever the leaves.
  const Conv same{-3, "conv1", 2};
  CHECK(grove::tree_structure(a) == grove::tree_structure(same));
  CHECK(grove::tree_structure(a).hash() == grove::tree_structure(same).hash());
  // Any static value differing: another structure.
  const Conv other_name{1.5, "conv2", 2}, other_stride{1.5, "conv1", 3};
  CHECK_FALSE(grove::tree_structure(a) == grove::tree_structure(other_name));
  CHECK_FALSE(grove::tree_structure(a) == grove::tree_structure(other_stride));
  CHECK(grove::tree_structure(a).hash() != grove::tree_structure(other_name).hash());
  CHECK(grove::tree_structure(a).hash() != grove::tree_structure(other_stride).hash());
  CHECK(grove::tree_structure(statics::Tag{1}) != grove::tree_structure(statics::Tag{2}));

  // Inside bigger trees, through children, subtree and compose.
  const std::vector<Conv> net{a, other_stride};
  const auto def = grove::tree_structure(net);
  CHECK(def.str() ==
        "PyTreeDef([CustomNode(Conv[('conv1', 2)], [*]), CustomNode(Conv[('conv1', 3)], [*])])");
  CHECK(def.children()[1] == grove::tree_structure(other_stride));
  const auto composed =
      grove::tree_structure(std::vector<int>{0, 0}).compose(grove::tree_structure(a));
  CHECK(composed.str() ==
        "PyTreeDef([CustomNode(Conv[('conv1', 2)], [*]), CustomNode(Conv[('conv1', 2)], [*])])");
  CHECK(composed == grove::tree_structure(std::vector<Conv>{a, same}));
}

TEST_CASE("static fields survive every operation", "[tree][static]") {
  const Conv a{1.5, "conv1", 2};
  // tree_map copies them from the (first) tree.
  CHECK(grove::tree_map([](double w) { return 2 * w; }, a) == Conv{3.0, "conv1", 2});
  CHECK(grove::tree_map([](double x, double y) { return x + y; }, a, Conv{1, "conv1", 2}) ==
        Conv{2.5, "conv1", 2});
  // A mapped_node carries them too, and hands them back.
  const auto text = grove::tree_map([](double w) { return std::to_string(w); }, a);
  CHECK(text.statics == std::tuple<std::string, int>{"conv1", 2});
  CHECK(grove::tree_structure(text) == grove::tree_structure(a));
  CHECK(grove::tree_map([](const std::string& s) { return std::stod(s); }, text) == a);
  // A class template rebinding to a new scalar keeps them.
  const auto d = grove::tree_map([](float v) { return double(v); }, statics::Scaled<float>{2, "m"});
  CHECK(d == statics::Scaled<double>{2, "m"});
  // tree_unflatten restores them from the TreeDef.
  auto [leaves, def] = grove::tree_flatten(a);
  CHECK(grove::tree_unflatten(def, std::vector<double>{9}) == Conv{9, "conv1", 2});
  CHECK(grove::tree_unflatten(def, leaves) == a);
  const auto strings = grove::tree_unflatten(def, std::vector<std::string>{"w"});
  CHECK(strings.statics == std::tuple<std::string, int>{"conv1", 2});
  const statics::Norm n{false, 0.25, {1, 2, 3}};
  auto [nl, nd] = grove::tree_flatten(n);
  CHECK(grove::tree_unflatten(nd, nl) == n);
  CHECK(grove::tree_map([](double v) { return v; }, statics::Tag{5}).id == 5);
  CHECK(grove::tree_unflatten(grove::tree_structure(statics::Tag{5}), std::vector<int>{}).id == 5);
  // tree_for_each leaves them alone.
  Conv b = a;
  grove::tree_for_each([](double& w) { w = 0; }, b);
  CHECK(b == Conv{0, "conv1", 2});
  // flatten_up_to accepts a tree with the same static values.
  const auto prefix = grove::tree_structure(std::vector<Conv>{a});
  std::vector<Conv> tree{Conv{4, "conv1", 2}};
  CHECK(*std::get<double*>(prefix.flatten_up_to(tree)[0]) == 4);
  // tree_transpose: the static fields go with the structure.
  const std::vector<Conv> rows{Conv{1, "c", 1}, Conv{2, "c", 1}};
  const auto cols = grove::tree_transpose(grove::tree_structure(std::vector<int>{0, 0}),
                                          grove::tree_structure(rows[0]), rows);
  CHECK(cols.statics == std::tuple<std::string, int>{"c", 1});
  CHECK(cols.get<0>() == std::vector<double>{1, 2});
}

TEST_CASE("trees whose static fields differ are different structures", "[tree][static][errors]") {
  const std::vector<Conv> x{{1, "a", 2}, {2, "a", 2}};
  const std::vector<Conv> y{{1, "a", 2}, {2, "b", 2}};
  auto add = [](double p, double q) { return p + q; };
  CHECK_THROWS_AS(grove::tree_map(add, x, y), grove::tree_error);
  CHECK_THROWS_WITH(grove::tree_map(add, x, y),
                    Contains("grove::tree_map: pytree structure error: different static fields of "
                             "Conv at key path [1]: ('a', 2) in tree 1, ('b', 2) in tree 2") &&
                        Contains("tree 2: PyTreeDef([CustomNode(Conv[('a', 2)], [*]), "
                                 "CustomNode(Conv[('b', 2)], [*])])"));
  std::vector<Conv> target = x;
  CHECK_THROWS_WITH(grove::tree_for_each([](double&, double) {}, target, y),
                    Contains("grove::tree_for_each: pytree structure error: different static "
                             "fields of Conv at key path [1]"));
  CHECK(target == x);
  const auto prefix = grove::tree_structure(x);
  std::vector<Conv> other = y;
  CHECK_THROWS_WITH(prefix.flatten_up_to(other),
                    Contains("grove::tree_flatten_up_to: pytree structure error: different static "
                             "fields of Conv at key path [1]: ('a', 2) in the prefix, ('b', 2) in "
                             "the tree"));
  // At the root, and in a struct that is only static fields.
  CHECK_THROWS_WITH(
      grove::tree_map([](double p, double) { return p; }, Conv{1, "a", 1}, Conv{1, "a", 2}),
      Contains("different static fields of Conv at the root: ('a', 1) in tree 1, "
               "('a', 2) in tree 2"));
  using Tagged = std::tuple<statics::Tag, int>;
  CHECK_THROWS_WITH(grove::tree_map(add, Tagged{{1}, 0}, Tagged{{2}, 0}),
                    Contains("at key path [0]: (1,) in tree 1, (2,) in tree 2"));
}
