// Prints grove::optim's parameter trajectories for tests/optim_torch.py, which runs
// torch.optim's implementations of the same formulas on the same start and gradients and
// compares. The parameters are one double vector; the gradient at each step is a fixed linear
// function of the parameters, g = a * p + c (elementwise), so that both sides compute exactly the
// same gradients from their own parameters.
//
// Output: for each optimizer, a line `name`, then one line of the parameters after each step.
#include <Eigen/Core>
#include <cstdio>
#include <grove/optim.hpp>
#include <string>
#include <vector>

namespace optim = grove::optim;
using Vec = Eigen::VectorXd;

namespace {
constexpr int n = 7, steps = 6;

Vec start() {
  Vec p(n);
  for (int i = 0; i < n; ++i) p[i] = 0.3 * (i - 3) + 0.05 * i * i;
  return p;
}
Vec grad(const Vec& p) {
  Vec g(n);
  for (int i = 0; i < n; ++i) g[i] = (0.5 + 0.25 * i) * p[i] + 0.1 * (i % 3 - 1);
  return g;
}

template <class Tx>
void run(const char* name, const Tx& tx) {
  std::printf("%s\n", name);
  std::vector<Vec> params{start()};  // a pytree: a list with one leaf
  auto state = tx.init(params);
  for (int t = 0; t < steps; ++t) {
    const std::vector<Vec> g{grad(params[0])};
    tx.step(params, g, state);
    for (int i = 0; i < n; ++i) std::printf("%s%.17g", i ? " " : "", params[0][i]);
    std::printf("\n");
  }
}
}  // namespace

int main() {
  // torch.optim.AdamW(lr=0.01, betas=(0.9, 0.99), eps=1e-6, weight_decay=0.1)
  run("adamw", optim::adamw(0.01, 0.9, 0.99, 1e-6, 0.0, 0.1));
  // torch.optim.RMSprop(lr=0.01, alpha=0.9, eps=0): optax adds eps inside the root, torch
  // outside; with eps = 0 the formulas are the same.
  run("rmsprop", optim::rmsprop(0.01, 0.9, 0.0));
  // torch.optim.Adagrad(lr=0.1, initial_accumulator_value=0.1, eps=0) (same remark on eps).
  run("adagrad", optim::adagrad(0.1, 0.1, 0.0));
  // torch.optim.SGD(lr=0.05, momentum=0.9, nesterov=True)
  run("sgd_nesterov", optim::sgd(0.05, 0.9, true));
  // torch.optim.SGD(lr=0.05, momentum=0.8)
  run("sgd_momentum", optim::sgd(0.05, 0.8));
  return 0;
}
