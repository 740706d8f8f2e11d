// The C++ side of checkpoint_interop.py:
//   checkpoint_interop write FILE   saves ckpt_test::sample() to FILE
//   checkpoint_interop read FILE    loads FILE into a zeroed Sample, checks every value bit for bit
//                                   against sample(), prints the user metadata as JSON; exit 1 if
//                                   any value differs.
#include <iostream>
#include <string_view>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"

int main(int argc, char** argv) {
  using namespace ckpt_test;
  if (argc != 3) {
    std::cerr << "usage: checkpoint_interop write|read FILE\n";
    return 2;
  }
  const std::string_view mode = argv[1];
  const std::filesystem::path file = argv[2];
  try {
    if (mode == "write") {
      grove::io::save(file, sample(), {{"source", "grove"}, {"note", "h\u00e9llo \u2713"}});
      return 0;
    }
    if (mode != "read") {
      std::cerr << "unknown mode " << mode << '\n';
      return 2;
    }
    Sample loaded = zeroed();
    const auto meta = grove::io::load_into(file, loaded);
    const Sample expected = sample();
    std::vector<std::string> names;
    for (const auto& [path, leaf] : grove::tree_leaves_with_path(expected))
      names.push_back(grove::keystr(path, "/"));
    std::size_t i = 0;
    int bad = 0;
    grove::tree_for_each(
        [&](const auto& got, const auto& want) {
          if (!bits_equal(got, want)) {
            std::cerr << "tensor " << names[i] << " differs\n";
            ++bad;
          }
          ++i;
        },
        loaded, expected);
    std::cout << nlohmann::json(meta).dump() << '\n';
    return bad == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << e.what() << '\n';
    return 1;
  }
}
