// broadcast copies bits: a leaf that is not trivially copyable (a std::string) is refused with
// grove's message.
#include <grove/grove.hpp>
#include <string>
#include <vector>

int main() {
  grove::parallel::SingleDevice one;
  std::vector<std::string> names{"a"};
  grove::parallel::broadcast_inplace(names, one, 0);
  return 0;
}
