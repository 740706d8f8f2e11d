// grove::parallel over MPI ranks (grove::mpi::Communicator), run by ctest through mpirun with 2
// and 3 ranks: psum / pmean / broadcast on trees, the data-parallel training step against the
// single-process step and against LocalDevices, bit-identical reruns, signed integer sums that
// wrap around as on LocalDevices, and (tag [mismatch]) trees that differ across ranks: the same
// clear error on every rank, and no hang.
//
// Every rank runs the same test cases in the same order, so their collectives match. MPI is
// initialized before Catch2's main starts and finalized after it returns (mpi_environment below).
#include <catch2/catch.hpp>

#include <cstdint>
#include <grove/parallel/mpi.hpp>
#include <grove/parallel/train.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "parallel_fixtures.hpp"

namespace nn = grove::nn;
namespace gr = grove::random;
namespace par = grove::parallel;
using par_test::Mixed;
using par_test::Net;
using par_test::Problem;
using par_test::problem;

static_assert(par::communicator<grove::mpi::Communicator>);

// MPI for the whole run of this executable: a static object, constructed before main.
const grove::mpi::Environment mpi_environment;

namespace {

// The sum over ranks of a flag: how many ranks saw something.
int count_ranks(grove::mpi::Communicator& world, bool flag) {
  std::int64_t n = flag ? 1 : 0;
  world.allreduce_sum(std::span<std::int64_t>(&n, 1));
  return static_cast<int>(n);
}

}  // namespace

TEST_CASE("MPI: psum, pmean and broadcast on trees", "[mpi]") {
  grove::mpi::Communicator world;
  const int n = world.size();
  REQUIRE(n >= 2);
  std::vector<Mixed> mixed;
  std::vector<Net> nets;
  for (int r = 0; r < n; ++r) {
    mixed.push_back(par_test::make_mixed(r));
    nets.push_back(par_test::make_net(r));
  }
  const auto me = static_cast<std::size_t>(world.rank());
  const auto add = [](const auto& a, const auto& b) {
    return std::remove_cvref_t<decltype(a)>(a + b);
  };
  const Mixed mixed_sum = par_test::combine(mixed, add);
  const Net net_sum = par_test::combine(nets, add);
  Net net_mean = net_sum;
  grove::tree_for_each([&](auto& leaf) { leaf /= static_cast<float>(n); }, net_mean);

  CHECK(par_test::same_bits(par::psum(mixed[me], world), mixed_sum));
  CHECK(par_test::same_bits(par::psum(nets[me], world), net_sum));
  CHECK(par_test::same_bits(par::pmean(nets[me], world), net_mean));
  CHECK(par_test::same_bits(par::broadcast(nets[me], world, n - 1), nets.back()));
  Mixed m = mixed[me];
  par::broadcast_inplace(m, world, 0);
  CHECK(par_test::same_bits(m, mixed.front()));

  SECTION("in buckets") {
    world.staging().set_bucket_bytes(64);
    CHECK(par_test::same_bits(par::psum(mixed[me], world), mixed_sum));
    CHECK(par_test::same_bits(par::broadcast(mixed[me], world, 1), mixed[1]));
    world.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
  }
  SECTION("in_sync") {
    CHECK(par::in_sync(nets[0], world));
    CHECK_FALSE(par::in_sync(nets[me], world));
  }
}

TEST_CASE("MPI: psum of signed integers wraps around modulo 2^bits, as on LocalDevices",
          "[mpi][integers]") {
  grove::mpi::Communicator world;
  const int n = world.size();
  const bool first = world.rank() == 0;
  std::tuple<std::int32_t, std::int64_t, std::int8_t> mine{
      first ? INT32_MAX : 1, first ? INT64_MAX : 1, std::int8_t(first ? 127 : 1)};
  const auto sum = par::psum(mine, world);
  CHECK(std::get<0>(sum) == INT32_MIN + (n - 2));
  CHECK(std::get<1>(sum) == INT64_MIN + (n - 2));
  CHECK(std::get<2>(sum) == -128 + (n - 2));
  // The same bits as n local devices give.
  par::LocalDevices devices(n);
  const auto local = devices.run([&](par::LocalDevice& d) {
    const bool lead = d.rank() == 0;
    return par::psum(
        std::tuple<std::int32_t, std::int64_t, std::int8_t>{
            lead ? INT32_MAX : 1, lead ? INT64_MAX : 1, std::int8_t(lead ? 127 : 1)},
        d);
  });
  CHECK(local[0] == sum);
}

namespace {

template <class C>
std::pair<Net, std::vector<float>> train(const Problem& p, C& comm, int steps) {
  Net params = p.params;
  if (comm.rank() != 0)  // only rank 0's initial params matter
    for (auto& layer : params) layer.w.setRandom(), layer.b.setRandom();
  par::broadcast_inplace(params, comm, 0);
  const auto opt = nn::adam(1e-2);
  auto state = opt.init(params);
  par::StepWorkspace<Net> ws;
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(par::train_step(params, p.X, p.y, opt, state, comm, ws));
  return {params, losses};
}

}  // namespace

TEST_CASE("MPI: the data-parallel step equals the single step, and repeats bit for bit",
          "[mpi][train]") {
  grove::mpi::Communicator world;
  const Problem p = problem(64);
  const int steps = 4;
  const auto [params, losses] = train(p, world, steps);
  CHECK(par::in_sync(params, world));

  // The single-process steps on the whole batch.
  Net single = p.params;
  const auto opt = nn::adam(1e-2);
  auto state = opt.init(single);
  std::vector<float> single_losses;
  for (int s = 0; s < steps; ++s) {
    auto [loss, grads] = nn::value_and_grad(single, p.X, p.y);
    opt.step(single, grads, state);
    single_losses.push_back(loss);
  }
  CHECK(par_test::max_relative(params, single) < 1e-5);
  for (int s = 0; s < steps; ++s)
    CHECK(
        std::abs(losses[static_cast<std::size_t>(s)] - single_losses[static_cast<std::size_t>(s)]) <
        1e-5 * single_losses[static_cast<std::size_t>(s)]);

  // Reruns give the same bits.
  for (int rerun = 0; rerun < 2; ++rerun) {
    const auto [again, again_losses] = train(p, world, steps);
    CHECK(par_test::same_bits(again, params));
    CHECK(again_losses == losses);
  }

  // With 2 ranks the sum is x0 + x1 as on 2 local devices: the same bits.
  if (world.rank() == 0) {
    par::LocalDevices devices(world.size());
    const auto local = devices.run([&](par::LocalDevice& d) { return train(p, d, steps); });
    if (world.size() == 2) {
      CHECK(par_test::same_bits(local[0].first, params));
      CHECK(local[0].second == losses);
    } else {
      CHECK(par_test::max_relative(local[0].first, params) < 1e-5);
    }
  }
  world.barrier();
}

// --- mismatched trees across ranks
// ----------------------------------------------------------------

namespace {

// Runs f on every rank, which must raise grove::tree_error on every rank; returns this rank's
// message. Then checks that every rank raised it and that the ranks still work together.
template <class F>
std::string error_on_every_rank(grove::mpi::Communicator& world, F f) {
  std::string message = "no error";
  try {
    f();
  } catch (const grove::tree_error& e) {
    message = e.what();
  }
  CHECK(count_ranks(world, message != "no error") == world.size());
  double one = 1;
  par::psum_inplace(one, world);
  CHECK(one == world.size());
  return message;
}

}  // namespace

TEST_CASE("MPI: trees of different shapes: the same clear error on every rank, no hang",
          "[mpi][mismatch]") {
  grove::mpi::Communicator world;
  const std::string m = error_on_every_rank(world, [&] {
    Net net = par_test::make_net(0, world.rank() == 1 ? std::vector<Eigen::Index>{6, 5, 3}
                                                      : std::vector<Eigen::Index>{6, 5, 4});
    par::psum_inplace(net, world);
  });
  CHECK_THAT(m, Catch::Contains("grove::parallel::psum: the devices disagree on the tree, so "
                                "nothing was moved (rank 1 of " +
                                std::to_string(world.size()) + " differs from rank 0)"));
  CHECK_THAT(m,
             Catch::Contains("at [1].w rank 0 has float32 (4, 5) but rank 1 has float32 (3, 5)"));
}

TEST_CASE("MPI: trees of different structures or element types, or different operations",
          "[mpi][mismatch]") {
  grove::mpi::Communicator world;
  const int last = world.size() - 1;
  SECTION("structure") {
    const std::string m = error_on_every_rank(world, [&] {
      Net net = par_test::make_net(0, world.rank() == last ? std::vector<Eigen::Index>{6, 5, 4, 2}
                                                           : std::vector<Eigen::Index>{6, 5, 4});
      net = par::pmean(net, world);
    });
    CHECK_THAT(m, Catch::Contains("grove::parallel::pmean: the devices disagree on the tree"));
    CHECK_THAT(m, Catch::Contains("the structures differ: rank 0 has PyTreeDef([CustomNode("
                                  "Dense[()], [*, *]), CustomNode(Dense[()], [*, *])]) but rank " +
                                  std::to_string(last) + " has "));
  }
  SECTION("element type") {
    const std::string m = error_on_every_rank(world, [&] {
      if (world.rank() == 0) {
        std::map<std::string, Eigen::VectorXf> t{{"x", Eigen::VectorXf::Ones(3)}};
        par::broadcast_inplace(t, world, 0);
      } else {
        std::map<std::string, Eigen::VectorXd> t{{"x", Eigen::VectorXd::Ones(3)}};
        par::broadcast_inplace(t, world, 0);
      }
    });
    CHECK_THAT(m, Catch::Contains("at ['x'] rank 0 has float32 (3,) but rank 1 has float64 (3,)"));
  }
  SECTION("operation") {
    const std::string m = error_on_every_rank(world, [&] {
      Net net = par_test::make_net(0);
      if (world.rank() == 0)
        par::psum_inplace(net, world);
      else
        par::broadcast_inplace(net, world, 0);
    });
    CHECK_THAT(m, Catch::Contains("rank 0 called psum but rank 1 called broadcast from rank 0"));
  }
  SECTION("train_step with different networks") {
    const std::string m = error_on_every_rank(world, [&] {
      const Problem p = problem(16);
      Net params =
          world.rank() == 0 ? p.params : nn::init_network_params<float>({20, 32, 7}, gr::key(0));
      auto opt = nn::sgd(0.1);
      auto state = opt.init(params);
      par::StepWorkspace<Net> ws;
      par::train_step(params, p.X, p.y, opt, state, world, ws);
    });
    CHECK_THAT(m, Catch::Contains("grove::parallel::train_step: the devices disagree on the tree"));
  }
}
