// The pytree collectives and the data-parallel training step allocate nothing after warm-up,
// on every device: this executable counts every call to the global operator new and, outside
// AddressSanitizer builds (which own malloc), every call to malloc, calloc, realloc and the
// aligned allocators, on all threads.
#include <catch2/catch.hpp>

#include <Eigen/Core>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>
#include <grove/parallel/zero.hpp>
#include <memory>
#include <new>
#include <vector>

#include "alloc_counter.hpp"

namespace nn = grove::nn;
namespace gr = grove::random;
namespace par = grove::parallel;

namespace {

// The allocations of every device while each runs `work`, counted from a barrier to a barrier (on
// rank 0; the others get 0).
template <class F>
long allocations_in(par::LocalDevice& d, F&& work) {
  d.barrier();
  if (d.rank() == 0) {
    g_allocations = 0;
    g_counting = true;
  }
  d.barrier();
  work();
  d.barrier();
  long allocated = 0;
  if (d.rank() == 0) {
    g_counting = false;
    allocated = g_allocations.load();
  }
  d.barrier();
  return allocated;
}

}  // namespace

TEST_CASE("psum, pmean, broadcast and train_step allocate nothing after warm-up",
          "[parallel][alloc]") {
  INFO("counting " << (GROVE_COUNTS_MALLOC ? "malloc and operator new"
                                           : "operator new (AddressSanitizer build)"));
  for (const int n : {1, 2, 3}) {
    INFO(n << " devices");
    par::LocalDevices devices(n);
    const auto params0 = nn::init_network_params<float>({100, 64, 32, 10}, gr::key(1), 0.05f);
    const Eigen::MatrixXf X = gr::normal<float>(gr::key(2), 100, 64);
    const Eigen::VectorXi y = gr::randint(gr::key(3), 64, 0, 10);
    const auto opt = nn::adam(1e-3);
    std::vector<long> counted(static_cast<std::size_t>(n));
    devices.run([&](par::LocalDevice& d) {
      auto params = params0;
      auto state = opt.init(params);
      par::StepWorkspace<std::vector<nn::Dense<float>>> ws;
      auto grads = params;
      // Warm-up: the workspace, the gradients, the staging memory.
      par::broadcast_inplace(params, d, 0);
      par::train_step(params, X, y, opt, state, d, ws);
      par::train_step(params, X.leftCols(40), y.head(40), opt, state, d, ws);
      par::pmean_inplace(grads, d);
      const long allocated = allocations_in(d, [&] {
        for (int i = 0; i < 3; ++i) par::train_step(params, X, y, opt, state, d, ws);
        par::train_step(params, X.leftCols(40), y.head(40), opt, state, d, ws);
        par::psum_inplace(grads, d);
        par::pmean_inplace(grads, d);
        par::broadcast_inplace(params, d, n - 1);
      });
      if (d.rank() == 0) counted[0] = allocated;
    });
    CHECK(counted[0] == 0);
  }
}

TEST_CASE(
    "pmax, pmin, and train_step under multi_steps and ZeRO stage 1 allocate nothing after "
    "warm-up",
    "[parallel][alloc]") {
  for (const int n : {1, 2, 3}) {
    INFO(n << " devices");
    par::LocalDevices devices(n);
    const auto params0 = nn::init_network_params<float>({100, 64, 32, 10}, gr::key(1), 0.05f);
    const Eigen::MatrixXf X = gr::normal<float>(gr::key(2), 100, 64);
    const Eigen::VectorXi y = gr::randint(gr::key(3), 64, 0, 10);
    const auto accumulate = grove::optim::multi_steps(nn::adam(1e-3), 2);
    const auto zero = par::zero_redundancy(nn::adam(1e-3));
    std::vector<long> counted(static_cast<std::size_t>(n));
    devices.run([&](par::LocalDevice& d) {
      auto params = params0, sharded = params0;
      auto acc_state = accumulate.init(params);
      auto zero_state = zero.init(sharded, d);
      par::StepWorkspace<std::vector<nn::Dense<float>>> ws, zero_ws;
      auto values = params0;
      // Warm-up: two mini steps (one accumulation), a ZeRO step, the extrema.
      for (int i = 0; i < 2; ++i) par::train_step(params, X, y, accumulate, acc_state, d, ws);
      par::train_step(sharded, X, y, zero, zero_state, d, zero_ws);
      par::pmax_inplace(values, d);
      par::pmin_inplace(values, d);
      const long allocated = allocations_in(d, [&] {
        for (int i = 0; i < 4; ++i) par::train_step(params, X, y, accumulate, acc_state, d, ws);
        for (int i = 0; i < 2; ++i) par::train_step(sharded, X, y, zero, zero_state, d, zero_ws);
        par::pmax_inplace(values, d);
        par::pmin_inplace(values, d);
      });
      if (d.rank() == 0) counted[0] = allocated;
    });
    CHECK(counted[0] == 0);
  }
}

TEST_CASE("The allocation counter counts on device threads", "[parallel][alloc]") {
  par::LocalDevices devices(2);
  g_allocations = 0;
  g_counting = true;
  const auto sizes = devices.run([](par::LocalDevice& d) {
    auto v = std::make_unique<std::vector<int>>(10);  // operator new, counted in every build
    d.barrier();
    return v->size();
  });
  CHECK(sizes == std::vector<std::size_t>{10, 10});
  g_counting = false;
  CHECK(g_allocations.load() >= 2);
}
