// regression: a small network fitted to the diabetes data (442 patients, 10 measurements each,
// and a measure of the disease's progression one year later), with grove::nn and the mean squared
// error. The data is the copy Debian's python3-sklearn ships (Efron et al., "Least Angle
// Regression", 2004):
//
//   regression                          # 10-16-16-1 swish MLP, adam, 60 epochs
//   regression --epochs 100 --hidden 32 --seed 1
//
// The examples are split once, with grove::random::permutation of --seed's key, into 354 for
// training and 88 for testing; features and target are standardized with the training set's
// means and standard deviations. Each step is nn::train_step with nn::mse; the test error is
// reported in the target's own units, next to what predicting the training mean would give, and
// as R^2 (1 - the model's squared error / the mean's).
#include <zlib.h>

#include <CLI/CLI.hpp>
#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <grove/nn.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace nn = grove::nn;

namespace {

constexpr const char* kDefaultData = "/usr/lib/python3/dist-packages/sklearn/datasets/data";

// The numbers of a gzip-compressed text file (spaces, commas or newlines between them).
std::vector<double> read_numbers(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f)
    throw std::runtime_error("cannot open " + path +
                             " (Debian's python3-sklearn installs it: apt-get install "
                             "python3-sklearn, or pass --data DIR)");
  std::string text;
  char buffer[1 << 14];
  int n;
  while ((n = gzread(f, buffer, sizeof buffer)) > 0)
    text.append(buffer, static_cast<std::size_t>(n));
  const bool failed = n < 0;
  gzclose(f);
  if (failed) throw std::runtime_error(path + " is not a readable gzip file");
  for (char& c : text)
    if (c == ',') c = ' ';
  std::istringstream in(text);
  std::vector<double> values;
  double v;
  while (in >> v) values.push_back(v);
  if (!in.eof()) throw std::runtime_error(path + " holds something that is not a number");
  return values;
}

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

  std::vector<double> raw, target;
  try {
    raw = read_numbers(data + "/diabetes_data_raw.csv.gz");
    target = read_numbers(data + "/diabetes_target.csv.gz");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "regression: %s\n", e.what());
    return 1;
  }
  constexpr Eigen::Index features = 10;
  const auto n = static_cast<Eigen::Index>(target.size());
  if (n < 10 || static_cast<Eigen::Index>(raw.size()) != n * features) {
    std::fprintf(stderr, "regression: expected %ld x %ld measurements for %ld targets, got %zu\n",
                 static_cast<long>(n), static_cast<long>(features), static_cast<long>(n),
                 raw.size());
    return 1;
  }
  // Columns are examples: the file's rows, one patient each.
  const Eigen::MatrixXd all_x = Eigen::Map<const Eigen::MatrixXd>(raw.data(), features, n);
  const Eigen::RowVectorXd all_y = Eigen::Map<const Eigen::RowVectorXd>(target.data(), n);

  const auto [split_key, init_key, data_key] = [&] {
    const auto k = grove::random::split(grove::random::key(seed), 3);
    return std::tuple{k[0], k[1], k[2]};
  }();
  const auto order = grove::random::permutation(split_key, n);
  const Eigen::Index n_test = n / 5, n_train = n - n_test;
  Eigen::MatrixXd x_train(features, n_train), x_test(features, n_test);
  Eigen::RowVectorXd y_train(n_train), y_test(n_test);
  for (Eigen::Index i = 0; i < n; ++i) {
    const Eigen::Index j = order(i);
    if (i < n_train) {
      x_train.col(i) = all_x.col(j);
      y_train(i) = all_y(j);
    } else {
      x_test.col(i - n_train) = all_x.col(j);
      y_test(i - n_train) = all_y(j);
    }
  }
  // Standardize with the training set's statistics.
  const Eigen::VectorXd mean = x_train.rowwise().mean();
  const Eigen::VectorXd sd =
      ((x_train.colwise() - mean).array().square().rowwise().mean()).sqrt().matrix();
  const double y_mean = y_train.mean();
  const double y_sd = std::sqrt((y_train.array() - y_mean).square().mean());
  auto standardize = [&](const Eigen::MatrixXd& x) -> Eigen::MatrixXf {
    return ((x.colwise() - mean).array().colwise() / sd.array()).matrix().cast<float>();
  };
  const Eigen::MatrixXf xs_train = standardize(x_train), xs_test = standardize(x_test);
  const Eigen::MatrixXf ys_train = ((y_train.array() - y_mean) / y_sd).matrix().cast<float>();

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
    const Eigen::ArrayXd p = (prediction.row(0).cast<double>().array() * y_sd + y_mean).transpose();
    return std::sqrt((p - y_test.transpose().array()).square().mean());
  };
  const double baseline = std::sqrt((y_test.array() - y_mean).square().mean());
  std::printf(
      "regression: diabetes, %ld training and %ld test patients, %ld features; MLP %ld-%d-%d-1 "
      "(swish), mse, adam lr %g, batch %d, seed %llu\n",
      static_cast<long>(n_train), static_cast<long>(n_test), static_cast<long>(features),
      static_cast<long>(features), hidden, hidden, lr, batch_size,
      static_cast<unsigned long long>(seed));

  const Eigen::Index batch = std::min<Eigen::Index>(batch_size, n_train);
  Eigen::MatrixXf xb(features, batch), yb(1, batch);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto perm = grove::random::permutation(
        grove::random::fold_in(data_key, static_cast<std::uint32_t>(epoch)), n_train);
    double loss_sum = 0;
    for (Eigen::Index first = 0; first < n_train; first += batch) {
      const Eigen::Index size = std::min(batch, n_train - first);
      for (Eigen::Index j = 0; j < size; ++j) {
        xb.col(j) = xs_train.col(perm(first + j));
        yb(0, j) = ys_train(0, perm(first + j));
      }
      loss_sum +=
          size * static_cast<double>(nn::train_step(model, params, xb.leftCols(size),
                                                    yb.leftCols(size), nn::mse, opt, state, work));
    }
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
