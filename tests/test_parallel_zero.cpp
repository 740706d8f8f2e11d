// ZeRO stage 1 (parallel::zero_redundancy) over LocalDevices: the data-parallel step with each
// device keeping the optimizer state of its block of the parameters gives the replicated
// optimizer's parameters and losses (to an ulp), on 1 to 4 devices (the parameters' 1959 elements never
// divide evenly), with adam, momentum, adamw and multi_steps, for the walk-through's MLP and for
// a model; each device's optimizer state is 1/N of the replicated one; a state made for another
// number of devices is refused.
#include <catch2/catch.hpp>

#include <cstddef>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>
#include <grove/parallel/zero.hpp>
#include <utility>
#include <vector>

#include "parallel_fixtures.hpp"

namespace {

namespace nn = grove::nn;
namespace gr = grove::random;
namespace par = grove::parallel;
namespace optim = grove::optim;
using par_test::Net;

// The bytes of a tree's leaves.
template <class Tree>
std::size_t leaf_bytes(const Tree& tree) {
  std::size_t bytes = 0;
  grove::tree_for_each(
      [&](const auto& leaf) {
        using L = std::remove_cvref_t<decltype(leaf)>;
        if constexpr (std::is_arithmetic_v<L>)
          bytes += sizeof(L);
        else
          bytes += static_cast<std::size_t>(leaf.size()) * sizeof(typename L::Scalar);
      },
      tree);
  return bytes;
}

// Two trees of parameters equal to an ulp or so (see check_against_replicated).
template <class Tree>
bool close(const Tree& a, const Tree& b) {
  const Eigen::VectorXf x = grove::ravel(a).first, y = grove::ravel(b).first;
  return x.size() == y.size() && (x - y).cwiseAbs().maxCoeff() <= 1e-6f * y.cwiseAbs().maxCoeff();
}

struct Run {
  Net params;
  std::vector<float> losses;
  std::size_t state_bytes = 0;
};

// `steps` data-parallel steps of the MLP on n devices with `opt` (its state made by make_state).
template <class Opt, class MakeState>
std::vector<Run> train(const par_test::Problem& p, const Opt& opt, MakeState make_state, int n,
                       int steps) {
  par::LocalDevices devices(n);
  return devices.run([&](par::LocalDevice& d) {
    Run r;
    r.params = p.params;
    auto state = make_state(r.params, d);
    r.state_bytes = leaf_bytes(state);
    par::StepWorkspace<Net> ws;
    for (int s = 0; s < steps; ++s)
      r.losses.push_back(par::train_step(r.params, p.X, p.y, opt, state, d, ws));
    return r;
  });
}

template <class Inner>
void check_against_replicated(const Inner& inner, int steps) {
  const par_test::Problem p = par_test::problem(61);
  const auto zero = par::zero_redundancy(inner);
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " devices");
    const auto replicated = train(
        p, inner, [&](const Net& params, par::LocalDevice&) { return inner.init(params); }, n,
        steps);
    const auto sharded = train(
        p, zero, [&](const Net& params, par::LocalDevice& d) { return zero.init(params, d); }, n,
        steps);
    std::size_t total = 0;
    for (std::size_t r = 0; r < sharded.size(); ++r) {
      INFO("device " << r);
      // The same sums and the same elementwise arithmetic, up to where the optimizer's vector
      // code meets an element (a leaf's tail is computed one element at a time, the flat block's
      // the same elements in a packet): an ulp here and there.
      CHECK(par_test::max_relative(sharded[r].params, replicated[r].params) < 1e-6);
      for (std::size_t s = 0; s < sharded[r].losses.size(); ++s)
        CHECK(std::abs(sharded[r].losses[s] - replicated[r].losses[s]) <=
              1e-6f * replicated[r].losses[s]);
      // Every device holds the same bits.
      CHECK(par_test::same_bits(sharded[r].params, sharded[0].params));
      // 1/n of the state's arrays on each device, plus its counts.
      CHECK(sharded[r].state_bytes <= replicated[r].state_bytes / static_cast<std::size_t>(n) + 64);
      total += sharded[r].state_bytes;
    }
    CHECK(total >= replicated[0].state_bytes);
    CHECK(total <= replicated[0].state_bytes + 64 * static_cast<std::size_t>(n));
  }
}

}  // namespace

TEST_CASE("ZeRO stage 1 gives the replicated optimizer's parameters, with 1/N of its state",
          "[parallel][zero]") {
  SECTION("adam") {
    check_against_replicated(nn::adam(1e-2), 3);
  }
  SECTION("sgd with momentum") {
    check_against_replicated(optim::sgd(0.1, 0.9), 3);
  }
  SECTION("adamw without a mask") {
    check_against_replicated(optim::adamw(1e-2, 0.9, 0.99, 1e-8, 0.0, 0.1), 3);
  }
  SECTION("multi_steps of adam") {
    check_against_replicated(optim::multi_steps(nn::adam(1e-2), 2), 4);
  }
}

TEST_CASE("ZeRO stage 1 trains any model, and on one device is the plain optimizer",
          "[parallel][zero][model]") {
  const auto model = nn::sequential(nn::dense(20, 9), nn::gelu, nn::layer_norm(9), nn::dense(9, 7));
  const auto start = nn::init<float>(model, gr::key(5));
  const par_test::Problem p = par_test::problem(45);
  const auto inner = nn::adam(1e-2);
  const auto zero = par::zero_redundancy(inner);
  // One device: step is the inner optimizer on the flattened parameters.
  {
    auto a = start, b = start;
    auto sa = inner.init(a);
    auto sb = zero.init(b);
    nn::StepWorkspace<decltype(a)> wa, wb;
    for (int s = 0; s < 3; ++s) {
      nn::train_step(model, a, p.X, p.y, nn::softmax_cross_entropy, inner, sa, wa);
      nn::train_step(model, b, p.X, p.y, nn::softmax_cross_entropy, zero, sb, wb);
    }
    CHECK(close(a, b));
  }
  par::LocalDevices devices(3);
  const auto results = devices.run([&](par::LocalDevice& d) {
    auto replicated = start, sharded = start;
    auto rs = inner.init(replicated);
    auto ss = zero.init(sharded, d);
    par::StepWorkspace<decltype(replicated)> wr, ws;
    for (int s = 0; s < 3; ++s) {
      par::train_step(model, replicated, p.X, p.y, nn::softmax_cross_entropy, nullptr, inner, rs, d,
                      wr);
      par::train_step(model, sharded, p.X, p.y, nn::softmax_cross_entropy, nullptr, zero, ss, d,
                      ws);
    }
    return close(replicated, sharded) && par::in_sync(sharded, d);
  });
  for (const bool same : results) CHECK(same);
}

TEST_CASE("ZeRO stage 1 refuses a state made for another number of devices", "[parallel][zero]") {
  const par_test::Problem p = par_test::problem(8);
  const auto zero = par::zero_redundancy(nn::adam(1e-2));
  par::LocalDevices devices(2);
  CHECK_THROWS_WITH(devices.run([&](par::LocalDevice& d) {
    Net params = p.params;
    auto state = zero.init(params);  // the whole vector's state, for one device
    par::StepWorkspace<Net> ws;
    par::train_step(params, p.X, p.y, zero, state, d, ws);
  }),
                    Catch::Contains("the state holds a block of 1959 parameters") &&
                        Catch::Contains("this device's block of the 1959 is 980") &&
                        Catch::Contains("init(params, comm)"));
}
