#include <grove/nn.hpp>
#include <grove/parallel.hpp>
#include <grove/parallel/train.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

namespace nn = grove::nn;
namespace gr = grove::random;
namespace par = grove::parallel;

int main() {
  // Two devices: threads of this process. run(f) calls f(device) on each (JAX's pmap).
  par::LocalDevices devices(2);

  // Collectives on whole trees: every device gets the same result.
  devices.run([](par::LocalDevice& dev) {
    const std::map<std::string, Eigen::VectorXf> tree{
        {"a", Eigen::VectorXf::Constant(3, dev.rank() + 1.0f)}, {"b", Eigen::VectorXf::Ones(2)}};
    const auto total = par::psum(tree, dev);          // lax.psum
    const auto mean = par::pmean(tree, dev);          // lax.pmean
    const auto from1 = par::broadcast(tree, dev, 1);  // device 1's tree on every device
    if (dev.rank() == 0)
      std::printf("psum a = %g, pmean a = %g, broadcast a = %g\n", total.at("a")(0),
                  mean.at("a")(0), from1.at("a")(0));
  });

  // Data-parallel training: each device takes half of the batch, one allreduce averages the
  // gradients, every device applies the same Adam update.
  const auto [init_key, data_key] = gr::split(gr::key(0));
  const auto start =
      nn::init_network_params<float>({784, 512, 512, 10}, init_key, nn::lecun_normal<float>);
  const Eigen::MatrixXf X = gr::uniform<float>(data_key, 784, 256);
  const Eigen::VectorXi y = gr::randint(gr::fold_in(data_key, 1), 256, 0, 10);
  const auto opt = nn::adam(1e-3);
  const auto results = devices.run([&](par::LocalDevice& dev) {
    auto params = start;
    par::broadcast_inplace(params, dev, 0);  // replicas start from device 0's parameters
    auto state = opt.init(params);
    par::StepWorkspace<std::vector<nn::Dense<float>>> ws;
    float loss = 0;
    for (int step = 0; step < 10; ++step) loss = par::train_step(params, X, y, opt, state, dev, ws);
    return std::pair{loss, par::in_sync(params, dev)};
  });
  std::printf("2 devices: loss %.4f at step 10, replicas bit-identical: %d\n", results[0].first,
              results[0].second);

  // The same 10 steps in one process, on the whole batch.
  auto params = start;
  auto state = opt.init(params);
  float loss = 0;
  for (int step = 0; step < 10; ++step) {
    auto [l, grads] = nn::value_and_grad(params, X, y);
    opt.step(params, grads, state);
    loss = l;
  }
  std::printf("1 process: loss %.4f at step 10\n", loss);

  // Trees that differ across devices: the same error on every device, instead of a hang.
  try {
    devices.run([](par::LocalDevice& dev) {
      std::vector<Eigen::VectorXf> tree{Eigen::VectorXf::Ones(dev.rank() == 0 ? 3 : 4)};
      par::psum_inplace(tree, dev);
    });
  } catch (const grove::tree_error& e) {
    std::printf("%s\n", e.what());
  }
}
