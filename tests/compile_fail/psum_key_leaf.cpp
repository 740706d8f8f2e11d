// psum sums numbers: a random::Key leaf is refused with grove's message (broadcast takes it).
#include <grove/grove.hpp>
#include <vector>

int main() {
  grove::parallel::SingleDevice one;
  std::vector<grove::random::Key> keys{grove::random::key(0)};
  grove::parallel::psum_inplace(keys, one);
  return 0;
}
