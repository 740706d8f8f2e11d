// regression: a small network fitted to the diabetes data (442 patients, 10 measurements each,
// and a measure of the disease's progression one year later), with grove::nn and the mean squared
// error. The data is the copy Debian's python3-sklearn ships (Efron et al., "Least Angle
// Regression", 2004):
//
//   regression                          # 10-16-16-1 swish MLP, adam, 60 epochs
//   regression --epochs 100 --hidden 32 --seed 1
//
// The examples are split once, with grove::data::random_split of --seed's key, into 354 for
// training and 88 for testing; features and target are standardized with the training set's
// means and standard deviations (grove::data::fit_standardizer). Each epoch's batches come from
// grove::data::batches, each step is nn::train_step with nn::mse; the test error is reported in
// the target's own units, next to what predicting the training mean would give, and as R^2
// (1 - the model's squared error / the mean's).
#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <grove/data.hpp>
#include <grove/data/csv_gz.hpp>
#include <grove/nn.hpp>
#include <string>

namespace data = grove::data;
namespace nn = grove::nn;

namespace {
constexpr const char* kDefaultData = "/usr/lib/python3/dist-packages/sklearn/datasets/data";
}  // namespace

int main(int argc, char** argv) {
  std::string data = kDefaultData;
  int epochs = 60, batch_size = 32, hidden = 16;
  double lr = 1e-3;
  std::uint64_t seed = 0;
  CLI::App app{"Fits a small MLP to the diabetes data with grove::nn and the mean squared error.",
               "regression"};
  app.add_option("--data", data,
                 "Directory with diabetes_data_raw.csv.gz and diabetes_target.csv.gz (Debian's "
                 "python3-sklearn installs them here)")
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
  app.add_option("--seed", seed, "Seed of the split, the initialisation and the batches")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  // The patients: one row each, measurements separated by spaces; the targets in a file of their
  // own, in the same order.
  data::Dataset<double, Eigen::MatrixXd> all;
  try {
    const data::csv_options numbers{.delimiter = ' ', .header = data::csv_header::absent};
    all.inputs = data::read_csv_gz<double>(data + "/diabetes_data_raw.csv.gz", numbers).inputs;
    all.targets = data::read_csv_gz<double>(data + "/diabetes_target.csv.gz", numbers).inputs;
    data::check_dataset(all, "regression");
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "regression: %s\n(Debian's python3-sklearn installs the data: apt-get install "
                 "python3-sklearn, or pass --data DIR)\n",
                 e.what());
    return 1;
  }
  const Eigen::Index features = all.features(), n = all.size();
  if (n < 10 || all.targets.rows() != 1) {
    std::fprintf(stderr,
                 "regression: expected one target and at least 10 patients, got %ld and %ld\n",
                 static_cast<long>(all.targets.rows()), static_cast<long>(n));
    return 1;
  }

  const auto [split_key, init_key, data_key] = [&] {
    const auto k = grove::random::split(grove::random::key(seed), 3);
    return std::tuple{k[0], k[1], k[2]};
  }();
  auto [train, test] = data::random_split(all, n - n / 5, split_key);
  // Standardize with the training set's statistics.
  const auto x_scale = data::fit_standardizer(train.inputs);
  const auto y_scale = data::fit_standardizer(train.targets);
  const Eigen::MatrixXd y_test = test.targets;
  x_scale.apply_inplace(train.inputs);
  x_scale.apply_inplace(test.inputs);
  y_scale.apply_inplace(train.targets);
  const data::Dataset<float, Eigen::MatrixXf> train_set{train.inputs.cast<float>(),
                                                        train.targets.cast<float>()};
  const Eigen::MatrixXf xs_test = test.inputs.cast<float>();
  const Eigen::Index n_train = train_set.size(), n_test = xs_test.cols();
  const double y_mean = y_scale.mean(0);

  const auto model = nn::sequential(nn::dense(features, hidden), nn::swish,
                                    nn::dense(hidden, hidden), nn::swish, nn::dense(hidden, 1));
  auto params = nn::init<float>(model, init_key);
  const auto opt = nn::adam(lr);
  auto state = opt.init(params);
  nn::StepWorkspace<decltype(params)> work;
  nn::Workspace<float> eval;
  Eigen::MatrixXf prediction;
  auto test_rmse = [&] {
    nn::apply_into(model, params, xs_test, prediction, eval);
    Eigen::MatrixXd p = prediction.cast<double>();
    y_scale.invert_inplace(p);
    return std::sqrt((p - y_test).array().square().mean());
  };
  const double baseline = std::sqrt((y_test.array() - y_mean).square().mean());
  std::printf(
      "regression: diabetes, %ld training and %ld test patients, %ld features; MLP %ld-%d-%d-1 "
      "(swish), mse, adam lr %g, batch %d, seed %llu\n",
      static_cast<long>(n_train), static_cast<long>(n_test), static_cast<long>(features),
      static_cast<long>(features), hidden, hidden, lr, batch_size,
      static_cast<unsigned long long>(seed));

  const Eigen::Index batch = std::min<Eigen::Index>(batch_size, n_train);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    double loss_sum = 0;
    for (const auto& b : data::batches(train_set, batch, data::epoch_key(data_key, epoch)))
      loss_sum += static_cast<double>(b.size) *
                  static_cast<double>(nn::train_step(model, params, b.inputs, b.targets, nn::mse,
                                                     opt, state, work));
    if (!std::isfinite(loss_sum)) {
      std::fprintf(stderr, "regression: the loss diverged (try a smaller --lr)\n");
      return 1;
    }
    if (epoch % 50 == 0 || epoch == epochs)
      std::printf("epoch %3d  train mse %.4f (standardized)  test RMSE %.2f\n", epoch,
                  loss_sum / static_cast<double>(n_train), test_rmse());
  }
  const double rmse = test_rmse();
  std::printf("test RMSE %.2f (predicting the training mean: %.2f), R^2 %.3f\n", rmse, baseline,
              1 - (rmse * rmse) / (baseline * baseline));
  return 0;
}
