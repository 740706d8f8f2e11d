// Tree benchmarks. Two kinds:
//  * tree_map / tree_for_each over static trees next to a hand-written loop doing the same
//    arithmetic: the ratio (grove / hand) is printed at the end, measured in the same run.
//  * flatten, unflatten, map and map_with_path on a ResNet-50-shaped train state (~1,650 nodes),
//    a 2,000-leaf wide map and a 100-level deep nesting, reported per node.
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <grove/grove.hpp>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace shapes {

template <class T>
struct Dense {
  Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> w;
  Eigen::Matrix<T, Eigen::Dynamic, 1> b;
};
GROVE_NODE(Dense, w, b);

// ResNet-50's parameter tree, as Flax lays it out: small arrays in nested structs, vectors and
// maps.
struct Conv {
  Eigen::ArrayXf kernel;
};
GROVE_NODE(Conv, kernel);
struct BatchNorm {
  Eigen::ArrayXf scale, bias, mean, var;
};
GROVE_NODE(BatchNorm, scale, bias, mean, var);
struct Bottleneck {
  Conv conv1, conv2, conv3;
  BatchNorm bn1, bn2, bn3;
  std::optional<std::pair<Conv, BatchNorm>> projection;
};
GROVE_NODE(Bottleneck, conv1, conv2, conv3, bn1, bn2, bn3, projection);
struct ResNet {
  Conv stem;
  BatchNorm stem_bn;
  std::map<std::string, std::vector<Bottleneck>> stages;
  Dense<float> head;
};
GROVE_NODE(ResNet, stem, stem_bn, stages, head);
// A train state holds the parameters, their gradients and two optimizer moments.
struct TrainState {
  ResNet params, grads, mu, nu;
};
GROVE_NODE(TrainState, params, grads, mu, nu);

Eigen::ArrayXf small(int n) {
  return Eigen::ArrayXf::Constant(n, 0.5f);
}
BatchNorm batch_norm(int c) {
  return {small(c % 16 + 1), small(c % 16 + 1), small(c % 16 + 1), small(c % 16 + 1)};
}

ResNet resnet50() {
  ResNet net{
      {small(64)}, batch_norm(64), {}, {Eigen::MatrixXf::Ones(10, 16), Eigen::VectorXf::Ones(10)}};
  const int blocks[] = {3, 4, 6, 3};
  for (int s = 0; s < 4; ++s) {
    auto& stage = net.stages["stage" + std::to_string(s + 1)];
    for (int b = 0; b < blocks[s]; ++b) {
      Bottleneck block{{small(8)},    {small(8)},    {small(8)},  batch_norm(s),
                       batch_norm(s), batch_norm(s), std::nullopt};
      if (b == 0) block.projection = std::pair{Conv{small(8)}, batch_norm(s)};
      stage.push_back(std::move(block));
    }
  }
  return net;
}

TrainState train_state() {
  auto net = resnet50();
  return {net, net, net, net};
}

std::map<std::string, float> wide_map() {
  std::map<std::string, float> m;
  for (int i = 0; i < 2000; ++i) m["param_" + std::to_string(i)] = static_cast<float>(i);
  return m;
}

// deep<N>: N nested pairs (float, deeper). Nested std::vectors would do too, but GCC's compile
// time doubles per level of std::vector<std::vector<...>> (the allocator repeats the type).
template <int N>
struct deep {
  using type = std::tuple<float, typename deep<N - 1>::type>;
  static type make() { return {static_cast<float>(N), deep<N - 1>::make()}; }
};
template <>
struct deep<0> {
  using type = float;
  static type make() { return 0.0f; }
};

}  // namespace shapes

// --- tree_map over static trees vs a hand-written loop ------------------------------------------

using Quad = std::tuple<Eigen::MatrixXf, Eigen::MatrixXf, Eigen::MatrixXf, Eigen::MatrixXf>;

static Quad make_quad() {
  return {Eigen::MatrixXf::Random(128, 128), Eigen::MatrixXf::Random(128, 64),
          Eigen::MatrixXf::Random(64, 64), Eigen::MatrixXf::Random(256, 32)};
}

static std::vector<shapes::Dense<float>> mlp_params() {
  const Eigen::Index sizes[] = {784, 512, 512, 10};
  std::vector<shapes::Dense<float>> params;
  for (int i = 0; i < 3; ++i)
    params.push_back(
        {Eigen::MatrixXf::Random(sizes[i + 1], sizes[i]), Eigen::VectorXf::Random(sizes[i + 1])});
  return params;
}

static void BM_map_tuple_grove(benchmark::State& state) {
  const Quad a = make_quad(), b = make_quad();
  for (auto _ : state) {
    auto out =
        grove::tree_map([](const auto& x, const auto& y) { return 0.9f * x + 0.1f * y; }, a, b);
    benchmark::DoNotOptimize(out);
  }
}
static void BM_map_tuple_hand(benchmark::State& state) {
  const Quad a = make_quad(), b = make_quad();
  for (auto _ : state) {
    Quad out{0.9f * std::get<0>(a) + 0.1f * std::get<0>(b),
             0.9f * std::get<1>(a) + 0.1f * std::get<1>(b),
             0.9f * std::get<2>(a) + 0.1f * std::get<2>(b),
             0.9f * std::get<3>(a) + 0.1f * std::get<3>(b)};
    benchmark::DoNotOptimize(out);
  }
}

static void BM_map_mlp_grove(benchmark::State& state) {
  const auto params = mlp_params(), grads = mlp_params();
  for (auto _ : state) {
    auto out =
        grove::tree_map([](const auto& p, const auto& g) { return p - 0.01f * g; }, params, grads);
    benchmark::DoNotOptimize(out);
  }
}
static void BM_map_mlp_hand(benchmark::State& state) {
  const auto params = mlp_params(), grads = mlp_params();
  for (auto _ : state) {
    std::vector<shapes::Dense<float>> out;
    out.reserve(params.size());
    for (std::size_t i = 0; i < params.size(); ++i)
      out.push_back({params[i].w - 0.01f * grads[i].w, params[i].b - 0.01f * grads[i].b});
    benchmark::DoNotOptimize(out);
  }
}

static void BM_update_mlp_grove(benchmark::State& state) {
  auto params = mlp_params();
  const auto grads = mlp_params();
  for (auto _ : state) {
    grove::tree_for_each([](auto& p, const auto& g) { p -= 1e-9f * g; }, params, grads);
    benchmark::ClobberMemory();
  }
}
static void BM_update_mlp_hand(benchmark::State& state) {
  auto params = mlp_params();
  const auto grads = mlp_params();
  for (auto _ : state) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      params[i].w -= 1e-9f * grads[i].w;
      params[i].b -= 1e-9f * grads[i].b;
    }
    benchmark::ClobberMemory();
  }
}

BENCHMARK(BM_map_tuple_grove);
BENCHMARK(BM_map_tuple_hand);
BENCHMARK(BM_map_mlp_grove);
BENCHMARK(BM_map_mlp_hand);
BENCHMARK(BM_update_mlp_grove);
BENCHMARK(BM_update_mlp_hand);

// --- structure operations, per node -----------------------------------------------------------

template <class Tree>
static void per_node(benchmark::State& state, const Tree& tree) {
  state.counters["nodes"] = static_cast<double>(grove::tree_structure(tree).num_nodes());
  state.counters["ns_per_node"] = benchmark::Counter(
      static_cast<double>(grove::tree_structure(tree).num_nodes()) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

template <class Make>
static void BM_flatten(benchmark::State& state, Make make) {
  const auto tree = make();
  for (auto _ : state) {
    auto flat = grove::tree_flatten(tree);
    benchmark::DoNotOptimize(flat);
  }
  per_node(state, tree);
}

template <class Make>
static void BM_unflatten(benchmark::State& state, Make make) {
  const auto tree = make();
  auto [leaves, def] = grove::tree_flatten(tree);
  for (auto _ : state) {
    auto back = grove::tree_unflatten(def, leaves);
    benchmark::DoNotOptimize(back);
  }
  per_node(state, tree);
}

template <class Make>
static void BM_map(benchmark::State& state, Make make) {
  const auto tree = make();
  for (auto _ : state) {
    auto out = grove::tree_map([](const auto& x) { return x; }, tree);
    benchmark::DoNotOptimize(out);
  }
  per_node(state, tree);
}

template <class Make>
static void BM_map_with_path(benchmark::State& state, Make make) {
  const auto tree = make();
  for (auto _ : state) {
    auto out =
        grove::tree_map_with_path([](const grove::KeyPath&, const auto& x) { return x; }, tree);
    benchmark::DoNotOptimize(out);
  }
  per_node(state, tree);
}

BENCHMARK_CAPTURE(BM_flatten, resnet50, shapes::train_state);
BENCHMARK_CAPTURE(BM_unflatten, resnet50, shapes::train_state);
BENCHMARK_CAPTURE(BM_map, resnet50, shapes::train_state);
BENCHMARK_CAPTURE(BM_map_with_path, resnet50, shapes::train_state);
BENCHMARK_CAPTURE(BM_flatten, wide_map_2000, shapes::wide_map);
BENCHMARK_CAPTURE(BM_unflatten, wide_map_2000, shapes::wide_map);
BENCHMARK_CAPTURE(BM_map, wide_map_2000, shapes::wide_map);
BENCHMARK_CAPTURE(BM_map_with_path, wide_map_2000, shapes::wide_map);
BENCHMARK_CAPTURE(BM_flatten, deep_100, shapes::deep<100>::make);
BENCHMARK_CAPTURE(BM_unflatten, deep_100, shapes::deep<100>::make);
BENCHMARK_CAPTURE(BM_map, deep_100, shapes::deep<100>::make);
BENCHMARK_CAPTURE(BM_map_with_path, deep_100, shapes::deep<100>::make);

// --- ratios, from the same run -------------------------------------------------------------------

namespace {
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs)
      if (run.run_type == Run::RT_Iteration)
        times_[run.benchmark_name()] = run.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::cout << "\nratio grove / hand-written (same run; target <= 1.05):\n";
    for (const char* name : {"map_tuple", "map_mlp", "update_mlp"}) {
      const auto g = times_.find(std::string("BM_") + name + "_grove");
      const auto h = times_.find(std::string("BM_") + name + "_hand");
      if (g == times_.end() || h == times_.end()) continue;
      std::cout << "  " << std::left << std::setw(12) << name << std::fixed << std::setprecision(3)
                << g->second / h->second << '\n';
    }
  }

 private:
  std::map<std::string, double> times_;
};
}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
