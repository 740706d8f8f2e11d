// A random::Key is a value, not an array: all_gather refuses it with grove's message (ppermute and
// broadcast take it).
#include <grove/parallel.hpp>
#include <grove/random/key.hpp>
#include <vector>

int main() {
  grove::parallel::SingleDevice one;
  const std::vector<grove::random::Key> keys{grove::random::key(0)};
  const auto gathered = grove::parallel::all_gather(keys, one);
  return static_cast<int>(gathered.size());
}
