// grove::io::write_atomically (grove/io/atomic_write.hpp): a file's contents replaced whole, or
// left as they were.
#include <catch2/catch.hpp>

#include <filesystem>
#include <grove/io/atomic_write.hpp>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "checkpoint_fixture.hpp"

TEST_CASE("write_atomically: replaces a file's contents, or fails leaving it as it was",
          "[io][atomic_write]") {
  ckpt_test::temp_dir dir;
  const auto file = dir / "metrics.csv";
  grove::io::write_atomically(file, "epoch\n1\n");
  CHECK(ckpt_test::read_bytes(file) == "epoch\n1\n");
  grove::io::write_atomically(file, std::string(3 << 20, 'x'));  // larger than its buffer
  CHECK(ckpt_test::read_bytes(file) == std::string(3 << 20, 'x'));
  grove::io::write_atomically(file, "");
  CHECK(ckpt_test::read_bytes(file).empty());
  // Nothing but the file itself is left in the directory.
  CHECK(dir.entries() == std::vector<std::string>{"metrics.csv"});

  CHECK_THROWS_AS(grove::io::write_atomically(dir / "no-such-dir" / "f.csv", "x"),
                  std::system_error);
  CHECK_FALSE(std::filesystem::exists(dir / "no-such-dir"));
  CHECK_THROWS_AS(grove::io::write_atomically(dir.path / "", "x"), std::invalid_argument);
}
