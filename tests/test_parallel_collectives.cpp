// grove::parallel's collectives beyond psum: all_gather, psum_scatter, pmax / pmin and ppermute
// (JAX's lax functions of those names), and psum / pmean of Eigen tensors and 16-bit floats. Each
// runs over LocalDevices (1 to 4 devices), over SingleDevice and over a user communicator with
// only the five members `device_group` requires (so that the generic paths run), with the staging
// memory's default settings and with buckets of 64 bytes (the multi-bucket and in-place paths),
// and is checked against a reference computed here from every rank's input, element by element:
// every device's input is a function of its rank, so each device computes all of them.
//
// Catch2's assertions are not thread-safe: each device records what it checked in a Log, and the
// main thread asserts every entry.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <grove/parallel.hpp>
#include <grove/random/key.hpp>
#include <grove/tree/tensor.hpp>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace collectives_test {

namespace par = grove::parallel;
namespace rnd = grove::random;
using Eigen::Dynamic;
using Eigen::Index;
using RowMajorXf = Eigen::Matrix<float, Dynamic, Dynamic, Eigen::RowMajor>;
using RowMajorXd = Eigen::Matrix<double, Dynamic, Dynamic, Eigen::RowMajor>;

// --- leaves as the tests see them (written here, not taken from grove::parallel) ---------------

template <class T>
struct complex_number : std::false_type {};
template <class T>
struct complex_number<std::complex<T>> : std::true_type {};
template <class S>
constexpr bool half_float = std::is_same_v<S, Eigen::half> || std::is_same_v<S, Eigen::bfloat16>;
template <class S>
constexpr bool floating = std::is_floating_point_v<S> || half_float<S>;
template <class L>
constexpr bool dense = std::is_base_of_v<Eigen::DenseBase<L>, L>;
template <class L>
concept tensor = !dense<L> && requires {
  L::NumDimensions;
  typename L::Scalar;
};
template <class L>
constexpr bool number = std::is_arithmetic_v<L> || half_float<L> || complex_number<L>::value;

template <class L>
struct element {
  using type = L;
};
template <class L>
requires dense<L> || tensor<L>
struct element<L> {
  using type = typename L::Scalar;
};
template <class L>
using element_t = typename element<std::remove_cvref_t<L>>::type;

// numpy's ndim: 0 for a number, 1 for an Eigen vector (one row or one column at compile time), 2
// for another Eigen matrix, the rank of a tensor.
template <class L>
constexpr std::size_t ndim() {
  if constexpr (tensor<L>)
    return static_cast<std::size_t>(L::NumDimensions);
  else if constexpr (dense<L>)
    return L::IsVectorAtCompileTime ? 1 : 2;
  else
    return 0;
}

template <std::size_t N>
using Dims = std::array<Index, N>;

template <class L>
Dims<ndim<L>()> dims_of(const L& x) {
  Dims<ndim<L>()> d{};
  if constexpr (tensor<L>) {
    for (std::size_t k = 0; k < d.size(); ++k) d[k] = x.dimension(k);
  } else if constexpr (ndim<L>() == 1) {
    d[0] = x.size();
  } else if constexpr (ndim<L>() == 2) {
    d = {x.rows(), x.cols()};
  }
  (void)x;
  return d;
}

// Element i (numpy order) of a leaf, and a reference to it.
template <class L>
element_t<L> at(const L& x, const Dims<ndim<L>()>& i) {
  if constexpr (tensor<L> && ndim<L>() == 0)
    return x();
  else if constexpr (tensor<L>)
    return x(i);
  else if constexpr (ndim<L>() == 1)
    return x(i[0]);
  else if constexpr (ndim<L>() == 2)
    return x(i[0], i[1]);
  else
    return x;
}
template <class L>
decltype(auto) at_ref(L& x, const Dims<ndim<L>()>& i) {
  if constexpr (tensor<L> && ndim<L>() == 0)
    return (x());
  else if constexpr (tensor<L>)
    return (x(i));
  else if constexpr (ndim<L>() == 1)
    return (x(i[0]));
  else if constexpr (ndim<L>() == 2)
    return (x(i[0], i[1]));
  else
    return (x);
}

// Calls f(i) for every index of an array of dimensions `dims`, first index slowest.
template <std::size_t N, class F>
void for_each_index(const Dims<N>& dims, F&& f) {
  for (const Index d : dims)
    if (d == 0) return;
  Dims<N> i{};
  for (;;) {
    f(std::as_const(i));
    std::size_t k = N;
    while (k > 0) {
      --k;
      if (++i[k] < dims[k]) break;
      i[k] = 0;
      if (k == 0) return;
    }
    if (N == 0) return;
  }
}

template <std::size_t N>
Index position(const Dims<N>& i) {
  Index p = 0;
  for (std::size_t k = 0; k < N; ++k) p = p * 7 + i[k];
  return p;
}

// --- values --------------------------------------------------------------------------------------

// A small number that depends on the rank and the position: integers in [-20, 20] (unsigned:
// [0, 40]) or quarters, so that sums over 4 devices are exact in every element type and in any
// order.
template <class S>
S value_of(int rank, Index i) {
  const int v = static_cast<int>((rank * 131 + i * 17 + 5) % 41) - 20;
  if constexpr (std::is_same_v<S, bool>)
    return (rank + i) % 3 == 0;
  else if constexpr (complex_number<S>::value)
    return S(static_cast<typename S::value_type>(v) / 4,
             static_cast<typename S::value_type>(rank - v));
  else if constexpr (floating<S>)
    return S(static_cast<float>(v) / 4);
  else if constexpr (std::is_unsigned_v<S>)
    return static_cast<S>(v + 20);
  else
    return static_cast<S>(v);
}

// A number with all its bits in play (not a small integer), for the sums whose order matters.
template <class S>
S irregular_of(int rank, Index i) {
  const double x = std::sin(static_cast<double>(rank * 977 + i * 131 + 3)) * 100.0 / 3.0;
  return S(static_cast<float>(x));
}

template <class L>
void fill_leaf(L& x, int rank, int salt) {
  if constexpr (std::is_same_v<L, rnd::Key>) {
    x = rnd::fold_in(rnd::key(9), static_cast<std::uint32_t>(rank * 100 + salt));
  } else if constexpr (number<L>) {
    x = value_of<L>(rank, salt);
  } else {
    for_each_index(dims_of(x), [&](const auto& i) {
      at_ref(x, i) = value_of<element_t<L>>(rank, position(i) + 13 * salt);
    });
  }
}

// A fixed-size Eigen object or TensorFixedSize of zeros.
template <class T>
T zeros() {
  T t;
  t.setZero();
  return t;
}

// Fills every leaf of `tree` (through a Map, into the memory it maps) with rank's values.
template <class Tree>
void fill_tree(Tree& tree, int rank) {
  int salt = 0;
  grove::tree_for_each([&](auto& leaf) { fill_leaf(leaf, rank, salt++); }, tree);
}

template <class S>
std::uint16_t bits16(S x) {
  std::uint16_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// The same value: bits for 16-bit floats, a NaN for a NaN, a zero with its sign.
template <class S>
bool same_value(const S& a, const S& b) {
  if constexpr (half_float<S>) {
    if (std::isnan(static_cast<float>(a))) return std::isnan(static_cast<float>(b));
    return bits16(a) == bits16(b);
  } else if constexpr (std::is_floating_point_v<S>) {
    if (std::isnan(a)) return std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
  } else if constexpr (complex_number<S>::value) {
    return same_value(a.real(), b.real()) && same_value(a.imag(), b.imag());
  } else {
    return a == b;
  }
}

template <class L>
bool same_leaf(const L& x, const L& y) {
  if constexpr (dense<L> || tensor<L>) {
    if (dims_of(x) != dims_of(y)) return false;
    bool same = true;
    for_each_index(dims_of(x),
                   [&](const auto& i) { same = same && same_value(at(x, i), at(y, i)); });
    return same;
  } else if constexpr (number<L>) {
    return same_value(x, y);
  } else {
    return x == y;  // a value, such as a random::Key
  }
}

template <class Tree>
bool same_tree(const Tree& a, const Tree& b) {
  bool same = true;
  grove::tree_for_each([&](const auto& x, const auto& y) { same = same && same_leaf(x, y); }, a, b);
  return same;
}

// The leaf with every byte of its elements zero (lax.ppermute's zeros for a device no one sends
// to: 0, +0.0, false, a key of zero words).
template <class L>
L zeroed(L x) {
  if constexpr (dense<L> || tensor<L>) {
    if (x.size() > 0)
      std::memset(static_cast<void*>(x.data()), 0,
                  static_cast<std::size_t>(x.size()) * sizeof(element_t<L>));
  } else {
    std::memset(static_cast<void*>(&x), 0, sizeof(L));
  }
  return x;
}

// --- the expected results: arrays in numpy order -----------------------------------------------

template <class S, std::size_t N>
class Expected {
 public:
  Dims<N> dims{};

  void resize() {
    std::size_t count = 1;
    for (const Index d : dims) count *= static_cast<std::size_t>(d);
    cells_.assign(count, Cell{});
  }
  S get(const Dims<N>& i) const { return static_cast<S>(cells_[offset(i)]); }
  void set(const Dims<N>& i, S v) { cells_[offset(i)] = static_cast<Cell>(v); }

 private:
  using Cell = std::conditional_t<std::is_same_v<S, bool>, unsigned char, S>;
  std::size_t offset(const Dims<N>& i) const {
    std::size_t o = 0;
    for (std::size_t k = 0; k < N; ++k)
      o = o * static_cast<std::size_t>(dims[k]) + static_cast<std::size_t>(i[k]);
    return o;
  }
  std::vector<Cell> cells_;
};

// Whether `got` (a number, an Eigen object or a tensor) has the dimensions and values of `want`.
template <class Got, class S, std::size_t N>
bool matches(const Got& got, const Expected<S, N>& want) {
  static_assert(std::is_same_v<element_t<Got>, S>, "the result has another element type");
  static_assert(ndim<Got>() == N, "the result has another number of dimensions");
  if (dims_of(got) != want.dims) return false;
  bool same = true;
  for_each_index(want.dims,
                 [&](const auto& i) { same = same && same_value(at(got, i), want.get(i)); });
  return same;
}

// lax.all_gather(x, axis, tiled=False): the devices' leaves stacked along a new axis.
template <class Leaf>
auto stacked_expected(const std::vector<Leaf>& ins, int axis) {
  constexpr std::size_t D = ndim<Leaf>();
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(D) + 1 : axis);
  const auto in = dims_of(ins[0]);
  Expected<element_t<Leaf>, D + 1> out;
  for (std::size_t k = 0, j = 0; k < D + 1; ++k)
    out.dims[k] = k == a ? static_cast<Index>(ins.size()) : in[j++];
  out.resize();
  for_each_index(out.dims, [&](const auto& i) {
    Dims<D> from{};
    for (std::size_t k = 0, j = 0; k < D + 1; ++k)
      if (k != a) from[j++] = i[k];
    out.set(i, at(ins[static_cast<std::size_t>(i[a])], from));
  });
  return out;
}

// lax.all_gather(x, axis, tiled=True): the devices' leaves side by side along an existing axis.
template <class Leaf>
auto tiled_expected(const std::vector<Leaf>& ins, int axis) {
  constexpr std::size_t D = ndim<Leaf>();
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<int>(D) : axis);
  const auto in = dims_of(ins[0]);
  Expected<element_t<Leaf>, D> out;
  out.dims = in;
  out.dims[a] *= static_cast<Index>(ins.size());
  out.resize();
  for_each_index(out.dims, [&](const auto& i) {
    Dims<D> from = i;
    from[a] = i[a] % in[a];
    out.set(i, at(ins[static_cast<std::size_t>(i[a] / in[a])], from));
  });
  return out;
}

// 16-bit floats are summed in float, and rounded once.
template <class S>
using accumulator_t = std::conditional_t<half_float<S>, float, S>;

// The sum over the devices' leaves, added in rank order ((x0 + x1) + x2) + ..., as LocalDevices
// adds; with `mean`, divided by the number of devices.
template <class Leaf>
auto summed_expected(const std::vector<Leaf>& ins, bool mean = false) {
  using S = element_t<Leaf>;
  using A = accumulator_t<S>;
  Expected<S, ndim<Leaf>()> out;
  out.dims = dims_of(ins[0]);
  out.resize();
  for_each_index(out.dims, [&](const auto& i) {
    A acc = static_cast<A>(at(ins[0], i));
    for (std::size_t r = 1; r < ins.size(); ++r)
      acc = static_cast<A>(acc + static_cast<A>(at(ins[r], i)));
    if (mean) acc = static_cast<A>(acc / static_cast<A>(ins.size()));
    out.set(i, static_cast<S>(acc));
  });
  return out;
}

// lax.psum_scatter(x, scatter_dimension=d, tiled=False) on device `rank`: the sum's slice `rank`
// along d, that dimension dropped.
template <class S, std::size_t D>
Expected<S, D - 1> untiled_block(const Expected<S, D>& sum, int d, int rank) {
  const auto a = static_cast<std::size_t>(d);
  Expected<S, D - 1> out;
  for (std::size_t k = 0, j = 0; k < D; ++k)
    if (k != a) out.dims[j++] = sum.dims[k];
  out.resize();
  for_each_index(out.dims, [&](const auto& i) {
    Dims<D> from{};
    for (std::size_t k = 0, j = 0; k < D; ++k) from[k] = k == a ? Index{rank} : i[j++];
    out.set(i, sum.get(from));
  });
  return out;
}

// lax.psum_scatter(x, scatter_dimension=d, tiled=True) on device `rank` of n: the sum's block
// `rank` of n along d.
template <class S, std::size_t D>
Expected<S, D> tiled_block(const Expected<S, D>& sum, int d, int rank, int n) {
  const auto a = static_cast<std::size_t>(d);
  Expected<S, D> out;
  out.dims = sum.dims;
  out.dims[a] /= n;
  out.resize();
  for_each_index(out.dims, [&](const auto& i) {
    Dims<D> from = i;
    from[a] += Index{rank} * out.dims[a];
    out.set(i, sum.get(from));
  });
  return out;
}

// max and min as lax.pmax / lax.pmin take them: a NaN wins, and +0 is above -0.
template <class S>
S larger(S a, S b) {
  if constexpr (floating<S>) {
    using F = accumulator_t<S>;
    const F x = static_cast<F>(a), y = static_cast<F>(b);
    if (std::isnan(x)) return a;
    if (std::isnan(y)) return b;
    if (x == y) return std::signbit(x) ? b : a;
    return x < y ? b : a;
  } else {
    return a < b ? b : a;
  }
}
template <class S>
S smaller(S a, S b) {
  if constexpr (floating<S>) {
    using F = accumulator_t<S>;
    const F x = static_cast<F>(a), y = static_cast<F>(b);
    if (std::isnan(x)) return a;
    if (std::isnan(y)) return b;
    if (x == y) return std::signbit(x) ? a : b;
    return y < x ? b : a;
  } else {
    return b < a ? b : a;
  }
}

template <class Leaf>
auto extreme_expected(const std::vector<Leaf>& ins, bool max) {
  using S = element_t<Leaf>;
  Expected<S, ndim<Leaf>()> out;
  out.dims = dims_of(ins[0]);
  out.resize();
  for_each_index(out.dims, [&](const auto& i) {
    S acc = at(ins[0], i);
    for (std::size_t r = 1; r < ins.size(); ++r)
      acc = max ? larger<S>(acc, at(ins[r], i)) : smaller<S>(acc, at(ins[r], i));
    out.set(i, acc);
  });
  return out;
}

// --- the result types the docs promise -----------------------------------------------------------

template <class L>
constexpr bool array_kind = std::is_base_of_v<Eigen::ArrayBase<L>, L>;
template <class L, int Rows, int Cols, int Options>
using dense_of = std::conditional_t<array_kind<L>, Eigen::Array<element_t<L>, Rows, Cols, Options>,
                                    Eigen::Matrix<element_t<L>, Rows, Cols, Options>>;
template <class L>
using vector_of =
    std::conditional_t<L::ColsAtCompileTime == 1, dense_of<L, Dynamic, 1, Eigen::ColMajor>,
                       dense_of<L, 1, Dynamic, Eigen::RowMajor>>;
template <class L>
constexpr int layout_of = static_cast<int>(L::Layout) == static_cast<int>(Eigen::RowMajor)
                              ? Eigen::RowMajor
                              : Eigen::ColMajor;
template <class L>
using matrix_of = dense_of<L, Dynamic, Dynamic, L::IsRowMajor ? Eigen::RowMajor : Eigen::ColMajor>;

template <class L, bool Tiled>
auto gathered_type() {
  if constexpr (number<L>)
    return std::type_identity<Eigen::Matrix<L, Dynamic, 1>>{};
  else if constexpr (tensor<L>)
    return std::type_identity<
        Eigen::Tensor<element_t<L>, static_cast<int>(ndim<L>()) + (Tiled ? 0 : 1), layout_of<L>>>{};
  else if constexpr (ndim<L>() == 1 && Tiled)
    return std::type_identity<vector_of<L>>{};
  else if constexpr (ndim<L>() == 1)
    return std::type_identity<dense_of<L, Dynamic, Dynamic, Eigen::ColMajor>>{};
  else
    return std::type_identity<matrix_of<L>>{};
}
template <class L, bool Tiled>
using gathered_t = typename decltype(gathered_type<L, Tiled>())::type;

template <class L, bool Tiled>
auto scattered_type() {
  if constexpr (tensor<L>)
    return std::type_identity<
        Eigen::Tensor<element_t<L>, static_cast<int>(ndim<L>()) - (Tiled ? 0 : 1), layout_of<L>>>{};
  else if constexpr (ndim<L>() == 1 && Tiled)
    return std::type_identity<vector_of<L>>{};
  else if constexpr (ndim<L>() == 1)
    return std::type_identity<element_t<L>>{};
  else if constexpr (Tiled)
    return std::type_identity<matrix_of<L>>{};
  else
    return std::type_identity<dense_of<L, Dynamic, 1, Eigen::ColMajor>>{};
}
template <class L, bool Tiled>
using scattered_t = typename decltype(scattered_type<L, Tiled>())::type;

// --- running on every kind of group --------------------------------------------------------------

// What one device checked: (what, whether it held), and the bytes of results that must be the
// same on every device.
struct Log {
  std::string context;
  std::vector<std::pair<std::string, bool>> checks;
  std::vector<unsigned char> shared;

  void operator()(const std::string& what, bool ok) {
    checks.emplace_back(context.empty() ? what : context + ": " + what, ok);
  }
  // Appends the bytes of every element of `tree`'s leaves (numbers and Eigen objects).
  template <class Tree>
  void keep(const Tree& tree) {
    grove::tree_for_each(
        [&](const auto& leaf) {
          using L = std::remove_cvref_t<decltype(leaf)>;
          auto append = [&](const auto& v) {
            const auto* p = reinterpret_cast<const unsigned char*>(&v);
            shared.insert(shared.end(), p, p + sizeof v);
          };
          if constexpr (number<L>)
            append(leaf);
          else
            for_each_index(dims_of(leaf), [&](const auto& i) { append(at(leaf, i)); });
        },
        tree);
  }
};

void report(const std::vector<Log>& logs, const std::string& group) {
  for (std::size_t r = 0; r < logs.size(); ++r) {
    for (const auto& [what, ok] : logs[r].checks) {
      INFO(group << ", device " << r << ": " << what);
      CHECK(ok);
    }
    INFO(group << ", device " << r << ": the same result bits as device 0");
    CHECK(logs[r].shared == logs[0].shared);
  }
}

// A user's communicator: the five members device_group requires and nothing else (no staging
// memory, no gather, reduce-scatter or send-receive of its own), over a LocalDevices device.
class Minimal {
 public:
  explicit Minimal(par::LocalDevice& d) : d_(&d) {}
  int rank() const { return d_->rank(); }
  int size() const { return d_->size(); }
  template <par::reducible T>
  void allreduce_sum(std::span<T> buf) {
    d_->allreduce_sum(buf);
  }
  void allreduce_max(std::span<std::uint64_t> buf) { d_->allreduce_max(buf); }
  void broadcast(std::span<std::byte> buf, int root) { d_->broadcast(buf, root); }

 private:
  par::LocalDevice* d_;
};
static_assert(par::device_group<Minimal>);
static_assert(par::device_group<par::SingleDevice>);
static_assert(par::device_group<par::LocalDevice>);

// A LocalDevices device or a SingleDevice behind one type, with every primitive a device_group
// may have, each forwarded to the wrapped group's own: the cases compile each check once for both
// (a collective is instantiated per group type, and grove's collectives take both groups down the
// same paths), and still run it on each group's primitives.
class FullGroup {
 public:
  template <class G>
  explicit FullGroup(G& g) : group_(&g), rank_(g.rank()), size_(g.size()), staging_(&g.staging()) {
    fill<G>(primitives_);
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  template <par::reducible T>
  void allreduce_sum(std::span<T> buf) {
    std::get<SumFn<T>>(primitives_.sum)(group_, buf);
  }
  template <par::reducible T>
  void reduce_scatter_sum(std::span<const T> in, std::span<T> out) {
    std::get<ScatterFn<T>>(primitives_.scatter)(group_, in, out);
  }
  void allreduce_max(std::span<std::uint64_t> buf) { primitives_.max(group_, buf); }
  void broadcast(std::span<std::byte> buf, int root) { primitives_.broadcast(group_, buf, root); }
  void allgather(std::span<std::byte> buf) { primitives_.allgather(group_, buf); }
  void sendrecv(std::span<const std::byte> send, int dest, std::span<std::byte> recv, int source) {
    primitives_.sendrecv(group_, send, dest, recv, source);
  }
  par::Staging& staging() { return *staging_; }

 private:
  template <class T>
  using SumFn = void (*)(void*, std::span<T>);
  template <class T>
  using ScatterFn = void (*)(void*, std::span<const T>, std::span<T>);
  template <class... Ts>
  struct Table {
    std::tuple<SumFn<Ts>...> sum;
    std::tuple<ScatterFn<Ts>...> scatter;
    void (*max)(void*, std::span<std::uint64_t>);
    void (*broadcast)(void*, std::span<std::byte>, int);
    void (*allgather)(void*, std::span<std::byte>);
    void (*sendrecv)(void*, std::span<const std::byte>, int, std::span<std::byte>, int);
  };
  // Every arithmetic type but bool: what `reducible` admits.
  using Primitives = Table<char, signed char, unsigned char, wchar_t, char8_t, char16_t, char32_t,
                           short, unsigned short, int, unsigned, long, unsigned long, long long,
                           unsigned long long, float, double, long double>;

  template <class G, class... Ts>
  static void fill(Table<Ts...>& t) {
    ((std::get<SumFn<Ts>>(t.sum) =
          [](void* g, std::span<Ts> buf) { static_cast<G*>(g)->allreduce_sum(buf); }),
     ...);
    ((std::get<ScatterFn<Ts>>(t.scatter) =
          [](void* g, std::span<const Ts> in, std::span<Ts> out) {
            static_cast<G*>(g)->reduce_scatter_sum(in, out);
          }),
     ...);
    t.max = [](void* g, std::span<std::uint64_t> buf) { static_cast<G*>(g)->allreduce_max(buf); };
    t.broadcast = [](void* g, std::span<std::byte> buf, int root) {
      static_cast<G*>(g)->broadcast(buf, root);
    };
    t.allgather = [](void* g, std::span<std::byte> buf) { static_cast<G*>(g)->allgather(buf); };
    t.sendrecv = [](void* g, std::span<const std::byte> send, int dest, std::span<std::byte> recv,
                    int source) { static_cast<G*>(g)->sendrecv(send, dest, recv, source); };
  }

  void* group_;
  int rank_, size_;
  par::Staging* staging_;
  Primitives primitives_{};
};
static_assert(par::device_group<FullGroup>);

// Staging settings: how a group moves trees.
struct Moves {
  std::size_t bucket = par::Staging::default_bucket_bytes;
  std::size_t inplace = par::Staging::default_inplace_bytes;
};
// The defaults; every run packed into buckets of 64 bytes; every run in place, in pieces of 64
// bytes; and runs of 96 bytes or more in place, the others packed into buckets of 128 bytes.
const std::vector<Moves> bucket_sweep{
    {}, {64, std::numeric_limits<std::size_t>::max()}, {64, 0}, {128, 96}};

template <class Comm>
constexpr bool has_staging = requires(Comm& c) {
  { c.staging() } -> std::same_as<par::Staging&>;
};

std::string moves_text(const Moves& m) {
  return "buckets of " + std::to_string(m.bucket) + " bytes, in place from " +
         (m.inplace == std::numeric_limits<std::size_t>::max() ? std::string("never")
                                                               : std::to_string(m.inplace));
}

// Runs body(comm, log) on one device, once per staging setting (once, with its own staging, on a
// group that has none).
template <class Comm, class Body>
Log run_on(Comm& comm, const Body& body, const std::vector<Moves>& moves) {
  Log log;
  for (const Moves& m : moves) {
    if constexpr (has_staging<Comm>) {
      comm.staging().set_bucket_bytes(m.bucket);
      comm.staging().set_inplace_bytes(m.inplace);
      log.context = moves_text(m);
    }
    body(comm, log);
    if constexpr (!has_staging<Comm>) break;
  }
  if constexpr (has_staging<Comm>) {
    comm.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
    comm.staging().set_inplace_bytes(par::Staging::default_inplace_bytes);
  }
  return log;
}

// Which groups a case runs on besides LocalDevices and SingleDevice: the minimal communicator too
// (its generic paths), or not (a case about sizes or numbers, whose generic paths another case
// runs; each group type compiles every collective the case calls once more).
enum class also { minimal, none };

// Runs body(comm, log) on LocalDevices of 1 to 4 devices, on the minimal communicator over 1 to 4
// devices (unless told not to) and on SingleDevice, and asserts what every device logged. The
// local devices and SingleDevice go through FullGroup: body is compiled for two group types.
template <also Also = also::minimal, class Body>
void on_every_group(const Body& body, const std::vector<Moves>& moves = {Moves{}}) {
  for (int n = 1; n <= 4; ++n) {
    par::LocalDevices devices(n);
    report(devices.run([&](par::LocalDevice& d) {
      FullGroup g(d);
      return run_on(g, body, moves);
    }),
           std::to_string(n) + " local devices");
    if constexpr (Also == also::minimal)
      report(devices.run([&](par::LocalDevice& d) {
        Minimal m(d);
        return run_on(m, body, moves);
      }),
             "a minimal communicator over " + std::to_string(n) + " local devices");
  }
  par::SingleDevice one;
  FullGroup g(one);
  report({run_on(g, body, moves)}, "SingleDevice");
}

// Every rank's tree: make(r) for r in [0, n).
template <class Make>
auto trees_of(int n, Make&& make) {
  std::vector<std::remove_cvref_t<decltype(make(0))>> out;
  out.reserve(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) out.push_back(make(r));
  return out;
}

// Leaf I of every rank's tuple.
template <std::size_t I, class Tree>
auto column(const std::vector<Tree>& trees) {
  std::vector<std::remove_cvref_t<std::tuple_element_t<I, Tree>>> out;
  for (const auto& t : trees) out.push_back(std::get<I>(t));
  return out;
}

// Calls f(I, leaf I of got, leaf I of every rank's tuple) for each leaf of the tuples.
template <class Got, class Tree, class F>
void zip_leaves(const Got& got, const std::vector<Tree>& trees, F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(std::integral_constant<std::size_t, I>{}, std::get<I>(got), column<I>(trees)), ...);
  }
  (std::make_index_sequence<std::tuple_size_v<Tree>>{});
}

// --- what every device raised --------------------------------------------------------------------

struct Outcome {
  std::string kind = "no error";
  std::string message;
};

template <class F>
Outcome outcome_of(F&& f) {
  Outcome o;
  try {
    f();
  } catch (const grove::tree_error& e) {
    o = {"tree_error", e.what()};
  } catch (const grove::shape_error& e) {
    o = {"shape_error", e.what()};
  } catch (const grove::argument_error& e) {
    o = {"argument_error", e.what()};
  }
  return o;
}

// Runs f(comm) on n local devices (and, with `minimal`, on the minimal communicator over them);
// returns what each device raised. Afterwards the group must still work: a matching psum goes
// through.
template <class F>
std::vector<Outcome> outcomes(int n, F f, bool minimal = false) {
  par::LocalDevices devices(n);
  auto results = devices.run([&](par::LocalDevice& d) {
    Outcome o;
    if (minimal) {
      Minimal m(d);
      o = outcome_of([&] { f(m); });
    } else {
      FullGroup g(d);
      o = outcome_of([&] { f(g); });
    }
    double one = 1;
    par::psum_inplace(one, d);
    if (one != n) o.kind += " (and the group no longer works)";
    return o;
  });
  return results;
}

// The message after the function's name ("grove::parallel::pmax: ").
std::string after_name(const std::string& m) {
  return m.substr(std::min(m.size(), m.find(": ")));
}

// Every device raised the same exception, of type `kind`, with the same message (but for the
// name of the function each called, when they called different ones), which starts with `start`
// and holds each of `parts`.
void same_error_everywhere(const std::vector<Outcome>& os, const std::string& kind,
                           const std::string& start, const std::vector<std::string>& parts = {}) {
  for (std::size_t r = 0; r < os.size(); ++r) {
    INFO("device " << r << " of " << os.size() << ": " << os[r].kind << ": " << os[r].message);
    CHECK(os[r].kind == kind);
    CHECK(after_name(os[r].message) == after_name(os[0].message));
    CHECK_THAT(os[r].message, Catch::StartsWith(start));
    for (const auto& p : parts) CHECK_THAT(os[r].message, Catch::Contains(p));
  }
}

// --- the trees -----------------------------------------------------------------------------------

// Memory that the Map and Ref leaves point into, per rank; what lies outside the views is a
// sentinel that must never show up in a result.
struct Backing {
  Eigen::VectorXd strided = Eigen::VectorXd::Constant(9, 999.0);   // 5 elements, inner stride 2
  Eigen::MatrixXf tall = Eigen::MatrixXf::Constant(5, 2, 999.0f);  // 3 x 2, outer stride 5
  Eigen::MatrixXd wide = Eigen::MatrixXd::Constant(4, 10, 999.0);  // a 3 x k block, by Ref
  Eigen::Tensor<float, 3> cube = Eigen::Tensor<float, 3>(2, 2, 3);
  RowMajorXf rows = RowMajorXf::Constant(5, 6, 999.0f);  // n x 4 or 3 x 4, outer stride 6
};

using StridedVector = Eigen::Map<Eigen::VectorXd, 0, Eigen::InnerStride<2>>;
using StridedMatrix = Eigen::Map<Eigen::MatrixXf, 0, Eigen::OuterStride<>>;
using StridedRows = Eigen::Map<RowMajorXf, 0, Eigen::OuterStride<>>;
using BlockRef = Eigen::Ref<Eigen::MatrixXd, 0, Eigen::OuterStride<>>;
using CubeMap = Eigen::TensorMap<Eigen::Tensor<float, 3>>;

// all_gather, stacked along axis 0 or -1: numbers of every arithmetic type, bool and long double
// included, 16-bit floats and complex numbers, with a vector and a tensor.
using GatherScalars =
    std::tuple<float, bool, std::int64_t, std::uint8_t, long double, char, double, Eigen::VectorXf,
               Eigen::Tensor<std::int16_t, 2>, Eigen::half, Eigen::bfloat16, std::complex<double>>;
GatherScalars gather_scalars(int rank) {
  GatherScalars t;
  std::get<7>(t).resize(4);
  std::get<8>(t).resize(2, 3);
  fill_tree(t, rank);
  return t;
}

// Vectors: columns, rows, arrays, fixed sizes, 1 x 1, empty, strided; and a tensor of rank 1.
using GatherVectors =
    std::tuple<Eigen::VectorXf, Eigen::RowVectorXd, Eigen::ArrayXi, Eigen::Matrix<bool, Dynamic, 1>,
               Eigen::Matrix<Eigen::bfloat16, 3, 1>, Eigen::VectorXcf, Eigen::Matrix<float, 1, 1>,
               Eigen::VectorXf, Eigen::Array<std::uint16_t, 1, Dynamic>,
               Eigen::Matrix<Eigen::half, 1, 4>, StridedVector, Eigen::Tensor<float, 1>>;
GatherVectors gather_vectors(Backing& b, int rank) {
  GatherVectors t{Eigen::VectorXf(7),
                  Eigen::RowVectorXd(5),
                  Eigen::ArrayXi(3),
                  Eigen::Matrix<bool, Dynamic, 1>(4),
                  zeros<Eigen::Matrix<Eigen::bfloat16, 3, 1>>(),
                  Eigen::VectorXcf(2),
                  zeros<Eigen::Matrix<float, 1, 1>>(),
                  Eigen::VectorXf(Index{0}),
                  Eigen::Array<std::uint16_t, 1, Dynamic>(6),
                  zeros<Eigen::Matrix<Eigen::half, 1, 4>>(),
                  StridedVector(b.strided.data(), 5),
                  Eigen::Tensor<float, 1>(5)};
  fill_tree(t, rank);
  return t;
}

// Tensors of rank 2 and 3, both layouts, a TensorFixedSize, a TensorMap, one with a dimension 0.
using GatherTensors =
    std::tuple<Eigen::Tensor<double, 2, Eigen::RowMajor>,
               Eigen::TensorFixedSize<Eigen::half, Eigen::Sizes<2, 3>>,
               Eigen::Tensor<std::complex<float>, 2>, Eigen::Tensor<std::int32_t, 3>,
               Eigen::Tensor<bool, 3, Eigen::RowMajor>, CubeMap, Eigen::Tensor<std::uint64_t, 3>>;
GatherTensors gather_tensors(Backing& b, int rank) {
  GatherTensors t{Eigen::Tensor<double, 2, Eigen::RowMajor>(3, 4),
                  zeros<Eigen::TensorFixedSize<Eigen::half, Eigen::Sizes<2, 3>>>(),
                  Eigen::Tensor<std::complex<float>, 2>(2, 2),
                  Eigen::Tensor<std::int32_t, 3>(2, 3, 4),
                  Eigen::Tensor<bool, 3, Eigen::RowMajor>(2, 1, 3),
                  CubeMap(b.cube.data(), 2, 2, 3),
                  Eigen::Tensor<std::uint64_t, 3>(2, 0, 3)};
  fill_tree(t, rank);
  return t;
}

// Tensors of rank 3 only (axes 3 and -4 stacked, 2 and -3 tiled).
using GatherCubes =
    std::tuple<Eigen::Tensor<std::int32_t, 3>, Eigen::Tensor<bool, 3, Eigen::RowMajor>,
               Eigen::Tensor<double, 3, Eigen::RowMajor>>;
GatherCubes gather_cubes(int rank) {
  GatherCubes t{Eigen::Tensor<std::int32_t, 3>(2, 3, 4),
                Eigen::Tensor<bool, 3, Eigen::RowMajor>(2, 1, 3),
                Eigen::Tensor<double, 3, Eigen::RowMajor>(1, 4, 2)};
  fill_tree(t, rank);
  return t;
}

// Matrices: 3x5, 5x3 row-major, fixed, bool arrays, 16-bit floats, complex, 1x1, 0x3, a strided
// Map and a Ref to a block; and tensors of rank 2 and 3.
using TileMatrices =
    std::tuple<Eigen::MatrixXf, RowMajorXd, Eigen::Matrix<std::int32_t, 2, 3>,
               Eigen::Array<bool, Dynamic, Dynamic>,
               Eigen::Matrix<Eigen::half, Dynamic, Dynamic, Eigen::RowMajor>,
               Eigen::Matrix<std::complex<double>, Dynamic, Dynamic>, Eigen::MatrixXf,
               Eigen::Matrix<std::int8_t, Dynamic, Dynamic>, StridedMatrix, BlockRef, StridedRows,
               Eigen::Tensor<float, 2>, Eigen::Tensor<std::int64_t, 3, Eigen::RowMajor>,
               Eigen::TensorFixedSize<Eigen::bfloat16, Eigen::Sizes<2, 2>, Eigen::RowMajor>>;
TileMatrices tile_matrices(Backing& b, int rank) {
  TileMatrices t{
      Eigen::MatrixXf(3, 5),
      RowMajorXd(5, 3),
      zeros<Eigen::Matrix<std::int32_t, 2, 3>>(),
      Eigen::Array<bool, Dynamic, Dynamic>(2, 2),
      Eigen::Matrix<Eigen::half, Dynamic, Dynamic, Eigen::RowMajor>(2, 3),
      Eigen::Matrix<std::complex<double>, Dynamic, Dynamic>(1, 2),
      Eigen::MatrixXf(1, 1),
      Eigen::Matrix<std::int8_t, Dynamic, Dynamic>(0, 3),
      StridedMatrix(b.tall.data(), 3, 2, Eigen::OuterStride<>(5)),
      BlockRef(b.wide.block(1, 1, 3, 4)),
      StridedRows(b.rows.data(), 3, 4, Eigen::OuterStride<>(6)),
      Eigen::Tensor<float, 2>(3, 2),
      Eigen::Tensor<std::int64_t, 3, Eigen::RowMajor>(2, 3, 2),
      zeros<Eigen::TensorFixedSize<Eigen::bfloat16, Eigen::Sizes<2, 2>, Eigen::RowMajor>>()};
  fill_tree(t, rank);
  return t;
}

// The checks themselves, which depend on the result and the inputs only (not on the group, so
// that they are compiled once per tree).
template <bool Tiled, class Got, class Tree>
void verify_gathered(Log& log, const Got& got, const std::vector<Tree>& trees, int axis,
                     const std::string& what) {
  zip_leaves(got, trees, [&](auto index, const auto& g, const auto& ins) {
    using Leaf = typename std::remove_cvref_t<decltype(ins)>::value_type;
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(g)>, gathered_t<Leaf, Tiled>>,
                  "all_gather gives another leaf type than documented");
    const std::string name = what + (Tiled ? ", tiled" : ", stacked") + " along axis " +
                             std::to_string(axis) + ", leaf [" + std::to_string(index()) + "]";
    if constexpr (Tiled)
      log(name, matches(g, tiled_expected(ins, axis)));
    else
      log(name, matches(g, stacked_expected(ins, axis)));
  });
}

// Checks all_gather(trees[rank], comm, axis[, tiled])) against the reference, leaf by leaf.
template <bool Tiled, class Tree, class Comm>
void check_all_gather(Comm& comm, Log& log, const std::vector<Tree>& trees, int axis,
                      const std::string& what) {
  const auto& mine = trees[static_cast<std::size_t>(comm.rank())];
  if constexpr (Tiled)
    verify_gathered<true>(log, par::all_gather(mine, comm, axis, par::tiled), trees, axis, what);
  else
    verify_gathered<false>(log, par::all_gather(mine, comm, axis), trees, axis, what);
}

}  // namespace collectives_test

namespace collectives_test {

// --- more trees ----------------------------------------------------------------------------------

// A tree of nodes of every kind whose leaves are all vectors of floats.
struct Layer {
  std::vector<Eigen::VectorXf> weights;
  std::map<std::string, Eigen::VectorXf> named;
  std::optional<Eigen::VectorXf> bias;
};
GROVE_NODE(Layer, weights, named, bias);

Layer layer_of(int rank) {
  Layer l{{Eigen::VectorXf(3), Eigen::VectorXf(2)},
          {{"alpha", Eigen::VectorXf(4)}, {"beta", Eigen::VectorXf(1)}},
          Eigen::VectorXf(5)};
  fill_tree(l, rank);
  return l;
}

template <class Tree>
Tree zeroed_tree(Tree t) {
  grove::tree_for_each([](auto& leaf) { leaf = zeroed(leaf); }, t);
  return t;
}

// psum_scatter along dimension 0, untiled (that dimension has length n): vectors of every
// element type the sums take, matrices (column- and row-major, Array, 16-bit floats, a strided
// Map) and tensors of rank 1 to 3 in both layouts.
using ScatterRows =
    std::tuple<Eigen::VectorXf, Eigen::ArrayXd, Eigen::RowVectorXi,
               Eigen::Matrix<Eigen::half, Dynamic, 1>, Eigen::Matrix<Eigen::bfloat16, 1, Dynamic>,
               Eigen::Matrix<std::int8_t, Dynamic, 1>, Eigen::Array<std::uint16_t, Dynamic, 1>,
               Eigen::Matrix<std::int64_t, Dynamic, 1>, Eigen::Matrix<long double, Dynamic, 1>,
               Eigen::Matrix<std::uint64_t, Dynamic, 1>, Eigen::MatrixXf, RowMajorXd,
               Eigen::ArrayXXi, Eigen::Matrix<Eigen::half, Dynamic, Dynamic>, StridedMatrix,
               StridedRows, Eigen::Tensor<float, 2>, Eigen::Tensor<double, 3, Eigen::RowMajor>,
               Eigen::Tensor<std::int32_t, 1>, Eigen::Tensor<Eigen::bfloat16, 2, Eigen::RowMajor>>;
ScatterRows scatter_rows(Backing& b, int rank, int n) {
  ScatterRows t{Eigen::VectorXf(n),
                Eigen::ArrayXd(n),
                Eigen::RowVectorXi(n),
                Eigen::Matrix<Eigen::half, Dynamic, 1>(n),
                Eigen::Matrix<Eigen::bfloat16, 1, Dynamic>(n),
                Eigen::Matrix<std::int8_t, Dynamic, 1>(n),
                Eigen::Array<std::uint16_t, Dynamic, 1>(n),
                Eigen::Matrix<std::int64_t, Dynamic, 1>(n),
                Eigen::Matrix<long double, Dynamic, 1>(n),
                Eigen::Matrix<std::uint64_t, Dynamic, 1>(n),
                Eigen::MatrixXf(n, 5),
                RowMajorXd(n, 3),
                Eigen::ArrayXXi(n, 2),
                Eigen::Matrix<Eigen::half, Dynamic, Dynamic>(n, 3),
                StridedMatrix(b.tall.data(), n, 2, Eigen::OuterStride<>(5)),
                StridedRows(b.rows.data(), n, 4, Eigen::OuterStride<>(6)),
                Eigen::Tensor<float, 2>(n, 3),
                Eigen::Tensor<double, 3, Eigen::RowMajor>(n, 2, 3),
                Eigen::Tensor<std::int32_t, 1>(n),
                Eigen::Tensor<Eigen::bfloat16, 2, Eigen::RowMajor>(n, 2)};
  fill_tree(t, rank);
  return t;
}

// Dimension 1 of length n (untiled) or k * n (tiled): matrices, a Ref to a block, tensors.
using ScatterColumns =
    std::tuple<Eigen::MatrixXf, RowMajorXd, Eigen::ArrayXXi,
               Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic, Eigen::RowMajor>, BlockRef,
               Eigen::Tensor<float, 2>, Eigen::Tensor<double, 3, Eigen::RowMajor>,
               Eigen::Tensor<std::int16_t, 3>>;
ScatterColumns scatter_columns(Backing& b, int rank, int n, int k) {
  ScatterColumns t{Eigen::MatrixXf(4, k * n),
                   RowMajorXd(2, k * n),
                   Eigen::ArrayXXi(3, k * n),
                   Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic, Eigen::RowMajor>(2, k * n),
                   BlockRef(b.wide.block(1, 1, 3, k * n)),
                   Eigen::Tensor<float, 2>(3, k * n),
                   Eigen::Tensor<double, 3, Eigen::RowMajor>(2, k * n, 3),
                   Eigen::Tensor<std::int16_t, 3>(2, k * n, 2)};
  fill_tree(t, rank);
  return t;
}

// Dimension 2 of tensors of rank 3.
using ScatterDepth =
    std::tuple<Eigen::Tensor<float, 3>, Eigen::Tensor<std::int64_t, 3, Eigen::RowMajor>,
               Eigen::Tensor<Eigen::half, 3>>;
ScatterDepth scatter_depth(int rank, int n, int k) {
  ScatterDepth t{Eigen::Tensor<float, 3>(2, 3, k * n),
                 Eigen::Tensor<std::int64_t, 3, Eigen::RowMajor>(1, 2, k * n),
                 Eigen::Tensor<Eigen::half, 3>(2, 1, k * n)};
  fill_tree(t, rank);
  return t;
}

// Dimension 0, tiled: lengths that are multiples of n (a fixed 12, an empty vector).
using ScatterTiledRows =
    std::tuple<Eigen::VectorXf, Eigen::RowVectorXd, Eigen::ArrayXi, Eigen::Matrix<float, 12, 1>,
               Eigen::VectorXf, Eigen::Matrix<Eigen::half, Dynamic, 1>, Eigen::MatrixXf, RowMajorXd,
               Eigen::Array<std::uint8_t, Dynamic, Dynamic>, StridedMatrix, Eigen::Tensor<float, 2>,
               Eigen::Tensor<double, 3, Eigen::RowMajor>,
               Eigen::TensorFixedSize<float, Eigen::Sizes<12, 2>>,
               Eigen::Tensor<Eigen::bfloat16, 1>>;
ScatterTiledRows scatter_tiled_rows(Backing& b, int rank, int n) {
  ScatterTiledRows t{Eigen::VectorXf(3 * n),
                     Eigen::RowVectorXd(2 * n),
                     Eigen::ArrayXi(n),
                     zeros<Eigen::Matrix<float, 12, 1>>(),
                     Eigen::VectorXf(Index{0}),
                     Eigen::Matrix<Eigen::half, Dynamic, 1>(2 * n),
                     Eigen::MatrixXf(2 * n, 5),
                     RowMajorXd(3 * n, 2),
                     Eigen::Array<std::uint8_t, Dynamic, Dynamic>(n, 3),
                     StridedMatrix(b.tall.data(), n, 2, Eigen::OuterStride<>(5)),
                     Eigen::Tensor<float, 2>(2 * n, 3),
                     Eigen::Tensor<double, 3, Eigen::RowMajor>(n, 2, 2),
                     zeros<Eigen::TensorFixedSize<float, Eigen::Sizes<12, 2>>>(),
                     Eigen::Tensor<Eigen::bfloat16, 1>(3 * n)};
  fill_tree(t, rank);
  return t;
}

// psum_scatter's result on device `me` of n against the reference, leaf by leaf.
template <bool Tiled, class Got, class Tree>
void verify_scattered(Log& log, const Got& got, const std::vector<Tree>& trees, int dim, int me,
                      const std::string& what) {
  const int n = static_cast<int>(trees.size());
  zip_leaves(got, trees, [&](auto index, const auto& g, const auto& ins) {
    using Leaf = typename std::remove_cvref_t<decltype(ins)>::value_type;
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(g)>, scattered_t<Leaf, Tiled>>,
                  "psum_scatter gives another leaf type than documented");
    const std::string name = what + (Tiled ? ", tiled" : "") + " along dimension " +
                             std::to_string(dim) + ", leaf [" + std::to_string(index()) + "]";
    const int d = dim < 0 ? dim + static_cast<int>(ndim<Leaf>()) : dim;
    const auto sum = summed_expected(ins);
    if constexpr (Tiled)
      log(name, matches(g, tiled_block(sum, d, me, n)));
    else
      log(name, matches(g, untiled_block(sum, d, me)));
  });
}

// Checks psum_scatter(trees[rank], comm, dim[, tiled]) against the reference.
template <bool Tiled, class Tree, class Comm>
void check_psum_scatter(Comm& comm, Log& log, const std::vector<Tree>& trees, int dim,
                        const std::string& what) {
  const int me = comm.rank();
  const auto& mine = trees[static_cast<std::size_t>(me)];
  if constexpr (Tiled)
    verify_scattered<true>(log, par::psum_scatter(mine, comm, dim, par::tiled), trees, dim, me,
                           what);
  else
    verify_scattered<false>(log, par::psum_scatter(mine, comm, dim), trees, dim, me, what);
}

// --- all_gather ----------------------------------------------------------------------------------

TEST_CASE("all_gather stacks numbers, vectors and tensors along every axis", "[parallel][gather]") {
  on_every_group(
      [](auto& comm, Log& log) {
        const int n = comm.size();
        std::vector<Backing> backing(static_cast<std::size_t>(n));
        auto back = [&](int r) -> Backing& { return backing[static_cast<std::size_t>(r)]; };
        const auto scalars = trees_of(n, gather_scalars);
        const auto vectors = trees_of(n, [&](int r) { return gather_vectors(back(r), r); });
        const auto tensors = trees_of(n, [&](int r) { return gather_tensors(back(r), r); });
        const auto cubes = trees_of(n, gather_cubes);
        for (const int axis : {0, -1}) check_all_gather<false>(comm, log, scalars, axis, "numbers");
        for (const int axis : {0, 1, -1, -2})
          check_all_gather<false>(comm, log, vectors, axis, "vectors");
        for (const int axis : {0, 1, 2, -1, -2, -3})
          check_all_gather<false>(comm, log, tensors, axis, "tensors");
        for (const int axis : {3, -4}) check_all_gather<false>(comm, log, cubes, axis, "cubes");
        // The inputs are as they were, and so is the memory around the views.
        for (int r = 0; r < n; ++r) {
          log("input unchanged",
              same_tree(gather_scalars(r), scalars[static_cast<std::size_t>(r)]));
          log("no write outside a view", back(r).strided(1) == 999.0 &&
                                             back(r).tall(4, 1) == 999.0f &&
                                             back(r).rows(4, 5) == 999.0f);
        }
      },
      bucket_sweep);
}

TEST_CASE("all_gather tiles vectors, matrices and tensors along every axis", "[parallel][gather]") {
  on_every_group(
      [](auto& comm, Log& log) {
        const int n = comm.size();
        std::vector<Backing> backing(static_cast<std::size_t>(n));
        auto back = [&](int r) -> Backing& { return backing[static_cast<std::size_t>(r)]; };
        const auto vectors = trees_of(n, [&](int r) { return gather_vectors(back(r), r); });
        const auto matrices = trees_of(n, [&](int r) { return tile_matrices(back(r), r); });
        const auto cubes = trees_of(n, gather_cubes);
        for (const int axis : {0, -1}) check_all_gather<true>(comm, log, vectors, axis, "vectors");
        for (const int axis : {0, 1, -1, -2})
          check_all_gather<true>(comm, log, matrices, axis, "matrices");
        for (const int axis : {2, -3}) check_all_gather<true>(comm, log, cubes, axis, "cubes");
      },
      bucket_sweep);
}

TEST_CASE("all_gather stacks along axis 0 by default, as lax.all_gather", "[parallel][gather]") {
  on_every_group<also::none>([](auto& comm, Log& log) {
    const auto trees = trees_of(comm.size(), gather_scalars);
    const auto& mine = trees[static_cast<std::size_t>(comm.rank())];
    const auto got = par::all_gather(mine, comm);
    log("all_gather(tree, comm) == all_gather(tree, comm, 0)",
        same_tree(got, par::all_gather(mine, comm, 0)));
    log("a float leaf", matches(std::get<0>(got), stacked_expected(column<0>(trees), 0)));
    log("a bool leaf", matches(std::get<1>(got), stacked_expected(column<1>(trees), 0)));
  });
}

TEST_CASE("all_gather of leaves larger than the in-place size, in many buckets",
          "[parallel][gather]") {
  using Big = std::tuple<Eigen::VectorXf, Eigen::Tensor<double, 2, Eigen::RowMajor>,
                         Eigen::Matrix<Eigen::half, Dynamic, 1>, Eigen::VectorXf>;
  const auto big = [](int rank) {
    Big t{Eigen::VectorXf(70000), Eigen::Tensor<double, 2, Eigen::RowMajor>(200, 180),
          Eigen::Matrix<Eigen::half, Dynamic, 1>(140000), Eigen::VectorXf(3)};
    fill_tree(t, rank);
    return t;
  };
  on_every_group<also::none>(
      [&](auto& comm, Log& log) {
        const auto trees = trees_of(comm.size(), big);
        check_all_gather<false>(comm, log, trees, 1, "large leaves");
        check_all_gather<true>(comm, log, trees, 0, "large leaves");
      },
      {{}, {4096, 0}, {4096, std::numeric_limits<std::size_t>::max()}, {65536, 1000}});
}

TEST_CASE("all_gather, psum_scatter, pmax and ppermute keep the tree's structure",
          "[parallel][gather][scatter][extrema][permute]") {
  on_every_group([](auto& comm, Log& log) {
    const int n = comm.size(), me = comm.rank();
    const auto layers = trees_of(n, layer_of);
    const Layer& mine = layers[static_cast<std::size_t>(me)];
    const std::string structure = grove::tree_structure(mine).str();

    const auto stacked = par::all_gather(mine, comm, 1);
    log("all_gather: the same structure", grove::tree_structure(stacked).str() == structure);
    const auto leaves = grove::tree_leaves(stacked);
    for (std::size_t k = 0; k < leaves.size(); ++k) {
      std::vector<Eigen::VectorXf> ins;
      for (const auto& l : layers) ins.push_back(*grove::tree_leaves(l)[k]);
      log("all_gather: leaf " + std::to_string(k), matches(*leaves[k], stacked_expected(ins, 1)));
    }

    // Tiled, every device holds every device's leaves; psum_scatter gives device me the sum of
    // its block of them, which is its own leaf, n times.
    const auto tiled = par::all_gather(mine, comm, 0, par::tiled);
    log("all_gather tiled: the same structure", grove::tree_structure(tiled).str() == structure);
    const Layer back = par::psum_scatter(tiled, comm, 0, par::tiled);
    Layer times_n = mine;
    grove::tree_for_each([&](auto& leaf) { leaf *= static_cast<float>(n); }, times_n);
    log("psum_scatter of the tiled gather is n times the device's leaf", same_tree(back, times_n));

    const Layer largest = par::pmax(mine, comm);
    log("pmax: the same structure", grove::tree_structure(largest).str() == structure);
    const Layer shifted = par::ppermute(mine, comm, {{0, n - 1}});
    log("ppermute: device n - 1 has device 0's tree, the others zeros",
        same_tree(shifted, me == n - 1 ? layers[0] : zeroed_tree(mine)));

    // An empty tree: nothing to move, and the devices still agree.
    const std::vector<Eigen::VectorXf> none;
    log("all_gather of an empty tree", par::all_gather(none, comm).empty());
    log("psum_scatter of an empty tree", par::psum_scatter(none, comm, 0, par::tiled).empty());
    log("pmax of an empty tree", par::pmax(none, comm).empty());
    log("ppermute of an empty tree", par::ppermute(none, comm, {{0, n - 1}}).empty());
  });
}

TEST_CASE("all_gather: an axis out of range for a leaf is an error on every device",
          "[parallel][gather][errors]") {
  for (const int n : {1, 2, 3}) {
    INFO(n << " devices");
    for (const bool minimal : {false, true}) {
      // A number has one axis to stack along (0, or -1).
      same_error_everywhere(
          outcomes(
              n,
              [](auto& comm) {
                const std::tuple<float, Eigen::VectorXf> t{1.0f, Eigen::VectorXf::Ones(3)};
                (void)par::all_gather(t, comm, 1);
              },
              minimal),
          "argument_error", "grove::parallel::all_gather(axis=1): ",
          {"axis 1 is out of range for the leaf at [0]", "0 dimensions"});
      // A vector tiles along axis 0 (or -1) only, and stacks along 0, 1, -1 or -2.
      same_error_everywhere(
          outcomes(
              n,
              [](auto& comm) {
                const std::map<std::string, Eigen::VectorXf> t{{"w", Eigen::VectorXf::Ones(3)}};
                (void)par::all_gather(t, comm, 1, par::tiled);
              },
              minimal),
          "argument_error", "grove::parallel::all_gather(axis=1, tiled): ",
          {"axis 1 is out of range for the leaf at ['w']", "1 dimension"});
      for (const int axis : {2, -3})
        same_error_everywhere(outcomes(
                                  n,
                                  [&](auto& comm) {
                                    const std::vector<Eigen::RowVectorXd> t{
                                        Eigen::RowVectorXd::Ones(2), Eigen::RowVectorXd::Ones(4)};
                                    (void)par::all_gather(t, comm, axis);
                                  },
                                  minimal),
                              "argument_error",
                              "grove::parallel::all_gather(axis=" + std::to_string(axis) + "): ",
                              {"out of range for the leaf at [0]", "(stacking adds one)"});
      // A tensor of rank 3: stacked axes -4 to 3, tiled -3 to 2.
      same_error_everywhere(outcomes(
                                n,
                                [](auto& comm) {
                                  Eigen::Tensor<float, 3> t(2, 2, 2);
                                  t.setZero();
                                  (void)par::all_gather(t, comm, -5);
                                },
                                minimal),
                            "argument_error",
                            "grove::parallel::all_gather(axis=-5): ", {"3 dimensions"});
      same_error_everywhere(outcomes(
                                n,
                                [](auto& comm) {
                                  Eigen::Tensor<float, 3> t(2, 2, 2);
                                  t.setZero();
                                  (void)par::all_gather(t, comm, 3, par::tiled);
                                },
                                minimal),
                            "argument_error", "grove::parallel::all_gather(axis=3, tiled): ");
    }
  }
}

TEST_CASE("all_gather: devices that pass different axes, modes or trees get the same tree_error",
          "[parallel][gather][errors][agree]") {
  for (const bool minimal : {false, true}) {
    INFO((minimal ? "minimal communicator" : "LocalDevices"));
    same_error_everywhere(
        outcomes(
            3,
            [](auto& comm) {
              const Eigen::VectorXf v = Eigen::VectorXf::Ones(3);
              (void)par::all_gather(v, comm, comm.rank() == 2 ? 1 : 0);
            },
            minimal),
        "tree_error", "grove::parallel::all_gather: the devices disagree",
        {"rank 0 called all_gather(axis=0) but rank 2 called all_gather(axis=1)"});
    same_error_everywhere(outcomes(
                              2,
                              [](auto& comm) {
                                const Eigen::VectorXf v = Eigen::VectorXf::Ones(3);
                                if (comm.rank() == 0)
                                  (void)par::all_gather(v, comm, 0);
                                else
                                  (void)par::all_gather(v, comm, 0, par::tiled);
                              },
                              minimal),
                          "tree_error", "grove::parallel::all_gather: the devices disagree",
                          {"rank 0 called all_gather(axis=0) but rank 1 called all_gather(axis=0, "
                           "tiled)"});
    same_error_everywhere(outcomes(
                              2,
                              [](auto& comm) {
                                const std::tuple<float, Eigen::VectorXf> t{
                                    1.0f, Eigen::VectorXf::Ones(3 + comm.rank())};
                                (void)par::all_gather(t, comm, 0);
                              },
                              minimal),
                          "tree_error", "grove::parallel::all_gather: the devices disagree",
                          {"at [1] rank 0 has float32 (3,) but rank 1 has float32 (4,)"});
    // all_gather against psum: a different operation.
    same_error_everywhere(outcomes(
                              2,
                              [](auto& comm) {
                                Eigen::VectorXf v = Eigen::VectorXf::Ones(3);
                                if (comm.rank() == 0)
                                  (void)par::all_gather(v, comm, 0);
                                else
                                  par::psum_inplace(v, comm);
                              },
                              minimal),
                          "tree_error", "grove::parallel::",
                          {"rank 0 called all_gather(axis=0) but rank 1 called psum"});
  }
}

// --- psum_scatter --------------------------------------------------------------------------------

TEST_CASE("psum_scatter gives each device its slice of the sum", "[parallel][scatter]") {
  on_every_group(
      [](auto& comm, Log& log) {
        const int n = comm.size();
        std::vector<Backing> backing(static_cast<std::size_t>(n));
        auto back = [&](int r) -> Backing& { return backing[static_cast<std::size_t>(r)]; };
        const auto rows = trees_of(n, [&](int r) { return scatter_rows(back(r), r, n); });
        const auto columns = trees_of(n, [&](int r) { return scatter_columns(back(r), r, n, 1); });
        const auto depth = trees_of(n, [&](int r) { return scatter_depth(r, n, 1); });
        check_psum_scatter<false>(comm, log, rows, 0, "rows");
        check_psum_scatter<false>(comm, log, columns, 1, "columns");
        check_psum_scatter<false>(comm, log, depth, 2, "depth");
        check_psum_scatter<false>(comm, log, depth, -1, "depth");
        // The inputs are as they were.
        for (int r = 0; r < n; ++r) {
          Backing fresh;
          log("input unchanged",
              same_tree(scatter_rows(fresh, r, n), rows[static_cast<std::size_t>(r)]));
        }
      },
      bucket_sweep);
}

TEST_CASE("psum_scatter tiled gives each device its block of the sum", "[parallel][scatter]") {
  on_every_group(
      [](auto& comm, Log& log) {
        const int n = comm.size();
        std::vector<Backing> backing(static_cast<std::size_t>(n));
        auto back = [&](int r) -> Backing& { return backing[static_cast<std::size_t>(r)]; };
        const auto rows = trees_of(n, [&](int r) { return scatter_tiled_rows(back(r), r, n); });
        const auto columns = trees_of(n, [&](int r) { return scatter_columns(back(r), r, n, 2); });
        const auto depth = trees_of(n, [&](int r) { return scatter_depth(r, n, 3); });
        check_psum_scatter<true>(comm, log, rows, 0, "rows");
        check_psum_scatter<true>(comm, log, columns, 1, "columns");
        check_psum_scatter<true>(comm, log, depth, 2, "depth");
        check_psum_scatter<true>(comm, log, depth, -1, "depth");
      },
      bucket_sweep);
}

// Fills every leaf with irregular_of's numbers, whose sums round.
template <class Tree>
void fill_irregular(Tree& tree, int rank) {
  int salt = 0;
  grove::tree_for_each(
      [&](auto& leaf) {
        using S = element_t<decltype(leaf)>;
        for_each_index(dims_of(leaf), [&](const auto& i) {
          at_ref(leaf, i) = irregular_of<S>(rank, position(i) + 13 * salt);
        });
        ++salt;
      },
      tree);
}

// A leaf's elements as an Expected array.
template <class L>
auto expected_of(const L& leaf) {
  Expected<element_t<L>, ndim<L>()> out;
  out.dims = dims_of(leaf);
  out.resize();
  for_each_index(out.dims, [&](const auto& i) { out.set(i, at(leaf, i)); });
  return out;
}

// psum_scatter against the reference and against the slice of psum's result, bit for bit.
template <bool Tiled, class Tree, class Comm>
void check_against_psum(Comm& comm, Log& log, const std::vector<Tree>& trees, int dim) {
  const int n = comm.size(), me = comm.rank();
  const auto& mine = trees[static_cast<std::size_t>(me)];
  const auto got = [&] {
    if constexpr (Tiled)
      return par::psum_scatter(mine, comm, dim, par::tiled);
    else
      return par::psum_scatter(mine, comm, dim);
  }();
  const auto sum = par::psum(mine, comm);
  zip_leaves(got, trees, [&](auto index, const auto& g, const auto& ins) {
    const std::string name =
        std::string(Tiled ? "tiled, " : "") + "leaf [" + std::to_string(index()) + "]";
    const auto mine_summed = expected_of(std::get<decltype(index)::value>(sum));
    if constexpr (Tiled) {
      log(name + ": the sums in rank order",
          matches(g, tiled_block(summed_expected(ins), dim, me, n)));
      log(name + ": psum's block", matches(g, tiled_block(mine_summed, dim, me, n)));
    } else {
      log(name + ": the sums in rank order",
          matches(g, untiled_block(summed_expected(ins), dim, me)));
      log(name + ": psum's slice", matches(g, untiled_block(mine_summed, dim, me)));
    }
  });
}

TEST_CASE("psum_scatter is psum's slice, bit for bit, whatever the numbers",
          "[parallel][scatter]") {
  // Numbers whose sums round: the sums must still be LocalDevices' sums, in rank order.
  using Uneven =
      std::tuple<Eigen::VectorXf, RowMajorXd, Eigen::Matrix<Eigen::half, Dynamic, Dynamic>,
                 Eigen::Tensor<float, 3>, Eigen::Tensor<Eigen::bfloat16, 2, Eigen::RowMajor>>;
  using UnevenColumns = std::tuple<Eigen::MatrixXf, Eigen::Tensor<double, 2, Eigen::RowMajor>,
                                   Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic>>;
  on_every_group<also::none>(
      [](auto& comm, Log& log) {
        const int n = comm.size();
        const auto rows = trees_of(n, [&](int rank) {
          Uneven t{Eigen::VectorXf(n), RowMajorXd(n, 7),
                   Eigen::Matrix<Eigen::half, Dynamic, Dynamic>(n, 3),
                   Eigen::Tensor<float, 3>(n, 2, 2),
                   Eigen::Tensor<Eigen::bfloat16, 2, Eigen::RowMajor>(n, 5)};
          fill_irregular(t, rank);
          return t;
        });
        check_against_psum<false>(comm, log, rows, 0);
        const auto columns = trees_of(n, [&](int rank) {
          UnevenColumns t{Eigen::MatrixXf(3, 2 * n),
                          Eigen::Tensor<double, 2, Eigen::RowMajor>(2, 3 * n),
                          Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic>(4, n)};
          fill_irregular(t, rank);
          return t;
        });
        check_against_psum<true>(comm, log, columns, 1);
      },
      bucket_sweep);
}

TEST_CASE("psum_scatter of leaves larger than the in-place size, in many buckets",
          "[parallel][scatter]") {
  using Rows = std::tuple<Eigen::MatrixXf, Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic>>;
  using Blocks = std::tuple<Eigen::VectorXd, Eigen::Tensor<float, 2, Eigen::RowMajor>>;
  on_every_group<also::none>(
      [](auto& comm, Log& log) {
        const int n = comm.size();
        const auto rows = trees_of(n, [&](int r) {
          Rows t{Eigen::MatrixXf(n, 70000),
                 Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic>(n, 140000)};
          fill_tree(t, r);
          return t;
        });
        check_psum_scatter<false>(comm, log, rows, 0, "large rows");
        const auto blocks = trees_of(n, [&](int r) {
          Blocks t{Eigen::VectorXd(40000 * n),
                   Eigen::Tensor<float, 2, Eigen::RowMajor>(100 * n, 800)};
          fill_tree(t, r);
          return t;
        });
        check_psum_scatter<true>(comm, log, blocks, 0, "large blocks");
      },
      // Buckets of 64 KiB, not 64 bytes: each window of psum_scatter walks every element of the
      // leaves it overlaps, so that tiny buckets on leaves this large take time quadratic in their
      // length.
      {{}, {65536, 0}, {65536, 1000}});
}

TEST_CASE("psum_scatter: a wrong length or dimension is an error on every device",
          "[parallel][scatter][errors]") {
  for (const int n : {1, 2, 3}) {
    INFO(n << " devices");
    for (const bool minimal : {false, true}) {
      // Untiled, the dimension's length must be n.
      same_error_everywhere(
          outcomes(
              n,
              [n](auto& comm) {
                const std::map<std::string, Eigen::VectorXf> t{{"a", Eigen::VectorXf::Ones(n)},
                                                               {"b", Eigen::VectorXf::Ones(n + 1)}};
                (void)par::psum_scatter(t, comm, 0);
              },
              minimal),
          "shape_error", "grove::parallel::psum_scatter(scatter_dimension=0): the leaf at ['b']",
          {"has length " + std::to_string(n + 1) +
           " along dimension 0, which must be the number of "
           "devices, " +
           std::to_string(n)});
      same_error_everywhere(
          outcomes(
              n,
              [n](auto& comm) {
                const std::tuple<Eigen::MatrixXf> t{Eigen::MatrixXf::Ones(n, n + 2)};
                (void)par::psum_scatter(t, comm, -1);
              },
              minimal),
          "shape_error", "grove::parallel::psum_scatter(scatter_dimension=-1): the leaf at [0]",
          {"along dimension 1"});
      // Tiled, a multiple of n.
      if (n > 1)
        same_error_everywhere(
            outcomes(
                n,
                [n](auto& comm) {
                  const std::vector<Eigen::Tensor<float, 2>> t{
                      Eigen::Tensor<float, 2>(2, 2 * n), Eigen::Tensor<float, 2>(2, 2 * n + 1)};
                  (void)par::psum_scatter(t, comm, 1, par::tiled);
                },
                minimal),
            "shape_error",
            "grove::parallel::psum_scatter(scatter_dimension=1, tiled): the leaf at [1]",
            {"has length " + std::to_string(2 * n + 1) +
             " along dimension 1, which must be a "
             "multiple of the number of devices"});
      // A dimension the leaf does not have.
      same_error_everywhere(outcomes(
                                n,
                                [n](auto& comm) {
                                  const std::tuple<Eigen::VectorXd> t{Eigen::VectorXd::Ones(n)};
                                  (void)par::psum_scatter(t, comm, 1);
                                },
                                minimal),
                            "argument_error",
                            "grove::parallel::psum_scatter(scatter_dimension=1): the leaf at [0]",
                            {"has 1 dimension, so scatter_dimension 1 is out of range"});
      same_error_everywhere(
          outcomes(
              n,
              [n](auto& comm) {
                const std::tuple<Eigen::MatrixXd> t{Eigen::MatrixXd::Ones(n, n)};
                (void)par::psum_scatter(t, comm, -3, par::tiled);
              },
              minimal),
          "argument_error",
          "grove::parallel::psum_scatter(scatter_dimension=-3, tiled): ", {"has 2 dimensions"});
    }
  }
  // Devices that pass different dimensions or modes.
  same_error_everywhere(outcomes(2,
                                 [](auto& comm) {
                                   const Eigen::MatrixXf m = Eigen::MatrixXf::Ones(2, 2);
                                   (void)par::psum_scatter(m, comm, comm.rank());
                                 }),
                        "tree_error", "grove::parallel::psum_scatter: the devices disagree",
                        {"rank 0 called psum_scatter(scatter_dimension=0) but rank 1 called "
                         "psum_scatter(scatter_dimension=1)"});
  same_error_everywhere(outcomes(2,
                                 [](auto& comm) {
                                   const Eigen::VectorXf v = Eigen::VectorXf::Ones(2);
                                   if (comm.rank() == 0)
                                     (void)par::psum_scatter(v, comm, 0, par::tiled);
                                   else
                                     (void)par::psum_scatter(v, comm, 0);
                                 }),
                        "tree_error", "grove::parallel::psum_scatter: the devices disagree",
                        {"psum_scatter(scatter_dimension=0, tiled) but rank 1 called "
                         "psum_scatter(scatter_dimension=0)"});
}

// --- pmax and pmin -------------------------------------------------------------------------------

// Every element type pmax and pmin take, in numbers, vectors, matrices (row-major, a strided Map,
// 1x1, empty) and tensors (both layouts, fixed size).
using Extremes =
    std::tuple<std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, std::int32_t, std::uint32_t,
               std::int64_t, std::uint64_t, long long, unsigned long long, char, float, double,
               Eigen::VectorXf, RowMajorXd, Eigen::Array<std::int64_t, Dynamic, Dynamic>,
               Eigen::Matrix<Eigen::half, Dynamic, 1>, Eigen::Matrix<Eigen::bfloat16, 2, 3>,
               StridedMatrix, Eigen::Tensor<float, 3>,
               Eigen::Tensor<std::uint32_t, 2, Eigen::RowMajor>,
               Eigen::TensorFixedSize<double, Eigen::Sizes<2, 2>>, Eigen::Matrix<float, 1, 1>,
               Eigen::VectorXd, Eigen::Tensor<Eigen::half, 2, Eigen::RowMajor>>;
Extremes extremes_of(Backing& b, int rank) {
  Extremes t{0,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             0,
             0.0f,
             0.0,
             Eigen::VectorXf(7),
             RowMajorXd(3, 5),
             Eigen::Array<std::int64_t, Dynamic, Dynamic>(5, 3),
             Eigen::Matrix<Eigen::half, Dynamic, 1>(6),
             zeros<Eigen::Matrix<Eigen::bfloat16, 2, 3>>(),
             StridedMatrix(b.tall.data(), 3, 2, Eigen::OuterStride<>(5)),
             Eigen::Tensor<float, 3>(2, 3, 4),
             Eigen::Tensor<std::uint32_t, 2, Eigen::RowMajor>(3, 3),
             zeros<Eigen::TensorFixedSize<double, Eigen::Sizes<2, 2>>>(),
             zeros<Eigen::Matrix<float, 1, 1>>(),
             Eigen::VectorXd(Index{0}),
             Eigen::Tensor<Eigen::half, 2, Eigen::RowMajor>(2, 3)};
  fill_tree(t, rank);
  return t;
}

// NaN, signed zeros, infinities and the extremes of the integer types, placed so that each rule
// decides an element.
template <class S>
Eigen::Matrix<S, Dynamic, 1> special_floats(int rank, int n) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  const float v[] = {
      rank == 0 ? nan : static_cast<float>(rank),       // a NaN on device 0 only
      rank == n - 1 ? nan : -static_cast<float>(rank),  // a NaN on the last device only
      rank % 2 == 1 ? 0.0f : -0.0f,                     // -0 and +0: max +0, min -0
      -0.0f,                                            // -0 everywhere
      0.0f,                                             // +0 everywhere
      rank == 0 ? -inf : (rank == 1 ? inf : 1.0f),      // the infinities
      static_cast<float>(rank) - 1.5f,
      rank == n - 1 ? -0.0f : 0.0f,  // -0 on the last device
  };
  Eigen::Matrix<S, Dynamic, 1> out(8);
  for (int i = 0; i < 8; ++i) out(i) = S(v[i]);
  return out;
}

using Specials =
    std::tuple<Eigen::VectorXf, Eigen::VectorXd, Eigen::Matrix<Eigen::half, Dynamic, 1>,
               Eigen::Matrix<Eigen::bfloat16, Dynamic, 1>, Eigen::Array<std::int64_t, 3, 1>,
               Eigen::Array<std::uint64_t, 3, 1>, Eigen::Matrix<std::int8_t, 2, 1>,
               Eigen::Matrix<std::uint8_t, 2, 1>, Eigen::Matrix<std::int32_t, 2, 1>, float, double,
               std::int64_t, std::uint64_t>;
Specials specials_of(int rank, int n) {
  constexpr auto i64 = std::numeric_limits<std::int64_t>::min(),
                 i64max = std::numeric_limits<std::int64_t>::max();
  constexpr auto u64 = std::numeric_limits<std::uint64_t>::max();
  constexpr std::uint64_t top = std::uint64_t{1} << 63;
  const bool first = rank == 0, last = rank == n - 1;
  Specials t{special_floats<float>(rank, n),
             special_floats<double>(rank, n),
             special_floats<Eigen::half>(rank, n),
             special_floats<Eigen::bfloat16>(rank, n),
             zeros<Eigen::Array<std::int64_t, 3, 1>>(),
             zeros<Eigen::Array<std::uint64_t, 3, 1>>(),
             zeros<Eigen::Matrix<std::int8_t, 2, 1>>(),
             zeros<Eigen::Matrix<std::uint8_t, 2, 1>>(),
             zeros<Eigen::Matrix<std::int32_t, 2, 1>>(),
             last ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(rank),
             rank % 2 == 0 ? -0.0 : 0.0,
             first ? i64 : rank,
             last ? u64 : static_cast<std::uint64_t>(rank)};
  std::get<4>(t) << (first ? i64 : rank), (last ? i64max : -rank), -1 - rank;
  std::get<5>(t) << (first ? u64 : static_cast<std::uint64_t>(rank)), 0, (last ? top : top - 1);
  std::get<6>(t) << static_cast<std::int8_t>(first ? -128 : 127 - rank),
      static_cast<std::int8_t>(first ? 127 : -128);
  std::get<7>(t) << static_cast<std::uint8_t>(last ? 255 : rank), static_cast<std::uint8_t>(0);
  std::get<8>(t) << (first ? std::numeric_limits<std::int32_t>::min()
                           : std::numeric_limits<std::int32_t>::max() - rank),
      rank;
  return t;
}

// pmax's or pmin's result against the reference, leaf by leaf.
template <class Got, class Tree>
void verify_extremum(Log& log, const Got& got, const std::vector<Tree>& trees, bool max,
                     const std::string& name) {
  zip_leaves(got, trees, [&](auto index, const auto& g, const auto& ins) {
    log(name + ", leaf [" + std::to_string(index()) + "]", matches(g, extreme_expected(ins, max)));
  });
  log.keep(got);
}

// Checks pmax or pmin of trees[rank], both forms, against the reference; keeps the result's bits
// (the same on every device).
template <class Tree, class Comm>
void check_extremum(Comm& comm, Log& log, const std::vector<Tree>& trees, bool max,
                    const std::string& what) {
  const auto& mine = trees[static_cast<std::size_t>(comm.rank())];
  const auto got = max ? par::pmax(mine, comm) : par::pmin(mine, comm);
  const std::string name = what + (max ? ", pmax" : ", pmin");
  verify_extremum(log, got, trees, max, name);
  auto again = mine;
  if (max)
    par::pmax_inplace(again, comm);
  else
    par::pmin_inplace(again, comm);
  log(name + "_inplace: the same as the new tree", same_tree(again, got));
}

TEST_CASE("pmax and pmin: the elementwise extremes over the devices, every element type",
          "[parallel][extrema]") {
  on_every_group(
      [](auto& comm, Log& log) {
        const int n = comm.size();
        std::vector<Backing> backing(static_cast<std::size_t>(n));
        const auto trees = trees_of(
            n, [&](int r) { return extremes_of(backing[static_cast<std::size_t>(r)], r); });
        // As plain trees (the Map's view copied), so that `again = mine` above can copy them.
        std::vector<std::remove_cvref_t<decltype(par::pmax(trees[0], comm))>> plain;
        for (const auto& t : trees)
          plain.push_back(grove::tree_map(
              [](const auto& leaf) {
                using L = std::remove_cvref_t<decltype(leaf)>;
                if constexpr (dense<L>)
                  return typename L::PlainObject(leaf);
                else
                  return L(leaf);
              },
              t));
        check_extremum(comm, log, plain, true, "every type");
        check_extremum(comm, log, plain, false, "every type");
        // In place through the Map: the mapped memory gets the extremes, the rest stays.
        Backing fresh;
        Extremes mine = extremes_of(fresh, comm.rank());
        par::pmax_inplace(mine, comm);
        log("pmax_inplace writes through a Map",
            matches(std::get<18>(mine), extreme_expected(column<18>(trees), true)) &&
                fresh.tall(3, 0) == 999.0f && fresh.tall(4, 1) == 999.0f);
        log("pmax_inplace: a tensor",
            matches(std::get<19>(mine), extreme_expected(column<19>(trees), true)));

        const auto specials = trees_of(n, [&](int r) { return specials_of(r, n); });
        check_extremum(comm, log, specials, true, "NaN, zeros, extremes");
        check_extremum(comm, log, specials, false, "NaN, zeros, extremes");
      },
      bucket_sweep);
}

TEST_CASE("pmax and pmin: NaN wins, -0 is below +0, integer extremes are exact",
          "[parallel][extrema]") {
  // The rules, spelled out for 3 devices (the reference above computes them in general).
  par::LocalDevices devices(3);
  const auto results = devices.run([](par::LocalDevice& d) {
    const Specials mine = specials_of(d.rank(), 3);
    return std::pair{par::pmax(mine, d), par::pmin(mine, d)};
  });
  for (const auto& [hi, lo] : results) {
    const auto& f = std::get<0>(hi);
    const auto& g = std::get<0>(lo);
    CHECK(std::isnan(f(0)));
    CHECK(std::isnan(g(0)));
    CHECK(std::isnan(f(1)));
    CHECK(std::isnan(g(1)));
    CHECK((f(2) == 0 && !std::signbit(f(2))));
    CHECK((g(2) == 0 && std::signbit(g(2))));
    CHECK((f(3) == 0 && std::signbit(f(3))));
    CHECK((g(4) == 0 && !std::signbit(g(4))));
    CHECK(f(5) == std::numeric_limits<float>::infinity());
    CHECK(g(5) == -std::numeric_limits<float>::infinity());
    CHECK(f(6) == 0.5f);
    CHECK(g(6) == -1.5f);
    CHECK((f(7) == 0 && !std::signbit(f(7))));
    CHECK((g(7) == 0 && std::signbit(g(7))));
    const auto& h = std::get<2>(hi);
    CHECK(std::isnan(static_cast<float>(h(0))));
    CHECK(bits16(h(2)) == 0x0000);
    CHECK(bits16(std::get<2>(lo)(2)) == 0x8000);
    CHECK(bits16(std::get<3>(lo)(2)) == 0x8000);
    CHECK(std::get<4>(lo)(0) == std::numeric_limits<std::int64_t>::min());
    CHECK(std::get<4>(hi)(1) == std::numeric_limits<std::int64_t>::max());
    CHECK(std::get<5>(hi)(0) == std::numeric_limits<std::uint64_t>::max());
    CHECK(std::get<5>(lo)(2) == (std::uint64_t{1} << 63) - 1);
    CHECK(std::get<5>(hi)(2) == std::uint64_t{1} << 63);
    CHECK(std::get<6>(lo)(0) == -128);
    CHECK(std::get<6>(hi)(1) == 127);
    CHECK(std::get<7>(hi)(0) == 255);
    CHECK(std::get<8>(lo)(0) == std::numeric_limits<std::int32_t>::min());
    CHECK(std::isnan(std::get<9>(hi)));
    CHECK((std::get<10>(hi) == 0 && !std::signbit(std::get<10>(hi))));
    CHECK((std::get<10>(lo) == 0 && std::signbit(std::get<10>(lo))));
    CHECK(std::get<11>(lo) == std::numeric_limits<std::int64_t>::min());
    CHECK(std::get<12>(hi) == std::numeric_limits<std::uint64_t>::max());
    CHECK(std::get<12>(lo) == 0);
  }
}

TEST_CASE("pmax and pmin of leaves larger than the in-place size, in many buckets",
          "[parallel][extrema]") {
  using Big = std::tuple<Eigen::VectorXf, Eigen::Tensor<std::int64_t, 2>,
                         Eigen::Matrix<Eigen::half, Dynamic, 1>>;
  on_every_group<also::none>(
      [](auto& comm, Log& log) {
        const auto trees = trees_of(comm.size(), [](int r) {
          Big t{Eigen::VectorXf(70000), Eigen::Tensor<std::int64_t, 2>(200, 200),
                Eigen::Matrix<Eigen::half, Dynamic, 1>(140000)};
          fill_tree(t, r);
          return t;
        });
        check_extremum(comm, log, trees, true, "large leaves");
        check_extremum(comm, log, trees, false, "large leaves");
      },
      {{}, {4096, 0}, {65536, 1000}});
}

TEST_CASE("pmax and pmin: different trees are the same tree_error everywhere, the tree unchanged",
          "[parallel][extrema][errors]") {
  for (const bool minimal : {false, true}) {
    INFO((minimal ? "minimal communicator" : "LocalDevices"));
    std::vector<int> unchanged(3, 0);
    same_error_everywhere(outcomes(
                              3,
                              [&](auto& comm) {
                                std::vector<Eigen::VectorXf> t{
                                    Eigen::VectorXf::Constant(comm.rank() == 1 ? 4 : 3, 2.0f)};
                                const auto before = t;
                                try {
                                  par::pmin_inplace(t, comm);
                                } catch (...) {
                                  unchanged[static_cast<std::size_t>(comm.rank())] =
                                      same_tree(t, before);
                                  throw;
                                }
                              },
                              minimal),
                          "tree_error", "grove::parallel::pmin: the devices disagree",
                          {"(rank 1 of 3 differs from rank 0)",
                           "at [0] rank 0 has float32 (3,) but rank 1 has float32 (4,)"});
    CHECK(unchanged == std::vector<int>{1, 1, 1});
    same_error_everywhere(outcomes(
                              2,
                              [](auto& comm) {
                                const float x = 1;
                                if (comm.rank() == 0)
                                  (void)par::pmax(x, comm);
                                else
                                  (void)par::pmin(x, comm);
                              },
                              minimal),
                          "tree_error", "grove::parallel::pm",
                          {"rank 0 called pmax but rank 1 called pmin"});
  }
}

// --- ppermute ------------------------------------------------------------------------------------

// Every leaf broadcast takes: a key, bools, 16-bit floats, complex numbers, tensors, integers.
struct Shipment {
  rnd::Key key;
  bool flag = false;
  Eigen::Matrix<bool, Dynamic, Dynamic> mask;
  Eigen::Matrix<Eigen::half, Dynamic, 1> half;
  Eigen::Matrix<Eigen::bfloat16, 2, 2> bf16;
  std::complex<double> z;
  Eigen::Tensor<float, 3> cube;
  Eigen::Tensor<std::int64_t, 2, Eigen::RowMajor> table;
  std::int64_t count = 0;
  RowMajorXf m;
  Eigen::VectorXd empty;
};
GROVE_NODE(Shipment, key, flag, mask, half, bf16, z, cube, table, count, m, empty);

// With `big`, a cube of 288,000 bytes, which moves in place.
Shipment shipment_of(int rank, bool big = false) {
  Shipment s;
  s.mask.resize(3, 4);
  s.half.resize(5);
  if (big)
    s.cube.resize(40, 30, 60);
  else
    s.cube.resize(2, 3, 2);
  s.table.resize(2, 3);
  s.m.resize(3, 5);
  fill_tree(s, rank);
  s.flag = rank % 2 == 1;
  return s;
}

using Perm = std::vector<std::pair<int, int>>;

// Permutations of n devices, by name.
std::vector<std::pair<std::string, Perm>> perms_of(int n) {
  std::vector<std::pair<std::string, Perm>> out;
  Perm up, down, identity, reverse, open_ring;
  for (int d = 0; d < n; ++d) {
    up.emplace_back(d, (d + 1) % n);
    down.emplace_back(d, (d + n - 1) % n);
    identity.emplace_back(d, d);
    reverse.emplace_back(d, n - 1 - d);
    if (d + 1 < n) open_ring.emplace_back(d, d + 1);
  }
  out.emplace_back("a ring, up", up);
  out.emplace_back("a ring, down", down);
  out.emplace_back("the identity", identity);
  out.emplace_back("reversed", reverse);
  out.emplace_back("an open ring (device 0 gets zeros)", open_ring);
  out.emplace_back("one pair, 0 to n - 1", Perm{{0, n - 1}});
  out.emplace_back("no pairs (zeros everywhere)", Perm{});
  if (n >= 2) out.emplace_back("a swap of 0 and 1", Perm{{1, 0}, {0, 1}});
  return out;
}

// lax.ppermute's result on device d: its source's tree, or zeros.
template <class Make>
auto permuted_expected(const Perm& perm, int d, Make&& make) {
  for (const auto& [s, to] : perm)
    if (to == d) return make(s);
  return zeroed_tree(make(d));
}

TEST_CASE("ppermute: rings, the identity, partial permutations, zeros for the others",
          "[parallel][permute]") {
  on_every_group(
      [](auto& comm, Log& log) {
        const int n = comm.size(), me = comm.rank();
        for (const auto& [name, perm] : perms_of(n)) {
          const Shipment want = permuted_expected(perm, me, [](int r) { return shipment_of(r); });
          const Shipment got = par::ppermute(shipment_of(me), comm, perm);
          log("ppermute, " + name, same_tree(got, want));
          Shipment mine = shipment_of(me);
          par::ppermute_inplace(mine, comm, perm);
          log("ppermute_inplace, " + name, same_tree(mine, want));
          // A tensor alone, through a TensorMap, in place.
          Eigen::Tensor<double, 2, Eigen::RowMajor> storage(3, 4);
          fill_leaf(storage, me, 1);
          Eigen::TensorMap<Eigen::Tensor<double, 2, Eigen::RowMajor>> view(storage.data(), 3, 4);
          par::ppermute_inplace(view, comm, perm);
          Eigen::Tensor<double, 2, Eigen::RowMajor> expected(3, 4);
          expected.setZero();
          for (const auto& [s, d] : perm)
            if (d == me) fill_leaf(expected, s, 1);
          log("ppermute_inplace of a TensorMap, " + name, same_leaf(storage, expected));
        }
        // The span overload, with a C array of pairs.
        const std::pair<int, int> pairs[] = {{0, n - 1}};
        const auto got =
            par::ppermute(shipment_of(me), comm, std::span<const std::pair<int, int>>(pairs));
        log("ppermute with a span",
            same_tree(got, permuted_expected(Perm{{0, n - 1}}, me,
                                             [](int r) { return shipment_of(r); })));
      },
      bucket_sweep);
}

TEST_CASE("ppermute of leaves larger than the in-place size", "[parallel][permute]") {
  on_every_group<also::none>(
      [](auto& comm, Log& log) {
        const int n = comm.size(), me = comm.rank();
        for (const auto& [name, perm] : perms_of(n)) {
          const Shipment got = par::ppermute(shipment_of(me, true), comm, perm);
          log("ppermute, " + name, same_tree(got, permuted_expected(perm, me, [](int r) {
                                               return shipment_of(r, true);
                                             })));
        }
      },
      {{}, {65536, 0}, {65536, std::numeric_limits<std::size_t>::max()}});
}

TEST_CASE("ppermute: a device outside the group, a repeated source or destination, different perms",
          "[parallel][permute][errors]") {
  for (const int n : {1, 2, 3}) {
    INFO(n << " devices");
    for (const bool minimal : {false, true}) {
      auto refused = [&](const Perm& perm, const std::string& why) {
        std::vector<int> unchanged(static_cast<std::size_t>(n), 0);
        same_error_everywhere(outcomes(
                                  n,
                                  [&](auto& comm) {
                                    Shipment s = shipment_of(comm.rank());
                                    try {
                                      par::ppermute_inplace(s, comm, perm);
                                    } catch (...) {
                                      unchanged[static_cast<std::size_t>(comm.rank())] =
                                          same_tree(s, shipment_of(comm.rank()));
                                      throw;
                                    }
                                  },
                                  minimal),
                              "argument_error", "grove::parallel::ppermute: perm's pair ", {why});
        CHECK(unchanged == std::vector<int>(static_cast<std::size_t>(n), 1));
      };
      refused({{0, n}}, "(0, " + std::to_string(n) + ") (number 0) names a device outside [0, " +
                            std::to_string(n) + ")");
      refused({{0, 0}, {-1, 0}}, "(-1, 0) (number 1) names a device outside");
      if (n >= 2) {
        refused({{0, 1}, {0, 0}}, "(0, 0) (number 1) repeats source 0");
        refused({{0, 1}, {1, 1}}, "(1, 1) (number 1) repeats destination 1");
      }
    }
    if (n >= 2) {
      std::vector<int> unchanged(static_cast<std::size_t>(n), 0);
      same_error_everywhere(outcomes(n,
                                     [&](auto& comm) {
                                       Shipment s = shipment_of(comm.rank());
                                       const int r = comm.rank();
                                       try {
                                         par::ppermute_inplace(s, comm, Perm{{r, r}});
                                       } catch (...) {
                                         unchanged[static_cast<std::size_t>(r)] =
                                             same_tree(s, shipment_of(r));
                                         throw;
                                       }
                                     }),
                            "tree_error", "grove::parallel::ppermute: the devices disagree",
                            {"rank 0 called ppermute(perm=[(0, 0)]) but rank 1 called "
                             "ppermute(perm=[(1, 1)])"});
      CHECK(unchanged == std::vector<int>(static_cast<std::size_t>(n), 1));
    }
  }
}

// --- psum and pmean of tensors and 16-bit floats -------------------------------------------------

// psum's (or pmean's) result against the reference, leaf by leaf.
template <class Got, class Tree>
void verify_summed(Log& log, const Got& got, const std::vector<Tree>& trees, bool mean,
                   const std::string& what) {
  zip_leaves(got, trees, [&](auto index, const auto& g, const auto& ins) {
    log(what + ", leaf [" + std::to_string(index()) + "]", matches(g, summed_expected(ins, mean)));
  });
}

using Sixteen =
    std::tuple<Eigen::Tensor<float, 3>, Eigen::Tensor<double, 2, Eigen::RowMajor>,
               Eigen::TensorFixedSize<float, Eigen::Sizes<2, 3>>,
               Eigen::Matrix<Eigen::half, Dynamic, 1>,
               Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic, Eigen::RowMajor>,
               Eigen::Tensor<Eigen::half, 2>, Eigen::Tensor<Eigen::bfloat16, 1, Eigen::RowMajor>,
               float, Eigen::VectorXd, Eigen::Matrix<Eigen::half, 1, 1>>;
// Numbers whose sums round; element 0 of the half vector is 1024 on device 0 and 0.5 elsewhere,
// element (0, 0) of the bfloat16 matrix 256 and 1: rounded at each step, their sums would stay
// 1024 and 256.
Sixteen sixteen_of(int rank) {
  Sixteen t{Eigen::Tensor<float, 3>(2, 3, 4),
            Eigen::Tensor<double, 2, Eigen::RowMajor>(3, 5),
            zeros<Eigen::TensorFixedSize<float, Eigen::Sizes<2, 3>>>(),
            Eigen::Matrix<Eigen::half, Dynamic, 1>(9),
            Eigen::Matrix<Eigen::bfloat16, Dynamic, Dynamic, Eigen::RowMajor>(2, 3),
            Eigen::Tensor<Eigen::half, 2>(2, 3),
            Eigen::Tensor<Eigen::bfloat16, 1, Eigen::RowMajor>(4),
            0.0f,
            Eigen::VectorXd(3),
            zeros<Eigen::Matrix<Eigen::half, 1, 1>>()};
  fill_irregular(t, rank);
  std::get<3>(t)(0) = Eigen::half(rank == 0 ? 1024.0f : 0.5f);
  std::get<4>(t)(0, 0) = Eigen::bfloat16(rank == 0 ? 256.0f : 1.0f);
  return t;
}

TEST_CASE("psum and pmean of tensors and 16-bit floats: summed in float, rounded once",
          "[parallel][psum]") {
  on_every_group(
      [](auto& comm, Log& log) {
        const int n = comm.size(), me = comm.rank();
        const auto trees = trees_of(n, sixteen_of);
        const auto sum = par::psum(trees[static_cast<std::size_t>(me)], comm);
        const auto mean = par::pmean(trees[static_cast<std::size_t>(me)], comm);
        verify_summed(log, sum, trees, false, "psum");
        verify_summed(log, mean, trees, true, "pmean");
        const float half_sum = 1024.0f + 0.5f * static_cast<float>(n - 1);
        const float bf16_sum = 256.0f + static_cast<float>(n - 1);
        log("1024 + 0.5 + ... rounded once",
            bits16(std::get<3>(sum)(0)) == bits16(Eigen::half(half_sum)));
        log("256 + 1 + ... rounded once",
            bits16(std::get<4>(sum)(0, 0)) == bits16(Eigen::bfloat16(bf16_sum)));
        log("(1024 + 0.5 + ...) / n rounded once",
            bits16(std::get<3>(mean)(0)) == bits16(Eigen::half(half_sum / static_cast<float>(n))));
        // In place, also through a TensorMap: the mapped memory gets the means.
        auto again = trees[static_cast<std::size_t>(me)];
        par::psum_inplace(again, comm);
        log("psum_inplace: the same as psum", same_tree(again, sum));
        again = trees[static_cast<std::size_t>(me)];
        par::pmean_inplace(again, comm);
        log("pmean_inplace: the same as pmean", same_tree(again, mean));
        auto storage = trees[static_cast<std::size_t>(me)];
        std::tuple<Eigen::TensorMap<Eigen::Tensor<float, 3>>,
                   Eigen::Matrix<Eigen::half, Dynamic, 1>>
            view{{std::get<0>(storage).data(), 2, 3, 4}, std::get<3>(storage)};
        par::pmean_inplace(view, comm);
        log("pmean_inplace through a TensorMap",
            matches(std::get<0>(storage), summed_expected(column<0>(trees), true)) &&
                matches(std::get<1>(view), summed_expected(column<3>(trees), true)));
        // Integers in tensors.
        using Ints = std::tuple<Eigen::Tensor<std::int32_t, 2>,
                                Eigen::Tensor<std::int64_t, 3, Eigen::RowMajor>,
                                Eigen::Tensor<std::uint8_t, 1>>;
        const auto ints = trees_of(n, [](int r) {
          Ints t{Eigen::Tensor<std::int32_t, 2>(3, 2),
                 Eigen::Tensor<std::int64_t, 3, Eigen::RowMajor>(2, 2, 2),
                 Eigen::Tensor<std::uint8_t, 1>(5)};
          fill_tree(t, r);
          return t;
        });
        verify_summed(log, par::psum(ints[static_cast<std::size_t>(me)], comm), ints, false,
                      "psum of integer tensors");
      },
      bucket_sweep);
}

TEST_CASE("psum and pmean of large tensors and 16-bit floats, in many buckets",
          "[parallel][psum]") {
  using Big = std::tuple<Eigen::Tensor<float, 3>, Eigen::Matrix<Eigen::half, Dynamic, 1>,
                         Eigen::Tensor<Eigen::bfloat16, 2>>;
  on_every_group<also::none>(
      [](auto& comm, Log& log) {
        const auto trees = trees_of(comm.size(), [](int r) {
          Big t{Eigen::Tensor<float, 3>(50, 40, 40), Eigen::Matrix<Eigen::half, Dynamic, 1>(140000),
                Eigen::Tensor<Eigen::bfloat16, 2>(400, 400)};
          fill_irregular(t, r);
          return t;
        });
        const auto& mine = trees[static_cast<std::size_t>(comm.rank())];
        verify_summed(log, par::psum(mine, comm), trees, false, "psum");
        verify_summed(log, par::pmean(mine, comm), trees, true, "pmean");
      },
      {{}, {4096, 0}, {65536, 1000}});
}

// docs/parallel.md's example of the collectives, the same text, checked.
TEST_CASE("the docs' example: a gather, a reduce-scatter and a ring", "[parallel][docs]") {
  struct Seen {
    Eigen::MatrixXf rows;
    Eigen::VectorXf all, block, left;
  };
  par::LocalDevices devices(3);
  const std::vector<Seen> seen = devices.run([&](par::LocalDevice& dev) {
    const Eigen::VectorXf mine = Eigen::VectorXf::Constant(2, static_cast<float>(dev.rank()));
    const Eigen::MatrixXf rows = par::all_gather(mine, dev);  // (n, 2): row r is device r's
    const Eigen::VectorXf all = par::all_gather(mine, dev, 0, par::tiled);     // 2n entries
    const Eigen::VectorXf block = par::psum_scatter(all, dev, 0, par::tiled);  // n times mine
    std::vector<std::pair<int, int>> ring;
    for (int d = 0; d < dev.size(); ++d) ring.push_back({d, (d + 1) % dev.size()});
    const Eigen::VectorXf left = par::ppermute(mine, dev, ring);  // device rank - 1's
    return Seen{rows, all, block, left};
  });
  for (int r = 0; r < 3; ++r) {
    const Seen& s = seen[static_cast<std::size_t>(r)];
    const auto mine = [](int d) { return Eigen::VectorXf::Constant(2, static_cast<float>(d)); };
    CHECK(s.rows.rows() == 3);
    for (int d = 0; d < 3; ++d) {
      CHECK(s.rows.row(d).transpose() == mine(d));
      CHECK(s.all.segment(2 * d, 2) == mine(d));
    }
    CHECK(s.block == 3 * mine(r));
    CHECK(s.left == mine((r + 2) % 3));
  }
}

}  // namespace collectives_test
