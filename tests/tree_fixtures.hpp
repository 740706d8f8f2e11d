// Types shared by the tree tests.
#pragma once

#include <grove/tree.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace fixtures {

struct Point {
  double x = 0;
  double y = 0;
  friend bool operator==(const Point&, const Point&) = default;
};
GROVE_NODE(Point, x, y);

template <class T>
struct Layer {
  T w;
  T b;
  friend bool operator==(const Layer&, const Layer&) = default;
};
GROVE_NODE(Layer, w, b);

// A struct whose fields are not in declaration order and which is not an aggregate.
class Reordered {
 public:
  Reordered() = default;
  Reordered(int a, std::string b) : a_(a), b_(std::move(b)) {}
  int a_ = 0;
  std::string b_;
  friend bool operator==(const Reordered&, const Reordered&) = default;
};
GROVE_NODE(Reordered, b_, a_);

// A custom container registered through node_traits: a list that is not a std::vector.
template <class T>
struct Bag {
  std::vector<T> items;
  friend bool operator==(const Bag&, const Bag&) = default;
};

}  // namespace fixtures

template <class T>
struct grove::node_traits<fixtures::Bag<T>> {
  static constexpr grove::node_kind kind = grove::node_kind::custom;
  static constexpr std::string_view name = "Bag";
  using child_type = T;
  static std::size_t size(const fixtures::Bag<T>& b) { return b.items.size(); }
  template <class Self>
  static decltype(auto) child(Self&& b, std::size_t i) {
    return std::forward<Self>(b).items[i];
  }
  template <class U>
  using rebind = fixtures::Bag<U>;
  template <class U, class Make>
  static fixtures::Bag<U> build(std::size_t n, Make&& make) {
    fixtures::Bag<U> out;
    for (std::size_t i = 0; i < n; ++i) out.items.push_back(make(i));
    return out;
  }
};

// Nodes with static fields (JAX's meta_fields): the fields test and the TreeDef hash test.
namespace statics {

struct Conv {
  double w = 0;
  std::string name;
  int stride = 1;
  friend bool operator==(const Conv&, const Conv&) = default;
};
GROVE_NODE_STATIC(Conv, (w), (name, stride));

// Static fields before the leaf in declaration order, a float and a bool among them.
struct Norm {
  bool affine = true;
  double eps = 1e-5;
  std::vector<double> scale;
  friend bool operator==(const Norm&, const Norm&) = default;
};
GROVE_NODE_STATIC(Norm, (scale), (eps, affine));

template <class T>
struct Scaled {
  T value{};
  std::string unit;
  friend bool operator==(const Scaled&, const Scaled&) = default;
};
GROVE_NODE_STATIC(Scaled, (value), (unit));

// Only static fields: a node without children.
struct Tag {
  int id = 0;
};
GROVE_NODE_STATIC(Tag, (), (id));

}  // namespace statics
