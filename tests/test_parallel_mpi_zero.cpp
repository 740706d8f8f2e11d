// ZeRO stage 1 across MPI processes (and processes × local devices), in the MPI test executable:
// the sharded optimizer's parameters against the replicated optimizer's, every rank's the same
// bits, each rank holding its block's state only.
#include <catch2/catch.hpp>

#include <grove/nn.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/global_device.hpp>
#include <grove/parallel/mpi.hpp>
#include <grove/parallel/train.hpp>
#include <grove/parallel/zero.hpp>
#include <utility>
#include <vector>

#include "parallel_fixtures.hpp"

namespace nn = grove::nn;
namespace par = grove::parallel;
using par_test::Net;

namespace {

// `steps` steps of the MLP with opt and its state, on any group.
template <class Opt, class State, par::device_group C>
Net train_with(const par_test::Problem& p, const Opt& opt, State state, C& comm, int steps) {
  Net params = p.params;
  par::StepWorkspace<Net> ws;
  for (int s = 0; s < steps; ++s) par::train_step(params, p.X, p.y, opt, state, comm, ws);
  return params;
}

}  // namespace

TEST_CASE("MPI: ZeRO stage 1 follows the replicated optimizer", "[mpi][zero]") {
  grove::mpi::Communicator world;
  const par_test::Problem p = par_test::problem(61);
  const auto inner = nn::adam(1e-2);
  const auto zero = par::zero_redundancy(inner);
  const Net replicated = train_with(p, inner, inner.init(p.params), world, 3);
  const Net sharded = train_with(p, zero, zero.init(p.params, world), world, 3);
  CHECK(par_test::max_relative(sharded, replicated) < 1e-6);
  CHECK(par::in_sync(sharded, world));

  // Processes × 2 local devices.
  par::LocalDevices devices(2);
  const auto nets = devices.run([&](par::LocalDevice& local) {
    grove::mpi::GlobalDevice device(world, local);
    return train_with(p, zero, zero.init(p.params, device), device, 3);
  });
  for (const Net& net : nets) {
    CHECK(par_test::max_relative(net, replicated) < 1e-5);
    CHECK(par_test::same_bits(net, nets[0]));
  }
  CHECK(par::in_sync(nets[0], world));
}
