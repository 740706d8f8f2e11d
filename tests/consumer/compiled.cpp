// A user's program in grove's compiled mode (linking grove::compiled): trains a small model in
// float and in double, so that it runs products of both; run_consumer.cmake then checks that its
// object file calls the library's gemm_slice rather than defining its own.
#include <cmath>
#include <grove/nn.hpp>
#include <iostream>

template <class T>
T train() {
  namespace nn = grove::nn;
  const auto model = nn::sequential(nn::dense(8, 16), nn::relu, nn::dense(16, 3));
  auto params = nn::init<T>(model, grove::random::key(0));
  const auto X = grove::random::normal<T>(grove::random::key(1), 8, 64);
  // Learnable labels: which of the first three features is the largest.
  Eigen::VectorXi y(64);
  for (Eigen::Index j = 0; j < 64; ++j) X.col(j).head(3).maxCoeff(&y(j));
  const auto opt = nn::adam(1e-2);
  auto state = opt.init(params);
  nn::StepWorkspace<decltype(params)> ws;
  T first = 0, last = 0;
  for (int step = 0; step < 100; ++step) {
    last = nn::train_step(model, params, X, y, nn::softmax_cross_entropy, opt, state, ws);
    if (step == 0) first = last;
  }
  return last / first;
}

int main() {
  const float f = train<float>();
  const double d = train<double>();
  std::cout << "consumer ok: compiled mode " << GROVE_COMPILED << ", the loss fell to "
            << (f < 0.5f && d < 0.5 ? "under half" : "too little") << '\n';
  return f < 0.5f && d < 0.5 ? 0 : 1;
}
