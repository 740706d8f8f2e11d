// Helpers shared by grove::nn's tests.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <grove/nn.hpp>

namespace nn_test {

// Standard normal values, deterministic for a key.
template <class T>
Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic> random_matrix(const grove::random::Key& key,
                                                               Eigen::Index rows,
                                                               Eigen::Index cols) {
  return grove::random::normal<T>(key, rows, cols);
}

// Labels in [0, classes).
inline Eigen::VectorXi random_labels(const grove::random::Key& key, Eigen::Index n, int classes) {
  return grove::random::randint(key, n, 0, classes);
}

// Sets the threads grove's passes use (Eigen::setNbThreads) for a scope.
class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(Eigen::nbThreads()) { Eigen::setNbThreads(n); }
  ~ThreadCount() { Eigen::setNbThreads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

}  // namespace nn_test
