// Helpers shared by grove::parallel's tests (LocalDevices and MPI).
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <grove/nn.hpp>
#include <grove/parallel.hpp>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace par_test {

namespace nn = grove::nn;
namespace gr = grove::random;

using Net = std::vector<nn::Dense<float>>;

// A small training problem: a [20, 32, 32, 7] network and a batch of `batch` examples.
struct Problem {
  Net params;
  Eigen::MatrixXf X;
  Eigen::VectorXi y;
};

inline Problem problem(Eigen::Index batch) {
  const auto [init, data] = gr::split(gr::key(42));
  return {nn::init_network_params({20, 32, 32, 7}, init, nn::lecun_normal<float>),
          gr::normal<float>(data, 20, batch), gr::randint(gr::fold_in(data, 1), batch, 0, 7)};
}

// A tree with leaves of three element types, a dict, a None, an engaged optional, a row-major
// matrix and a scalar: (dict of double arrays, float, [float matrices], int64, None, optional).
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Mixed = std::tuple<std::map<std::string, Eigen::ArrayXd>, float, std::vector<Eigen::MatrixXf>,
                         std::int64_t, std::monostate, std::optional<RowMajor>>;

// Small integers (as floats): their sums are exact in any order, so trees reduced by any
// algorithm compare bit for bit with the sums the tests compute.
template <class M>
M integers(const gr::Key& key, Eigen::Index rows, Eigen::Index cols) {
  const Eigen::MatrixXi v = gr::randint(key, rows, cols, -50, 50);
  return v.cast<typename M::Scalar>();
}

inline Mixed make_mixed(int rank) {
  const auto k = gr::fold_in(gr::key(7), static_cast<std::uint32_t>(rank));
  Mixed m;
  auto& [dict, scalar, mats, count, none, opt] = m;
  (void)none;
  dict["alpha"] = integers<Eigen::MatrixXd>(gr::fold_in(k, 1), 5, 1).array();
  dict["beta"] = integers<Eigen::MatrixXd>(gr::fold_in(k, 2), 3, 1).array();
  scalar = static_cast<float>(rank + 1) * 1.5f;
  mats = {integers<Eigen::MatrixXf>(gr::fold_in(k, 3), 3, 4),
          integers<Eigen::MatrixXf>(gr::fold_in(k, 4), 2, 2)};
  count = 10 * rank + 1;
  opt = integers<RowMajor>(gr::fold_in(k, 5), 2, 3);
  return m;
}

inline Net make_net(int rank, std::vector<Eigen::Index> sizes = {6, 5, 4}) {
  Net net = nn::init_network_params<float>(sizes, gr::fold_in(gr::key(3), rank), 1.0f);
  for (auto& layer : net) {  // integers, so that sums are exact
    layer.w = layer.w.array().round();
    layer.b = (layer.b * 4).array().round();
  }
  return net;
}

// Bit-for-bit equality of two trees of the same structure (shapes included).
template <class A, class B>
bool same_bits(const A& a, const B& b) {
  bool same = true;
  grove::tree_for_each(
      [&](const auto& x, const auto& y) {
        using X = std::remove_cvref_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<X>) {
          same = same && x == y;
        } else if constexpr (requires { x.array(); }) {
          same = same && x.rows() == y.rows() && x.cols() == y.cols() &&
                 (x.array() == y.array()).all();
        } else {  // a value leaf (a random::Key)
          same = same && x == y;
        }
      },
      a, b);
  return same;
}

// Applies f(x_0, x_1, ...) leaf by leaf over the trees in `trees`, in order: the reference for
// psum / pmean, computed the way the tests expect (rank order).
template <class Tree, class F>
Tree combine(const std::vector<Tree>& trees, F f) {
  Tree out = trees.front();
  for (std::size_t r = 1; r < trees.size(); ++r) {
    grove::tree_for_each([&](auto& acc, const auto& x) { acc = f(acc, x); }, out, trees[r]);
  }
  return out;
}

// The single-process reference: `steps` steps of `opt` on the whole batch from p.params, with
// value_and_grad and the optimizer's own step; the parameters after them and each step's loss.
template <class Opt>
std::pair<Net, std::vector<float>> single_process_steps(const Problem& p, const Opt& opt,
                                                        int steps) {
  Net single = p.params;
  auto state = opt.init(single);
  std::vector<float> losses;
  for (int s = 0; s < steps; ++s) {
    auto [loss, grads] = nn::value_and_grad(single, p.X, p.y);
    opt.step(single, grads, state);
    losses.push_back(loss);
  }
  return {single, losses};
}

// The largest relative difference, leaf by leaf (norms): |a - b| / |b|; infinity when a leaf
// holds a NaN (which std::max would pass over).
inline double max_relative(const Net& a, const Net& b) {
  double worst = 0;
  grove::tree_for_each(
      [&](const auto& x, const auto& y) {
        const double d = (x - y).norm(), n = y.norm();
        const double r = n > 0 ? d / n : d;
        worst = std::isnan(r) ? std::numeric_limits<double>::infinity() : std::max(worst, r);
      },
      a, b);
  return worst;
}

}  // namespace par_test
