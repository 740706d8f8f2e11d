// grove::io checkpoints: round trips, the file layout Python sees, metadata, atomic saves.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "checkpoint_fixture.hpp"
#include "grove/io/atomic_write.hpp"
#include "grove/io/checkpoint.hpp"
#include "grove/nn/train_state.hpp"
#include "grove/version.hpp"

using namespace ckpt_test;
namespace io = grove::io;

namespace {

std::uint64_t header_length(const std::string& bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return n;
}

nlohmann::json header_of(const std::string& bytes) {
  return nlohmann::json::parse(bytes.substr(8, header_length(bytes)));
}

template <class T>
T element_at(const std::string& bytes, std::size_t data_start, std::size_t byte_offset) {
  T v;
  std::memcpy(&v, bytes.data() + data_start + byte_offset, sizeof(T));
  return v;
}

}  // namespace

TEST_CASE("version: grove::version is the CMake project's version", "[version]") {
  CHECK(grove::version == GROVE_PROJECT_VERSION);
  CHECK(std::string(GROVE_VERSION) == GROVE_PROJECT_VERSION);
}

TEST_CASE("checkpoint: a tree of every leaf kind round-trips bit for bit", "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "sample.safetensors";
  const Sample original = sample();
  io::save(file, original, {{"epoch", "3"}, {"note", "h\u00e9llo \u2713"}});

  SECTION("load gives like's structure with the file's values") {
    const Sample back = io::load(file, zeroed());
    CHECK(bits_equal(back, original));
    CHECK(back.old_key.layout == grove::random::key_layout::legacy);
    CHECK(back.key.layout == grove::random::key_layout::partitionable);
    CHECK_FALSE(back.absent.has_value());
  }
  SECTION("load_into fills the tree and returns the user's metadata") {
    Sample target = zeroed();
    const io::metadata meta = io::load_into(file, target);
    CHECK(bits_equal(target, original));
    CHECK(meta == io::metadata{{"epoch", "3"}, {"note", "h\u00e9llo \u2713"}});
  }
  SECTION("the directory holds the checkpoint and nothing else") {
    CHECK(dir.entries() == std::vector<std::string>{"sample.safetensors"});
  }
}

TEST_CASE("checkpoint: the file is safetensors as Python reads it", "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "sample.safetensors";
  const Sample s = sample();
  io::save(file, s);
  const std::string bytes = read_bytes(file);
  const std::uint64_t n = header_length(bytes);
  const std::size_t data_start = 8 + n;

  // The header starts with '{' and is padded with spaces so that the data starts 8-byte aligned.
  CHECK(bytes[8] == '{');
  CHECK(data_start % 8 == 0);
  const auto head = header_of(bytes);

  // One tensor per leaf, named by the simple key path, listed in leaf order (after __metadata__).
  std::vector<std::string> names;
  for (const auto& [key, value] : head.items()) names.push_back(key);
  const std::vector<std::string> expected = {
      "__metadata__", "f32_scalar", "f64",  "f64_scalar",  "fixed",      "flag",
      "i32",          "i32_scalar", "i64",  "key",         "layers/0/b", "layers/0/w",
      "layers/1/b",   "layers/1/w", "mask", "named/alpha", "named/beta", "old_key",
      "step",         "u32",        "u8",   "u8_scalar"};
  CHECK(names == expected);  // nlohmann::json sorts the keys; inspect() keeps the file's order
  const auto info = io::inspect(file);
  std::vector<std::string> leaf_order;
  for (const auto& t : info.tensors) leaf_order.push_back(t.name);
  CHECK(leaf_order == std::vector<std::string>{
                          "layers/0/w", "layers/0/b", "layers/1/w", "layers/1/b", "f64",
                          "i32",        "i64",        "u32",        "u8",         "fixed",
                          "f32_scalar", "f64_scalar", "step",       "i32_scalar", "u8_scalar",
                          "flag",       "mask",       "key",        "old_key",    "named/alpha",
                          "named/beta"});

  // dtypes and row-major shapes: (rows, cols) for matrices, (n,) for vectors, () for scalars.
  CHECK(head["f64"]["dtype"] == "F64");
  CHECK(head["f64"]["shape"] == nlohmann::json::array({2, 3}));
  CHECK(head["i32"]["dtype"] == "I32");
  CHECK(head["i32"]["shape"] == nlohmann::json::array({3, 2}));
  CHECK(head["i64"]["shape"] == nlohmann::json::array({4}));
  CHECK(head["u32"]["dtype"] == "U32");
  CHECK(head["u32"]["shape"] == nlohmann::json::array({3}));
  CHECK(head["u8"]["dtype"] == "U8");
  CHECK(head["step"]["dtype"] == "I64");
  CHECK(head["step"]["shape"] == nlohmann::json::array());
  CHECK(head["flag"]["dtype"] == "BOOL");
  CHECK(head["key"]["dtype"] == "U32");
  CHECK(head["key"]["shape"] == nlohmann::json::array({2}));
  CHECK(head["named/beta"]["shape"] == nlohmann::json::array({0}));

  // Row-major data: element (i, j) of a (rows, cols) tensor is at index i * cols + j, whatever
  // Eigen's storage order.
  const std::size_t f64_begin = head["f64"]["data_offsets"][0];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      const double v = element_at<double>(bytes, data_start,
                                          f64_begin + 8 * static_cast<std::size_t>(i * 3 + j));
      CHECK(std::memcmp(&v, &s.f64(i, j), 8) == 0);
    }
  const std::size_t i32_begin = head["i32"]["data_offsets"][0];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      CHECK(element_at<std::int32_t>(bytes, data_start,
                                     i32_begin + 4 * static_cast<std::size_t>(i * 2 + j)) ==
            s.i32(i, j));
  const std::size_t u8_begin = head["u8"]["data_offsets"][0];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      CHECK(element_at<std::uint8_t>(bytes, data_start,
                                     u8_begin + static_cast<std::size_t>(i * 3 + j)) == s.u8(i, j));
  const std::size_t key_begin = head["key"]["data_offsets"][0];
  CHECK(element_at<std::uint32_t>(bytes, data_start, key_begin) == 0u);
  CHECK(element_at<std::uint32_t>(bytes, data_start, key_begin + 4) == 42u);

  // The tensors tile the data exactly, each aligned for its element type.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [key, value] : head.items()) {
    if (key == "__metadata__") continue;
    const std::uint64_t b = value["data_offsets"][0], e = value["data_offsets"][1];
    ranges.emplace_back(b, e);
    const std::string dt = value["dtype"];
    const std::uint64_t size = dt == "F64" || dt == "I64"                  ? 8
                               : dt == "F32" || dt == "I32" || dt == "U32" ? 4
                                                                           : 1;
    CHECK((data_start + b) % size == 0);
  }
  std::sort(ranges.begin(), ranges.end());
  std::uint64_t covered = 0;
  for (const auto& [b, e] : ranges) {
    CHECK(b == covered);
    covered = e;
  }
  CHECK(covered == bytes.size() - data_start);

  // grove's metadata.
  const auto& meta = head["__metadata__"];
  CHECK(meta["grove.version"] == std::string(grove::version));
  CHECK(meta["grove.treedef"] == grove::tree_structure(s).str());
  CHECK(meta["grove.key_layout:key"] == "partitionable");
  CHECK(meta["grove.key_layout:old_key"] == "legacy");
  CHECK(meta.size() == 4);
}

TEST_CASE("checkpoint: inspect reports the header without reading the data", "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "sample.safetensors";
  const Sample s = sample();
  io::save(file, s, {{"run", "a"}});
  const auto info = io::inspect(file);
  CHECK(info.grove_version == std::string(grove::version));
  CHECK(info.treedef == grove::tree_structure(s).str());
  CHECK(info.metadata == io::metadata{{"run", "a"}});
  CHECK(info.key_layouts.at("old_key") == grove::random::key_layout::legacy);
  CHECK(info.key_layouts.at("key") == grove::random::key_layout::partitionable);
  REQUIRE(info.tensors.size() == 21);
  CHECK(info.tensors[0].name == "layers/0/w");
  CHECK(info.tensors[0].dtype == "F32");
  CHECK(info.tensors[0].shape == std::vector<std::uint64_t>{2, 3});
  CHECK(info.tensors[0].data_end - info.tensors[0].data_begin == 24);
}

TEST_CASE("checkpoint: leaves of many kinds and trees of many shapes", "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "t.safetensors";

  SECTION("a single leaf at the root is the tensor named \"\"") {
    Eigen::MatrixXf m(2, 2);
    m << 1, 2, 3, 4;
    io::save(file, m);
    CHECK(io::inspect(file).tensors.at(0).name.empty());
    Eigen::MatrixXf back = Eigen::MatrixXf::Zero(2, 2);
    io::load_into(file, back);
    CHECK(back == m);
  }
  SECTION("a tree without leaves") {
    std::vector<Layer> none;
    io::save(file, none, {{"k", "v"}});
    CHECK(io::inspect(file).tensors.empty());
    CHECK(io::load_into(file, none) == io::metadata{{"k", "v"}});
    std::vector<Layer> one(1, Layer{Eigen::MatrixXf::Zero(1, 1), Eigen::VectorXf::Zero(1)});
    CHECK_THROWS_AS(io::load_into(file, one), io::format_error);
  }
  SECTION("every integer width, signed and unsigned, and both float types") {
    auto t = std::make_tuple(std::int8_t{-8}, std::uint8_t{250}, std::int16_t{-300},
                             std::uint16_t{60000}, std::int32_t{-70000}, std::uint32_t{4000000000u},
                             std::int64_t{-1} << 40, std::uint64_t{1} << 63, 1.25f, 2.5, true,
                             false, static_cast<long long>(-3), static_cast<unsigned long>(9));
    io::save(file, t);
    std::vector<std::string> dtypes;
    for (const auto& info : io::inspect(file).tensors) dtypes.push_back(info.dtype);
    CHECK(dtypes == std::vector<std::string>{"I8", "U8", "I16", "U16", "I32", "U32", "I64", "U64",
                                             "F32", "F64", "BOOL", "BOOL", "I64", "U64"});
    decltype(t) back{};
    io::load_into(file, back);
    CHECK(back == t);
  }
  SECTION("Eigen maps and expressions save like the matrices they show") {
    Eigen::MatrixXd m(3, 2);
    m << 1, 2, 3, 4, 5, 6;
    const Eigen::Map<const Eigen::MatrixXd> view(m.data(), 3, 2);
    io::save(file, std::make_tuple(view, Eigen::Map<const Eigen::VectorXd>(m.data(), 6)));
    auto back = io::load(file, std::make_tuple(Eigen::MatrixXd(3, 2), Eigen::VectorXd(6)));
    CHECK(std::get<0>(back) == m);
    CHECK(std::get<1>(back) == Eigen::Map<const Eigen::VectorXd>(m.data(), 6));
  }
  SECTION("fixed-size and row-major storage give the same file as dynamic column-major") {
    Eigen::Matrix<float, 2, 3, Eigen::RowMajor> rm;
    rm << 1, 2, 3, 4, 5, 6;
    io::save(file, rm);
    Eigen::MatrixXf cm = Eigen::MatrixXf::Zero(2, 3);
    io::load_into(file, cm);
    CHECK(cm == rm);
    Eigen::Array<float, 2, 3> fixed = Eigen::Array<float, 2, 3>::Zero();
    io::load_into(file, fixed);
    CHECK(fixed.matrix() == rm);
  }
  SECTION("structures are matched by key path: a list and an int-keyed dict agree") {
    std::vector<Layer> list(
        2, Layer{Eigen::MatrixXf::Constant(2, 2, 1), Eigen::VectorXf::Constant(2, 2)});
    list[1].w(0, 1) = 7;
    io::save(file, list);
    std::map<int, Layer> dict;
    dict[0] = Layer{Eigen::MatrixXf::Zero(2, 2), Eigen::VectorXf::Zero(2)};
    dict[1] = dict[0];
    io::load_into(file, dict);
    CHECK(dict[1].w(0, 1) == 7);
    CHECK(dict[0].b(1) == 2);
  }
  SECTION("the file's key layout wins over the tree's") {
    auto legacy = grove::random::wrap_key_data({1, 2}, grove::random::key_layout::legacy);
    io::save(file, legacy);
    auto back = grove::random::key(0);
    io::load_into(file, back);
    CHECK(back == legacy);
  }
}

TEST_CASE("checkpoint: a training state saves and resumes", "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "state.safetensors";
  // An optimizer state: a tuple (velocities, step count) stands for a registered struct here.
  using Opt = std::tuple<std::vector<Layer>, std::int64_t>;
  std::vector<Layer> params(2, Layer{Eigen::MatrixXf::Random(3, 2), Eigen::VectorXf::Random(3)});
  grove::nn::train_state<std::vector<Layer>, Opt> state{params, Opt{params, 17},
                                                        grove::random::key(5), 4};
  io::save(file, state, {{"optimizer", "momentum"}});
  std::vector<std::string> names;
  for (const auto& t : io::inspect(file).tensors) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"params/0/w", "params/0/b", "params/1/w", "params/1/b",
                                          "opt_state/0/0/w", "opt_state/0/0/b", "opt_state/0/1/w",
                                          "opt_state/0/1/b", "opt_state/1", "key", "epoch"});
  grove::nn::train_state<std::vector<Layer>, Opt> resumed{
      std::vector<Layer>(2, Layer{Eigen::MatrixXf::Zero(3, 2), Eigen::VectorXf::Zero(3)}),
      Opt{std::vector<Layer>(2, Layer{Eigen::MatrixXf::Zero(3, 2), Eigen::VectorXf::Zero(3)}), 0},
      grove::random::key(0), 0};
  CHECK(io::load_into(file, resumed) == io::metadata{{"optimizer", "momentum"}});
  CHECK(bits_equal(resumed, state));
  CHECK(resumed.epoch == 4);
  CHECK(resumed.key == grove::random::key(5));
}

// Code written against 0.1 keeps compiling (with a deprecation warning) for a release.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static_assert(std::is_same_v<io::train_state<int, double>, grove::nn::train_state<int, double>>);
#pragma GCC diagnostic pop

TEST_CASE("checkpoint: save overwrites an existing file and creates files as open() would",
          "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "c.safetensors";
  io::save(file, std::int32_t{1});
  io::save(file, std::int32_t{2});
  std::int32_t v = 0;
  io::load_into(file, v);
  CHECK(v == 2);
  CHECK(dir.entries() == std::vector<std::string>{"c.safetensors"});

  const mode_t mask = ::umask(022);
  ::umask(mask);
  struct stat st {};
  REQUIRE(::stat(file.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == (0666 & ~mask));

  SECTION("a relative path saves in the working directory") {
    const auto old = std::filesystem::current_path();
    std::filesystem::current_path(dir.path);
    io::save("relative.safetensors", std::int32_t{3});
    std::filesystem::current_path(old);
    CHECK(io::load(dir / "relative.safetensors", std::int32_t{0}) == 3);
  }
}

TEST_CASE("checkpoint: a failed save throws and leaves no trace", "[io][checkpoint]") {
  temp_dir dir;
  const Sample s = sample();

  SECTION("a directory that does not exist") {
    try {
      io::save(dir / "missing" / "c.safetensors", s);
      FAIL("no exception");
    } catch (const std::system_error& e) {
      CHECK(e.code() == std::errc::no_such_file_or_directory);
      CHECK_THAT(e.what(),
                 Catch::Contains("missing/c.safetensors") && Catch::Contains("temporary file"));
    }
    CHECK(dir.entries().empty());
  }
  SECTION("a parent that is a file") {
    write_bytes(dir / "file", "x");
    CHECK_THROWS_AS(io::save(dir / "file" / "c.safetensors", s), std::system_error);
    CHECK(dir.entries() == std::vector<std::string>{"file"});
  }
  SECTION("a target that is a directory: refused before anything is written, the directory stays") {
    std::filesystem::create_directories(dir / "c.safetensors" / "inside");
    try {
      io::save(dir / "c.safetensors", s);
      FAIL("no exception");
    } catch (const io::file_error& e) {
      CHECK(e.code() == std::errc::is_a_directory);
      CHECK_THAT(e.what(),
                 Catch::StartsWith("grove::io::save: cannot save " +
                                   (dir / "c.safetensors").string() + ": it is a directory"));
    }
    CHECK(dir.entries() == std::vector<std::string>{"c.safetensors"});
    CHECK(std::filesystem::is_directory(dir / "c.safetensors" / "inside"));
  }
  SECTION("a path without a file name") {
    CHECK_THROWS_AS(io::save(dir.path.string() + "/", s), std::invalid_argument);
    CHECK(dir.entries().empty());
  }
  SECTION("the disk fills up (a file size limit): the previous checkpoint survives intact") {
    const auto file = dir / "c.safetensors";
    io::save(file, std::int32_t{7});
    const std::string before = read_bytes(file);
    std::vector<Layer> big(1, Layer{Eigen::MatrixXf::Ones(512, 512), Eigen::VectorXf::Ones(512)});
    // write() past RLIMIT_FSIZE fails with EFBIG (and SIGXFSZ, ignored here), as with a full disk.
    struct rlimit old_limit {};
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    const auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_limit;
    small.rlim_cur = 64 * 1024;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    std::error_code code;
    try {
      io::save(file, big);
    } catch (const std::system_error& e) {
      code = e.code();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    ::signal(SIGXFSZ, old_handler);
    CHECK(code == std::errc::file_too_large);
    CHECK(read_bytes(file) == before);
    CHECK(dir.entries() == std::vector<std::string>{"c.safetensors"});
  }
  SECTION("bad trees and metadata are refused before any file is created") {
    CHECK_THROWS_AS(io::save(dir / "c.safetensors", s, {{"grove.version", "9"}}),
                    std::invalid_argument);
    CHECK_THROWS_AS(io::save(dir / "c.safetensors", s, {{"bad", std::string("\xff\xfe")}}),
                    std::invalid_argument);
    std::map<std::string, std::map<std::string, float>> clash{{"a", {{"b/c", 1.0f}}},
                                                              {"a/b", {{"c", 2.0f}}}};
    try {
      io::save(dir / "c.safetensors", clash);
      FAIL("no exception");
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains("['a']['b/c']") && Catch::Contains("['a/b']['c']") &&
                               Catch::Contains("\"a/b/c\""));
    }
    std::map<std::string, float> reserved{{"__metadata__", 1.0f}};
    CHECK_THROWS_AS(io::save(dir / "c.safetensors", reserved), std::invalid_argument);
    CHECK(dir.entries().empty());
  }
}

TEST_CASE("checkpoint: a save killed at any moment leaves the previous checkpoint or the new one",
          "[io][checkpoint]") {
  temp_dir dir;
  const auto file = dir / "c.safetensors";
  // Two versions, each a few MB so that the writer is often caught mid-write.
  std::vector<Layer> a(
      4, Layer{Eigen::MatrixXf::Constant(400, 400, 1.0f), Eigen::VectorXf::Constant(400, 1.0f)});
  std::vector<Layer> b(
      4, Layer{Eigen::MatrixXf::Constant(400, 400, 2.0f), Eigen::VectorXf::Constant(400, 2.0f)});
  io::save(file, a);
  for (int round = 0; round < 5; ++round) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      try {
        for (int i = 0;; ++i) io::save(file, i % 2 ? a : b);
      } catch (...) {
      }
      ::_exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20 + 17 * round));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    const auto back = io::load(file, a);
    CHECK((bits_equal(back, a) || bits_equal(back, b)));
  }
  // The killed writers' temporary files may remain (nothing can remove them); they never replace
  // the checkpoint and are named so that they are easy to spot.
  for (const auto& name : dir.entries())
    CHECK((name == "c.safetensors" || name.starts_with(".c.safetensors.tmp-")));
}
