// grove::parallel over MPI ranks (grove::mpi::Communicator), run by ctest through mpirun with 2
// and 3 ranks: psum / pmean / broadcast on trees, the data-parallel training step against the
// single-process step and against LocalDevices, bit-identical reruns, signed integer sums that
// wrap around as on LocalDevices, and (tag [mismatch]) trees that differ across ranks: the same
// clear error on every rank, and no hang.
//
// Every rank runs the same test cases in the same order, so their collectives match. MPI is
// initialized before Catch2's main starts and finalized after it returns (mpi_environment below).
#include <catch2/catch.hpp>

#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <grove/parallel/mpi.hpp>
#include <grove/parallel/train.hpp>
#include <grove/tree/tensor.hpp>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
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
  const auto [single, single_losses] = par_test::single_process_steps(p, nn::adam(1e-2), steps);
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

namespace {

// `steps` steps with the gradients' reduction overlapping the backward pass: every run starts as
// soon as its layer ends (in-place size 0), in pieces of 64 floats. With `empty_rank`, that rank
// takes no examples.
std::pair<Net, std::vector<float>> train_shards(const Problem& p, grove::mpi::Communicator& world,
                                                int steps, bool overlap, int empty_rank = -1) {
  world.set_overlap(overlap);
  world.staging().set_inplace_bytes(0);
  world.staging().set_bucket_bytes(256);
  Net params = p.params;
  const auto opt = nn::adam(1e-2);
  auto state = opt.init(params);
  par::StepWorkspace<Net> ws;
  const Eigen::Index n = world.rank() == empty_rank ? 0 : p.X.cols();
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s)
    losses.push_back(
        par::train_step_on_shard(params, p.X.leftCols(n), p.y.head(n), opt, state, world, ws));
  world.set_overlap(false);
  return {params, losses};
}

}  // namespace

TEST_CASE("MPI: the reduction overlapping the backward pass gives the blocking reduction's sums",
          "[mpi][train][overlap]") {
  grove::mpi::Communicator world;
  CHECK_FALSE(world.overlap());  // off unless set
  const Problem p = problem(64);
  const int steps = 3;
  for (const int empty_rank : {-1, 1}) {
    INFO("the rank without examples: " << empty_rank);
    const auto [blocking, blocking_losses] = train_shards(p, world, steps, false, empty_rank);
    const auto [overlapped, losses] = train_shards(p, world, steps, true, empty_rank);
    CHECK(par::in_sync(overlapped, world));
    if (world.size() == 2) {  // x0 + x1 either way
      CHECK(par_test::same_bits(overlapped, blocking));
      CHECK(losses == blocking_losses);
    } else {
      CHECK(par_test::max_relative(overlapped, blocking) < 1e-5);
    }
    const auto [again, again_losses] = train_shards(p, world, steps, true, empty_rank);
    CHECK(par_test::same_bits(again, overlapped));
    CHECK(again_losses == losses);
  }
  // Each rank on the whole batch, as a single process on the whole batch.
  const auto [overlapped, losses] = train_shards(p, world, steps, true);
  const auto [single, single_losses] = par_test::single_process_steps(p, nn::adam(1e-2), steps);
  CHECK(par_test::max_relative(overlapped, single) < 1e-5);
  CHECK(losses.back() == Approx(single_losses.back()).epsilon(1e-5));
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

// --- all_gather, psum_scatter, pmax / pmin, ppermute, and psum / pmean of tensors and 16-bit
// floats, over MPI ranks
// -----------------------------------------------------------------------------------------------
//
// Every rank's input is a function of its rank, so each rank checks its result against every
// rank's input, element by element. The numbers are small integers (or quarters), whose sums are
// exact in any order, except where a case says otherwise.

namespace mpi_collectives {

namespace {

using Eigen::Dynamic;
using Eigen::Index;
using RowMajorXd = Eigen::Matrix<double, Dynamic, Dynamic, Eigen::RowMajor>;

std::uint16_t bits_of(Eigen::half h) {
  return Eigen::numext::bit_cast<std::uint16_t>(h);
}
std::uint16_t bits_of(Eigen::bfloat16 h) {
  return Eigen::numext::bit_cast<std::uint16_t>(h);
}

using Gathered =
    std::tuple<double, Eigen::VectorXf, Eigen::Tensor<std::int32_t, 2, Eigen::RowMajor>,
               Eigen::Matrix<bool, Dynamic, 1>, Eigen::Matrix<Eigen::half, Dynamic, 1>>;
Gathered gathered_of(int r) {
  Gathered t{r + 0.5, Eigen::VectorXf(5), Eigen::Tensor<std::int32_t, 2, Eigen::RowMajor>(2, 3),
             Eigen::Matrix<bool, Dynamic, 1>(4), Eigen::Matrix<Eigen::half, Dynamic, 1>(3)};
  for (Index i = 0; i < 5; ++i) std::get<1>(t)(i) = static_cast<float>(10 * r + i);
  for (Index i = 0; i < 2; ++i)
    for (Index j = 0; j < 3; ++j)
      std::get<2>(t)(i, j) = static_cast<std::int32_t>(100 * r + 10 * i + j);
  for (Index i = 0; i < 4; ++i) std::get<3>(t)(i) = (r + i) % 2 == 0;
  for (Index i = 0; i < 3; ++i)
    std::get<4>(t)(i) = Eigen::half(static_cast<float>(4 * r) + static_cast<float>(i) / 4);
  return t;
}

using Tiles = std::tuple<Eigen::MatrixXf, RowMajorXd, Eigen::Tensor<float, 3>>;
Tiles tiles_of(int r) {
  Tiles t{Eigen::MatrixXf(3, 2), RowMajorXd(2, 3), Eigen::Tensor<float, 3>(2, 2, 2)};
  for (Index i = 0; i < 6; ++i) {
    std::get<0>(t).data()[i] = static_cast<float>(r * 100 + i);
    std::get<1>(t).data()[i] = r * 1000.0 + static_cast<double>(i);
  }
  for (Index i = 0; i < 8; ++i)
    std::get<2>(t).data()[i] = static_cast<float>(-r * 10) - static_cast<float>(i);
  return t;
}

// Runs the gather checks, returning what failed (empty: all passed).
std::vector<std::string> check_gathers(grove::mpi::Communicator& world) {
  const int n = world.size(), me = world.rank();
  std::vector<std::string> failed;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) failed.push_back(what);
  };
  const auto stacked = par::all_gather(gathered_of(me), world);
  const auto stacked_last = par::all_gather(gathered_of(me), world, -1);
  check(std::get<0>(stacked).size() == n && std::get<1>(stacked).rows() == n &&
            std::get<1>(stacked).cols() == 5 && std::get<1>(stacked_last).rows() == 5 &&
            std::get<1>(stacked_last).cols() == n && std::get<2>(stacked).dimension(0) == n &&
            std::get<2>(stacked_last).dimension(2) == n,
        "stacked shapes");
  for (int r = 0; r < n; ++r) {
    const Gathered in = gathered_of(r);
    check(std::get<0>(stacked)(r) == std::get<0>(in), "a number, rank " + std::to_string(r));
    check(std::get<1>(stacked).row(r).transpose() == std::get<1>(in), "a vector, axis 0");
    check(std::get<1>(stacked_last).col(r) == std::get<1>(in), "a vector, axis -1");
    check(std::get<3>(stacked).row(r).transpose() == std::get<3>(in), "bools");
    for (Index i = 0; i < 3; ++i)
      check(bits_of(std::get<4>(stacked)(r, i)) == bits_of(std::get<4>(in)(i)), "halves");
    const Eigen::Tensor<std::int32_t, 2, Eigen::RowMajor> first = std::get<2>(stacked).chip(r, 0);
    const Eigen::Tensor<std::int32_t, 2, Eigen::RowMajor> last =
        std::get<2>(stacked_last).chip(r, 2);
    for (Index i = 0; i < 2; ++i)
      for (Index j = 0; j < 3; ++j) {
        check(first(i, j) == std::get<2>(in)(i, j), "a tensor, axis 0");
        check(last(i, j) == std::get<2>(in)(i, j), "a tensor, axis -1");
      }
  }
  const auto tiled = par::all_gather(tiles_of(me), world, 1, par::tiled);
  check(std::get<0>(tiled).rows() == 3 && std::get<0>(tiled).cols() == 2 * n &&
            std::get<1>(tiled).cols() == 3 * n && std::get<2>(tiled).dimension(1) == 2 * n,
        "tiled shapes");
  for (int r = 0; r < n; ++r) {
    const Tiles in = tiles_of(r);
    check(std::get<0>(tiled).block(0, 2 * r, 3, 2) == std::get<0>(in), "a matrix, tiled");
    check(std::get<1>(tiled).block(0, 3 * r, 2, 3) == std::get<1>(in), "a row-major matrix, tiled");
    const Eigen::array<Index, 3> offsets{0, 2 * r, 0}, extents{2, 2, 2};
    const Eigen::Tensor<float, 3> slice = std::get<2>(tiled).slice(offsets, extents);
    for (Index i = 0; i < 8; ++i)
      check(slice.data()[i] == std::get<2>(in).data()[i], "a tensor, tiled");
  }
  return failed;
}

// psum_scatter's inputs: dimension 0 of length n (untiled) or a multiple of n (tiled).
using Scattered =
    std::tuple<Eigen::VectorXd, Eigen::MatrixXf, Eigen::Matrix<std::int64_t, Dynamic, 1>,
               Eigen::Matrix<Eigen::half, Dynamic, 1>, Eigen::Tensor<float, 3>>;
Scattered scattered_of(int r, int n) {
  Scattered t{Eigen::VectorXd(n), Eigen::MatrixXf(n, 4), Eigen::Matrix<std::int64_t, Dynamic, 1>(n),
              Eigen::Matrix<Eigen::half, Dynamic, 1>(n), Eigen::Tensor<float, 3>(n, 2, 3)};
  for (Index i = 0; i < n; ++i) {
    std::get<0>(t)(i) = 10.0 * r + static_cast<double>(i);
    for (Index j = 0; j < 4; ++j) std::get<1>(t)(i, j) = static_cast<float>(r * 7 - i * 3 + j);
    std::get<2>(t)(i) = (std::int64_t{1} << 40) * r + i;
    std::get<3>(t)(i) = Eigen::half(static_cast<float>(r) / 4 + static_cast<float>(i));
  }
  for (Index i = 0; i < std::get<4>(t).size(); ++i)
    std::get<4>(t).data()[i] = static_cast<float>(r * 50 + i);
  return t;
}

using Blocks = std::tuple<Eigen::VectorXf, Eigen::Tensor<double, 2, Eigen::RowMajor>,
                          Eigen::Matrix<Eigen::bfloat16, Dynamic, 1>>;
Blocks blocks_of(int r, int n) {
  Blocks t{Eigen::VectorXf(2 * n), Eigen::Tensor<double, 2, Eigen::RowMajor>(3 * n, 2),
           Eigen::Matrix<Eigen::bfloat16, Dynamic, 1>(n)};
  for (Index i = 0; i < 2 * n; ++i) std::get<0>(t)(i) = static_cast<float>(r - i);
  for (Index i = 0; i < 3 * n; ++i)
    for (Index j = 0; j < 2; ++j) std::get<1>(t)(i, j) = r * 0.25 + static_cast<double>(i * 2 + j);
  for (Index i = 0; i < n; ++i) std::get<2>(t)(i) = Eigen::bfloat16(static_cast<float>(r + 2 * i));
  return t;
}

std::vector<std::string> check_scatters(grove::mpi::Communicator& world) {
  const int n = world.size(), me = world.rank();
  std::vector<std::string> failed;
  auto check = [&](bool ok, const std::string& what) {
    if (!ok) failed.push_back(what);
  };
  std::vector<Scattered> ins;
  std::vector<Blocks> blocks;
  for (int r = 0; r < n; ++r) {
    ins.push_back(scattered_of(r, n));
    blocks.push_back(blocks_of(r, n));
  }
  const auto got = par::psum_scatter(ins[static_cast<std::size_t>(me)], world);
  double d = 0;
  Eigen::VectorXf row = Eigen::VectorXf::Zero(4);
  std::int64_t i64 = 0;
  float h = 0;
  Eigen::Tensor<float, 2> chip(2, 3);
  chip.setZero();
  for (const auto& in : ins) {
    d += std::get<0>(in)(me);
    row += std::get<1>(in).row(me).transpose();
    i64 += std::get<2>(in)(me);
    h += static_cast<float>(std::get<3>(in)(me));
    chip += std::get<4>(in).chip(me, 0);
  }
  check(std::get<0>(got) == d, "a vector of doubles");
  check(std::get<1>(got) == row, "a matrix's row");
  check(std::get<2>(got) == i64, "64-bit integers");
  check(bits_of(std::get<3>(got)) == bits_of(Eigen::half(h)), "halves, summed in float");
  for (Index i = 0; i < 6; ++i)
    check(std::get<4>(got).data()[i] == chip.data()[i], "a tensor's chip");

  const auto tiled = par::psum_scatter(blocks[static_cast<std::size_t>(me)], world, 0, par::tiled);
  Eigen::VectorXf v = Eigen::VectorXf::Zero(2);
  Eigen::Tensor<double, 2, Eigen::RowMajor> slab(3, 2);
  slab.setZero();
  float b = 0;
  for (const auto& in : blocks) {
    v += std::get<0>(in).segment(2 * me, 2);
    const Eigen::array<Index, 2> offsets{3 * me, 0}, extents{3, 2};
    slab += std::get<1>(in).slice(offsets, extents);
    b += static_cast<float>(std::get<2>(in)(me));
  }
  check(std::get<0>(tiled) == v, "a vector's block");
  for (Index i = 0; i < 6; ++i)
    check(std::get<1>(tiled).data()[i] == slab.data()[i], "a tensor's block");
  check(std::get<2>(tiled).size() == 1 &&
            bits_of(std::get<2>(tiled)(0)) == bits_of(Eigen::bfloat16(b)),
        "bfloat16, summed in float");
  return failed;
}

}  // namespace

TEST_CASE("MPI: all_gather stacks and tiles every rank's leaves", "[mpi][gather]") {
  grove::mpi::Communicator world;
  for (const std::size_t bucket : {par::Staging::default_bucket_bytes, std::size_t{64}}) {
    INFO("buckets of " << bucket << " bytes");
    world.staging().set_bucket_bytes(bucket);
    const auto failed = check_gathers(world);
    CHECK(failed == std::vector<std::string>{});
  }
  world.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
  // A leaf larger than the in-place size.
  Eigen::VectorXf big(70000);
  for (Index i = 0; i < big.size(); ++i) big(i) = static_cast<float>(world.rank() * 100000 + i);
  const Eigen::MatrixXf all = par::all_gather(big, world, 1);
  REQUIRE(all.cols() == world.size());
  for (int r = 0; r < world.size(); ++r)
    CHECK(all.col(r) == Eigen::VectorXf::LinSpaced(70000, static_cast<float>(r * 100000),
                                                   static_cast<float>(r * 100000 + 69999)));
}

TEST_CASE("MPI: psum_scatter gives each rank its slice of the sum", "[mpi][scatter]") {
  grove::mpi::Communicator world;
  for (const std::size_t bucket : {par::Staging::default_bucket_bytes, std::size_t{64}}) {
    INFO("buckets of " << bucket << " bytes");
    world.staging().set_bucket_bytes(bucket);
    const auto failed = check_scatters(world);
    CHECK(failed == std::vector<std::string>{});
  }
  world.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
  // Numbers whose sums round: exact with 2 ranks (x0 + x1), within a few ulps with 3 (MPI may add
  // in another order).
  const int n = world.size(), me = world.rank();
  auto uneven = [n](int r) {
    Eigen::VectorXf v(n);
    for (Index i = 0; i < n; ++i)
      v(i) = static_cast<float>(std::sin(r * 977.0 + i * 131.0 + 3.0) * 100.0 / 3.0);
    return v;
  };
  const float got = par::psum_scatter(uneven(me), world);
  float want = uneven(0)(me);
  for (int r = 1; r < n; ++r) want += uneven(r)(me);
  if (n == 2)
    CHECK(got == want);
  else
    CHECK(std::abs(got - want) <= 4 * std::numeric_limits<float>::epsilon() * std::abs(want));
}

TEST_CASE("MPI: pmax and pmin: NaN wins, -0 is below +0, integer extremes are exact",
          "[mpi][extrema]") {
  grove::mpi::Communicator world;
  const int n = world.size(), me = world.rank();
  const bool first = me == 0, last = me == n - 1;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Eigen::VectorXf f(5);
  f << (first ? nan : 1.0f), (me % 2 == 1 ? 0.0f : -0.0f), static_cast<float>(me) - 1.5f,
      (last ? -std::numeric_limits<float>::infinity() : 2.0f), -0.0f;
  Eigen::Matrix<Eigen::half, Dynamic, 1> h(2);
  h << Eigen::half(me % 2 == 1 ? 0.0f : -0.0f), Eigen::half(static_cast<float>(me) / 4);
  Eigen::Tensor<std::int64_t, 1> i64(2);
  i64(0) = first ? std::numeric_limits<std::int64_t>::min() : me;
  i64(1) = last ? std::numeric_limits<std::int64_t>::max() : -me;
  std::uint64_t u64 =
      last ? std::numeric_limits<std::uint64_t>::max() : static_cast<std::uint64_t>(me);
  auto tree = std::make_tuple(f, h, i64, u64);
  const auto hi = par::pmax(tree, world);
  const auto lo = par::pmin(tree, world);
  const auto& fh = std::get<0>(hi);
  const auto& fl = std::get<0>(lo);
  CHECK(std::isnan(fh(0)));
  CHECK(std::isnan(fl(0)));
  CHECK((fh(1) == 0 && !std::signbit(fh(1))));
  CHECK((fl(1) == 0 && std::signbit(fl(1))));
  CHECK(fh(2) == static_cast<float>(n) - 2.5f);
  CHECK(fl(2) == -1.5f);
  CHECK(fh(3) == 2.0f);
  CHECK(fl(3) == -std::numeric_limits<float>::infinity());
  CHECK((fh(4) == 0 && std::signbit(fh(4))));
  CHECK(bits_of(std::get<1>(hi)(0)) == 0x0000);
  CHECK(bits_of(std::get<1>(lo)(0)) == 0x8000);
  CHECK(static_cast<float>(std::get<1>(hi)(1)) == static_cast<float>(n - 1) / 4);
  CHECK(std::get<2>(lo)(0) == std::numeric_limits<std::int64_t>::min());
  CHECK(std::get<2>(hi)(0) == n - 1);
  CHECK(std::get<2>(hi)(1) == std::numeric_limits<std::int64_t>::max());
  CHECK(std::get<2>(lo)(1) == -(n - 2));
  CHECK(std::get<3>(hi) == std::numeric_limits<std::uint64_t>::max());
  CHECK(std::get<3>(lo) == 0);
  // In place, the same; and the same bits on every rank.
  par::pmax_inplace(tree, world);
  CHECK(std::memcmp(std::get<0>(tree).data(), fh.data(), 5 * sizeof(float)) == 0);
  CHECK(par::in_sync(tree, world));
}

namespace {

struct Parcel {
  gr::Key key;
  bool flag = false;
  Eigen::Matrix<bool, Dynamic, Dynamic> mask;
  Eigen::Matrix<Eigen::half, Dynamic, 1> half;
  std::complex<double> z;
  Eigen::Tensor<float, 3> cube;  // 288,000 bytes: moves in place
  std::int64_t count = 0;
};
GROVE_NODE(Parcel, key, flag, mask, half, z, cube, count);

Parcel parcel_of(int r) {
  Parcel p;
  p.key = gr::fold_in(gr::key(5), static_cast<std::uint32_t>(r));
  p.flag = r % 2 == 0;
  p.mask = Eigen::Matrix<bool, Dynamic, Dynamic>::Constant(2, 3, r % 2 == 1);
  p.half.resize(3);
  for (Index i = 0; i < 3; ++i) p.half(i) = Eigen::half(static_cast<float>(r * 3 + i) / 8);
  p.z = {r + 0.25, -r * 1.5};
  p.cube.resize(40, 30, 60);
  for (Index i = 0; i < p.cube.size(); ++i)
    p.cube.data()[i] = static_cast<float>(r) + static_cast<float>(i % 1000) / 8;
  p.count = 1000 * r + 1;
  return p;
}

bool same_parcel(const Parcel& a, const Parcel& b) {
  return a.key == b.key && a.flag == b.flag && a.mask == b.mask &&
         std::memcmp(a.half.data(), b.half.data(), 3 * sizeof(Eigen::half)) == 0 && a.z == b.z &&
         a.cube.size() == b.cube.size() &&
         std::memcmp(a.cube.data(), b.cube.data(),
                     static_cast<std::size_t>(a.cube.size()) * sizeof(float)) == 0 &&
         a.count == b.count;
}

bool zero_parcel(const Parcel& p) {
  const Eigen::Tensor<bool, 0> cube_zero = (p.cube == 0.0f).all();
  return p.key == gr::Key{{0, 0}, gr::key_layout::partitionable} && !p.flag && !p.mask.any() &&
         (p.half.array() == Eigen::half(0)).all() && p.z == std::complex<double>{} && cube_zero() &&
         p.count == 0;
}

}  // namespace

TEST_CASE("MPI: ppermute: a ring, a partial permutation, zeros for the others", "[mpi][permute]") {
  grove::mpi::Communicator world;
  const int n = world.size(), me = world.rank();
  std::vector<std::pair<int, int>> ring;
  for (int d = 0; d < n; ++d) ring.emplace_back(d, (d + 1) % n);
  for (const std::size_t bucket : {par::Staging::default_bucket_bytes, std::size_t{4096}}) {
    INFO("buckets of " << bucket << " bytes");
    world.staging().set_bucket_bytes(bucket);
    CHECK(same_parcel(par::ppermute(parcel_of(me), world, ring), parcel_of((me + n - 1) % n)));
    Parcel mine = parcel_of(me);
    par::ppermute_inplace(mine, world, {{0, n - 1}});
    if (me == n - 1)
      CHECK(same_parcel(mine, parcel_of(0)));
    else
      CHECK(zero_parcel(mine));
  }
  world.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
}

TEST_CASE("MPI: psum and pmean of tensors and 16-bit floats, summed in float and rounded once",
          "[mpi][psum]") {
  grove::mpi::Communicator world;
  const int n = world.size(), me = world.rank();
  Eigen::Tensor<float, 3, Eigen::RowMajor> t(2, 3, 4);
  for (Index i = 0; i < t.size(); ++i) t.data()[i] = static_cast<float>(me * 24 + i) / 4;
  Eigen::Matrix<Eigen::half, Dynamic, 1> h(2);
  h << Eigen::half(me == 0 ? 1024.0f : 0.5f), Eigen::half(static_cast<float>(me));
  Eigen::Tensor<Eigen::bfloat16, 1> b(2);
  b(0) = Eigen::bfloat16(me == 0 ? 256.0f : 1.0f);
  b(1) = Eigen::bfloat16(-static_cast<float>(me));
  const auto tree = std::make_tuple(t, h, b);
  const auto sum = par::psum(tree, world);
  const auto mean = par::pmean(tree, world);
  for (Index i = 0; i < t.size(); ++i) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += static_cast<float>(r * 24 + i) / 4;
    CHECK(std::get<0>(sum).data()[i] == s);
    CHECK(std::get<0>(mean).data()[i] == s / static_cast<float>(n));
  }
  const float half_sum = 1024.0f + 0.5f * static_cast<float>(n - 1);
  const float bf16_sum = 256.0f + static_cast<float>(n - 1);
  CHECK(bits_of(std::get<1>(sum)(0)) == bits_of(Eigen::half(half_sum)));
  CHECK(bits_of(std::get<1>(mean)(0)) == bits_of(Eigen::half(half_sum / static_cast<float>(n))));
  CHECK(static_cast<float>(std::get<1>(sum)(1)) == static_cast<float>(n * (n - 1) / 2));
  CHECK(bits_of(std::get<2>(sum)(0)) == bits_of(Eigen::bfloat16(bf16_sum)));
  CHECK(static_cast<float>(std::get<2>(sum)(1)) == -static_cast<float>(n * (n - 1) / 2));
}

TEST_CASE("MPI: all_gather with different axes, ppermute with different perms: the same error",
          "[mpi][mismatch]") {
  grove::mpi::Communicator world;
  const int last = world.size() - 1;
  SECTION("all_gather axis") {
    const std::string m = error_on_every_rank(world, [&] {
      const Eigen::VectorXf v = Eigen::VectorXf::Ones(3);
      (void)par::all_gather(v, world, world.rank() == last ? 1 : 0);
    });
    CHECK_THAT(m, Catch::Contains("grove::parallel::all_gather: the devices disagree on the tree"));
    CHECK_THAT(m, Catch::Contains("rank 0 called all_gather(axis=0) but rank " +
                                  std::to_string(last) + " called all_gather(axis=1)"));
  }
  SECTION("ppermute perm") {
    const std::string m = error_on_every_rank(world, [&] {
      float x = 1;
      const int r = world.rank();
      par::ppermute_inplace(x, world, {{r, r}});
    });
    CHECK_THAT(m, Catch::Contains("grove::parallel::ppermute: the devices disagree on the tree"));
    CHECK_THAT(m, Catch::Contains("rank 0 called ppermute(perm=[(0, 0)]) but rank 1 called "
                                  "ppermute(perm=[(1, 1)])"));
  }
}

}  // namespace mpi_collectives

TEST_CASE("MPI: ranks that differ in overlapping the reduction: the same error on every rank",
          "[mpi][mismatch][overlap]") {
  grove::mpi::Communicator world;
  world.set_overlap(world.rank() == 0);
  const Problem p = problem(16);
  Net params = p.params;
  const auto opt = nn::sgd(0.1);
  auto state = opt.init(params);
  par::StepWorkspace<Net> ws;
  const std::string m =
      error_on_every_rank(world, [&] { par::train_step(params, p.X, p.y, opt, state, world, ws); });
  CHECK_THAT(m, Catch::Matchers::Contains("the devices disagree") &&
                    Catch::Matchers::Contains("overlapping the backward pass"));
  CHECK(par_test::same_bits(params, p.params));  // nothing moved, nothing stepped
}
