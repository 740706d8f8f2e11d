// The data-parallel training step over LocalDevices: equal to the single-process step on the
// whole batch (within 1e-5 relative), with equal and unequal shards and an empty one, with SGD,
// momentum and Adam, labels and one-hot targets; bit-identical across reruns; replicas stay
// bit-identical. (Catch2's assertions are not thread-safe: the devices return what they computed
// and the test checks it on the main thread.)
#include <catch2/catch.hpp>

#include <grove/data/batches.hpp>
#include <grove/nn.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>
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
