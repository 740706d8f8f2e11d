// A number has no axis to tile along: all_gather tiled refuses it with grove's message (stacked,
// the default, takes it).
#include <grove/parallel.hpp>

int main() {
  grove::parallel::SingleDevice one;
  const float x = 1;
  const auto tiled = grove::parallel::all_gather(x, one, 0, grove::parallel::tiled);
  return static_cast<int>(tiled.size());
}
