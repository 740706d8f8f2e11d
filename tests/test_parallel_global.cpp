// grove::mpi::GlobalDevice, processes × local devices, in the MPI test executable (2 and 3 ranks,
// each running LocalDevices): device numbering, every collective against a reference computed
// from every device's tree, the data-parallel step against the single-process step, reruns bit
// for bit, and processes that run different numbers of devices (an error on every device, no
// hang). Catch2's assertions are not thread-safe: the devices return what they computed, and the
// main thread checks it.
#include <catch2/catch.hpp>

#include <cstdint>
#include <grove/parallel.hpp>
#include <grove/parallel/global_device.hpp>
#include <grove/parallel/mpi.hpp>
#include <grove/parallel/train.hpp>
#include <string>
#include <utility>
#include <vector>

#include "parallel_fixtures.hpp"

namespace nn = grove::nn;
namespace par = grove::parallel;
using par_test::Net;

namespace {

// What one global device saw.
struct Seen {
  int rank = -1, size = 0;
  Net sum, broadcast_from_last, from_left;
  Eigen::MatrixXf gathered;  // every device's b0, stacked in global order
  Eigen::VectorXf maximum;
  float scattered = 0;
};

}  // namespace

TEST_CASE("MPI: GlobalDevice's collectives span every process's local devices", "[mpi][global]") {
  grove::mpi::Communicator world;
  for (const int local_devices : {1, 2, 3}) {
    INFO(world.size() << " processes of " << local_devices << " local devices");
    const int n = world.size() * local_devices;
    par::LocalDevices devices(local_devices);
    const auto seen = devices.run([&](par::LocalDevice& local) {
      grove::mpi::GlobalDevice device(world, local);
      Seen s;
      s.rank = device.rank();
      s.size = device.size();
      const Net mine = par_test::make_net(s.rank);
      s.sum = par::psum(mine, device);
      s.broadcast_from_last = par::broadcast(mine, device, n - 1);
      std::vector<std::pair<int, int>> ring;
      for (int d = 0; d < n; ++d) ring.push_back({d, (d + 1) % n});
      s.from_left = par::ppermute(mine, device, ring);
      s.gathered = par::all_gather(mine[0].b, device);
      s.maximum = par::pmax(mine[1].b, device);
      const Eigen::VectorXf entries =
          Eigen::VectorXf::LinSpaced(n, 1, static_cast<float>(n)) * static_cast<float>(s.rank + 1);
      s.scattered = par::psum_scatter(entries, device);
      return s;
    });
    std::vector<Net> nets;
    for (int r = 0; r < n; ++r) nets.push_back(par_test::make_net(r));
    const Net sum = par_test::combine(
        nets, [](const auto& a, const auto& b) { return std::remove_cvref_t<decltype(a)>(a + b); });
    const float ranks_total = static_cast<float>(n * (n + 1) / 2);
    for (std::size_t l = 0; l < seen.size(); ++l) {
      const Seen& s = seen[l];
      CHECK(s.rank == world.rank() * local_devices + static_cast<int>(l));
      CHECK(s.size == n);
      CHECK(par_test::same_bits(s.sum, sum));  // integers: exact in any order
      CHECK(par_test::same_bits(s.broadcast_from_last, nets.back()));
      CHECK(par_test::same_bits(s.from_left, nets[static_cast<std::size_t>((s.rank + n - 1) % n)]));
      REQUIRE(s.gathered.rows() == n);
      Eigen::VectorXf most = nets[0][1].b;
      for (int r = 0; r < n; ++r) {
        CHECK(s.gathered.row(r).transpose() == nets[static_cast<std::size_t>(r)][0].b);
        most = most.cwiseMax(nets[static_cast<std::size_t>(r)][1].b);
      }
      CHECK(s.maximum == most);
      CHECK(s.scattered == static_cast<float>(s.rank + 1) * ranks_total);
    }
  }
}

TEST_CASE("MPI: data-parallel training over processes × local devices", "[mpi][global][train]") {
  grove::mpi::Communicator world;
  const par_test::Problem p = par_test::problem(61);  // shards of unequal sizes
  const auto opt = nn::adam(1e-2);
  constexpr int steps = 3;
  auto run = [&] {
    par::LocalDevices devices(2);
    return devices.run([&](par::LocalDevice& local) {
      grove::mpi::GlobalDevice device(world, local);
      Net params = p.params;
      auto state = opt.init(params);
      par::StepWorkspace<Net> ws;
      std::vector<float> losses;
      for (int s = 0; s < steps; ++s)
        losses.push_back(par::train_step(params, p.X, p.y, opt, state, device, ws));
      return std::pair{params, losses};
    });
  };
  const auto first = run();
  const auto [single, single_losses] = par_test::single_process_steps(p, opt, steps);
  for (const auto& [params, losses] : first) {
    CHECK(par_test::max_relative(params, single) < 1e-5);
    for (int s = 0; s < steps; ++s)
      CHECK(std::abs(losses[static_cast<std::size_t>(s)] -
                     single_losses[static_cast<std::size_t>(s)]) <
            1e-5 * single_losses[static_cast<std::size_t>(s)]);
    CHECK(par_test::same_bits(params, first[0].first));
  }
  // Every process holds the same bits, and a rerun repeats them.
  CHECK(par::in_sync(first[0].first, world));
  const auto again = run();
  for (std::size_t l = 0; l < again.size(); ++l) {
    CHECK(par_test::same_bits(again[l].first, first[l].first));
    CHECK(again[l].second == first[l].second);
  }
}

TEST_CASE("MPI: processes with different numbers of local devices: an error on every device",
          "[mpi][global]") {
  grove::mpi::Communicator world;
  const int local_devices = world.rank() == 0 ? 2 : 1;
  par::LocalDevices devices(local_devices);
  std::string message;
  try {
    devices.run([&](par::LocalDevice& local) { grove::mpi::GlobalDevice device(world, local); });
  } catch (const grove::argument_error& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Contains("every process must run as many local devices") &&
                          Catch::Contains("between 1 and 2"));
  // The processes still work together.
  double one = 1;
  par::psum_inplace(one, world);
  CHECK(one == world.size());
}
