// Starts N threads under a real limit that its runner, tests/parallel_thread_limit.cmake, sets (a
// process limit, `ulimit -u`, as an unprivileged user; or an address-space limit, `ulimit -v`):
// either a grove::parallel::LocalDevices(N), whose constructor must stop the threads it started
// and throw grove::parallel::thread_error, not hang; or (`team`) a threaded pass's team of N
// threads (an optimizer's step with N threads), which must throw grove::thread_error before any
// work. Usage: test_parallel_thread_limit N [devices|team]. Prints the message and exits 0 when
// it is so refused; exits 1 when all N threads started or anything else was thrown.
#include <Eigen/Core>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <grove/optim.hpp>
#include <grove/parallel.hpp>
#include <string>
#include <system_error>
#include <vector>
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace {
// An sgd step over parameters large enough that grove shares it among n threads.
void step_with_threads(int n) {
#if defined(_OPENMP)
  omp_set_num_threads(n);
#endif
  Eigen::setNbThreads(n);
  std::vector<Eigen::VectorXf> params(1, Eigen::VectorXf::Ones(1 << 22));
  const auto grads = params;
  const auto tx = grove::optim::sgd(0.1);
  auto state = tx.init(params);
  tx.step(params, grads, state);
  if (params[0](0) != 0.9f) std::printf("the step computed %g, not 0.9\n", params[0](0));
}
}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200;
  const bool team = argc > 2 && std::string(argv[2]) == "team";
  try {
    if (team) {
      step_with_threads(n);
    } else {
      grove::parallel::LocalDevices devices(n);
    }
    std::printf("all %d threads started: the limit did not hold\n", n);
    return 1;
  } catch (const grove::thread_error& e) {
    const grove::error& as_grove = e;
    const std::system_error& as_system = e;
    std::printf("%s\n", as_grove.what());
    if (as_system.code() != std::errc::resource_unavailable_try_again) {
      std::printf("unexpected code %d\n", as_system.code().value());
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    std::printf("another exception: %s\n", e.what());
    return 1;
  }
}
