// grove::io checkpoints in shards: Hugging Face's model.safetensors.index.json and its files. The
// shards here are written by hand from the safetensors specification (not by grove's save), the
// index as Hugging Face's save_pretrained writes it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>

#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"

using namespace ckpt_test;
namespace io = grove::io;
using json = nlohmann::ordered_json;

namespace {

struct Model {
  std::vector<Layer> layers;  // (2, 3) and (1, 2) w; b of 2 and 1
  std::int64_t step = 0;
};
GROVE_NODE(Model, layers, step);

Model blank() {
  Model m;
  m.layers.resize(2);
  m.layers[0].w = Eigen::MatrixXf::Constant(2, 3, -1.0f);
  m.layers[0].b = Eigen::VectorXf::Constant(2, -1.0f);
  m.layers[1].w = Eigen::MatrixXf::Constant(1, 2, -1.0f);
  m.layers[1].b = Eigen::VectorXf::Constant(1, -1.0f);
  m.step = -1;
  return m;
}

bool is_blank(const Model& m) {
  const Model b = blank();
  return m.layers[0].w == b.layers[0].w && m.layers[0].b == b.layers[0].b &&
         m.layers[1].w == b.layers[1].w && m.layers[1].b == b.layers[1].b && m.step == b.step;
}

// Two shards and an index: layer 0 and the step in the first, layer 1 in the second.
struct Sharded {
  temp_dir dir;
  std::filesystem::path index = dir / "model.safetensors.index.json";
  json weight_map = {{"layers/0/w", "model-00001-of-00002.safetensors"},
                     {"layers/0/b", "model-00001-of-00002.safetensors"},
                     {"step", "model-00001-of-00002.safetensors"},
                     {"layers/1/w", "model-00002-of-00002.safetensors"},
                     {"layers/1/b", "model-00002-of-00002.safetensors"}};
  std::vector<Entry> first = {
      {"layers/0/b", "F32", {2}, bytes_of<float>({0.5f, -0.25f})},
      {"layers/0/w", "F32", {2, 3}, bytes_of<float>({1, 2, 3, 4, 5, 6})},  // row-major
      {"step", "I64", {}, bytes_of<std::int64_t>({42})}};
  std::vector<Entry> second = {
      {"layers/1/w", "F16", {1, 2}, bytes_of<std::uint16_t>({0x3C00, 0xC000})},  // 1, -2
      {"layers/1/b", "F32", {1}, bytes_of<float>({8})}};

  void write(const json& metadata = {{"total_size", 46}, {"format", "pt"}}) {
    write_safetensors(dir / "model-00001-of-00002.safetensors", first, {{"format", "pt"}});
    write_safetensors(dir / "model-00002-of-00002.safetensors", second, {{"format", "pt"}});
    write_index({{"metadata", metadata}, {"weight_map", weight_map}});
  }
  void write_index(const json& j) const { write_bytes(index, j.dump(2)); }
};

void check_loaded(const Model& m) {
  Eigen::MatrixXf w0(2, 3);
  w0 << 1, 2, 3, 4, 5, 6;
  CHECK(m.layers[0].w == w0);
  CHECK(m.layers[0].b == Eigen::Vector2f(0.5f, -0.25f));
  CHECK(m.layers[1].w == Eigen::RowVector2f(1.0f, -2.0f).eval());
  CHECK(m.layers[1].b(0) == 8.0f);
  CHECK(m.step == 42);
}

// Loading `index` into a blank model fails with a format_error whose what() contains `needle`,
// and the model keeps its values.
void check_refused(const std::filesystem::path& index, const std::string& needle,
                   const io::load_options& options = {}) {
  Model m = blank();
  try {
    io::load_into(index, m, options);
    FAIL("the load succeeded; expected a format_error containing " << needle);
  } catch (const io::format_error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith("grove::io::load_into: ") &&
                             Catch::Matchers::Contains(needle));
  }
  CHECK(is_blank(m));
}

}  // namespace

TEST_CASE("a sharded checkpoint loads across its files", "[io][checkpoint][shards]") {
  Sharded s;
  s.write();
  Model m = blank();
  const auto meta = io::load_into(s.index, m);
  check_loaded(m);
  // The index's metadata: a number as its JSON text, a string as it is.
  CHECK(meta == io::metadata{{"format", "pt"}, {"total_size", "46"}});

  const Model loaded = io::load(s.index, blank());
  check_loaded(loaded);

  const auto info = io::inspect(s.index);
  REQUIRE(info.tensors.size() == 5);
  std::vector<std::pair<std::string, std::string>> where;
  for (const auto& t : info.tensors) where.emplace_back(t.name, t.file);
  CHECK(where == std::vector<std::pair<std::string, std::string>>{
                     {"layers/0/b", "model-00001-of-00002.safetensors"},
                     {"layers/0/w", "model-00001-of-00002.safetensors"},
                     {"step", "model-00001-of-00002.safetensors"},
                     {"layers/1/w", "model-00002-of-00002.safetensors"},
                     {"layers/1/b", "model-00002-of-00002.safetensors"}});
  CHECK(info.tensors[3].dtype == "F16");
  CHECK(info.tensors[3].shape == std::vector<std::uint64_t>{1, 2});
  CHECK(info.metadata == io::metadata{{"format", "pt"}, {"total_size", "46"}});
  // A single file's tensors name no shard.
  write_safetensors(s.dir / "one.safetensors", s.second);
  CHECK(io::inspect(s.dir / "one.safetensors").tensors[0].file.empty());
}

TEST_CASE("a sharded index without metadata, or with shards in a subdirectory",
          "[io][checkpoint][shards]") {
  Sharded s;
  std::filesystem::create_directories(s.dir / "shards");
  for (auto& [tensor, file] : s.weight_map.items()) file = "shards/" + file.get<std::string>();
  write_safetensors(s.dir / "shards/model-00001-of-00002.safetensors", s.first);
  write_safetensors(s.dir / "shards/model-00002-of-00002.safetensors", s.second);
  s.write_index({{"weight_map", s.weight_map}});
  Model m = blank();
  CHECK(io::load_into(s.index, m).empty());
  check_loaded(m);
  s.write_index({{"metadata", nullptr}, {"weight_map", s.weight_map}});
  CHECK(io::load(s.index, blank(), {}).report.metadata.empty());
}

TEST_CASE("strict, rename and convert apply across the shards, the report covers them all",
          "[io][checkpoint][shards]") {
  Sharded s;
  // An extra tensor in the second shard (listed in the index), the step renamed away.
  s.second.push_back({"model.extra", "F32", {2}, bytes_of<float>({1, 2})});
  s.weight_map["model.extra"] = "model-00002-of-00002.safetensors";
  s.first[2] = {"global_step", "I64", {}, bytes_of<std::int64_t>({42})};
  s.weight_map.erase("step");
  s.weight_map["global_step"] = "model-00001-of-00002.safetensors";
  // layers/0/b as F64: narrowing into float.
  s.first[0] = {"layers/0/b", "F64", {2}, bytes_of<double>({0.5, -0.25})};
  s.write();

  check_refused(s.index,
                "the file does not match the tree (4 problems):\n"
                "  tensor \"layers/0/b\" (key path .layers[0].b): dtype F64 in the file, F32");
  check_refused(s.index, "tensor \"step\" (key path .step) is missing from the file");
  check_refused(s.index, "the file has tensor \"model.extra\" (F32 [2])");

  auto [m, report] = io::load(s.index, blank(), {.strict = false, .convert = true});
  CHECK(report.missing == std::vector<std::string>{"step"});
  CHECK(report.unexpected == std::vector<std::string>{"global_step", "model.extra"});
  CHECK(m.step == -1);
  CHECK(m.layers[0].b == Eigen::Vector2f(0.5f, -0.25f));
  CHECK(m.layers[1].w == Eigen::RowVector2f(1.0f, -2.0f).eval());

  const auto renamed = io::load_into(s.index, m,
                                     {.strict = true,
                                      .rename = [](std::string_view n) -> std::string {
                                        if (n == "global_step") return "step";
                                        if (n == "model.extra") return "";
                                        return std::string(n);
                                      },
                                      .convert = true});
  CHECK(renamed.missing.empty());
  CHECK(renamed.unexpected.empty());
  check_loaded(m);
}

TEST_CASE("a shard file name that leaves the index's directory is refused, naming the entry",
          "[io][checkpoint][shards]") {
  Sharded s;
  s.write();
  temp_dir outside;
  write_safetensors(outside / "evil.safetensors", s.second);
  const std::vector<std::pair<std::string, std::string>> hostile = {
      {(outside / "evil.safetensors").string(), "an absolute path"},
      {"../evil.safetensors", "which has a component \"..\""},
      {"shards/../model-00002-of-00002.safetensors", "which has a component \"..\""},
      {"./model-00002-of-00002.safetensors", "which has a component \".\""},
      {"shards//model-00002-of-00002.safetensors", "which has a component \"\""},
      {"", "names an empty shard"},
      {std::string("model-00002-of-00002.safetensors\0x", 34), "which holds a NUL character"},
  };
  for (const auto& [file, needle] : hostile) {
    INFO(file);
    auto map = s.weight_map;
    map["layers/1/w"] = file;
    s.write_index({{"weight_map", map}});
    check_refused(s.index, "weight_map entry \"layers/1/w\"");
    check_refused(s.index, needle);
  }
}

TEST_CASE("symbolic links in the index's directory are followed, as in Hugging Face's hub cache",
          "[io][checkpoint][shards]") {
  // The hub cache: snapshots/<revision>/ holds the index and links to ../../blobs/<hash>, one
  // per shard. The links are the directory's, not the index's, so they may lead out of it.
  Sharded s;
  s.write();
  temp_dir blobs;
  std::filesystem::rename(s.dir / "model-00002-of-00002.safetensors", blobs / "f3a9");
  std::filesystem::create_symlink(blobs / "f3a9", s.dir / "model-00002-of-00002.safetensors");
  Model m = blank();
  io::load_into(s.index, m);
  check_loaded(m);
  // A directory link, too; the name in the index is still checked word by word.
  std::filesystem::create_directory_symlink(blobs.path, s.dir / "out");
  std::filesystem::rename(blobs / "f3a9", blobs / "second.safetensors");
  auto map = s.weight_map;
  for (auto it = map.begin(); it != map.end(); ++it)
    if (it.value() == "model-00002-of-00002.safetensors") it.value() = "out/second.safetensors";
  s.write_index({{"weight_map", map}});
  Model again = blank();
  io::load_into(s.index, again);
  check_loaded(again);
}

TEST_CASE("two names of one shard (a link inside the directory) are one shard",
          "[io][checkpoint][shards]") {
  Sharded s;
  s.write();
  std::filesystem::create_symlink("model-00002-of-00002.safetensors", s.dir / "alias.safetensors");
  s.weight_map["layers/1/b"] = "alias.safetensors";
  s.write_index({{"weight_map", s.weight_map}});
  Model m = blank();
  io::load_into(s.index, m);
  check_loaded(m);
  const auto info = io::inspect(s.index);
  REQUIRE(info.tensors.size() == 5);
  // One file, named as the index first mentions it (entries are read in sorted order).
  CHECK(info.tensors[3].file == info.tensors[4].file);
}

TEST_CASE("shards and the weight_map must agree tensor for tensor", "[io][checkpoint][shards]") {
  SECTION("a shard holds a tensor the weight_map does not list") {
    Sharded s;
    s.second.push_back({"stray", "F32", {1}, bytes_of<float>({1})});
    s.write();
    check_refused(s.index,
                  "model-00002-of-00002.safetensors: tensor \"stray\" is in this shard, "
                  "but the index");
    check_refused(s.index, "does not list it in its weight_map");
  }
  SECTION("a shard holds a tensor the weight_map gives to another shard") {
    Sharded s;
    s.second.push_back({"step", "I64", {}, bytes_of<std::int64_t>({7})});
    s.write();
    check_refused(s.index, "tensor \"step\" is in this shard, but the index");
    check_refused(s.index, "maps it to shard \"model-00001-of-00002.safetensors\"");
  }
  SECTION("a weight_map entry its shard lacks") {
    Sharded s;
    s.weight_map["layers/2/w"] = "model-00002-of-00002.safetensors";
    s.write();
    check_refused(s.index,
                  "model.safetensors.index.json: weight_map entry \"layers/2/w\" says "
                  "shard \"model-00002-of-00002.safetensors\" holds it, but that shard "
                  "has no such tensor");
  }
  SECTION("a malformed shard names the shard") {
    Sharded s;
    s.write();
    write_bytes(s.dir / "model-00002-of-00002.safetensors",
                std::string("\x02\0\0\0\0\0\0\0{]", 10));
    check_refused(s.index, "model-00002-of-00002.safetensors: the header is not valid JSON");
  }
  SECTION("a mismatch in the last shard leaves the whole tree untouched") {
    Sharded s;
    s.second[1] = {"layers/1/b", "F32", {2}, bytes_of<float>({8, 9})};
    s.write();
    check_refused(s.index,
                  "tensor \"layers/1/b\" (key path .layers[1].b): shape [2] in the file, "
                  "[1] in the tree");
  }
  SECTION("a missing shard is a file_error") {
    Sharded s;
    s.write();
    std::filesystem::remove(s.dir / "model-00002-of-00002.safetensors");
    Model m = blank();
    try {
      io::load_into(s.index, m);
      FAIL("loaded without its shard");
    } catch (const io::file_error& e) {
      CHECK(e.code() == std::errc::no_such_file_or_directory);
      CHECK_THAT(e.what(), Catch::Matchers::StartsWith("grove::io::load_into: cannot open") &&
                               Catch::Matchers::Contains("model-00002-of-00002.safetensors"));
    }
    CHECK(is_blank(m));
  }
}

TEST_CASE("a malformed index is a format_error that says what is wrong",
          "[io][checkpoint][shards]") {
  Sharded s;
  s.write();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "the index is not valid JSON"},
      {"{\"weight_map\": {", "the index is not valid JSON"},
      {"[1, 2]", "the index is array, not an object with \"weight_map\""},
      {"{\"metadata\": {}}", "the index has no \"weight_map\""},
      {"{\"weight_map\": [\"a\"]}", "the index's \"weight_map\" is array, not an object"},
      {"{\"weight_map\": {\"step\": 3}}", "weight_map entry \"step\" is number, not the name"},
      {"{\"weight_map\": {\"step\": \"a\", \"step\": \"a\"}}",
       "the index has the key \"step\" twice in one object"},
      {"{\"weight_map\": {}, \"weight_map\": {}}", "the key \"weight_map\" twice"},
      {"{\"metadata\": [], \"weight_map\": {}}",
       "the index's \"metadata\" is array, not an object"},
      {"{\"metadata\": {\"a\": [[[[[1]]]]]}, \"weight_map\": {}}", "the index nests deeper than 4"},
  };
  for (const auto& [text, needle] : cases) {
    INFO(text);
    write_bytes(s.index, text);
    check_refused(s.index, needle);
  }
  // 100,000 levels of nesting fail at the fifth, as they are read.
  write_bytes(s.index, std::string(100000, '[') + std::string(100000, ']'));
  check_refused(s.index, "the index nests deeper than 4 levels");
  // An empty weight_map is an empty checkpoint: strict fails on every leaf, loose keeps all.
  write_bytes(s.index, "{\"weight_map\": {}}");
  check_refused(s.index, "(5 problems)");
  Model m = blank();
  CHECK(io::load_into(s.index, m, {.strict = false}).missing.size() == 5);
  CHECK(is_blank(m));
}

TEST_CASE("inspect of an index checks it as load does", "[io][checkpoint][shards]") {
  Sharded s;
  s.write();
  auto map = s.weight_map;
  map["step"] = "../x.safetensors";
  s.write_index({{"weight_map", map}});
  CHECK_THROWS_MATCHES(io::inspect(s.index), io::format_error,
                       Catch::Matchers::Message(
                           "grove::io::inspect: " + s.index.string() +
                           ": weight_map entry \"step\" names shard \"../x.safetensors\", which "
                           "has a component \"..\"; shard names must stay inside the index's "
                           "directory"));
}

namespace {

long max_rss_kib() {
  struct rusage usage {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

}  // namespace

TEST_CASE("two small tensors load from a sparse 4 GiB file, alone or as a shard, in little memory",
          "[io][checkpoint][shards][large]") {
  // A file of 4 GiB of U8 the tree does not want (a hole on disk), then w (F32, at an odd
  // offset) and b (F16). Loading w and b with strict = false reads 28 bytes: the process's peak
  // resident memory grows by far less than 100 MB (a loader that read or mapped and touched the
  // data would add 4 GiB), and it takes far less than the generous bound below.
  temp_dir dir;
  const auto file = dir / "big.safetensors";
  const std::uint64_t big = std::uint64_t{4} << 30;
  json header = json::object();
  header["big"] = {{"dtype", "U8"}, {"shape", {big}}, {"data_offsets", {0, big}}};
  header["pad"] = {{"dtype", "U8"}, {"shape", {1}}, {"data_offsets", {big, big + 1}}};
  header["layers/0/w"] = {
      {"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {big + 1, big + 25}}};
  header["layers/0/b"] = {{"dtype", "F16"}, {"shape", {2}}, {"data_offsets", {big + 25, big + 29}}};
  const std::string text = header.dump();
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i)
    prefix[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  prefix += text;
  write_bytes(file, prefix);
  std::string tail(1, '\0');
  tail += bytes_of<float>({1, 2, 3, 4, 5, 6}) + bytes_of<std::uint16_t>({0x3C00, 0xBC00});
  {
    const int fd = ::open(file.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const bool wrote =
        ::pwrite(fd, tail.data(), tail.size(), static_cast<off_t>(prefix.size() + big)) ==
        static_cast<ssize_t>(tail.size());
    ::close(fd);
    if (!wrote) {
      WARN("skipped: this file system cannot hold a sparse file of 4 GiB");
      return;
    }
  }
  REQUIRE(std::filesystem::file_size(file) == prefix.size() + big + tail.size());
  write_safetensors(dir / "small.safetensors",
                    {{"layers/1/w", "F32", {1, 2}, bytes_of<float>({7, 8})}});
  write_bytes(dir / "model.safetensors.index.json", json{{"weight_map",
                                                          {{"big", "big.safetensors"},
                                                           {"pad", "big.safetensors"},
                                                           {"layers/0/w", "big.safetensors"},
                                                           {"layers/0/b", "big.safetensors"},
                                                           {"layers/1/w", "small.safetensors"}}}}
                                                        .dump());

  for (const auto& path : {file, dir / "model.safetensors.index.json"}) {
    INFO(path);
    Model m = blank();
    // The peak so far is low: ctest runs each case in a process of its own.
    const long rss_before = max_rss_kib();
    const auto t0 = std::chrono::steady_clock::now();
    const auto report = io::load_into(path, m, {.strict = false});
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const long grown_kib = max_rss_kib() - rss_before;
    CHECK(grown_kib < 100 * 1024);
    CHECK(seconds < 5.0);  // generous: the load reads 28 bytes (the sanitizer build is slow)
    CHECK(report.unexpected == std::vector<std::string>{"big", "pad"});
    Eigen::MatrixXf w(2, 3);
    w << 1, 2, 3, 4, 5, 6;
    CHECK(m.layers[0].w == w);
    CHECK(m.layers[0].b == Eigen::Vector2f(1.0f, -1.0f));
    if (path == file) {
      CHECK(report.missing == std::vector<std::string>{"layers/1/w", "layers/1/b", "step"});
    } else {
      CHECK(report.missing == std::vector<std::string>{"layers/1/b", "step"});
      CHECK(m.layers[1].w == Eigen::RowVector2f(7.0f, 8.0f).eval());
    }
  }
}

TEST_CASE("an index's JSON may be followed by whitespace, never by a NUL and more",
          "[io][checkpoint][shards]") {
  Sharded s;
  s.write();
  const std::string text = json{{"weight_map", s.weight_map}}.dump(2);
  // Hugging Face ends the file with a newline; JSON's whitespace is accepted, as json.loads and
  // serde_json accept it.
  write_bytes(s.index, text + "\n \t\r\n");
  Model m = blank();
  io::load_into(s.index, m);
  check_loaded(m);
  // nlohmann's lexer takes a NUL for the end of its input; grove refuses what follows it.
  write_bytes(s.index, text + std::string("\n\0this is not JSON {{{", 22));
  check_refused(s.index,
                "model.safetensors.index.json: the index's JSON is followed by a NUL byte "
                "at file byte " +
                    std::to_string(text.size() + 1) + " (and 20 more bytes)");
  write_bytes(s.index, text + std::string(1, '\0'));
  check_refused(s.index, "only whitespace may follow the JSON value");
  CHECK_THROWS_AS(io::inspect(s.index), io::format_error);
  write_bytes(s.index, text + "xyz");
  check_refused(s.index, "the index is not valid JSON");
}

TEST_CASE("an index's metadata: strings as they are, other values as compact JSON text",
          "[io][checkpoint][shards]") {
  Sharded s;
  s.write();
  const std::string map = json{{"weight_map", s.weight_map}}.dump().substr(1);  // "weight_map"...
  write_bytes(s.index,
              R"({"metadata": {"total_size": 46, "neg": -3, "x": 1.5, "t": true, "n": null,
                   "s": "a\"b", "list": [1, "a\u00e9", {"b": null, "c": 2.0}], "m": {"k": [false]}, "o": {},
                   "grove.version": "9"}, "other": {"k": [{"a": 1}, {"a": 2}]}, )" +
                  map);
  const auto info = io::inspect(s.index);
  CHECK(info.metadata == io::metadata{{"total_size", "46"},
                                      {"neg", "-3"},
                                      {"x", "1.5"},
                                      {"t", "true"},
                                      {"n", "null"},
                                      {"s", "a\"b"},
                                      {"list", "[1,\"a\xc3\xa9\",{\"b\":null,\"c\":2.0}]"},
                                      {"m", "{\"k\":[false]}"},
                                      {"o", "{}"}});
  // A key may appear once in each object, however the objects nest; reserved keys too.
  const std::vector<std::pair<std::string, std::string>> twice = {
      {R"({"metadata": {"grove.x": "1", "grove.x": "2"}, )", "\"grove.x\" twice"},
      {R"({"metadata": {"a": {"k": 1, "k": 2}}, )", "\"k\" twice"},
      {R"({"metadata": {"a": [{"k": 1}, {"j": 1, "k": null, "k": 2}]}, )", "\"k\" twice"},
      {R"({"other": {"k": 1, "k": 1}, )", "\"k\" twice"},
      {R"({"other": [{"a": {"k": 1, "k": 1}}], )", "\"k\" twice"},
      {R"({"metadata": {"a": 1, "a": [1]}, )", "\"a\" twice"},
      {R"({"metadata": {"a": [[[1]]]}, )", "nests deeper than 4 levels"},
      {R"({"other": [[[[1]]]], )", "nests deeper than 4 levels"},
      {R"({"weight_map": {"step": {}}, )", "weight_map entry \"step\" is object, not the name"},
      {R"({"weight_map": "x", )", "the index's \"weight_map\" is string, not an object"},
      {R"({"metadata": 1, )", "the index's \"metadata\" is number, not an object"},
  };
  for (const auto& [start, needle] : twice) {
    INFO(start);
    write_bytes(s.index, start + map);
    check_refused(s.index, needle);
  }
  for (const char* root : {"\"x\"", "null", "1", "true"}) {
    write_bytes(s.index, root);
    check_refused(s.index, std::string("the index is ") +
                               (root[0] == '"'   ? "string"
                                : root[0] == 'n' ? "null"
                                : root[0] == '1' ? "number"
                                                 : "boolean") +
                               ", not an object with \"weight_map\"");
  }
  // Nested two levels inside a metadata value is the most there is room for, and loads.
  write_bytes(s.index, R"({"metadata": {"a": [[1]]}, )" + map);
  CHECK(io::inspect(s.index).metadata.at("a") == "[[1]]");
}
