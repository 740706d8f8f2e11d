// grove::parallel over LocalDevices: psum / pmean / broadcast on trees with 1 to 4 devices,
// determinism whatever the threads' timing, buckets, the agreement check (every device raises
// the same error when the trees differ), integer sums that wrap around, and no hang when a device
// fails or leaves or when its thread cannot be started.
//
// Catch2's assertions are not thread-safe: the devices return what they saw, and the test checks
// it on the main thread.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>  // shard, Shard
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <vector>

#include "parallel_fixtures.hpp"

namespace par = grove::parallel;
using par_test::Mixed;
using par_test::Net;

static_assert(par::communicator<par::LocalDevice>);

TEST_CASE("LocalDevices: run calls f once per device, on distinct threads, and returns results",
          "[parallel]") {
  for (int n = 1; n <= 4; ++n) {
    par::LocalDevices devices(n);
    REQUIRE(devices.size() == n);
    const auto ids = devices.run([&](par::LocalDevice& d) {
      return std::tuple{d.rank(), std::this_thread::get_id(), d.size()};
    });
    REQUIRE(ids.size() == static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      CHECK(std::get<0>(ids[static_cast<std::size_t>(r)]) == r);
      CHECK(std::get<2>(ids[static_cast<std::size_t>(r)]) == n);
      for (int q = 0; q < r; ++q)
        CHECK(std::get<1>(ids[static_cast<std::size_t>(q)]) !=
              std::get<1>(ids[static_cast<std::size_t>(r)]));
    }
    // The same threads from one run to the next.
    const auto again = devices.run([](par::LocalDevice&) { return std::this_thread::get_id(); });
    for (int r = 0; r < n; ++r)
      CHECK(again[static_cast<std::size_t>(r)] == std::get<1>(ids[static_cast<std::size_t>(r)]));
  }
  CHECK_THROWS_AS(par::LocalDevices(0), std::invalid_argument);
  CHECK_THROWS_AS(par::LocalDevices(2, 0), std::invalid_argument);
}

TEST_CASE("psum, pmean and broadcast on trees, 1 to 4 devices", "[parallel]") {
  for (int n = 1; n <= 4; ++n) {
    INFO(n << " devices");
    std::vector<Mixed> mixed;
    std::vector<Net> nets;
    for (int r = 0; r < n; ++r) {
      mixed.push_back(par_test::make_mixed(r));
      nets.push_back(par_test::make_net(r));
    }
    const Mixed mixed_sum = par_test::combine(mixed, [](const auto& a, const auto& b) {
      return std::remove_cvref_t<decltype(a)>(a + b);
    });
    const Net net_sum = par_test::combine(
        nets, [](const auto& a, const auto& b) { return std::remove_cvref_t<decltype(a)>(a + b); });
    Net net_mean = net_sum;
    grove::tree_for_each([&](auto& leaf) { leaf /= static_cast<float>(n); }, net_mean);

    par::LocalDevices devices(n);
    struct Out {
      Mixed psum_mixed, bcast_mixed;
      Net psum_net, pmean_net, inplace_net, bcast_net;
    };
    const auto outs = devices.run([&](par::LocalDevice& d) {
      const auto r = static_cast<std::size_t>(d.rank());
      Out o;
      o.psum_mixed = par::psum(mixed[r], d);
      o.psum_net = par::psum(nets[r], d);
      o.pmean_net = par::pmean(nets[r], d);
      o.inplace_net = nets[r];
      par::psum_inplace(o.inplace_net, d);
      o.bcast_net = par::broadcast(nets[r], d, n - 1);
      o.bcast_mixed = mixed[r];
      par::broadcast_inplace(o.bcast_mixed, d, 0);
      return o;
    });
    for (int r = 0; r < n; ++r) {
      INFO("device " << r);
      const Out& o = outs[static_cast<std::size_t>(r)];
      CHECK(par_test::same_bits(o.psum_mixed, mixed_sum));
      CHECK(std::get<3>(o.psum_mixed) == std::get<3>(mixed_sum));  // the int64 leaf
      CHECK(par_test::same_bits(o.psum_net, net_sum));
      CHECK(par_test::same_bits(o.inplace_net, net_sum));
      CHECK(par_test::same_bits(o.pmean_net, net_mean));
      CHECK(par_test::same_bits(o.bcast_net, nets.back()));
      CHECK(par_test::same_bits(o.bcast_mixed, mixed.front()));
    }
  }
}

TEST_CASE("psum adds in rank order: the same bits whatever the threads' timing",
          "[parallel][determinism]") {
  // Values whose sum depends on the order of the additions.
  const int n = 4;
  std::vector<Eigen::VectorXf> x;
  for (int r = 0; r < n; ++r)
    x.push_back(
        grove::random::normal<float>(grove::random::fold_in(grove::random::key(1), r), 10000) *
        std::pow(10.0f, static_cast<float>(2 * r - 3)));
  Eigen::VectorXf expected = x[0];
  for (int r = 1; r < n; ++r) expected += x[static_cast<std::size_t>(r)];

  par::LocalDevices devices(n);
  for (int trial = 0; trial < 20; ++trial) {
    const auto sums = devices.run([&](par::LocalDevice& d) {
      // Stagger the devices differently on every trial.
      std::this_thread::sleep_for(
          std::chrono::microseconds(((trial + 1) * (d.rank() + 3)) % 7 * 300));
      return par::psum(x[static_cast<std::size_t>(d.rank())], d);
    });
    for (const auto& s : sums) REQUIRE((s.array() == expected.array()).all());
  }
}

TEST_CASE("long runs move in place, short ones packed: the same result either way", "[parallel]") {
  const int n = 3;
  std::vector<Net> nets;
  for (int r = 0; r < n; ++r) nets.push_back(par_test::make_net(r, {300, 200, 10}));
  const auto add = [](const auto& a, const auto& b) {
    return std::remove_cvref_t<decltype(a)>(a + b);
  };
  const Net sum = par_test::combine(nets, add);
  par::LocalDevices devices(n);
  const auto results = devices.run([&](par::LocalDevice& d) {
    const Net& mine = nets[static_cast<std::size_t>(d.rank())];
    std::vector<Net> out;
    for (const std::size_t inplace :
         {std::size_t{0}, std::size_t{1024}, par::Staging::default_inplace_bytes, SIZE_MAX}) {
      d.staging().set_inplace_bytes(inplace);
      out.push_back(par::psum(mine, d));
      out.push_back(par::broadcast(mine, d, 1));
      d.staging().set_bucket_bytes(4096);  // and pieces of in-place runs
      out.push_back(par::psum(mine, d));
      d.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
    }
    // With everything in place no staging memory is needed at all.
    d.staging() = par::Staging();  // releases the memory
    Net again = mine;
    d.staging().set_inplace_bytes(0);
    par::psum_inplace(again, d);
    const std::size_t capacity = d.staging().capacity();
    d.staging().set_inplace_bytes(par::Staging::default_inplace_bytes);
    return std::pair{out, capacity};
  });
  for (const auto& [out, capacity] : results) {
    CHECK(capacity == 0);
    for (std::size_t i = 0; i < out.size(); ++i) {
      INFO("variant " << i);
      CHECK(par_test::same_bits(out[i], i % 3 == 1 ? nets[1] : sum));
    }
  }
}

TEST_CASE("trees larger than a bucket move in buckets, with the same result", "[parallel]") {
  const int n = 3;
  std::vector<Mixed> mixed;
  for (int r = 0; r < n; ++r) mixed.push_back(par_test::make_mixed(r));
  par::LocalDevices devices(n);
  const auto results = devices.run([&](par::LocalDevice& d) {
    d.staging().set_bucket_bytes(64);  // 8 doubles or 16 floats per collective
    const Mixed bucketed = par::psum(mixed[static_cast<std::size_t>(d.rank())], d);
    const Mixed bcast = par::broadcast(mixed[static_cast<std::size_t>(d.rank())], d, 2);
    const std::size_t capacity = d.staging().capacity();
    d.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
    const Mixed whole = par::psum(mixed[static_cast<std::size_t>(d.rank())], d);
    return std::tuple{whole, bucketed, bcast, capacity};
  });
  for (const auto& [whole, bucketed, bcast, capacity] : results) {
    CHECK(capacity == 64);  // the staging memory never exceeds a bucket
    CHECK(par_test::same_bits(whole, bucketed));
    CHECK(par_test::same_bits(bcast, mixed.back()));
  }
}

TEST_CASE("leaves that are Maps and Refs, and empty trees", "[parallel]") {
  par::LocalDevices devices(2);
  const auto seen = devices.run([](par::LocalDevice& d) {
    std::vector<bool> ok;
    // A Map onto a strided view: only the mapped elements change.
    Eigen::MatrixXf storage = Eigen::MatrixXf::Constant(4, 3, static_cast<float>(d.rank() + 1));
    Eigen::Map<Eigen::MatrixXf, 0, Eigen::OuterStride<>> top(storage.data(), 2, 3,
                                                             Eigen::OuterStride<>(4));
    std::vector<Eigen::Map<Eigen::MatrixXf, 0, Eigen::OuterStride<>>> tree{top};
    par::psum_inplace(tree, d);
    ok.push_back((storage.topRows(2).array() == 3.0f).all());
    ok.push_back((storage.bottomRows(2).array() == static_cast<float>(d.rank() + 1)).all());
    // psum returns plain objects and leaves its argument alone.
    const auto copy = par::psum(tree, d);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(copy[0])>, Eigen::MatrixXf>);
    ok.push_back((copy[0].array() == 6.0f).all());
    ok.push_back((storage.topRows(2).array() == 3.0f).all());
    // A tree without leaves.
    std::tuple<std::monostate, std::vector<float>> empty;
    par::psum_inplace(empty, d);
    par::broadcast_inplace(empty, d, 1);
    // A scalar on its own is a tree.
    double x = d.rank() + 0.5;
    par::psum_inplace(x, d);
    ok.push_back(x == 2.0);
    return ok;
  });
  for (const auto& ok : seen)
    for (std::size_t i = 0; i < ok.size(); ++i) {
      INFO("check " << i);
      CHECK(ok[i]);
    }
}

TEST_CASE("in_sync: true on every device exactly when the replicas are bit-identical",
          "[parallel]") {
  par::LocalDevices devices(3);
  const auto verdicts = devices.run([](par::LocalDevice& d) {
    Net net = par_test::make_net(0);
    const bool same = par::in_sync(net, d);
    if (d.rank() == 2) net[1].b(0) = std::nextafter(net[1].b(0), 1e9f);
    const bool one_bit = par::in_sync(net, d);
    return std::pair{same, one_bit};
  });
  for (const auto& [same, one_bit] : verdicts) {
    CHECK(same);
    CHECK_FALSE(one_bit);
  }
}

TEST_CASE("shard splits a batch into contiguous ranges that differ by at most one", "[parallel]") {
  CHECK(par::shard(10, 0, 4) == par::Shard{0, 3});
  CHECK(par::shard(10, 1, 4) == par::Shard{3, 3});
  CHECK(par::shard(10, 2, 4) == par::Shard{6, 2});
  CHECK(par::shard(10, 3, 4) == par::Shard{8, 2});
  CHECK(par::shard(3, 3, 4) == par::Shard{3, 0});
  CHECK(par::shard(1024, 1, 2) == par::Shard{512, 512});
  CHECK_THROWS_AS(par::shard(10, 4, 4), std::invalid_argument);
}

// --- the agreement check
// --------------------------------------------------------------------------

namespace {

// Runs f on `n` devices; every device must throw grove::tree_error. Returns the messages.
template <class F>
std::vector<std::string> errors_on_every_device(int n, F f) {
  par::LocalDevices devices(n);
  std::vector<std::string> messages(static_cast<std::size_t>(n));
  const auto sums = devices.run([&](par::LocalDevice& d) {
    try {
      f(d);
      messages[static_cast<std::size_t>(d.rank())] = "no error";
    } catch (const grove::tree_error& e) {
      messages[static_cast<std::size_t>(d.rank())] = e.what();
    }
    d.staging().set_bucket_bytes(par::Staging::default_bucket_bytes);
    // The group is still usable after the error: a matching psum goes through.
    double one = 1;
    par::psum_inplace(one, d);
    return one;
  });
  for (double s : sums) CHECK(s == n);
  return messages;
}

}  // namespace

TEST_CASE("trees of different shapes: the same clear error on every device", "[parallel][agree]") {
  const auto messages = errors_on_every_device(2, [](par::LocalDevice& d) {
    Net net = par_test::make_net(
        0, d.rank() == 0 ? std::vector<Eigen::Index>{6, 5, 4} : std::vector<Eigen::Index>{6, 5, 3});
    par::psum_inplace(net, d);
  });
  for (const auto& m : messages) {
    CHECK_THAT(m, Catch::Contains("grove::parallel::psum: the devices disagree on the tree, so "
                                  "nothing was moved (rank 1 of 2 differs from rank 0)"));
    CHECK_THAT(m, Catch::Contains("at [1].w rank 0 has float32 (4, 5) but rank 1 has float32 (3, "
                                  "5)"));
  }
}

TEST_CASE("trees of different structures, element types, operations, roots or buckets",
          "[parallel][agree]") {
  SECTION("structure") {
    const auto messages = errors_on_every_device(3, [](par::LocalDevice& d) {
      Net net = par_test::make_net(0, d.rank() == 2 ? std::vector<Eigen::Index>{6, 5, 4, 2}
                                                    : std::vector<Eigen::Index>{6, 5, 4});
      net = par::pmean(net, d);
    });
    for (const auto& m : messages) {
      CHECK_THAT(m, Catch::Contains("grove::parallel::pmean"));
      CHECK_THAT(m, Catch::Contains("(rank 2 of 3 differs from rank 0)"));
      CHECK_THAT(m, Catch::Contains("the structures differ: rank 0 has PyTreeDef([CustomNode("
                                    "Dense[()], [*, *]), CustomNode(Dense[()], [*, *])]) but rank "
                                    "2 has PyTreeDef([CustomNode(Dense[()], [*, *]), "));
    }
  }
  SECTION("element type") {
    const auto messages = errors_on_every_device(2, [](par::LocalDevice& d) {
      if (d.rank() == 0) {
        std::vector<Eigen::VectorXf> v{Eigen::VectorXf::Ones(3)};
        par::psum_inplace(v, d);
      } else {
        std::vector<Eigen::VectorXd> v{Eigen::VectorXd::Ones(3)};
        par::psum_inplace(v, d);
      }
    });
    for (const auto& m : messages)
      CHECK_THAT(m, Catch::Contains("at [0] rank 0 has float32 (3,) but rank 1 has float64 (3,)"));
  }
  SECTION("operation") {
    const auto messages = errors_on_every_device(2, [](par::LocalDevice& d) {
      Net net = par_test::make_net(0);
      if (d.rank() == 0)
        par::psum_inplace(net, d);
      else
        par::broadcast_inplace(net, d, 0);
    });
    CHECK_THAT(messages[0], Catch::StartsWith("grove::parallel::psum: "));
    CHECK_THAT(messages[1], Catch::StartsWith("grove::parallel::broadcast: "));
    for (const auto& m : messages)
      CHECK_THAT(m, Catch::Contains("rank 0 called psum but rank 1 called broadcast from rank 0"));
  }
  SECTION("root") {
    const auto messages = errors_on_every_device(2, [](par::LocalDevice& d) {
      Net net = par_test::make_net(0);
      par::broadcast_inplace(net, d, d.rank());
    });
    for (const auto& m : messages)
      CHECK_THAT(m, Catch::Contains("rank 0 called broadcast from rank 0 but rank 1 called "
                                    "broadcast from rank 1"));
  }
  SECTION("bucket size") {
    const auto messages = errors_on_every_device(2, [](par::LocalDevice& d) {
      if (d.rank() == 1) d.staging().set_bucket_bytes(1024);
      Net net = par_test::make_net(0);
      par::psum_inplace(net, d);
    });
    for (const auto& m : messages)
      CHECK_THAT(m, Catch::Contains("rank 0 moves trees in buckets of 33554432 bytes, runs of "
                                    "262144 bytes or more in place but rank 1 in buckets of 1024 "
                                    "bytes, runs of 262144 bytes or more in place"));
  }
  SECTION("memory layout") {
    const auto messages = errors_on_every_device(2, [](par::LocalDevice& d) {
      Eigen::MatrixXf storage = Eigen::MatrixXf::Ones(4, 3);
      Eigen::Map<Eigen::MatrixXf, 0, Eigen::OuterStride<>> view(storage.data(), d.rank() ? 2 : 4, 3,
                                                                Eigen::OuterStride<>(4));
      Eigen::MatrixXf plain = Eigen::MatrixXf::Ones(2, 3);
      if (d.rank() == 0) {
        auto tree = std::tuple{plain};
        par::psum_inplace(tree, d);
      } else {
        auto tree = std::tuple{view};
        par::psum_inplace(tree, d);
      }
    });
    for (const auto& m : messages)
      CHECK_THAT(m, Catch::Contains("at [0] rank 0 has float32 (2, 3) but rank 1 has float32 (2, "
                                    "3, strided: runs of 2)"));
  }
  SECTION("dict keys") {
    const auto messages = errors_on_every_device(2, [](par::LocalDevice& d) {
      std::map<std::string, float> m{{d.rank() == 0 ? "lr" : "momentum", 1.0f}};
      par::psum_inplace(m, d);
    });
    for (const auto& m : messages)
      CHECK_THAT(m, Catch::Contains("rank 0 has PyTreeDef({'lr': *}) but rank 1 has "
                                    "PyTreeDef({'momentum': *})"));
  }
}

TEST_CASE("an invalid root is an error on every device", "[parallel][agree]") {
  par::LocalDevices devices(2);
  CHECK_THROWS_WITH(devices.run([](par::LocalDevice& d) {
    float x = 1;
    par::broadcast_inplace(x, d, 2);
  }),
                    Catch::Contains("root 2 is not a rank of this communicator (size 2)"));
}

// --- failures never hang ------------------------------------------------------------------------

TEST_CASE("a device that throws: the others stop waiting, run rethrows its exception",
          "[parallel][abort]") {
  par::LocalDevices devices(3);
  std::vector<std::string> seen(3);
  CHECK_THROWS_WITH(devices.run([&](par::LocalDevice& d) {
    try {
      if (d.rank() == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        throw std::runtime_error("device 1's data is missing");
      }
      Net net = par_test::make_net(d.rank());
      par::psum_inplace(net, d);
    } catch (const par::aborted_error& e) {
      seen[static_cast<std::size_t>(d.rank())] = e.what();
      throw;
    }
  }),
                    "device 1's data is missing");
  for (int r : {0, 2})
    CHECK_THAT(seen[static_cast<std::size_t>(r)],
               Catch::Contains("device 1 failed (device 1's data is missing)"));
  // The devices work again in the next run.
  const auto sums = devices.run([](par::LocalDevice& d) { return par::psum(1.0, d); });
  for (double s : sums) CHECK(s == 3.0);
}

TEST_CASE("a device that returns without the collective the others wait in: no hang",
          "[parallel][abort]") {
  par::LocalDevices devices(2);
  CHECK_THROWS_WITH(devices.run([](par::LocalDevice& d) {
    if (d.rank() == 1) return;  // skips the psum
    std::this_thread::sleep_for(std::chrono::milliseconds(d.rank() == 0 ? 0 : 20));
    Net net = par_test::make_net(0);
    par::psum_inplace(net, d);
  }),
                    Catch::Contains("device 1 returned from its function while another device "
                                    "waits in a collective"));
  // And the other way round: the device that leaves does so after the other started waiting.
  CHECK_THROWS_AS(devices.run([](par::LocalDevice& d) {
    if (d.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return;
    }
    d.barrier();
  }),
                  par::aborted_error);
}

TEST_CASE("the raw collectives check that the devices agree", "[parallel][abort]") {
  par::LocalDevices devices(2);
  const auto messages = devices.run([](par::LocalDevice& d) {
    std::vector<float> v(static_cast<std::size_t>(3 + d.rank()), 1.0f);
    try {
      d.allreduce_sum(std::span<float>(v));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  });
  for (const auto& m : messages)
    CHECK_THAT(m, Catch::Contains("the devices called different collectives"));
}

TEST_CASE("run is not reentrant", "[parallel][abort]") {
  par::LocalDevices devices(2);
  CHECK_THROWS_AS(devices.run([&](par::LocalDevice&) { devices.run([](par::LocalDevice&) {}); }),
                  std::logic_error);
}

TEST_CASE("LocalDevices whose threads the system refuses: a thread_error, no hang",
          "[parallel][abort][errors]") {
  // std::thread fails as the system makes it fail (std::system_error, EAGAIN) at thread k; the
  // real limits are exercised by parallel_thread_limit_* (tests/parallel.cmake).
  for (const int k : {0, 1, 3}) {
    INFO("thread " << k << " refused");
    try {
      par::LocalDevices devices(4, 1, par::detail::fail_thread_start{k});
      FAIL("no exception");
    } catch (const par::thread_error& e) {
      const grove::error& as_grove = e;
      const std::system_error& as_system = e;
      CHECK(as_system.code() == std::errc::resource_unavailable_try_again);
      CHECK_THAT(as_grove.what(),
                 Catch::StartsWith("grove::parallel::LocalDevices: 4 devices need 4 threads, and "
                                   "the operating system refused to start more than " +
                                   std::to_string(k) +
                                   " (the limit on a user's processes and "
                                   "threads, RLIMIT_NPROC or `ulimit -u`, is "));
      CHECK_THAT(e.what(), Catch::Contains("RLIMIT_AS or `ulimit -v`, is "));
      CHECK_THAT(e.what(),
                 Catch::EndsWith(
                     "ask for fewer devices or raise the limit: " +
                     std::make_error_code(std::errc::resource_unavailable_try_again).message()));
    }
  }
  CHECK_THROWS_WITH(par::LocalDevices(1, 2, par::detail::fail_thread_start{0}),
                    Catch::StartsWith("grove::parallel::LocalDevices: 1 device needs 1 thread, "));
  // Devices started afterwards work.
  par::LocalDevices devices(3);
  const auto sums = devices.run([](par::LocalDevice& d) { return par::psum(1.0, d); });
  for (double s : sums) CHECK(s == 3.0);
}

TEST_CASE("psum of signed integers wraps around modulo 2^bits, as JAX's does",
          "[parallel][integers]") {
  // (Added as the unsigned type: UBSan, in the sanitized build, finds no signed overflow.)
  using Ints = std::tuple<std::int32_t, std::int64_t, std::int8_t, Eigen::Array<std::int32_t, 3, 1>,
                          std::int16_t>;
  for (const int n : {2, 3}) {
    INFO(n << " devices");
    par::LocalDevices devices(n);
    const auto sums = devices.run([](par::LocalDevice& d) {
      const bool first = d.rank() == 0;
      Ints mine{first ? INT32_MAX : 1, first ? INT64_MAX : 1, std::int8_t(first ? 127 : 1),
                Eigen::Array<std::int32_t, 3, 1>(first ? INT32_MIN : -1, 5, -7),
                std::int16_t(first ? -32768 : -1)};
      return par::psum(mine, d);
    });
    const int others = n - 1;
    for (const Ints& s : sums) {
      CHECK(std::get<0>(s) == INT32_MIN + (others - 1));
      CHECK(std::get<1>(s) == INT64_MIN + (others - 1));
      CHECK(std::get<2>(s) == -128 + (others - 1));
      CHECK(std::get<3>(s)(0) == INT32_MAX - (others - 1));
      CHECK(std::get<3>(s)(1) == 5 * n);
      CHECK(std::get<3>(s)(2) == -7 * n);
      CHECK(std::get<4>(s) == 32767 - (others - 1));
    }
  }
}
