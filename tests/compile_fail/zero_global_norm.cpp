// ZeRO stage 1 runs the optimizer on one block of the parameters per device: a transformation
// that needs all of them at once (the global norm's clipping) is refused with grove's message.
#include <grove/optim.hpp>
#include <grove/parallel/zero.hpp>

int main() {
  const auto opt = grove::parallel::zero_redundancy(
      grove::optim::chain(grove::optim::clip_by_global_norm(1.0), grove::optim::adam(1e-3)));
  return static_cast<int>(sizeof(opt));
}
