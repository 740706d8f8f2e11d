// tabular: a classifier trained on a CSV file, with grove::data from the file to the batches.
// The default data is the affairs survey that Debian's python3-statsmodels ships (Fair, "A
// Theory of Extramarital Affairs", 1978: 6,366 women, 8 answers each, and a measure of the time
// spent in affairs); the question is whether that measure is above 0:
//
//   tabular                                   # 8-32-32-2 swish MLP, adam, 30 epochs
//   tabular --csv my.csv --target label --above 0.5 --epochs 50
//
// grove::data does the data path: read_csv (the header names the target column), a one-off
// random_split into 80% training and 20% test examples, a Standardizer fitted on the training
// set, and each epoch's shuffled batches (data::batches, gathered ahead on a second thread with
// --prefetch). The program reports the test accuracy next to what always answering the training
// set's majority class would score.
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <grove/data.hpp>
#include <grove/nn.hpp>
#include <string>

namespace data = grove::data;
namespace nn = grove::nn;

namespace {
constexpr const char* kDefaultCsv =
    "/usr/lib/python3/dist-packages/statsmodels/datasets/fair/fair.csv";
}  // namespace

int main(int argc, char** argv) {
  std::string csv = kDefaultCsv, target = "affairs";
  double above = 0;
  int epochs = 30, batch_size = 64, hidden = 32;
  double lr = 1e-3;
  bool prefetch = false;
  std::uint64_t seed = 0;
  CLI::App app{
      "Trains a small MLP classifier on a CSV file of numbers with grove::data and grove::nn.",
      "tabular"};
  app.add_option("--csv", csv, "The CSV file: a header row of names, then one example per row")
      ->capture_default_str();
  app.add_option("--target", target, "The column to predict")->capture_default_str();
  app.add_option("--above", above, "The class is 1 where the target is above this value, else 0")
      ->capture_default_str();
  app.add_option("--epochs", epochs, "Passes over the training set")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-size", batch_size, "Examples per step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--hidden", hidden, "Width of the two hidden layers")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", lr, "Adam's learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--prefetch", prefetch, "Gather each next batch on a second thread");
  app.add_option("--seed", seed, "Seed of the split, the initialisation and the batches")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  data::csv_dataset<float, Eigen::MatrixXf> table;
  try {
    table = data::read_csv<float>(csv, {.target = target});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tabular: %s\n", e.what());
    if (csv == kDefaultCsv)
      std::fprintf(stderr,
                   "(Debian's python3-statsmodels installs the default data: apt-get install "
                   "python3-statsmodels, or pass --csv FILE)\n");
    return 1;
  }
  // The classes: 1 where the target is above the threshold.
  const data::Dataset<float> all{
      std::move(table.inputs),
      (table.targets.row(0).array() > static_cast<float>(above)).cast<int>().transpose()};
  const Eigen::Index n = all.size();
  if (n < 10) {
    std::fprintf(stderr, "tabular: %s has %ld examples; at least 10 are needed\n", csv.c_str(),
                 static_cast<long>(n));
    return 1;
  }

  const auto keys = grove::random::split(grove::random::key(seed), 3);
  auto [train, test] = data::random_split(all, n - n / 5, keys[0]);
  try {
    const auto scale = data::fit_standardizer(train.inputs);
    scale.apply_inplace(train.inputs);
    scale.apply_inplace(test.inputs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tabular: %s\n", e.what());
    return 1;
  }
  const double positive = train.targets.cast<double>().mean();
  const double majority =
      positive > 0.5 ? test.targets.cast<double>().mean() : 1 - test.targets.cast<double>().mean();

  const Eigen::Index features = all.features();
  const auto model = nn::sequential(nn::dense(features, hidden), nn::swish,
                                    nn::dense(hidden, hidden), nn::swish, nn::dense(hidden, 2));
  auto params = nn::init<float>(model, keys[1]);
  const auto opt = nn::adam(lr);
  auto state = opt.init(params);
  nn::StepWorkspace<decltype(params)> work;
  std::printf(
      "tabular: %s, %ld training and %ld test examples, %ld features, class 1 = %s > %g (%.1f%% "
      "of the training set); MLP %ld-%d-%d-2 (swish), adam lr %g, batch %d, seed %llu\n",
      csv.c_str(), static_cast<long>(train.size()), static_cast<long>(test.size()),
      static_cast<long>(features), target.c_str(), above, 100 * positive,
      static_cast<long>(features), hidden, hidden, lr, batch_size,
      static_cast<unsigned long long>(seed));

  const Eigen::Index batch = std::min<Eigen::Index>(batch_size, train.size());
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double loss_sum = 0;
    for (const auto& b :
         data::batches(train, batch, data::epoch_key(keys[2], epoch), {.prefetch = prefetch}))
      loss_sum += static_cast<double>(b.size) *
                  static_cast<double>(nn::train_step(model, params, b.inputs, b.targets,
                                                     nn::softmax_cross_entropy, opt, state, work));
    if (!std::isfinite(loss_sum)) {
      std::fprintf(stderr, "tabular: the loss diverged (try a smaller --lr)\n");
      return 1;
    }
    if (epoch % 10 == 0 || epoch == epochs) {
      const auto [test_loss, accuracy] =
          nn::evaluate(model, params, test.inputs, test.targets, work.ws);
      std::printf("epoch %3d  train loss %.4f  test loss %.4f  test accuracy %.2f%%\n", epoch,
                  loss_sum / static_cast<double>(train.size()), test_loss, 100 * accuracy);
    }
  }
  const auto [test_loss, accuracy] =
      nn::evaluate(model, params, test.inputs, test.targets, work.ws);
  std::printf("test accuracy %.2f%% (always the majority class: %.2f%%)\n", 100 * accuracy,
              100 * majority);
  return 0;
}
