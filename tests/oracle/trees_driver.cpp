// grove's tree core on random trees, for tests/oracle/trees_oracle.py to check against
// jax.tree_util and optree. A seeded generator fills a few dozen C++ tree types whose run-time
// shape varies (vector lengths, map keys, engaged optionals, static field values); for each tree
// the driver prints its own serialization of the tree (written here, independently of grove's
// traits, so that Python can rebuild the same tree out of tuples, lists, dicts, None and
// dataclasses) and grove's answers: leaves, TreeDef text, counts, key paths, tree_map over two and
// three trees, flatten_up_to, tree_broadcast, and whether a structure mismatch threw.
//
// Usage: trees_driver TREES_PER_FAMILY SEED. One text record `trees`: one JSON object per line.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "grove/tree.hpp"
#include "oracle_io.hpp"

namespace fam {

// The registered structs. Each is a class template over its leaf (or subtree) types, so that one
// family of trees can be instantiated with leaves (the prefix) and with subtrees (the full tree).
template <class A, class B>
struct Point {
  A x{};
  B y{};
};
GROVE_NODE(Point, x, y);

template <class W>
struct Conv {
  W w{};
  std::string name;
  int stride = 1;
};
GROVE_NODE_STATIC(Conv, (w), (name, stride));

// Static fields before the leaf, a float and a bool among them.
template <class W>
struct Norm {
  double eps = 0;
  W scale{};
  bool affine = false;
};
GROVE_NODE_STATIC(Norm, (scale), (eps, affine));

template <class W>
struct Block {
  std::vector<W> items;
  std::optional<W> bias;
};
GROVE_NODE(Block, items, bias);

// Only static fields: a node without children.
struct Tag {
  int id = 0;
};
GROVE_NODE_STATIC(Tag, (), (id));

// Registered in the other order than declared: leaves come b first.
template <class A, class B>
struct Reord {
  A a{};
  B b{};
};
GROVE_NODE(Reord, b, a);

}  // namespace fam

namespace {

using fam::Block;
using fam::Conv;
using fam::Norm;
using fam::Point;
using fam::Reord;
using fam::Tag;

// --- type categories, decided here rather than by grove's traits ------------------------------

template <class T, template <class...> class Tm>
constexpr bool is_a = false;
template <template <class...> class Tm, class... A>
constexpr bool is_a<Tm<A...>, Tm> = true;

template <class T>
constexpr bool is_sequence = is_a<T, std::vector> || is_a<T, std::deque> || is_a<T, std::list>;
template <class T>
constexpr bool is_mapping = is_a<T, std::map> || is_a<T, std::unordered_map>;
template <class T>
constexpr bool is_std_array = false;
template <class T, std::size_t N>
constexpr bool is_std_array<std::array<T, N>> = true;
template <class T>
constexpr bool is_tuple_like = is_a<T, std::tuple> || is_a<T, std::pair> || is_std_array<T>;

// --- the generator -----------------------------------------------------------------------------

// A stream of structural choices. With p > 0, each choice is replaced by an unrelated one with
// probability p: the same seed then gives a tree that mostly agrees with the unmutated one, which
// is what makes the structure-mismatch cases interesting (a different length here, a missing key
// there) rather than always wildly different.
struct Source {
  std::mt19937_64 base;
  std::mt19937_64 mutation;
  double p = 0;
  Source(std::uint64_t seed, std::uint64_t mutation_seed, double prob)
      : base(seed), mutation(mutation_seed), p(prob) {}
  std::uint64_t operator()() {
    std::uint64_t v = base();
    if (p > 0 && std::uniform_real_distribution<double>(0, 1)(mutation) < p) v = mutation();
    return v;
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>((*this)() % n); }
};

struct Gen {
  Source* shape;  // choices of the prefix part of the tree
  Source* sub;    // choices inside the subtrees that replace the prefix's leaves
  long* counter;  // the next leaf value
};

const std::vector<std::string>& string_keys() {
  // Quotes, backslashes, control characters, spaces and UTF-8: what Python's repr must escape.
  static const std::vector<std::string> keys{"a",
                                             "b",
                                             "c",
                                             "w",
                                             "bias",
                                             "",
                                             "a'b",
                                             "q\"x",
                                             "b\\s",
                                             "t\tab",
                                             "n\nl",
                                             "\xc3\xa9",
                                             "z z",
                                             "cr\r",
                                             "\x01",
                                             "B",
                                             "a1",
                                             "a'\"b",
                                             "del\x7f",
                                             "nb\xc2\xa0sp",
                                             "zw\xe2\x80\x8bsp",
                                             "c1\xc2\x85",
                                             "\xe2\x80\xa8",
                                             "\xf0\x9f\x8c\xb3"};
  return keys;
}
const std::vector<std::int64_t>& int_keys() {
  static const std::vector<std::int64_t> keys{-3, -1, 0, 1, 2, 7, 10, 100, 1ll << 40, -(1ll << 33)};
  return keys;
}

std::size_t draw_length(Source& s) {
  // Mostly short, sometimes empty: small trees, many distinct structures.
  static constexpr std::array<std::size_t, 8> lengths{0, 1, 1, 2, 2, 2, 3, 4};
  return lengths[s.below(lengths.size())];
}

template <class L, class T>
void fill(const Gen& g, T& t);

template <class L, class A, class B>
void fill_node(const Gen& g, Point<A, B>& p) {
  fill<L>(g, p.x);
  fill<L>(g, p.y);
}
template <class L, class W>
void fill_node(const Gen& g, Conv<W>& c) {
  static const std::vector<std::string> names{"conv1",     "a'b",         "", "x\"y", "conv2",
                                              "tab\there", "\x02\xc2\xa0"};
  static constexpr std::array<int, 4> strides{1, 2, -1, 0};
  c.name = names[g.shape->below(names.size())];
  c.stride = strides[g.shape->below(strides.size())];
  fill<L>(g, c.w);
}
template <class L, class W>
void fill_node(const Gen& g, Norm<W>& n) {
  // Floats whose Python repr switches between fixed and scientific notation, and -0.0.
  static constexpr std::array<double, 18> eps{1e-5,
                                              0.5,
                                              1e15,
                                              1e16,
                                              1e-4,
                                              123456.789,
                                              -0.0,
                                              0.0,
                                              1.0,
                                              3e-300,
                                              2.5e22,
                                              0.1,
                                              1.5e-5,
                                              0.000123,
                                              12345678901234567.0,
                                              9999999999999998.0,
                                              -2.5,
                                              1e300};
  n.eps = eps[g.shape->below(eps.size())];
  if (g.shape->below(2) == 0) {
    // Or a float with 1 to 17 significant digits and a decimal exponent from -8 to 20, either
    // side of where repr switches between positional and scientific notation.
    const auto digits = static_cast<double>(g.shape->below(std::uint64_t{1} << 53));
    const double rounded =
        std::round(digits / std::pow(10.0, static_cast<double>(g.shape->below(16))));
    const double exponent = static_cast<double>(g.shape->below(29)) - 8.0 - 16.0;
    n.eps = (g.shape->below(2) ? -1.0 : 1.0) * rounded * std::pow(10.0, exponent);
  }
  n.affine = g.shape->below(2) == 1;
  fill<L>(g, n.scale);
}
template <class L, class W>
void fill_node(const Gen& g, Block<W>& b) {
  fill<L>(g, b.items);
  fill<L>(g, b.bias);
}
template <class L>
void fill_node(const Gen& g, Tag& t) {
  t.id = static_cast<int>(g.shape->below(3));
}
template <class L, class A, class B>
void fill_node(const Gen& g, Reord<A, B>& r) {
  fill<L>(g, r.a);
  fill<L>(g, r.b);
}

template <class L, class T>
void fill(const Gen& g, T& t) {
  if constexpr (!std::is_same_v<L, long> && std::is_same_v<T, L>) {
    // A subtree where the prefix has a leaf: its shape comes from a stream of its own, so the
    // prefix part stays in step with the prefix tree built from the same seed.
    fill<long>(Gen{g.sub, g.sub, g.counter}, t);
  } else if constexpr (std::is_same_v<T, long>) {
    t = (*g.counter)++;
  } else if constexpr (std::is_same_v<T, std::monostate>) {
  } else if constexpr (is_a<T, std::optional>) {
    t.reset();
    if (g.shape->below(10) < 7) fill<L>(g, t.emplace());
  } else if constexpr (is_sequence<T>) {
    t.clear();
    t.resize(draw_length(*g.shape));
    for (auto& x : t) fill<L>(g, x);
  } else if constexpr (is_mapping<T>) {
    using K = typename T::key_type;
    std::vector<K> pool;
    if constexpr (std::is_same_v<K, std::string>)
      pool = string_keys();
    else
      for (auto k : int_keys())
        if (static_cast<std::int64_t>(static_cast<K>(k)) == k) pool.push_back(static_cast<K>(k));
    const std::size_t n = draw_length(*g.shape);
    std::vector<K> keys;
    for (std::size_t i = 0; i < n; ++i) keys.push_back(pool[g.shape->below(pool.size())]);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    t.clear();
    for (const auto& k : keys) fill<L>(g, t[k]);
  } else if constexpr (is_tuple_like<T>) {
    std::apply([&](auto&... xs) { (fill<L>(g, xs), ...); }, t);
  } else {
    fill_node<L>(g, t);
  }
}

// --- the serializer: JSON that trees_oracle.py turns back into Python objects ------------------
//   leaf: a number; None: null; tuple: {"t": [...]}; list: [...]; dict: {"d": [[key, value], ...]}
//   (entries in the container's own order); registered struct: {"c": name, "d": [[field, value],
//   ...] in registration order, "m": [[field, static value], ...]}; a float static value is
//   {"f": "%.17g text"}, so that Python reads back the very double (and 1e15 stays a float).

void write_json_string(std::string& out, std::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

void write_static(std::string& out, const std::string& v) {
  write_json_string(out, v);
}
void write_static(std::string& out, int v) {
  out += std::to_string(v);
}
void write_static(std::string& out, bool v) {
  out += v ? "true" : "false";
}
void write_static(std::string& out, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  out += "{\"f\": \"";
  out += buf;
  out += "\"}";
}

template <class T>
void desc(std::string& out, const T& t);

// One registered struct: its name, its leaf fields in registration order, its static fields.
template <class... Data, class... Meta>
void desc_struct(std::string& out, const char* name,
                 std::tuple<std::pair<const char*, Data>...> data,
                 std::tuple<std::pair<const char*, Meta>...> meta) {
  out += "{\"c\": \"";
  out += name;
  out += "\", \"d\": [";
  bool first = true;
  std::apply(
      [&](const auto&... field) {
        ((out += first ? "[\"" : ", [\"", first = false, out += field.first, out += "\", ",
          desc(out, *field.second), out += ']'),
         ...);
      },
      data);
  out += "], \"m\": [";
  first = true;
  std::apply(
      [&](const auto&... field) {
        ((out += first ? "[\"" : ", [\"", first = false, out += field.first, out += "\", ",
          write_static(out, *field.second), out += ']'),
         ...);
      },
      meta);
  out += "]}";
}

template <class P>
auto field(const char* name, const P* value) {
  return std::pair<const char*, const P*>(name, value);
}

template <class A, class B>
void desc_node(std::string& out, const Point<A, B>& p) {
  desc_struct(out, "Point", std::make_tuple(field("x", &p.x), field("y", &p.y)), std::make_tuple());
}
template <class W>
void desc_node(std::string& out, const Conv<W>& c) {
  desc_struct(out, "Conv", std::make_tuple(field("w", &c.w)),
              std::make_tuple(field("name", &c.name), field("stride", &c.stride)));
}
template <class W>
void desc_node(std::string& out, const Norm<W>& n) {
  desc_struct(out, "Norm", std::make_tuple(field("scale", &n.scale)),
              std::make_tuple(field("eps", &n.eps), field("affine", &n.affine)));
}
template <class W>
void desc_node(std::string& out, const Block<W>& b) {
  desc_struct(out, "Block", std::make_tuple(field("items", &b.items), field("bias", &b.bias)),
              std::make_tuple());
}
void desc_node(std::string& out, const Tag& t) {
  desc_struct(out, "Tag", std::make_tuple(), std::make_tuple(field("id", &t.id)));
}
template <class A, class B>
void desc_node(std::string& out, const Reord<A, B>& r) {
  desc_struct(out, "Reord", std::make_tuple(field("b", &r.b), field("a", &r.a)), std::make_tuple());
}

// tree_map rebuilds a registered struct whose fields are not its type parameters as a
// grove::mapped_node that keeps the original's name, fields and static values.
template <class W, class... C>
void desc_node(std::string& out, const grove::mapped_node<Conv<W>, C...>& c) {
  desc_struct(out, "Conv", std::make_tuple(field("w", &c.template get<0>())),
              std::make_tuple(field("name", &std::get<0>(c.statics)),
                              field("stride", &std::get<1>(c.statics))));
}
template <class W, class... C>
void desc_node(std::string& out, const grove::mapped_node<Norm<W>, C...>& n) {
  desc_struct(out, "Norm", std::make_tuple(field("scale", &n.template get<0>())),
              std::make_tuple(field("eps", &std::get<0>(n.statics)),
                              field("affine", &std::get<1>(n.statics))));
}
template <class W, class... C>
void desc_node(std::string& out, const grove::mapped_node<Block<W>, C...>& b) {
  desc_struct(
      out, "Block",
      std::make_tuple(field("items", &b.template get<0>()), field("bias", &b.template get<1>())),
      std::make_tuple());
}

template <class A, class B, class... C>
void desc_node(std::string& out, const grove::mapped_node<Reord<A, B>, C...>& r) {
  desc_struct(out, "Reord",
              std::make_tuple(field("b", &r.template get<0>()), field("a", &r.template get<1>())),
              std::make_tuple());
}

template <class T>
void desc(std::string& out, const T& t) {
  if constexpr (std::is_same_v<T, long>) {
    out += std::to_string(t);
  } else if constexpr (std::is_same_v<T, std::monostate>) {
    out += "null";
  } else if constexpr (is_a<T, std::optional>) {
    if (t)
      desc(out, *t);
    else
      out += "null";
  } else if constexpr (is_sequence<T>) {
    out += '[';
    bool first = true;
    for (const auto& x : t) {
      if (!first) out += ", ";
      first = false;
      desc(out, x);
    }
    out += ']';
  } else if constexpr (is_mapping<T>) {
    out += "{\"d\": [";
    bool first = true;
    for (const auto& [k, v] : t) {
      out += first ? "[" : ", [";
      first = false;
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(k)>, std::string>)
        write_json_string(out, k);
      else
        out += std::to_string(k);
      out += ", ";
      desc(out, v);
      out += ']';
    }
    out += "]}";
  } else if constexpr (is_tuple_like<T>) {
    out += "{\"t\": [";
    bool first = true;
    std::apply(
        [&](const auto&... xs) { ((out += first ? "" : ", ", first = false, desc(out, xs)), ...); },
        t);
    out += "]}";
  } else {
    desc_node(out, t);
  }
}

template <class T>
std::string desc(const T& t) {
  std::string out;
  desc(out, t);
  return out;
}

// A pointer or a variant of pointers, as tree_leaves and flatten_up_to give them.
template <class P>
std::string desc_pointee(const P& p) {
  if constexpr (std::is_pointer_v<P>)
    return desc(*p);
  else
    return std::visit([](const auto* q) { return desc(*q); }, p);
}

// --- the families ------------------------------------------------------------------------------
// Each family is a tree type over its leaf type L, instantiated with L = long (the prefix) and
// with L = a subtree type (the full tree that has the prefix as a prefix).

template <class L>
using F0 = std::deque<std::list<std::optional<L>>>;
template <class L>
using F1 = std::tuple<L, std::vector<L>, std::monostate>;
template <class L>
using F2 = std::map<std::string, std::vector<L>>;
template <class L>
using F3 = std::vector<std::optional<L>>;
template <class L>
using F4 = std::map<int, std::tuple<L, std::optional<L>>>;
template <class L>
using F5 = std::pair<Point<L, std::vector<L>>, std::array<L, 2>>;
template <class L>
using F6 = std::vector<Conv<std::map<std::string, L>>>;
template <class L>
using F7 = std::tuple<Norm<L>, Tag, std::vector<Reord<L, std::optional<L>>>>;
template <class L>
using F8 = std::unordered_map<std::string, Block<L>>;
template <class L>
using F9 = std::optional<std::vector<std::map<std::int64_t, L>>>;
template <class L>
using F11 = std::tuple<std::map<std::string, std::tuple<>>, std::array<L, 0>,
                       std::vector<std::tuple<L>>, std::optional<std::monostate>>;
template <class L>
using F12 = Conv<Point<std::vector<L>, std::map<std::string, Norm<L>>>>;
template <class L>
using F13 = std::unordered_map<int, std::vector<std::tuple<Tag, L, std::optional<Tag>>>>;

// The subtrees put where the prefix has leaves.
using S0 = std::vector<long>;
using S1 = std::pair<long, std::optional<long>>;
using S2 = std::map<std::string, long>;
using S3 = Point<long, std::vector<long>>;
using S4 = std::optional<long>;

// f for tree_map over the prefix and the full tree: the prefix leaf and the sum of the leaves of
// the subtree matched to it (trees_oracle.py computes the same with jax and optree).
long sum_leaves(const auto& subtree) {
  return grove::tree_reduce([](long acc, long v) { return acc + v; }, subtree, 0L);
}

struct Driver {
  std::string out;
  std::size_t trees = 0;
  std::size_t mismatches_thrown = 0;

  template <template <class> class F, class S>
  void family(int id, std::size_t count, std::uint64_t seed) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t s = seed * 1000003u + static_cast<std::uint64_t>(id) * 7919u + i;
      one<F, S>(id, s);
    }
  }

  template <template <class> class F, class S>
  void one(int id, std::uint64_t seed) {
    using P = F<long>;
    using Full = F<S>;
    P a, b, m;
    Full full;
    {
      Source shape(seed, 1, 0), sub(seed + 0x51, 2, 0);
      long counter = 1;
      fill<long>(Gen{&shape, &sub, &counter}, a);
    }
    {
      Source shape(seed, 1, 0), sub(seed + 0x51, 2, 0);
      long counter = 101;
      fill<long>(Gen{&shape, &sub, &counter}, b);
    }
    {
      Source shape(seed, 1, 0), sub(seed + 0x51, 2, 0);
      long counter = 10001;
      fill<S>(Gen{&shape, &sub, &counter}, full);
    }
    {
      Source shape(seed, seed ^ 0x9e3779b97f4a7c15ull, 0.08), sub(seed + 0x51, 2, 0);
      long counter = 1;
      fill<long>(Gen{&shape, &sub, &counter}, m);
    }

    std::string& o = out;
    o += "{\"family\": " + std::to_string(id) + ", \"seed\": " + std::to_string(seed);
    o += ", \"tree\": " + desc(a) + ", \"b\": " + desc(b) + ", \"full\": " + desc(full) +
         ", \"mutated\": " + desc(m);

    // Leaves, structure, counts.
    auto [leaves, def] = grove::tree_flatten(a);
    o += ", \"leaves\": [";
    for (std::size_t k = 0; k < leaves.size(); ++k) o += (k ? ", " : "") + desc_pointee(leaves[k]);
    o += "], \"treedef\": ";
    write_json_string(o, def.str());
    o += ", \"num_leaves\": " + std::to_string(def.num_leaves()) +
         ", \"num_nodes\": " + std::to_string(def.num_nodes()) +
         ", \"is_leaf\": " + (def.is_leaf() ? "true" : "false");
    // unflatten must give back the tree (its own serialization).
    std::vector<long> values;
    for (const auto& p : leaves) values.push_back(*p);
    o += ", \"unflatten_same\": ";
    o += desc(grove::tree_unflatten(def, values)) == desc(a) ? "true" : "false";

    // Key paths in both of keystr's forms.
    o += ", \"paths\": [";
    std::string simple;
    bool first = true;
    for (const auto& [path, leaf] : grove::tree_leaves_with_path(a)) {
      (void)leaf;
      if (!first) {
        o += ", ";
        simple += ", ";
      }
      first = false;
      write_json_string(o, grove::keystr(path));
      write_json_string(simple, grove::keystr(path, "/"));
    }
    o += "], \"simple_paths\": [" + simple + "]";

    // tree_map over two trees (prefix and full) and three (prefix, same-structure, full).
    const auto map2 =
        grove::tree_map([](long x, const auto& s) { return x * 1000 + sum_leaves(s); }, a, full);
    const auto map3 = grove::tree_map(
        [](long x, long y, const auto& s) { return x + 10 * y + 100 * sum_leaves(s); }, a, b, full);
    o += ", \"map2\": " + desc(map2) + ", \"map3\": " + desc(map3);

    // flatten_up_to and broadcast of the prefix onto the full tree.
    o += ", \"up_to\": [";
    first = true;
    for (const auto& p : def.flatten_up_to(full)) {
      o += (first ? "" : ", ") + desc_pointee(p);
      first = false;
    }
    const auto broadcast = grove::tree_broadcast(a, full);
    o += "], \"broadcast\": " + desc(broadcast);
    o += ", \"broadcast_treedef\": ";
    write_json_string(o, grove::tree_structure(broadcast).str());

    // The mutated tree: same type, often another structure. Both sides must throw, or not.
    const auto mdef = grove::tree_structure(m);
    o += ", \"mutated_equal\": ";
    o += def == mdef ? "true" : "false";
    o += ", \"mutated_hash_equal\": ";
    o += def.hash() == mdef.hash() ? "true" : "false";
    o += ", \"map_mutated\": ";
    try {
      o += desc(
          grove::tree_map([](long x, const auto& s) { return x * 1000 + sum_leaves(s); }, a, m));
    } catch (const grove::tree_error&) {
      o += "\"raised\"";
      ++mismatches_thrown;
    }
    o += ", \"up_to_mutated\": ";
    try {
      std::string list = "[";
      first = true;
      for (const auto& p : def.flatten_up_to(m)) {
        list += (first ? "" : ", ") + desc_pointee(p);
        first = false;
      }
      o += list + "]";
    } catch (const grove::tree_error&) {
      o += "\"raised\"";
    }
    o += "}\n";
    ++trees;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: trees_driver TREES_PER_FAMILY SEED\n");
    return 2;
  }
  const std::size_t n = std::strtoull(argv[1], nullptr, 10);
  const std::uint64_t seed = std::strtoull(argv[2], nullptr, 10);
  Driver d;
  d.family<F0, S0>(0, n, seed);
  d.family<F1, S1>(1, n, seed);
  d.family<F2, S2>(2, n, seed);
  d.family<F3, S3>(3, n, seed);
  d.family<F4, S4>(4, n, seed);
  d.family<F5, S0>(5, n, seed);
  d.family<F6, S1>(6, n, seed);
  d.family<F7, S2>(7, n, seed);
  d.family<F8, S3>(8, n, seed);
  d.family<F9, S4>(9, n, seed);
  d.family<F11, S2>(11, n, seed);
  d.family<F12, S1>(12, n, seed);
  d.family<F13, S3>(13, n, seed);
  oracle::emit_text("trees", d.out);
  oracle::emit_text("count", std::to_string(d.trees));
  return 0;
}
