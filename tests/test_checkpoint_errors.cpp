// grove::io checkpoints: every kind of malformed or mismatched file raises format_error, naming
// the file and the problem, and leaves the target untouched.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"

using namespace ckpt_test;
namespace io = grove::io;
using json = nlohmann::ordered_json;

namespace {

struct Small {
  Eigen::MatrixXf w;
  Eigen::VectorXf b;
  grove::random::Key key;
  bool flag = false;
};
GROVE_NODE(Small, w, b, key, flag);

Small small_values() {
  Small s;
  s.w.resize(2, 3);
  s.w << 1, 2, 3, 4, 5, 6;
  s.b.resize(2);
  s.b << 7, 8;
  s.key = grove::random::key(9);
  s.flag = true;
  return s;
}

// A valid file for Small, as parts to edit: the header and the data.
struct parts {
  json header;
  std::string data;
};

parts valid_parts() {
  parts p;
  p.header["__metadata__"] = {{"grove.key_layout:key", "legacy"}};
  p.header["w"] = {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {0, 24}}};
  p.header["b"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {24, 32}}};
  p.header["key"] = {{"dtype", "U32"}, {"shape", {2}}, {"data_offsets", {32, 40}}};
  p.header["flag"] = {{"dtype", "BOOL"}, {"shape", json::array()}, {"data_offsets", {40, 41}}};
  const float w[6] = {10, 20, 30, 40, 50, 60};
  const float b[2] = {70, 80};
  const std::uint32_t key[2] = {1, 2};
  p.data.append(reinterpret_cast<const char*>(w), sizeof w);
  p.data.append(reinterpret_cast<const char*>(b), sizeof b);
  p.data.append(reinterpret_cast<const char*>(key), sizeof key);
  p.data.push_back('\1');
  return p;
}

using ckpt_test::assemble;
std::string assemble(const parts& p) {
  return assemble(p.header.dump(), p.data);
}

// Loading `bytes` into a Small must raise format_error whose message holds the file and every
// needle; the target must keep its values.
void expect_bad(const std::string& bytes, const std::vector<std::string>& needles) {
  temp_dir dir;
  const auto file = dir / "bad.safetensors";
  write_bytes(file, bytes);
  Small target = small_values();
  const Small before = target;
  try {
    io::load_into(file, target);
    FAIL("load_into accepted the file");
  } catch (const io::format_error& e) {
    INFO(e.what());
    CHECK(e.path() == file);
    CHECK_THAT(e.what(), Catch::StartsWith("grove::io::load_into: " + file.string() + ": "));
    for (const auto& needle : needles) CHECK_THAT(e.problem(), Catch::Contains(needle));
  }
  CHECK(bits_equal(target, before));
  CHECK_THROWS_AS(io::load(file, target), io::format_error);
}

// The file itself is malformed: inspect (header only) must reject it too.
void expect_malformed(const std::string& bytes, const std::vector<std::string>& needles) {
  expect_bad(bytes, needles);
  temp_dir dir;
  write_bytes(dir / "bad.safetensors", bytes);
  CHECK_THROWS_AS(io::inspect(dir / "bad.safetensors"), io::format_error);
}

}  // namespace

TEST_CASE("checkpoint errors: the valid file of these tests loads", "[io][checkpoint]") {
  temp_dir dir;
  write_bytes(dir / "ok.safetensors", assemble(valid_parts()));
  Small s = small_values();
  io::load_into(dir / "ok.safetensors", s);
  CHECK(s.w(1, 0) == 40);  // row-major in the file
  CHECK(s.b(1) == 80);
  CHECK(s.key == grove::random::wrap_key_data({1, 2}, grove::random::key_layout::legacy));
  CHECK(s.flag);
}

TEST_CASE("checkpoint errors: a file too short for its header", "[io][checkpoint]") {
  expect_malformed("", {"the file is empty"});
  expect_malformed("abcde", {"has 5 bytes, fewer than the 8"});
  const parts p = valid_parts();
  // A header length one past the end of the file.
  const std::string header = p.header.dump();
  std::string bytes = assemble(header, p.data);
  bytes = assemble(header + p.data + "x", "").substr(0, 8) + bytes.substr(8);
  expect_malformed(bytes, {"header length (file bytes 0 to 8) is", "past the end of the file"});
  expect_malformed(assemble(p).substr(0, 20), {"past the end of the file"});
  std::string huge = assemble(p);
  huge[7] = '\x7f';
  expect_malformed(huge, {"past the end of the file"});
}

TEST_CASE("checkpoint errors: a header longer than safetensors allows", "[io][checkpoint]") {
  // A sparse 150 MB file whose header length says 120 MB: refused before it is read.
  temp_dir dir;
  const auto file = dir / "big.safetensors";
  std::string prefix(8, '\0');
  const std::uint64_t n = 120'000'000;
  for (int i = 0; i < 8; ++i)
    prefix[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  write_bytes(file, prefix);
  REQUIRE(::truncate(file.c_str(), 150'000'000) == 0);
  Small target = small_values();
  try {
    io::load_into(file, target);
    FAIL("accepted");
  } catch (const io::format_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("more than safetensors' limit"));
  }
}

TEST_CASE("checkpoint errors: a header that is not the JSON object safetensors requires",
          "[io][checkpoint]") {
  const std::string data = valid_parts().data;
  expect_malformed(assemble("", data), {"does not start with '{'"});
  expect_malformed(assemble("[1, 2]  ", data), {"does not start with '{'"});
  expect_malformed(assemble("{\"w\": }", data), {"not valid JSON", "near file byte"});
  expect_malformed(assemble("{\"w\": 1e999}", data), {"not valid JSON"});
  expect_malformed(assemble("{\"w\": \"\xff\"}", data), {"not valid JSON"});
  expect_malformed(assemble("{} trailing", data), {"not valid JSON"});
  std::string nul = valid_parts().header.dump();
  nul.back() = '\0';
  expect_malformed(assemble(nul, data), {"not valid JSON"});
  // Duplicate keys, at the top level and inside an entry.
  const std::string w = R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
  expect_malformed(assemble("{\"w\":" + w + ",\"w\":" + w + "}", data), {"\"w\" twice"});
  expect_malformed(
      assemble(R"({"w":{"dtype":"F32","dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", data),
      {"\"dtype\" twice"});
}

TEST_CASE("checkpoint errors: only whitespace may follow the header's JSON, never a NUL",
          "[io][checkpoint]") {
  // nlohmann's lexer takes a NUL for the end of its input: without the check after parsing, the
  // bytes after a NUL were never read, so a file could hide anything there.
  const parts p = valid_parts();
  const std::string header = p.header.dump();
  for (const std::string& tail : {std::string(1, '\0'), std::string("\0this is not JSON {{{", 21),
                                  std::string("  \0\0", 4), std::string("\0 ", 2)}) {
    INFO(json(tail).dump());
    const auto at = 8 + header.size() + tail.find('\0');
    expect_malformed(
        assemble(header + tail, p.data),
        {"the header's JSON is followed by a NUL byte at file byte " + std::to_string(at) +
             " (and " + std::to_string(tail.size() - tail.find('\0') - 1) + " more bytes)",
         "only whitespace may follow the JSON value"});
  }
  // A NUL inside the JSON (not after it) is a parse error, as before.
  std::string inside = header;
  inside.insert(inside.find("\"w\""), std::string(1, '\0'));
  expect_malformed(assemble(inside, p.data), {"not valid JSON"});
  // Whitespace after the JSON, as serde_json (safetensors' reader) and Python's json accept it:
  // spaces (the specification's padding, and what save writes), tabs, newlines, returns.
  for (const std::string tail : {"        ", " \t\r\n", "\n"}) {
    temp_dir dir;
    write_bytes(dir / "padded.safetensors", assemble(header + tail, p.data));
    Small s = small_values();
    io::load_into(dir / "padded.safetensors", s);
    CHECK(s.w(1, 0) == 40);
  }
}

TEST_CASE("checkpoint errors: malformed tensor entries", "[io][checkpoint]") {
  auto edit = [](auto&& change) {
    parts p = valid_parts();
    change(p);
    return assemble(p);
  };
  expect_malformed(edit([](parts& p) { p.header["b"] = 5; }),
                   {"tensor \"b\"", "is an integer, not an object"});
  expect_malformed(edit([](parts& p) { p.header["b"].erase("dtype"); }),
                   {"tensor \"b\"", "no \"dtype\""});
  expect_malformed(edit([](parts& p) { p.header["b"].erase("shape"); }), {"no \"shape\""});
  expect_malformed(edit([](parts& p) { p.header["b"].erase("data_offsets"); }),
                   {"no \"data_offsets\""});
  expect_malformed(edit([](parts& p) { p.header["b"]["stride"] = 1; }),
                   {"unknown field \"stride\""});
  expect_malformed(edit([](parts& p) { p.header["b"]["dtype"] = "F17"; }),
                   {"tensor \"b\"", "unknown dtype \"F17\"", "BF16"});
  expect_malformed(edit([](parts& p) { p.header["b"]["dtype"] = 4; }), {"dtype must be a string"});
  expect_malformed(edit([](parts& p) { p.header["b"]["shape"] = "2"; }),
                   {"shape must be an array"});
  expect_malformed(edit([](parts& p) { p.header["b"]["shape"] = {-2}; }),
                   {"shape[0] must be a non-negative integer", "-2"});
  expect_malformed(edit([](parts& p) { p.header["b"]["shape"] = {2.0}; }),
                   {"shape[0]", "non-integer number"});
  expect_malformed(edit([](parts& p) { p.header["b"]["data_offsets"] = {24}; }),
                   {"data_offsets must be an array"});
  expect_malformed(edit([](parts& p) {
                     p.header["b"]["data_offsets"] = {24, "32"};
                   }),
                   {"data_offsets[1]"});
  expect_malformed(edit([](parts& p) {
                     p.header["b"]["data_offsets"] = {32, 24};
                   }),
                   {"end before they begin"});
  expect_malformed(edit([](parts& p) {
                     p.header["b"]["shape"] = {std::uint64_t{1} << 62, std::uint64_t{1} << 62};
                   }),
                   {"more than 2^64 bytes"});
}

TEST_CASE("checkpoint errors: shapes and byte ranges that disagree, overlap or leave gaps",
          "[io][checkpoint]") {
  auto edit = [](auto&& change) {
    parts p = valid_parts();
    change(p);
    return assemble(p);
  };
  expect_malformed(
      edit([](parts& p) {
        p.header["w"]["shape"] = {2, 2};
      }),
      {"tensor \"w\"", "shape [2, 2] of F32 needs 16 bytes", "data_offsets [0, 24] hold 24"});
  expect_malformed(edit([](parts& p) { p.header["w"]["dtype"] = "F64"; }), {"needs 48 bytes"});
  expect_malformed(edit([](parts& p) {
                     p.header["flag"]["data_offsets"] = {40, 42};
                   }),
                   {"run past the end of the data, which has 41 bytes"});
  expect_malformed(edit([](parts& p) {
                     p.header["b"]["data_offsets"] = {20, 28};
                   }),
                   {"tensors \"w\"", "\"b\"", "overlap"});
  expect_malformed(edit([](parts& p) {
                     p.header["key"]["data_offsets"] = {33, 41};
                     p.header["flag"]["data_offsets"] = {41, 42};
                     p.data.push_back('\0');
                   }),
                   {"data bytes [32, 33)", "belong to no tensor"});
  expect_malformed(edit([](parts& p) { p.data += "junk"; }), {"4 bytes after the last tensor"});
  expect_malformed(edit([](parts& p) { p.data.pop_back(); }), {"run past the end of the data"});
}

TEST_CASE("checkpoint errors: malformed metadata", "[io][checkpoint]") {
  auto edit = [](auto&& change) {
    parts p = valid_parts();
    change(p);
    return assemble(p);
  };
  expect_malformed(edit([](parts& p) { p.header["__metadata__"] = json::array({1}); }),
                   {"__metadata__ is an array"});
  expect_malformed(edit([](parts& p) { p.header["__metadata__"]["epoch"] = 3; }),
                   {"\"epoch\" is an integer", "must be strings"});
  expect_malformed(
      edit([](parts& p) { p.header["__metadata__"]["grove.key_layout:key"] = "sideways"; }),
      {"\"sideways\"", "\"partitionable\" or \"legacy\""});
  expect_malformed(
      edit([](parts& p) { p.header["__metadata__"]["grove.key_layout:w"] = "legacy"; }),
      {"tensor \"w\" is a random key", "F32 [2, 3], not U32 [2]"});
  expect_malformed(
      edit([](parts& p) { p.header["__metadata__"]["grove.key_layout:nope"] = "legacy"; }),
      {"a tensor the file does not have"});
}

TEST_CASE("checkpoint errors: a file that does not match the tree names the key paths",
          "[io][checkpoint]") {
  auto edit = [](auto&& change) {
    parts p = valid_parts();
    change(p);
    return assemble(p);
  };
  // A missing tensor: drop "flag" (the data with it).
  expect_bad(edit([](parts& p) {
               p.header.erase("flag");
               p.data.pop_back();
             }),
             {"tensor \"flag\" (key path .flag) is missing from the file", "bool[]"});
  // An extra tensor.
  expect_bad(edit([](parts& p) {
               p.header["extra"] = {{"dtype", "F16"}, {"shape", {1}}, {"data_offsets", {41, 43}}};
               p.data += "ab";
             }),
             {"the file has tensor \"extra\" (F16 [1]), which the tree does not have"});
  // Both shapes.
  expect_bad(edit([](parts& p) {
               p.header["w"]["shape"] = {3, 2};
             }),
             {"tensor \"w\" (key path .w): shape [3, 2] in the file, [2, 3] in the tree"});
  // Both dtypes.
  expect_bad(edit([](parts& p) { p.header["w"]["dtype"] = "I32"; }),
             {"tensor \"w\" (key path .w): dtype I32 in the file, F32 (float32) in the tree"});
  expect_bad(edit([](parts& p) {
               p.header["b"] = {{"dtype", "I32"}, {"shape", {2}}, {"data_offsets", {24, 32}}};
             }),
             {"tensor \"b\" (key path .b): dtype I32 in the file, F32 (float32) in the tree; "
              "grove does not convert I32 to F32"});
  // A narrowing conversion needs load_options::convert.
  expect_bad(edit([](parts& p) {
               p.header["b"] = {{"dtype", "F64"}, {"shape", {1}}, {"data_offsets", {24, 32}}};
             }),
             {"dtype F64 in the file, F32 (float32) in the tree; F64 to F32 narrows, which "
              "load_options::convert allows"});
  expect_bad(edit([](parts& p) {
               p.header["key"]["dtype"] = "I32";
               p.header["__metadata__"].erase("grove.key_layout:key");
             }),
             {"tensor \"key\" (key path .key): dtype I32 in the file, U32"});
  // Several problems at once: all listed.
  expect_bad(edit([](parts& p) {
               p.header["w"]["shape"] = {6};
               p.header["b"]["shape"] = {1, 2};
             }),
             {"2 problems", "tensor \"w\"", "tensor \"b\""});
  // A BOOL byte that is neither 0 nor 1.
  expect_bad(edit([](parts& p) { p.data.back() = '\2'; }),
             {"tensor \"flag\" is BOOL", "file offset", "is 2"});
}

TEST_CASE("checkpoint errors: what is not a format error", "[io][checkpoint]") {
  temp_dir dir;
  Small s = small_values();
  try {
    io::load_into(dir / "nothing.safetensors", s);
    FAIL("accepted");
  } catch (const io::format_error&) {
    FAIL("a missing file is not a format error");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::no_such_file_or_directory);
    CHECK_THAT(e.what(), Catch::Contains("nothing.safetensors"));
  }
  try {
    (void)io::inspect(dir.path);
    FAIL("accepted");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::is_a_directory);
  }
  // Both kinds are std::runtime_error.
  CHECK_THROWS_AS(io::load(dir / "nothing.safetensors", s), std::runtime_error);
}

TEST_CASE("checkpoint errors: format_error copies without throwing and keeps its details",
          "[io][checkpoint]") {
  static_assert(std::is_nothrow_copy_constructible_v<io::format_error>);
  static_assert(std::is_base_of_v<std::runtime_error, io::format_error>);
  const io::format_error e("f", "a/b.safetensors", "broken");
  const io::format_error copy = e;
  CHECK(std::string(copy.what()) == "f: a/b.safetensors: broken");
  CHECK(copy.path() == "a/b.safetensors");
  CHECK(copy.problem() == "broken");
}
