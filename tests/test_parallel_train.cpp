// The data-parallel training step over LocalDevices: equal to the single-process step on the
// whole batch (within 1e-5 relative), with equal and unequal shards and an empty one, with SGD,
// momentum and Adam, labels and one-hot targets; bit-identical across reruns; replicas stay
// bit-identical. (Catch2's assertions are not thread-safe: the devices return what they computed
// and the test checks it on the main thread.)
#include <catch2/catch.hpp>

#include <cstdint>
#include <grove/data/batches.hpp>
#include <grove/detail/threads.hpp>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>
#include <limits>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "parallel_fixtures.hpp"

namespace nn = grove::nn;
namespace gr = grove::random;
namespace par = grove::parallel;
using par_test::Net;
using par_test::Problem;
using par_test::problem;

namespace {

// `steps` single-process steps on the whole batch.
template <class Opt, class Y>
std::pair<Net, std::vector<float>> single(const Net& start, const Eigen::MatrixXf& X, const Y& y,
                                          const Opt& opt, int steps) {
  Net params = start;
  auto state = opt.init(params);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    auto [loss, grads] = nn::value_and_grad(params, X, y);
    opt.step(params, grads, state);
    losses.push_back(loss);
  }
  return {params, losses};
}

// The same on `n` devices: device 0 starts from `start`, the others from zeros (the broadcast
// fixes that). Returns each device's params and losses.
template <class Opt, class Y>
std::vector<std::pair<Net, std::vector<float>>> data_parallel(const Net& start,
                                                              const Eigen::MatrixXf& X, const Y& y,
                                                              const Opt& opt, int steps, int n,
                                                              int threads = 1) {
  par::LocalDevices devices(n, threads);
  return devices.run([&](par::LocalDevice& d) {
    Net params = start;
    if (d.rank() != 0)
      for (auto& layer : params) layer.w.setZero(), layer.b.setZero();
    par::broadcast_inplace(params, d, 0);
    auto state = opt.init(params);
    par::StepWorkspace<Net> ws;
    std::vector<float> losses;
    for (int s = 0; s < steps; ++s)
      losses.push_back(par::train_step(params, X, y, opt, state, d, ws));
    return std::pair{params, losses};
  });
}

template <class Opt, class Y>
void check_against_single(const Problem& p, const Y& y, const Opt& opt, int steps, int n,
                          int threads = 1) {
  INFO(n << " devices of " << threads << " threads, batch " << p.X.cols() << ", " << steps
         << " steps");
  const auto [expected, expected_losses] = single(p.params, p.X, y, opt, steps);
  const auto results = data_parallel(p.params, p.X, y, opt, steps, n, threads);
  for (std::size_t r = 0; r < results.size(); ++r) {
    INFO("device " << r);
    const auto& [params, losses] = results[r];
    CHECK(par_test::max_relative(params, expected) < 1e-5);
    for (int s = 0; s < steps; ++s)
      CHECK(std::abs(losses[static_cast<std::size_t>(s)] -
                     expected_losses[static_cast<std::size_t>(s)]) <
            1e-5 * std::abs(expected_losses[static_cast<std::size_t>(s)]));
    // Every replica holds the same bits.
    CHECK(par_test::same_bits(params, results[0].first));
    CHECK(losses == results[0].second);
  }
}

}  // namespace

TEST_CASE("the data-parallel step equals the single step on the whole batch", "[parallel][train]") {
  const Problem p = problem(64);
  for (int n = 1; n <= 4; ++n) {
    check_against_single(p, p.y, nn::sgd(0.5), 1, n);
    check_against_single(p, p.y, nn::momentum(0.1, 0.9), 4, n);
  }
  check_against_single(p, p.y, nn::adam(1e-3), 3, 2);
}

TEST_CASE("unequal and empty shards are weighted by their sizes", "[parallel][train]") {
  const Problem p = problem(61);  // 16, 15, 15, 15
  check_against_single(p, p.y, nn::sgd(0.5), 2, 4);
  const Problem tiny = problem(3);  // 1, 1, 1 and an empty shard
  check_against_single(tiny, tiny.y, nn::sgd(0.5), 2, 4);
}

TEST_CASE("one-hot targets, and devices of two threads each", "[parallel][train]") {
  const Problem p = problem(48);
  Eigen::MatrixXf onehot = Eigen::MatrixXf::Zero(7, p.X.cols());
  for (Eigen::Index j = 0; j < p.X.cols(); ++j) onehot(p.y(j), j) = 1;
  check_against_single(p, onehot, nn::sgd(0.5), 2, 3);
  check_against_single(p, p.y, nn::sgd(0.5), 2, 2, 2);
}

TEST_CASE("data-parallel training repeats bit for bit", "[parallel][train][determinism]") {
  const Problem p = problem(100);
  const auto opt = nn::adam(1e-2);
  for (int n : {2, 3, 4}) {
    INFO(n << " devices");
    const auto first = data_parallel(p.params, p.X, p.y, opt, 5, n);
    for (int rerun = 0; rerun < 3; ++rerun) {
      const auto again = data_parallel(p.params, p.X, p.y, opt, 5, n);
      for (std::size_t r = 0; r < again.size(); ++r) {
        CHECK(par_test::same_bits(again[r].first, first[r].first));
        CHECK(again[r].second == first[r].second);
      }
    }
  }
}

TEST_CASE("train_step_on_shard: each device brings its own shard", "[parallel][train]") {
  const Problem p = problem(40);
  const auto [expected, losses] = single(p.params, p.X, p.y, nn::sgd(0.5), 1);
  par::LocalDevices devices(2);
  const auto params = devices.run([&](par::LocalDevice& d) {
    // Device 0 takes the first 25 examples, device 1 the other 15.
    const Eigen::Index begin = d.rank() == 0 ? 0 : 25, size = d.rank() == 0 ? 25 : 15;
    Net net = p.params;
    auto opt = nn::sgd(0.5);
    auto state = opt.init(net);
    par::StepWorkspace<Net> ws;
    const float loss = par::train_step_on_shard(net, p.X.middleCols(begin, size),
                                                p.y.segment(begin, size), opt, state, d, ws);
    return std::pair{net, loss};
  });
  for (const auto& [net, loss] : params) {
    CHECK(par_test::max_relative(net, expected) < 1e-5);
    CHECK(std::abs(loss - losses[0]) < 1e-5f * losses[0]);
  }
}

namespace {

// A LocalDevice that counts the gradient reductions: the allreduce_sum calls of more than the
// two numbers (shard sizes and losses) that every step sums.
struct CountingDevice {
  par::LocalDevice& device;
  int gradient_sums = 0;
  int rank() const { return device.rank(); }
  int size() const { return device.size(); }
  template <par::reducible T>
  void allreduce_sum(std::span<T> buf) {
    if (buf.size() > 2) ++gradient_sums;
    device.allreduce_sum(buf);
  }
  void allreduce_max(std::span<std::uint64_t> buf) { device.allreduce_max(buf); }
  void broadcast(std::span<std::byte> buf, int root) { device.broadcast(buf, root); }
  par::Staging& staging() { return device.staging(); }
};

// Mini step s's batch: a window of the problem's examples, of a size that changes from step to
// step (so that the accumulation's mini batches weigh alike only if the code weighs them so).
Eigen::Index mini_batch_size(int s) {
  return 24 + 7 * (s % 3);
}

}  // namespace

TEST_CASE("multi_steps under data parallelism sums the gradients once per accumulation",
          "[parallel][train][multi_steps]") {
  const Problem p = problem(64);
  constexpr int k = 3, steps = 8;
  const auto opt = grove::optim::multi_steps(nn::adam(1e-2), k);
  auto batch = [&](int s) {
    const Eigen::Index begin = (5 * s) % 16, n = mini_batch_size(s);
    return std::pair{p.X.middleCols(begin, n), p.y.segment(begin, n)};
  };
  // A single process on every whole mini batch.
  Net expected = p.params;
  auto expected_state = opt.init(expected);
  std::vector<float> expected_losses;
  for (int s = 0; s < steps; ++s) {
    const auto [X, y] = batch(s);
    auto [loss, grads] = nn::value_and_grad(expected, X, y);
    opt.step(expected, grads, expected_state);
    expected_losses.push_back(loss);
  }
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " devices");
    par::LocalDevices devices(n);
    struct Result {
      Net params;
      std::vector<float> losses;
      int gradient_sums;
      bool in_sync;
    };
    const auto results = devices.run([&](par::LocalDevice& d) {
      CountingDevice counting{d};
      Net params = p.params;
      auto state = opt.init(params);
      par::StepWorkspace<Net> ws;
      std::vector<float> losses;
      for (int s = 0; s < steps; ++s) {
        const auto [X, y] = batch(s);
        losses.push_back(par::train_step(params, X, y, opt, state, counting, ws));
      }
      return Result{params, losses, counting.gradient_sums, par::in_sync(params, d)};
    });
    for (const Result& r : results) {
      CHECK(par_test::max_relative(r.params, expected) < 1e-5);
      for (std::size_t s = 0; s < r.losses.size(); ++s)
        CHECK(std::abs(r.losses[s] - expected_losses[s]) < 1e-5f * expected_losses[s]);
      // One reduction of the gradients per accumulation of k mini steps (on one device, none).
      CHECK(r.gradient_sums == (n == 1 ? 0 : steps / k));
      CHECK(r.in_sync);
    }
  }
}

TEST_CASE("multi_steps under data parallelism: any model, unequal shards",
          "[parallel][train][multi_steps]") {
  const auto model = nn::sequential(nn::dense(20, 16), nn::gelu, nn::dense(16, 7));
  const auto params = nn::init<float>(model, gr::key(3));
  const Problem p = problem(45);
  const auto opt = grove::optim::multi_steps(nn::sgd(0.3), 2);
  auto expected = params;
  auto expected_state = opt.init(expected);
  nn::StepWorkspace<decltype(expected)> single_ws;
  for (int s = 0; s < 4; ++s) {
    const Eigen::Index n = 45 - 11 * (s % 2);
    nn::train_step(model, expected, p.X.leftCols(n), p.y.head(n), nn::softmax_cross_entropy, opt,
                   expected_state, single_ws);
  }
  par::LocalDevices devices(3);
  const auto results = devices.run([&](par::LocalDevice& d) {
    auto mine = params;
    auto state = opt.init(mine);
    par::StepWorkspace<decltype(mine)> ws;
    for (int s = 0; s < 4; ++s) {
      const Eigen::Index n = 45 - 11 * (s % 2);  // 45 and 34 examples: shards of 15 or 12, 11, 11
      par::train_step(model, mine, p.X.leftCols(n), p.y.head(n), nn::softmax_cross_entropy, nullptr,
                      opt, state, d, ws);
    }
    return mine;
  });
  const Eigen::VectorXf want = grove::ravel(expected).first;
  for (const auto& r : results) {
    const Eigen::VectorXf got = grove::ravel(r).first;
    REQUIRE(got.size() == want.size());
    CHECK((got - want).cwiseAbs().maxCoeff() <= 1e-5f * want.cwiseAbs().maxCoeff());
  }
}

TEST_CASE("multi_steps under data parallelism: a device with an empty shard adds nothing",
          "[parallel][train][multi_steps]") {
  const Problem p = problem(2);  // shards of 1, 1 and 0 examples
  const auto opt = grove::optim::multi_steps(nn::sgd(0.5), 2);
  Net expected = p.params;
  auto expected_state = opt.init(expected);
  for (int s = 0; s < 4; ++s) {
    auto [loss, grads] = nn::value_and_grad(expected, p.X, p.y);
    (void)loss;
    opt.step(expected, grads, expected_state);
  }
  par::LocalDevices devices(3);
  const auto results = devices.run([&](par::LocalDevice& d) {
    Net params = p.params;
    auto state = opt.init(params);
    par::StepWorkspace<Net> ws;
    // The empty shard's gradient buffer holds NaNs from before: they must not reach the sum (a
    // part of 0 times NaN would).
    ws.grads = p.params;
    for (auto& layer : ws.grads) {
      layer.w.setConstant(std::numeric_limits<float>::quiet_NaN());
      layer.b.setConstant(std::numeric_limits<float>::quiet_NaN());
    }
    for (int s = 0; s < 4; ++s) par::train_step(params, p.X, p.y, opt, state, d, ws);
    return params;
  });
  for (const Net& params : results) CHECK(par_test::max_relative(params, expected) < 1e-5);
}

TEST_CASE("MultiSteps::step_accumulated applies a known mean at the last mini step",
          "[parallel][train][multi_steps]") {
  const Problem p = problem(16);
  const auto opt = grove::optim::multi_steps(nn::sgd(0.5), 2);
  Net params = p.params, direct = p.params;
  auto state = opt.init(params), direct_state = opt.init(direct);
  auto [loss, grads] = nn::value_and_grad(params, p.X, p.y);
  (void)loss;
  CHECK_THROWS_WITH(opt.step_accumulated(params, grads, state),
                    Catch::Contains("not at the accumulation's last"));
  opt.step(params, grads, state);
  opt.step(direct, grads, direct_state);
  opt.step(direct, grads, direct_state);  // the mean of two equal gradients is the gradient
  opt.step_accumulated(params, grads, state);
  CHECK(par_test::same_bits(params, direct));
  CHECK(state.mini_step == 0);
  CHECK(state.gradient_step == 1);
}

TEST_CASE("train_step checks its arguments on every device", "[parallel][train]") {
  const Problem p = problem(8);
  par::LocalDevices devices(2);
  CHECK_THROWS_WITH(devices.run([&](par::LocalDevice& d) {
    Net net = p.params;
    auto opt = nn::sgd(0.1);
    auto state = opt.init(net);
    par::StepWorkspace<Net> ws;
    par::train_step(net, p.X, p.y.head(7), opt, state, d, ws);
  }),
                    Catch::Contains("got 7 targets for a batch of 8 examples"));
  CHECK_THROWS_WITH(devices.run([&](par::LocalDevice& d) {
    Net net = p.params;
    auto opt = nn::sgd(0.1);
    auto state = opt.init(net);
    par::StepWorkspace<Net> ws;
    par::train_step_on_shard(net, p.X.leftCols(0), p.y.head(0), opt, state, d, ws);
  }),
                    Catch::Contains("every device's shard is empty"));
}

TEST_CASE("any model trains data-parallel: a residual block with layer norm, mse",
          "[parallel][train][model]") {
  const auto model = nn::sequential(
      nn::dense(10, 8), nn::gelu,
      nn::residual(nn::sequential(nn::layer_norm(8), nn::dense(8, 8), nn::tanh)), nn::dense(8, 3));
  const auto start = nn::init<float>(model, gr::key(0));
  const Eigen::MatrixXf X = gr::normal<float>(gr::key(1), 10, 30);
  const Eigen::MatrixXf Y = gr::normal<float>(gr::key(2), 3, 30);
  const auto opt = nn::adam(1e-2);
  // Single process: nn::train_step on the whole batch.
  auto expected = start;
  auto state = opt.init(expected);
  nn::StepWorkspace<decltype(expected)> sws;
  std::vector<float> expected_losses;
  for (int s = 0; s < 3; ++s)
    expected_losses.push_back(nn::train_step(model, expected, X, Y, nn::mse, opt, state, sws));
  for (const int n : {1, 2, 3}) {
    INFO(n << " devices");
    par::LocalDevices devices(n);
    const auto results = devices.run([&](par::LocalDevice& d) {
      auto params = start;
      auto st = opt.init(params);
      par::StepWorkspace<decltype(params)> ws;
      std::vector<float> losses;
      for (int s = 0; s < 3; ++s)
        losses.push_back(par::train_step(model, params, X, Y, nn::mse, nullptr, opt, st, d, ws));
      return std::pair{params, losses};
    });
    for (const auto& [params, losses] : results) {
      for (int s = 0; s < 3; ++s)
        CHECK(losses[static_cast<std::size_t>(s)] ==
              Approx(expected_losses[static_cast<std::size_t>(s)]).epsilon(1e-5));
      grove::tree_for_each(
          [](const auto& a, const auto& b) {
            CHECK((a - b).cwiseAbs().maxCoeff() <= 1e-5f * (1 + b.cwiseAbs().maxCoeff()));
          },
          params, expected);
    }
  }
}

TEST_CASE("data-parallel training under the bf16 policy follows the single step on the batch",
          "[parallel][train][precision]") {
  // On one device the step is nn::train_step's, bit for bit. On several, each shard's loss
  // gradient is scaled by 1 / (its size) before the products round it, where the whole batch's is
  // scaled by 1 / (the batch): the rounded inputs differ, by up to one bfloat16 rounding, and so
  // do the steps (by far less than the steps themselves, which is what is checked). The policy
  // must reach every device: the result differs from float32's.
  const auto net =
      nn::sequential(nn::dense(20, 24), nn::swish, nn::dense(24, 24), nn::relu, nn::dense(24, 4));
  const auto chain = nn::with_policy(net, nn::precision_policy::mixed_bf16());
  const auto start = nn::init<float>(chain, gr::key(3));
  const Eigen::MatrixXf X = gr::normal<float>(gr::key(4), 20, 33);
  const Eigen::VectorXi y = gr::randint(gr::key(5), 33, 0, 4);
  // |a - b| / |b - start| over all leaves.
  auto relative_to_step = [&](const auto& a, const auto& b) {
    double diff = 0, step = 0;
    grove::tree_for_each(
        [&](const auto& x, const auto& z, const auto& s0) {
          diff += (x - z).template cast<double>().squaredNorm();
          step += (z - s0).template cast<double>().squaredNorm();
        },
        a, b, start);
    return std::sqrt(diff / step);
  };
  auto run = [&](const auto& model, const auto& opt, int n) {
    par::LocalDevices devices(n);
    return devices.run([&](par::LocalDevice& d) {
      auto params = start;
      auto st = opt.init(params);
      par::StepWorkspace<decltype(params)> ws;
      for (int s = 0; s < 3; ++s)
        par::train_step(model, params, X, y, nn::softmax_cross_entropy, nullptr, opt, st, d, ws);
      return params;
    });
  };
  auto check = [&](const auto& opt, double tolerance) {
    auto expected = start;
    auto state = opt.init(expected);
    nn::StepWorkspace<decltype(expected)> sws;
    for (int s = 0; s < 3; ++s)
      nn::train_step(chain, expected, X, y, nn::softmax_cross_entropy, nullptr, opt, state, sws);
    grove::tree_for_each([](const auto& a, const auto& b) { CHECK(a == b); }, run(chain, opt, 1)[0],
                         expected);
    for (const int n : {2, 3}) {
      INFO(n << " devices");
      const auto results = run(chain, opt, n);
      for (const auto& params : results) {
        const double d = relative_to_step(params, expected);
        INFO("distance / step " << d);
        CHECK(d < tolerance);
        CHECK(relative_to_step(params, run(net, opt, n)[0]) > 0);
      }
    }
  };
  SECTION("sgd") {
    check(nn::sgd(0.1), 2e-2);
  }
  // adam moves each parameter by about the learning rate whatever its gradient's size, so a
  // gradient near zero whose rounding differs may move its parameter the other way.
  SECTION("adam") {
    check(nn::adam(1e-2), 1e-1);
  }
}

namespace {

// A local device that can start sums, as grove::mpi::Communicator can: each sum runs at once (a
// LocalDevice's blocking sum; every device starts the same sums in the same order), and the
// device records its length and whether it started inside a pass's thread team, that is, while
// the backward pass was still running.
struct starting_device {
  par::LocalDevice& d;
  std::vector<std::pair<std::size_t, bool>>* starts;
  bool overlapping = true;
  int rank() const { return d.rank(); }
  int size() const { return d.size(); }
  template <par::reducible T>
  void allreduce_sum(std::span<T> buf) {
    d.allreduce_sum(buf);
  }
  void allreduce_max(std::span<std::uint64_t> buf) { d.allreduce_max(buf); }
  void broadcast(std::span<std::byte> buf, int root) { d.broadcast(buf, root); }
  par::Staging& staging() { return d.staging(); }
  template <par::reducible T>
  void iallreduce_sum(std::span<T> buf) {
    starts->emplace_back(buf.size(), grove::detail::Team::current() != nullptr);
    d.allreduce_sum(buf);
  }
  void progress() {}
  void wait_all() {}
  bool overlap() const { return overlapping; }
};

struct overlap_run {
  Net params;
  std::vector<float> losses;
  std::vector<std::pair<std::size_t, bool>> starts;  // the last step's
};

// `steps` data-parallel steps on 2 devices of 2 threads, through starting_device; device 1 takes
// no examples when `empty_shard`.
std::vector<overlap_run> overlap_steps(const Problem& p, bool overlapping, std::size_t inplace,
                                       std::size_t bucket, bool empty_shard = false) {
  const auto opt = nn::adam(1e-2);
  par::LocalDevices devices(2, 2);
  return devices.run([&](par::LocalDevice& d) {
    overlap_run out;
    starting_device group{d, &out.starts, overlapping};
    d.staging().set_inplace_bytes(inplace);
    d.staging().set_bucket_bytes(bucket);
    out.params = p.params;
    auto state = opt.init(out.params);
    par::StepWorkspace<Net> ws;
    const Eigen::Index n = empty_shard && d.rank() == 1 ? 0 : p.X.cols();
    for (int s = 0; s < 3; ++s) {
      out.starts.clear();
      out.losses.push_back(par::train_step_on_shard(out.params, p.X.leftCols(n), p.y.head(n), opt,
                                                    state, group, ws));
    }
    return out;
  });
}

}  // namespace

TEST_CASE("the reduction overlapping the backward pass: the blocking sums, started as layers end",
          "[parallel][train][overlap]") {
  const Problem p = problem(48);  // a [20, 32, 32, 7] network
  using sizes = std::vector<std::size_t>;
  auto lengths = [](const overlap_run& r) {
    sizes out;
    for (const auto& [n, in_pass] : r.starts) out.push_back(n);
    return out;
  };
  auto all_in_pass = [](const overlap_run& r, bool in_pass) {
    for (const auto& s : r.starts)
      if (s.second != in_pass) return false;
    return true;
  };
  const auto blocking = overlap_steps(p, false, 0, par::Staging::default_bucket_bytes);
  CHECK(blocking[0].starts.empty());

  SECTION("every run started in the pass, the last layer's first, the same bits") {
    const auto overlapped = overlap_steps(p, true, 0, par::Staging::default_bucket_bytes);
    for (const auto& r : overlapped) {
      // The runs in reverse leaf order: b2, w2, b1, w1, b0, w0, each once its layer has ended.
      CHECK(lengths(r) == sizes{7, 224, 32, 1024, 32, 640});
      CHECK(all_in_pass(r, true));
      CHECK(par_test::same_bits(r.params, blocking[0].params));
      CHECK(r.losses == blocking[0].losses);
    }
  }
  SECTION("runs in pieces of a bucket") {
    const auto overlapped = overlap_steps(p, true, 0, 256);  // 64 floats
    sizes expected{7, 64, 64, 64, 32, 32};
    for (int i = 0; i < 16; ++i) expected.push_back(64);
    expected.push_back(32);
    for (int i = 0; i < 10; ++i) expected.push_back(64);
    CHECK(lengths(overlapped[0]) == expected);
    CHECK(all_in_pass(overlapped[0], true));
    CHECK(par_test::same_bits(overlapped[1].params, blocking[0].params));
  }
  SECTION("short runs wait for the bucket at the end") {
    // Runs of 1 KiB or more move early (w1, w0); the others go with the shard sizes and losses.
    const auto overlapped = overlap_steps(p, true, 1024, par::Staging::default_bucket_bytes);
    CHECK(lengths(overlapped[0]) == sizes{1024, 640});
    CHECK(par_test::same_bits(overlapped[0].params, blocking[0].params));
    // With the default in-place size (256 KiB) nothing of this network moves early.
    const auto defaults = overlap_steps(p, true, par::Staging::default_inplace_bytes,
                                        par::Staging::default_bucket_bytes);
    CHECK(defaults[0].starts.empty());
    CHECK(par_test::same_bits(defaults[0].params, blocking[0].params));
  }
  SECTION("a device with an empty shard starts the same sums after its (absent) pass") {
    const auto empty = overlap_steps(p, false, 0, par::Staging::default_bucket_bytes, true);
    const auto overlapped = overlap_steps(p, true, 0, par::Staging::default_bucket_bytes, true);
    CHECK(lengths(overlapped[1]) == lengths(overlapped[0]));
    CHECK(all_in_pass(overlapped[0], true));
    CHECK(all_in_pass(overlapped[1], false));
    for (const auto& r : overlapped) {
      CHECK(par_test::same_bits(r.params, empty[0].params));
      CHECK(r.losses == empty[0].losses);
    }
  }
  SECTION("devices that differ in the setting: the same error on both, nothing moved") {
    par::LocalDevices devices(2);
    const auto messages = devices.run([&](par::LocalDevice& d) {
      std::vector<std::pair<std::size_t, bool>> starts;
      starting_device group{d, &starts, d.rank() == 0};
      Net params = p.params;
      const auto opt = nn::sgd(0.1);
      auto state = opt.init(params);
      par::StepWorkspace<Net> ws;
      std::string message = "no error";
      try {
        par::train_step(params, p.X, p.y, opt, state, group, ws);
      } catch (const grove::tree_error& e) {
        message = e.what();
      }
      return std::pair{message, par_test::same_bits(params, p.params)};
    });
    for (const auto& [message, unchanged] : messages) {
      CHECK_THAT(message, Catch::Matchers::Contains("the devices disagree") &&
                              Catch::Matchers::Contains("overlapping the backward pass"));
      CHECK(unchanged);
    }
  }
}

TEST_CASE("the overlapping reduction on a model that runs layer by layer: all at the end",
          "[parallel][train][overlap][model]") {
  const auto model = nn::sequential(
      nn::dense(10, 8), nn::gelu, nn::residual(nn::sequential(nn::layer_norm(8), nn::dense(8, 8))),
      nn::dense(8, 3));
  const auto start = nn::init<float>(model, gr::key(0));
  const Eigen::MatrixXf X = gr::normal<float>(gr::key(1), 10, 30);
  const Eigen::MatrixXf Y = gr::normal<float>(gr::key(2), 3, 30);
  const auto opt = nn::adam(1e-2);
  auto run = [&](bool overlapping) {
    par::LocalDevices devices(2);
    return devices.run([&](par::LocalDevice& d) {
      std::vector<std::pair<std::size_t, bool>> starts;
      starting_device group{d, &starts, overlapping};
      d.staging().set_inplace_bytes(0);
      auto params = start;
      auto st = opt.init(params);
      par::StepWorkspace<decltype(params)> ws;
      std::vector<float> losses;
      for (int s = 0; s < 2; ++s)
        losses.push_back(
            par::train_step(model, params, X, Y, nn::mse, nullptr, opt, st, group, ws));
      return std::tuple{params, losses, starts};
    });
  };
  const auto blocking = run(false);
  const auto overlapped = run(true);
  const auto& [params, losses, starts] = overlapped[0];
  CHECK(par_test::same_bits(params, std::get<0>(blocking[0])));
  CHECK(losses == std::get<1>(blocking[0]));
  // Every leaf's run, in each of the 2 steps, none inside a pass.
  std::size_t leaves = 0;
  grove::tree_for_each([&](const auto&) { ++leaves; }, start);
  CHECK(leaves == 8);
  CHECK(starts.size() == 2 * leaves);
  for (const auto& s : starts) CHECK_FALSE(s.second);
}

TEST_CASE("SingleDevice: one device runs the data-parallel code as nn::train_step, bit for bit",
          "[parallel][train][model]") {
  static_assert(par::device_group<par::SingleDevice>);
  par::SingleDevice one;
  CHECK(one.rank() == 0);
  CHECK(one.size() == 1);
  // Its collectives leave a tree as it is, and still check it.
  const Problem p = problem(12);
  const auto same = [](const auto& a, const auto& b) { CHECK(a == b); };
  grove::tree_for_each(same, par::psum(p.params, one), p.params);
  auto copy = p.params;
  par::broadcast_inplace(copy, one, 0);
  grove::tree_for_each(same, copy, p.params);
  CHECK_THROWS_WITH(
      par::broadcast_inplace(copy, one, 1),
      "grove::parallel::broadcast: root 1 is not a rank of this communicator (size 1)");
  CHECK_THROWS_WITH(
      one.broadcast(std::span<std::byte>{}, -1),
      "grove::parallel::SingleDevice::broadcast: root -1 is not a device (there is 1)");

  // parallel::train_step on it: nn::train_step's numbers, with sgd fused as there.
  const auto model =
      nn::sequential(nn::dense(20, 32), nn::swish, nn::dense(32, 32), nn::swish, nn::dense(32, 7));
  const auto start = nn::init<float>(model, gr::key(3));
  for (const bool adam : {false, true}) {
    INFO((adam ? "adam" : "sgd"));
    auto run = [&](auto&& step) {
      auto params = start;
      std::vector<float> losses;
      if (adam) {
        const auto opt = nn::adam(1e-2);
        auto state = opt.init(params);
        for (int s = 0; s < 3; ++s) losses.push_back(step(params, opt, state));
      } else {
        const auto opt = nn::sgd(0.1);
        auto state = opt.init(params);
        for (int s = 0; s < 3; ++s) losses.push_back(step(params, opt, state));
      }
      return std::pair{params, losses};
    };
    nn::StepWorkspace<std::remove_cvref_t<decltype(start)>> sws, pws;
    const auto expected = run([&](auto& params, const auto& opt, auto& state) {
      return nn::train_step(model, params, p.X, p.y, nn::softmax_cross_entropy, opt, state, sws);
    });
    const auto got = run([&](auto& params, const auto& opt, auto& state) {
      return par::train_step(model, params, p.X, p.y, nn::softmax_cross_entropy, nullptr, opt,
                             state, one, pws);
    });
    CHECK(got.second == expected.second);
    grove::tree_for_each(same, got.first, expected.first);
  }
}

TEST_CASE("grove::data's shards are parallel::shard's", "[parallel][data]") {
  // Every batch size up to 40 over 1 to 7 devices: each device's batch from data::batches starts
  // and ends where parallel::shard puts it, so train_step_on_shard weights it right.
  for (Eigen::Index n = 1; n <= 40; ++n) {
    grove::data::Dataset<float> d{Eigen::MatrixXf::Zero(1, n), Eigen::VectorXi::Zero(n)};
    for (int count = 1; count <= 7; ++count)
      for (int rank = 0; rank < count; ++rank) {
        const auto expected = par::shard(n, rank, count);
        for (const auto& b :
             grove::data::batches(d, n, gr::key(0), {.shard_index = rank, .shard_count = count})) {
          CHECK(b.offset == expected.begin);
          CHECK(b.inputs.cols() == expected.size);
          CHECK(b.targets.size() == expected.size);
        }
      }
  }
}
