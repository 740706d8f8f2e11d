// grove::data: datasets, random splits, epochs of batches (order, remainder, resume, shards,
// prefetch, transforms, no allocation per batch), the transforms.
#include <catch2/catch.hpp>

#include <grove/data.hpp>
#include <grove/tree.hpp>
#include <set>
#include <stdexcept>
#include <vector>

#include "alloc_counter.hpp"

namespace data = grove::data;
namespace gr = grove::random;
using Catch::Matchers::Contains;

namespace {

// n examples whose every input row is the example's number (plus the row), so that a batch's
// columns say which examples it holds; labels are the example's number too.
data::Dataset<float> numbered(Eigen::Index n, Eigen::Index features = 3) {
  data::Dataset<float> d;
  d.inputs.resize(features, n);
  d.targets.resize(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index f = 0; f < features; ++f) d.inputs(f, j) = static_cast<float>(j * 10 + f);
    d.targets(j) = static_cast<int>(j);
  }
  return d;
}

// The example numbers of every batch of an epoch, checking that inputs and targets agree.
template <class T, class Y>
std::vector<std::vector<int>> visited(data::Batches<T, Y>& epoch) {
  std::vector<std::vector<int>> out;
  Eigen::Index previous = -1;
  for (const auto& b : epoch) {
    std::vector<int> ids;
    for (Eigen::Index j = 0; j < b.inputs.cols(); ++j) {
      const int id = b.targets(j);
      CHECK(b.inputs(0, j) == static_cast<float>(id * 10));
      CHECK(b.inputs(2, j) == static_cast<float>(id * 10 + 2));
      ids.push_back(id);
    }
    if (!out.empty()) CHECK(b.index == previous + 1);
    previous = b.index;
    out.push_back(ids);
  }
  return out;
}

}  // namespace

TEST_CASE("data: an epoch visits random::permutation(key, n) in batches", "[data][batches]") {
  const auto d = numbered(10);
  const auto key = data::epoch_key(gr::key(7), 3);
  CHECK(key == gr::fold_in(gr::key(7), 3));
  const auto order = gr::permutation(key, 10);

  auto epoch = data::batches(d, 4, key);
  CHECK(epoch.count() == 3);
  const auto seen = visited(epoch);
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].size() == 4);
  CHECK(seen[2].size() == 2);  // the short last batch
  std::vector<int> flat;
  for (const auto& b : seen) flat.insert(flat.end(), b.begin(), b.end());
  REQUIRE(flat.size() == 10);
  for (int i = 0; i < 10; ++i) CHECK(flat[static_cast<std::size_t>(i)] == order(i));
  // JAX's own numbers (jax 0.10.2):
  //   jax.random.permutation(jax.random.fold_in(jax.random.key(7), 3), 10)
  CHECK(flat == std::vector<int>{2, 0, 1, 4, 7, 9, 3, 8, 5, 6});

  // drop_remainder: the short batch goes; a batch as large as the dataset is one batch.
  auto dropped = data::batches(d, 4, key, {.drop_remainder = true});
  CHECK(dropped.count() == 2);
  CHECK(visited(dropped).size() == 2);
  auto whole = data::batches(d, 10, key);
  CHECK(visited(whole).size() == 1);

  // Another epoch's key, another order; the same key, the same order (begin() restarts).
  auto other = data::batches(d, 4, data::epoch_key(gr::key(7), 4));
  CHECK(visited(other) != seen);
  CHECK(visited(epoch) == seen);
}

TEST_CASE("data: label and matrix targets travel with their examples", "[data][batches]") {
  data::Dataset<double, Eigen::MatrixXd> d;
  d.inputs = Eigen::MatrixXd::Random(2, 7);
  d.targets = Eigen::MatrixXd::Random(3, 7);
  const auto key = gr::key(1);
  const auto order = gr::permutation(key, 7);
  Eigen::Index k = 0;
  for (const auto& b : data::batches(d, 3, key)) {
    REQUIRE(b.targets.rows() == 3);
    for (Eigen::Index j = 0; j < b.inputs.cols(); ++j, ++k) {
      CHECK(b.inputs.col(j) == d.inputs.col(order(k)));
      CHECK(b.targets.col(j) == d.targets.col(order(k)));
    }
  }
  CHECK(k == 7);
}

TEST_CASE("data: a resumed epoch gives exactly the batches that were left", "[data][batches]") {
  const auto d = numbered(23);
  const auto key = gr::key(11);
  auto full = data::batches(d, 5, key);
  const auto all = visited(full);
  REQUIRE(all.size() == 5);

  // Stop after two batches, keep the position in a pytree, start again from it.
  data::position saved;
  for (const auto& b : data::batches(d, 5, key)) {
    saved = {3, b.index + 1};
    if (b.index == 1) break;
  }
  CHECK(saved == data::position{3, 2});
  CHECK(grove::tree_leaves(saved).size() == 2);
  auto rest = data::batches(d, 5, key, {.start = saved.batch});
  const auto tail = visited(rest);
  REQUIRE(tail.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(tail[i] == all[i + 2]);
  // The end of an epoch is a valid position too: an empty rest.
  auto none = data::batches(d, 5, key, {.start = 5});
  CHECK(visited(none).empty());
}

TEST_CASE("data: shards split every batch as parallel::shard does", "[data][batches][shard]") {
  const auto d = numbered(23);
  const auto key = gr::key(5);
  auto full = data::batches(d, 10, key);
  const auto all = visited(full);
  // 10 examples over 3 devices: 4, 3, 3; the last batch of 3: 1, 1, 1.
  const std::vector<std::vector<Eigen::Index>> sizes = {{4, 3, 3}, {4, 3, 3}, {1, 1, 1}};
  std::vector<std::vector<int>> joined(all.size());
  for (int s = 0; s < 3; ++s) {
    std::size_t i = 0;
    for (const auto& b : data::batches(d, 10, key, {.shard_index = s, .shard_count = 3})) {
      CHECK(b.inputs.cols() == sizes[i][static_cast<std::size_t>(s)]);
      CHECK(b.size == static_cast<Eigen::Index>(all[i].size()));
      CHECK(b.offset == static_cast<Eigen::Index>(joined[i].size()));
      for (Eigen::Index j = 0; j < b.inputs.cols(); ++j) joined[i].push_back(b.targets(j));
      ++i;
    }
  }
  CHECK(joined == all);
  // More devices than examples in a batch: some shards are empty, none is lost.
  std::set<int> seen;
  for (int s = 0; s < 4; ++s)
    for (const auto& b : data::batches(d, 2, key, {.shard_index = s, .shard_count = 4}))
      for (Eigen::Index j = 0; j < b.targets.size(); ++j) CHECK(seen.insert(b.targets(j)).second);
  CHECK(seen.size() == 23);
}

TEST_CASE("data: prefetching gives the same batches, and stops cleanly",
          "[data][batches][prefetch]") {
  const auto d = numbered(101, 5);
  const auto key = gr::key(3);
  auto plain = data::batches(d, 8, key);
  const auto expected = visited(plain);
  for (int round = 0; round < 20; ++round) {
    auto ahead = data::batches(d, 8, key, {.prefetch = true});
    CHECK(visited(ahead) == expected);
  }
  // Leaving the loop early, or never starting it, joins the worker (no hang, no leak).
  for (int round = 0; round < 20; ++round) {
    auto ahead = data::batches(d, 8, key, {.prefetch = true});
    for (const auto& b : ahead)
      if (b.index == round % 5) break;
  }
  { auto unused = data::batches(d, 8, key, {.prefetch = true}); }
  // Resumed and sharded, with prefetch.
  auto rest = data::batches(d, 8, key, {.start = 10, .prefetch = true});
  const auto tail = visited(rest);
  REQUIRE(tail.size() == 3);
  CHECK(tail[0] == expected[10]);
}

TEST_CASE("data: a transform runs on every batch, and its error reaches the loop",
          "[data][batches][prefetch]") {
  const auto d = numbered(20, 3);
  const auto key = gr::key(9);
  for (const bool prefetch : {false, true}) {
    int calls = 0;
    auto doubled = data::batches(d, 6, key, {.prefetch = prefetch},
                                 [&](Eigen::Ref<Eigen::MatrixXf> x, Eigen::Ref<Eigen::VectorXi> y) {
                                   ++calls;
                                   x *= 2;
                                   y.array() += 1000;
                                 });
    for (const auto& b : doubled)
      for (Eigen::Index j = 0; j < b.inputs.cols(); ++j)
        CHECK(b.inputs(1, j) == 2 * static_cast<float>((b.targets(j) - 1000) * 10 + 1));
    CHECK(calls == 4);
    CHECK(d.inputs(1, 1) == 11);  // the dataset itself is untouched

    auto failing = data::batches(d, 6, key, {.prefetch = prefetch},
                                 [](Eigen::Ref<Eigen::MatrixXf>, Eigen::Ref<Eigen::VectorXi> y) {
                                   if ((y.array() == 7).any()) throw std::runtime_error("seven");
                                 });
    CHECK_THROWS_WITH(visited(failing), "seven");
  }
}

TEST_CASE("data: batches allocate nothing after the first", "[data][batches][alloc]") {
  const auto d = numbered(64, 4);
  const auto key = gr::key(2);
  for (const bool prefetch : {false, true}) {
    auto epoch = data::batches(d, 8, key, {.prefetch = prefetch});
    auto it = epoch.begin();
    float sum = 0;
    const long allocations = allocations_during([&] {
      for (; it != epoch.end(); ++it) sum += it->inputs.sum();
    });
    CHECK(allocations == 0);
    CHECK(sum > 0);
  }
}

TEST_CASE("data: bad batch requests are refused with the reason", "[data][batches][errors]") {
  const auto d = numbered(10);
  const auto key = gr::key(0);
  CHECK_THROWS_MATCHES(data::batches(d, 0, key), grove::argument_error,
                       Catch::Matchers::Message("grove::data::batches: a batch size of 0 does "
                                                "not fit a dataset of 10 examples (it must be "
                                                "between 1 and the dataset's size)"));
  CHECK_THROWS_AS(data::batches(d, 11, key), grove::argument_error);
  const data::Dataset<float> empty;
  CHECK_THROWS_WITH(data::batches(empty, 1, key), Contains("no examples"));
  CHECK_THROWS_WITH(data::batches(d, 3, key, {.start = 5}),
                    Contains("start 5 is outside the epoch's 4 batches"));
  CHECK_THROWS_WITH(data::batches(d, 3, key, {.shard_index = 2, .shard_count = 2}),
                    Contains("shard 2 of 2 is no shard"));
  CHECK_THROWS_AS(data::batches(d, 3, key, {.shard_count = 0}), grove::argument_error);
  auto bad = d;
  bad.targets.resize(9);
  CHECK_THROWS_MATCHES(data::batches(bad, 3, key), grove::shape_error,
                       Catch::Matchers::Message("grove::data::batches: the dataset's inputs hold "
                                                "10 examples (columns of a 3 x 10 matrix) but its "
                                                "targets 9"));
  CHECK_THROWS_WITH(data::epoch_key(key, -1), Contains("epoch -1 is outside [0, 2^32)"));
}

TEST_CASE("data: random_split and subset", "[data][dataset]") {
  const auto d = numbered(12);
  const auto key = gr::key(4);
  const auto [first, second] = data::random_split(d, 9, key);
  const auto order = gr::permutation(key, 12);
  REQUIRE(first.size() == 9);
  REQUIRE(second.size() == 3);
  for (Eigen::Index j = 0; j < 9; ++j) CHECK(first.targets(j) == order(j));
  for (Eigen::Index j = 0; j < 3; ++j) {
    CHECK(second.targets(j) == order(9 + j));
    CHECK(second.inputs.col(j) == d.inputs.col(order(9 + j)));
  }
  CHECK(data::random_split(d, 0, key).first.size() == 0);
  CHECK(data::random_split(d, 12, key).second.size() == 0);
  CHECK_THROWS_WITH(data::random_split(d, 13, key),
                    Contains("a first part of 13 examples does not fit a dataset of 12"));

  const auto picked = data::subset(d, std::vector<int>{5, 5, 0});
  CHECK(picked.targets == Eigen::Vector3i(5, 5, 0));
  CHECK(picked.inputs.col(1) == d.inputs.col(5));
  CHECK_THROWS_WITH(data::subset(d, std::vector<long>{1, 12}),
                    Contains("index 12 (position 1) is outside the dataset's 12 examples"));
}

TEST_CASE("data: standardisation fitted on one set, applied to others", "[data][transforms]") {
  Eigen::MatrixXd train(3, 4);
  train << 1, 2, 3, 4,  //
      10, 10, 10, 10,   // a constant feature
      -1, 1, -1, 1;
  const auto s = data::fit_standardizer(train);
  // Scalar reference: population statistics, row by row.
  for (Eigen::Index f = 0; f < 3; ++f) {
    double m = 0, v = 0;
    for (Eigen::Index j = 0; j < 4; ++j) m += train(f, j) / 4;
    for (Eigen::Index j = 0; j < 4; ++j) v += (train(f, j) - m) * (train(f, j) - m) / 4;
    CHECK(s.mean(f) == Approx(m));
    CHECK(s.scale(f) == Approx(v > 0 ? std::sqrt(v) : 1.0));
  }
  Eigen::MatrixXd x = train;
  s.apply_inplace(x);
  CHECK(x.row(0).mean() == Approx(0).margin(1e-12));
  CHECK((x.row(0).array().square().mean()) == Approx(1));
  CHECK(x.row(1).isZero());
  Eigen::MatrixXd test(3, 1);
  test << 5, 11, 0;
  s.apply_inplace(test);
  CHECK(test(0, 0) == Approx((5 - 2.5) / std::sqrt(1.25)));
  CHECK(test(1, 0) == Approx(1));
  s.invert_inplace(test);
  CHECK(test(0, 0) == Approx(5));
  s.apply_inplace(x.leftCols(2));  // a block works too
  Eigen::MatrixXd wrong(2, 1);
  CHECK_THROWS_AS(s.apply_inplace(wrong), grove::shape_error);
  Eigen::MatrixXd nan = train;
  nan(2, 1) = std::nan("");
  CHECK_THROWS_WITH(data::fit_standardizer(nan), Contains("feature 2 has a NaN"));
  CHECK_THROWS_AS(data::fit_standardizer(Eigen::MatrixXd(3, 0)), grove::argument_error);
}

TEST_CASE("data: one_hot", "[data][transforms]") {
  const Eigen::VectorXi labels = Eigen::Vector3i(2, 0, 2);
  const Eigen::MatrixXf y = data::one_hot(labels, 3);
  Eigen::MatrixXf expected(3, 3);
  expected << 0, 1, 0, 0, 0, 0, 1, 0, 1;
  CHECK(y == expected);
  CHECK_THROWS_WITH(data::one_hot(labels, 2), Contains("label 2 of example 0 is outside [0, 2)"));
  CHECK_THROWS_AS(data::one_hot(labels, 0), grove::argument_error);
}

TEST_CASE("data: a large batch gathered by several threads holds the same columns",
          "[data][batches][threads]") {
  // 300 features x 128 examples per batch: above the size where the training threads share the
  // gathering (with OpenMP, as this suite is built).
  const auto d = numbered(1000, 300);
  const auto key = gr::key(8);
  const auto order = gr::permutation(key, 1000);
  Eigen::Index k = 0;
  for (const auto& b : data::batches(d, 128, key)) {
    for (Eigen::Index j = 0; j < b.inputs.cols(); ++j, ++k) {
      CHECK(b.targets(j) == order(k));
      CHECK(b.inputs.col(j) == d.inputs.col(order(k)));
    }
  }
  CHECK(k == 1000);
}
