// broadcast of every leaf a training program's trees hold: random keys, bools, 16-bit floats,
// complex numbers, Eigen tensors, and the whole nn::train_state of a run with a masked adamw.
#include <catch2/catch.hpp>

#include <complex>
#include <cstring>
#include <grove/nn.hpp>
#include <grove/optim.hpp>
#include <grove/parallel.hpp>
#include <grove/tree/tensor.hpp>
#include <utility>
#include <vector>

namespace {

namespace par = grove::parallel;
namespace rnd = grove::random;

struct AllLeaves {
  rnd::Key key;
  bool flag = false;
  Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> mask;
  Eigen::Matrix<Eigen::half, Eigen::Dynamic, 1> half;
  Eigen::Matrix<Eigen::bfloat16, 2, 2> bf16;
  Eigen::Tensor<float, 3> cube;
  Eigen::Tensor<std::int64_t, 2, Eigen::RowMajor> table;
  std::complex<double> z;
  std::int64_t count = 0;
};
GROVE_NODE(AllLeaves, key, flag, mask, half, bf16, cube, table, z, count);

// A tree whose every value depends on the rank, with a cube large enough to move in place.
AllLeaves leaves_of(int rank) {
  AllLeaves t;
  t.key = rnd::fold_in(rnd::key(9), static_cast<std::uint32_t>(rank));
  t.flag = rank % 2 == 1;
  t.mask = Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic>::Constant(3, 5, rank % 2 == 0);
  t.mask(1, rank % 5) = rank % 2 != 0;
  t.half.resize(7);
  for (int i = 0; i < 7; ++i) t.half(i) = Eigen::half(static_cast<float>(rank * 10 + i) / 8);
  for (int i = 0; i < 4; ++i) t.bf16(i) = Eigen::bfloat16(static_cast<float>(rank - i));
  t.cube.resize(40, 30, 20);
  for (Eigen::Index i = 0; i < t.cube.size(); ++i)
    t.cube.data()[i] = static_cast<float>(rank) + static_cast<float>(i) / 64;
  t.table.resize(2, 3);
  for (Eigen::Index i = 0; i < 6; ++i) t.table.data()[i] = (std::int64_t{1} << 40) * rank + i;
  t.z = {rank + 0.5, -rank * 2.0};
  t.count = rank * 1000;
  return t;
}

template <class A>
bool same_memory(const A& a, const A& b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(),
                     static_cast<std::size_t>(a.size()) * sizeof(typename A::Scalar)) == 0;
}

bool same(const AllLeaves& a, const AllLeaves& b) {
  return a.key == b.key && a.flag == b.flag && a.mask == b.mask && same_memory(a.half, b.half) &&
         same_memory(a.bf16, b.bf16) && same_memory(a.cube, b.cube) &&
         same_memory(a.table, b.table) && a.z == b.z && a.count == b.count;
}

}  // namespace

TEST_CASE("broadcast takes keys, bools, 16-bit floats, complex numbers and tensors",
          "[parallel][broadcast]") {
  for (const int n : {1, 2, 3}) {
    INFO(n << " devices");
    par::LocalDevices devices(n);
    const auto results = devices.run([&](par::LocalDevice& d) {
      std::vector<AllLeaves> out;
      for (const std::size_t bucket : {std::size_t{64}, par::Staging::default_bucket_bytes}) {
        d.staging().set_bucket_bytes(bucket);  // 64 bytes: every leaf crosses buckets
        out.push_back(par::broadcast(leaves_of(d.rank()), d, n - 1));
        AllLeaves mine = leaves_of(d.rank());
        par::broadcast_inplace(mine, d, 0);
        out.push_back(mine);
      }
      d.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
      const bool before = par::in_sync(leaves_of(d.rank()), d);
      const bool after = par::in_sync(out.back(), d);
      return std::tuple{out, before, after};
    });
    for (const auto& [out, before, after] : results) {
      REQUIRE(out.size() == 4);
      CHECK(same(out[0], leaves_of(n - 1)));
      CHECK(same(out[1], leaves_of(0)));
      CHECK(same(out[2], leaves_of(n - 1)));
      CHECK(same(out[3], leaves_of(0)));
      CHECK(before == (n == 1));
      CHECK(after);
    }
  }
  // One device: SingleDevice, the same code.
  par::SingleDevice one;
  AllLeaves t = leaves_of(4);
  par::broadcast_inplace(t, one, 0);
  CHECK(same(t, leaves_of(4)));
}

TEST_CASE("a train_state with its key and a masked adamw state broadcast whole",
          "[parallel][broadcast][nn]") {
  namespace nn = grove::nn;
  namespace optim = grove::optim;
  const auto model = nn::sequential(nn::dense(6, 5), nn::swish, nn::dense(5, 3));
  using Params = decltype(nn::init<float>(model, rnd::key(0)));
  const auto weights = [](const Params& p) {
    return grove::tree_map([](const auto& leaf) { return leaf.cols() > 1; }, p);
  };
  const auto opt = optim::adamw(1e-2, 0.9, 0.999, 1e-8, 0.0, 0.1, weights);
  using State = decltype(opt.init(std::declval<const Params&>()));
  using TrainState = nn::train_state<Params, State>;
  auto state_of = [&](int rank) {
    auto params = nn::init<float>(model, rnd::key(static_cast<std::uint32_t>(rank)));
    auto s = opt.init(params);
    return TrainState{params, s, rnd::key(static_cast<std::uint32_t>(100 + rank)), rank};
  };
  par::LocalDevices devices(2);
  const auto results = devices.run([&](par::LocalDevice& d) {
    TrainState mine = state_of(d.rank());
    par::broadcast_inplace(mine, d, 1);
    return std::pair{mine, par::in_sync(mine, d)};
  });
  const TrainState expected = state_of(1);
  for (const auto& [got, synced] : results) {
    CHECK(synced);
    CHECK(got.key == expected.key);
    CHECK(got.epoch == 1);
    auto equal = [](const auto& x, const auto& y) { CHECK(x == y); };
    grove::tree_for_each(equal, got.params, expected.params);
    grove::tree_for_each(equal, got.opt_state, expected.opt_state);
  }
}

TEST_CASE("devices whose value leaves differ are told where", "[parallel][broadcast][errors]") {
  // Rank 0 holds a key where rank 1 holds a 64-bit integer: the same structure, another leaf.
  par::LocalDevices devices(2);
  const auto messages = devices.run([&](par::LocalDevice& d) -> std::string {
    try {
      if (d.rank() == 0) {
        std::vector<rnd::Key> t{rnd::key(1)};
        par::broadcast_inplace(t, d, 0);
      } else {
        std::vector<std::uint64_t> t{7};
        par::broadcast_inplace(t, d, 0);
      }
    } catch (const grove::tree_error& e) {
      return e.what();
    }
    return "no error";
  });
  for (const auto& m : messages) {
    CHECK_THAT(m, Catch::StartsWith("grove::parallel::broadcast: the devices disagree"));
    CHECK_THAT(m, Catch::Contains("a value of 12 bytes"));
  }
}
