// grove::optim's side of tests/oracle/optax_oracle.py: every transformation, optimizer, wrapper
// and schedule of grove/optim.hpp run on the start and gradients the script drew, each case
// twice: through update + apply_updates (its updates and parameters after each step) and through
// the fused step (its parameters after each step), with the state's counts after each step.
//
//   optax_driver GROUP DTYPE INPUT      GROUP: transforms, aliases, wrappers or schedules;
//                                       DTYPE: f4 or f8; INPUT: the script's records
//
// The parameters are the pytree ({'k': 4x3, 'q': 2x5}, v: 6, s: scalar): a dict of matrices, a
// vector and a scalar leaf, std::tuple<std::map<std::string, Matrix>, Vector, T> here. Records:
// CASE.u.LEAF (steps, ...) the updates of update(), CASE.pu.LEAF the parameters after
// apply_updates, CASE.ps.LEAF the parameters after step(), CASE.cu / CASE.cs (steps, n) the
// counts after each step of each path (int64). The hyperparameters here and in the script's
// table of the same case names must agree; the script checks that both list the same cases.
#include <Eigen/Core>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <grove/optim.hpp>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "oracle_io.hpp"

namespace {

namespace optim = grove::optim;

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic>;
template <class T>
using Vec = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using Params = std::tuple<std::map<std::string, Mat<T>>, Vec<T>, T>;

using Records = std::map<std::string, oracle::Record>;
using Counts = std::vector<std::int64_t>;

const oracle::Record& record(const Records& r, const std::string& name) {
  const auto it = r.find(name);
  if (it == r.end()) throw std::runtime_error("optax_driver: no record " + name);
  return it->second;
}

// Element `step` of a stacked record (steps, ...), or the whole record when stacked is false,
// as a row-major matrix of `rows` x `cols`.
template <class T>
Mat<T> slice(const oracle::Record& r, bool stacked, std::size_t step, Eigen::Index rows,
             Eigen::Index cols) {
  const std::vector<T> v = r.values<T>();
  const std::size_t n = static_cast<std::size_t>(rows * cols);
  const std::size_t at = stacked ? step * n : 0;
  if (at + n > v.size()) throw std::runtime_error("optax_driver: a record is too short");
  return Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      v.data() + at, rows, cols);
}

template <class T>
Params<T> read_params(const Records& r, const std::string& prefix, bool stacked, std::size_t step) {
  Params<T> p;
  std::get<0>(p)["k"] = slice<T>(record(r, prefix + "k"), stacked, step, 4, 3);
  std::get<0>(p)["q"] = slice<T>(record(r, prefix + "q"), stacked, step, 2, 5);
  std::get<1>(p) = slice<T>(record(r, prefix + "v"), stacked, step, 6, 1);
  std::get<2>(p) = slice<T>(record(r, prefix + "s"), stacked, step, 1, 1)(0, 0);
  return p;
}

template <class T>
std::vector<Params<T>> read_steps(const Records& r, const std::string& prefix) {
  const std::size_t steps = record(r, prefix + "s").count();
  std::vector<Params<T>> out;
  for (std::size_t i = 0; i < steps; ++i) out.push_back(read_params<T>(r, prefix, true, i));
  return out;
}

// One tree per step, stacked leaf by leaf into row-major arrays (steps, ...).
template <class T>
struct Trajectory {
  std::vector<T> k, q, v, s;
  std::size_t steps = 0;

  static void append(std::vector<T>& out, const Mat<T>& m) {
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) out.push_back(m(i, j));
  }
  void add(const Params<T>& p) {
    append(k, std::get<0>(p).at("k"));
    append(q, std::get<0>(p).at("q"));
    append(v, std::get<1>(p));
    s.push_back(std::get<2>(p));
    ++steps;
  }
  void emit(const std::string& prefix) const {
    oracle::emit(prefix + "k", k.data(), {steps, 4, 3});
    oracle::emit(prefix + "q", q.data(), {steps, 2, 5});
    oracle::emit(prefix + "v", v.data(), {steps, 6});
    oracle::emit(prefix + "s", s.data(), {steps});
  }
};

void emit_counts(const std::string& name, const std::vector<Counts>& per_step) {
  std::vector<std::int64_t> flat;
  for (const auto& c : per_step) flat.insert(flat.end(), c.begin(), c.end());
  const std::size_t n = per_step.empty() ? 0 : per_step.front().size();
  oracle::emit(name, flat.data(), {per_step.size(), n});
}

// No counts to compare (a stateless transformation, or one whose counts optax does not keep).
const auto no_counts = [](const auto&) { return Counts{}; };

// Runs `tx` from `p0` over `grads` both ways and emits the case's records.
template <class T, class Tx, class CountsOf>
void run_case(const std::string& name, const Tx& tx, const Params<T>& p0,
              const std::vector<Params<T>>& grads, CountsOf counts_of) {
  Trajectory<T> updates, via_update, via_step;
  std::vector<Counts> counts_update, counts_step;
  {
    Params<T> p = p0;
    auto state = tx.init(p);
    for (const auto& g : grads) {
      auto [u, next] = tx.update(g, state, p);
      updates.add(u);
      p = optim::apply_updates(p, u);
      state = std::move(next);
      via_update.add(p);
      counts_update.push_back(counts_of(state));
    }
  }
  {
    Params<T> p = p0;
    auto state = tx.init(p);
    for (const auto& g : grads) {
      tx.step(p, g, state);
      via_step.add(p);
      counts_step.push_back(counts_of(state));
    }
  }
  updates.emit(name + ".u.");
  via_update.emit(name + ".pu.");
  via_step.emit(name + ".ps.");
  emit_counts(name + ".cu", counts_update);
  emit_counts(name + ".cs", counts_step);
}

// The masks: a prefix of the parameters (the dict, the vector and the scalar as wholes), the full
// structure, and a callable that selects the matrices.
using PrefixMask = std::tuple<bool, bool, bool>;
using FullMask = std::tuple<std::map<std::string, bool>, bool, bool>;
const PrefixMask prefix_mask{true, false, true};
const FullMask full_mask{{{"k", true}, {"q", false}}, true, false};
const auto matrices_mask = [](const auto& params) {
  return grove::tree_map([](const auto& leaf) { return grove::shape(leaf).size() == 2; }, params);
};

// --- the groups ----------------------------------------------------------------------------------

template <class T>
void transforms(const Params<T>& p0, const std::vector<Params<T>>& g,
                const std::vector<Params<T>>& nan_g) {
  const auto count = [](const auto& s) { return Counts{s.count}; };
  run_case<T>("scale", optim::scale(-0.37), p0, g, no_counts);
  run_case<T>("scale_by_schedule",
              optim::scale_by_schedule(optim::polynomial_schedule(0.5, 0.01, 2.0, 40, 5)), p0, g,
              count);
  run_case<T>("scale_by_learning_rate", optim::scale_by_learning_rate(0.03), p0, g, no_counts);
  run_case<T>("scale_by_learning_rate_schedule_no_flip",
              optim::scale_by_learning_rate(optim::cosine_decay_schedule(0.2, 30, 0.1, 1.5), false),
              p0, g, count);
  run_case<T>("scale_by_adam", optim::scale_by_adam(0.8, 0.95, 1e-3, 1e-5), p0, g, count);
  run_case<T>("scale_by_adam_defaults", optim::scale_by_adam(), p0, g, count);
  run_case<T>("scale_by_rms", optim::scale_by_rms(0.7, 1e-4, 0.5), p0, g, no_counts);
  run_case<T>("scale_by_rms_defaults", optim::scale_by_rms(), p0, g, no_counts);
  run_case<T>("scale_by_rss", optim::scale_by_rss(0.3, 1e-4), p0, g, no_counts);
  run_case<T>("scale_by_rss_defaults", optim::scale_by_rss(), p0, g, no_counts);
  run_case<T>("scale_by_lion", optim::scale_by_lion(0.7, 0.95), p0, g, count);
  run_case<T>("scale_by_lion_defaults", optim::scale_by_lion(), p0, g, count);
  run_case<T>("trace", optim::trace(0.6), p0, g, no_counts);
  run_case<T>("trace_nesterov", optim::trace(0.6, true), p0, g, no_counts);
  run_case<T>("add_decayed_weights", optim::add_decayed_weights(0.07), p0, g, no_counts);
  run_case<T>("add_decayed_weights_defaults", optim::add_decayed_weights(), p0, g, no_counts);
  run_case<T>("add_decayed_weights_mask", optim::add_decayed_weights(0.07, prefix_mask), p0, g,
              no_counts);
  run_case<T>("clip", optim::clip(0.8), p0, g, no_counts);
  run_case<T>("clip_by_global_norm", optim::clip_by_global_norm(5.0), p0, g, no_counts);

  // The tree utilities: norms of every step's gradients, a constant tree, finiteness.
  std::vector<double> norms, squared;
  for (const auto& x : g) {
    norms.push_back(optim::global_norm(x));
    squared.push_back(optim::squared_global_norm(x));
  }
  oracle::emit("tree_utils.global_norm", norms);
  oracle::emit("tree_utils.squared_global_norm", squared);
  Trajectory<T> full, zeros;
  full.add(optim::tree_full_like(p0, 0.3));
  zeros.add(optim::tree_zeros_like(p0));
  full.emit("tree_utils.full_like.");
  zeros.emit("tree_utils.zeros_like.");
  std::vector<std::int64_t> finite;
  for (const auto& x : nan_g) finite.push_back(optim::tree_all_finite(x));
  oracle::emit("tree_utils.all_finite", finite);
}

template <class T>
void aliases(const Params<T>& p0, const std::vector<Params<T>>& g) {
  // optax's constant learning rate keeps no count; grove's does (docs/optim.md), and is not
  // compared. A schedule's count is.
  const auto lr_count = [](const auto& s) { return Counts{std::get<1>(s).count}; };
  const auto adam_count = [](const auto& s) { return Counts{std::get<0>(s).count}; };
  const auto adam_counts = [](const auto& s) {
    return Counts{std::get<0>(s).count, std::get<2>(s).count};
  };
  run_case<T>("sgd", optim::sgd(0.05), p0, g, no_counts);
  run_case<T>("sgd_momentum", optim::sgd(0.05, 0.85), p0, g, no_counts);
  run_case<T>("sgd_nesterov", optim::sgd(0.05, 0.85, true), p0, g, no_counts);
  run_case<T>("sgd_schedule",
              optim::sgd(optim::exponential_decay(0.1, 7.0, 0.6, 3, true, 0.02), 0.7), p0, g,
              lr_count);
  run_case<T>("adam", optim::adam(0.01, 0.85, 0.99, 1e-6, 1e-8), p0, g, adam_count);
  run_case<T>("adam_defaults", optim::adam(0.01), p0, g, adam_count);
  run_case<T>("adam_schedule",
              optim::adam(optim::warmup_cosine_decay_schedule(0.001, 0.02, 8, 45, 0.002, 1.3), 0.85,
                          0.99, 1e-6),
              p0, g, [](const auto& s) {
                return Counts{std::get<0>(s).count, std::get<1>(s).count};
              });
  run_case<T>("adamw", optim::adamw(0.01, 0.85, 0.99, 1e-6, 1e-8, 0.05), p0, g, adam_count);
  run_case<T>("adamw_defaults", optim::adamw(0.01), p0, g, adam_count);
  run_case<T>("adamw_mask", optim::adamw(0.01, 0.85, 0.99, 1e-6, 0.0, 0.05, full_mask), p0, g,
              adam_count);
  run_case<T>("adamw_mask_fn",
              optim::adamw(optim::linear_schedule(0.02, 0.002, 40, 5), 0.8, 0.97, 1e-7, 0.0, 0.1,
                           matrices_mask),
              p0, g, adam_counts);
  run_case<T>("rmsprop", optim::rmsprop(0.01, 0.8, 1e-5, 0.2), p0, g, no_counts);
  run_case<T>("rmsprop_defaults", optim::rmsprop(0.01), p0, g, no_counts);
  run_case<T>("adagrad", optim::adagrad(0.1, 0.2, 1e-5), p0, g, no_counts);
  run_case<T>("adagrad_defaults", optim::adagrad(0.1), p0, g, no_counts);
  run_case<T>("lion", optim::lion(0.003, 0.8, 0.95, 0.02), p0, g, adam_count);
  run_case<T>("lion_defaults", optim::lion(0.003), p0, g, adam_count);
  run_case<T>("lion_schedule", optim::lion(optim::piecewise_constant_schedule(0.01, {{20, 0.3}})),
              p0, g, adam_counts);
}

template <class T>
void wrappers(const Params<T>& p0, const std::vector<Params<T>>& g,
              const std::vector<Params<T>>& nan_g) {
  run_case<T>("chain", optim::chain(optim::clip(1.0), optim::trace(0.5, true), optim::scale(-0.1)),
              p0, g, no_counts);
  // The chain: clipping, then AdamW with a schedule and a weight-decay mask. The cosine
  // ends after the 50 steps: at its tail optax's float32 schedule (JAX's default types) loses
  // digits in 1 + cos(x) near x = pi (1.3e-6 at 6 steps before the end), where grove's, in
  // double, does not; the tails are compared in double by oracle_optax_schedules.
  run_case<T>(
      "chain_clip_adamw",
      optim::chain(optim::clip_by_global_norm(5.0),
                   optim::adamw(optim::warmup_cosine_decay_schedule(0.0, 0.05, 5, 80, 0.001), 0.8,
                                0.97, 1e-7, 0.0, 0.03, full_mask)),
      p0, g, [](const auto& s) {
        const auto& inner = std::get<1>(s);
        return Counts{std::get<0>(inner).count, std::get<2>(inner).count};
      });
  // Not fused: clip_by_global_norm after another transformation clips the adam updates.
  run_case<T>("chain_unfused",
              optim::chain(optim::scale_by_adam(0.85, 0.98), optim::clip_by_global_norm(3.0),
                           optim::scale(-0.02)),
              p0, g, [](const auto& s) { return Counts{std::get<0>(s).count}; });
  run_case<T>(
      "masked_prefix",
      optim::masked(optim::chain(optim::scale_by_adam(0.8, 0.9), optim::scale(-0.05)), prefix_mask),
      p0, g, [](const auto& s) { return Counts{std::get<0>(s.inner_state).count}; });
  run_case<T>("masked_full", optim::masked(optim::trace(0.5, true), full_mask), p0, g, no_counts);
  run_case<T>("masked_fn", optim::masked(optim::scale_by_rms(0.8, 1e-6), matrices_mask), p0, g,
              no_counts);

  const auto multi = [](const auto& tx, auto inner_counts) {
    return [inner_counts](const auto& s) {
      Counts c{s.mini_step, s.gradient_step,
               std::remove_cvref_t<decltype(tx)>::has_updated(s) ? 1 : 0};
      for (auto x : inner_counts(s.inner_opt_state)) c.push_back(x);
      return c;
    };
  };
  const auto ms_adam = optim::multi_steps(optim::adam(0.02, 0.8, 0.95, 1e-6), 4);
  run_case<T>("multi_steps", ms_adam, p0, g,
              multi(ms_adam, [](const auto& s) { return Counts{std::get<0>(s).count}; }));
  const auto ms_sgd =
      optim::multi_steps(optim::sgd(optim::linear_schedule(0.1, 0.01, 10, 2), 0.9), 3);
  run_case<T>("multi_steps_schedule", ms_sgd, p0, g,
              multi(ms_sgd, [](const auto& s) { return Counts{std::get<1>(s).count}; }));
  const auto ms_chain =
      optim::multi_steps(optim::chain(optim::clip_by_global_norm(4.0),
                                      optim::adamw(0.01, 0.85, 0.99, 1e-6, 0.0, 0.05, prefix_mask)),
                         5);
  run_case<T>("multi_steps_chain", ms_chain, p0, g, multi(ms_chain, [](const auto& s) {
                return Counts{std::get<0>(std::get<1>(s)).count};
              }));

  const auto finite_counts = [](auto inner_counts) {
    return [inner_counts](const auto& s) {
      Counts c{s.notfinite_count, s.last_finite ? 1 : 0, s.total_notfinite};
      for (auto x : inner_counts(s.inner_state)) c.push_back(x);
      return c;
    };
  };
  run_case<T>("apply_if_finite", optim::apply_if_finite(optim::adam(0.01, 0.85, 0.99), 3), p0,
              nan_g, finite_counts([](const auto& s) { return Counts{std::get<0>(s).count}; }));
  // Gives up after one non-finite step in a row: the second of a run is applied.
  run_case<T>("apply_if_finite_gives_up", optim::apply_if_finite(optim::sgd(0.05, 0.9), 1), p0,
              nan_g, finite_counts(no_counts));
  const auto ms_in = optim::multi_steps(optim::adamw(0.01, 0.8, 0.95, 1e-6, 0.0, 0.02), 3);
  // Skips every run of non-finite steps (the longest is 4): optax's MultiSteps, once a NaN is in
  // its inner state, returns NaN (0 * NaN) on the mini steps that do not emit, where grove returns
  // zeros as both document.
  run_case<T>(
      "apply_if_finite_multi_steps", optim::apply_if_finite(ms_in, 4), p0, nan_g,
      finite_counts(multi(ms_in, [](const auto& s) { return Counts{std::get<0>(s).count}; })));
}

// Every schedule at the counts the script chose, in double (grove's schedules are doubles).
void schedules(const Records& r) {
  const std::vector<std::int64_t> counts = record(r, "counts").values<std::int64_t>();
  const auto emit = [&](const std::string& name, const optim::Schedule& s) {
    std::vector<double> values;
    for (auto c : counts) values.push_back(s(c));
    oracle::emit(name, values);
  };
  emit("constant", optim::constant_schedule(0.37));
  emit("linear", optim::linear_schedule(0.3, 0.02, 40));
  emit("linear_begin", optim::linear_schedule(0.02, 0.3, 25, 10));
  emit("polynomial", optim::polynomial_schedule(0.5, 0.01, 2.0, 40, 5));
  emit("polynomial_sqrt", optim::polynomial_schedule(1.0, 0.1, 0.5, 60));
  emit("exponential", optim::exponential_decay(0.5, 7.0, 0.6));
  emit("exponential_staircase_begin_end", optim::exponential_decay(0.1, 7.0, 0.6, 3, true, 0.02));
  emit("exponential_growth_end", optim::exponential_decay(0.01, 5.0, 1.3, 0, false, 0.2));
  emit("exponential_fractional_steps", optim::exponential_decay(0.5, 2.5, 0.9));
  emit("cosine", optim::cosine_decay_schedule(0.2, 30));
  emit("cosine_alpha_exponent", optim::cosine_decay_schedule(0.2, 30, 0.1, 1.5));
  emit("warmup_cosine", optim::warmup_cosine_decay_schedule(0.001, 0.02, 8, 45, 0.002, 1.3));
  emit("warmup_cosine_defaults", optim::warmup_cosine_decay_schedule(0.0, 0.05, 5, 50));
  emit("warmup_cosine_no_warmup", optim::warmup_cosine_decay_schedule(0.0, 0.05, 0, 50, 0.001));
  emit("piecewise", optim::piecewise_constant_schedule(0.1, {{30, 0.5}, {10, 0.2}, {70, 3.0}}));
  emit("piecewise_empty", optim::piecewise_constant_schedule(0.1));
  emit("join", optim::join_schedules({optim::linear_schedule(0.0, 0.1, 10), 0.1,
                                      optim::cosine_decay_schedule(0.1, 40, 0.05)},
                                     {10, 25}));
}

template <class T>
void run_group(const std::string& group, const Records& r) {
  const Params<T> p0 = read_params<T>(r, "p0.", false, 0);
  const auto g = read_steps<T>(r, "g.");
  const auto nan_g = read_steps<T>(r, "nan.");
  if (group == "transforms")
    transforms<T>(p0, g, nan_g);
  else if (group == "aliases")
    aliases<T>(p0, g);
  else if (group == "wrappers")
    wrappers<T>(p0, g, nan_g);
  else
    throw std::runtime_error("optax_driver: unknown group " + group);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: optax_driver GROUP DTYPE INPUT\n");
    return 2;
  }
  try {
    const std::string group = argv[1], dtype = argv[2];
    const Records r = oracle::read_records(argv[3]);
    if (group == "schedules")
      schedules(r);
    else if (dtype == "f4")
      run_group<float>(group, r);
    else if (dtype == "f8")
      run_group<double>(group, r);
    else
      throw std::runtime_error("optax_driver: unknown dtype " + dtype);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optax_driver: %s\n", e.what());
    return 1;
  }
  return 0;
}
