// Hostile and unlucky input to grove's file readers and writers: special files (FIFOs, devices,
// directories, symbolic links), gzip streams cut or padded, headers that claim more than the file
// holds, JSON nested or repeated to exhaust the stack, time or memory. Each case must end in
// grove's own exception, naming the function and the file, quickly, within a small memory
// budget, and leave everything on disk as it was.
//
// The cases tagged [bomb] are also run by ctest under `ulimit -v` (tests/hostile.cmake), so that
// an allocation of the size an attacker claims fails the test instead of passing unnoticed.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

#include "checkpoint_fixture.hpp"
#include "grove/io/atomic_write.hpp"
#include "grove/io/checkpoint.hpp"
#include "grove/io/idx.hpp"

namespace fs = std::filesystem;
namespace io = grove::io;
using Catch::Contains;
using Catch::StartsWith;
using ckpt_test::read_bytes;
using ckpt_test::temp_dir;
using ckpt_test::write_bytes;

namespace {

using Bytes = std::string;

void put_u32(Bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<char>(v >> shift));
}

Bytes idx_header(std::uint8_t type, const std::vector<std::uint32_t>& dims) {
  Bytes b{0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (auto d : dims) put_u32(b, d);
  return b;
}

// count images of rows x cols pixels: pixel p of image i is (7 * i + p) % 256.
Bytes idx_images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes b = idx_header(0x08, {count, rows, cols});
  for (std::uint32_t i = 0; i < count; ++i)
    for (std::uint32_t p = 0; p < rows * cols; ++p)
      b.push_back(static_cast<char>((7 * i + p) % 256));
  return b;
}

// A gzip member holding `bytes`, made with zlib's own writer (so the test does not rely on the
// reader's inflate to produce its input).
Bytes gzip(const Bytes& bytes) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  Bytes out(deflateBound(&z, static_cast<uLong>(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The message of the format_error `f()` must raise; also checks it names `function` and `file`.
template <class F>
std::string format_message(F&& f, const std::string& function, const fs::path& file) {
  try {
    f();
  } catch (const io::format_error& e) {
    CHECK_THAT(e.what(), StartsWith(function + ": " + file.string() + ": "));
    CHECK(e.path() == file);
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected grove::io::format_error, got: " << e.what());
  }
  FAIL("expected grove::io::format_error, got no exception");
  return {};
}

// The file_error `f()` must raise: its code and message.
template <class F>
io::file_error file_failure(F&& f) {
  try {
    f();
  } catch (const io::file_error& e) {
    return e;
  } catch (const std::exception& e) {
    FAIL("expected grove::io::file_error, got: " << e.what());
  }
  FAIL("expected grove::io::file_error, got no exception");
  return io::file_error(std::error_code(), "");
}

// Seconds since `t0`.
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The time ceilings are generous (several times what the code takes on a loaded machine, a
// fraction of what the quadratic code took) and scaled up for a sanitized build
// (tests/checkpoint.cmake), which runs several times slower.
#ifndef GROVE_HOSTILE_TIME_SCALE
#define GROVE_HOSTILE_TIME_SCALE 1
#endif
constexpr double time_scale = GROVE_HOSTILE_TIME_SCALE;

struct Small {
  Eigen::MatrixXf w;
  Eigen::VectorXf b;
};
GROVE_NODE(Small, w, b);

Small small() {
  return {Eigen::MatrixXf::Constant(2, 3, 1.5f), Eigen::VectorXf::Constant(2, 2.5f)};
}

std::string le64(std::uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A safetensors file: the header text (padded to 8 bytes) and the data.
std::string safetensors(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  return le64(header.size()) + header + data;
}

// Every checkpoint reader on `file`: each must raise format_error naming itself and the file,
// and leave the tree as it was. Returns the longest message.
std::string every_checkpoint_reader_refuses(const fs::path& file) {
  std::string longest;
  auto keep = [&](const std::string& m) {
    if (m.size() > longest.size()) longest = m;
  };
  keep(format_message([&] { (void)io::inspect(file); }, "grove::io::inspect", file));
  Small s = small();
  keep(format_message([&] { (void)io::load_into(file, s); }, "grove::io::load_into", file));
  CHECK(s.w == small().w);
  CHECK(s.b == small().b);
  keep(format_message([&] { (void)io::load(file, s); }, "grove::io::load", file));
  return longest;
}

}  // namespace

// --- special files -------------------------------------------------------------------------------

TEST_CASE("hostile: a FIFO, a device or a socket is refused by every reader, without waiting",
          "[hostile][special]") {
  temp_dir dir;
  const auto fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A socket, bound in the directory.
  const auto sock_path = dir / "sock";
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(sock >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(sock_path.string().size() < sizeof addr.sun_path);
  std::strcpy(addr.sun_path, sock_path.c_str());
  REQUIRE(::bind(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
  std::vector<std::pair<fs::path, std::string>> specials = {
      {fifo, "a FIFO"}, {"/dev/null", "a character device"}, {"/dev/zero", "a character device"}};
  // A FIFO with no writer makes a blocking open wait forever; ctest's timeout catches a hang.
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& [file, kind] : specials) {
    INFO(file);
    auto check = [&, file = file, kind = kind](const io::file_error& e,
                                               const std::string& function) {
      CHECK(e.code() == std::errc::invalid_argument);
      CHECK_THAT(e.what(), StartsWith(function + ": cannot read " + file.string()) &&
                               Contains(kind + ", not a regular file"));
    };
    check(file_failure([&] { (void)io::read_idx(file); }), "grove::io::read_idx");
    check(file_failure([&] { (void)io::read_idx_images<float>(file); }),
          "grove::io::read_idx_images");
    check(file_failure([&] { (void)io::read_idx_labels(file); }), "grove::io::read_idx_labels");
    check(file_failure([&] { (void)io::inspect(file); }), "grove::io::inspect");
    Small s = small();
    check(file_failure([&] { (void)io::load_into(file, s); }), "grove::io::load_into");
    check(file_failure([&] { (void)io::load(file, s); }), "grove::io::load");
  }
  // The socket: not readable as a file at all (open fails with ENXIO), still a file_error.
  CHECK_THROWS_AS(io::read_idx(sock_path), io::file_error);
  CHECK_THROWS_AS(io::inspect(sock_path), io::file_error);
  ::close(sock);
  CHECK(since(t0) < 10 * time_scale);
  CHECK(fs::is_fifo(fifo));
  CHECK(fs::is_character_file("/dev/null"));
}

TEST_CASE("hostile: a directory is refused by every reader with EISDIR", "[hostile][special]") {
  temp_dir dir;
  for (auto f : std::vector<std::function<void()>>{
           [&] { (void)io::read_idx(dir.path); },
           [&] { (void)io::read_idx_images<float>(dir.path); },
           [&] { (void)io::inspect(dir.path); },
       }) {
    const auto e = file_failure(f);
    CHECK(e.code() == std::errc::is_a_directory);
    CHECK_THAT(e.what(), Contains("cannot read " + dir.path.string()));
  }
}

TEST_CASE("hostile: writers replace only regular files; a special target is left as it was",
          "[hostile][special]") {
  temp_dir dir;
  const Small s = small();
  // Each writer, onto `target`: must throw file_error with `code` before writing anything.
  auto refused = [&](const fs::path& target, std::errc code, const std::string& says) {
    INFO(target);
    for (int writer = 0; writer < 2; ++writer) {
      const std::string function = writer == 0 ? "grove::io::save" : "grove::io::write_atomically";
      const auto e = file_failure([&] {
        if (writer == 0)
          io::save(target, s);
        else
          io::write_atomically(target, "epoch\n1\n");
      });
      CHECK(e.code() == code);
      CHECK_THAT(e.what(), StartsWith(function + ": cannot save " + target.string() + ": " + says));
    }
  };
  const auto fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  refused(fifo, std::errc::invalid_argument, "it is a FIFO, and grove replaces only regular files");
  CHECK(fs::is_fifo(fifo));

  // A character device of its own (as /dev/null: major 1, minor 3), where the test may make one
  // (root, with CAP_MKNOD): a writer that renamed over it would replace only this node.
  const auto device = dir / "null";
  if (::mknod(device.c_str(), S_IFCHR | 0600, ::makedev(1, 3)) == 0) {
    refused(device, std::errc::invalid_argument,
            "it is a character device, and grove replaces only regular files");
    CHECK(fs::is_character_file(device));
    fs::remove(device);
  } else {
    WARN("no character device case: mknod is not permitted here");
  }

  fs::create_directories(dir / "d" / "inside");
  refused(dir / "d", std::errc::is_a_directory, "it is a directory");
  CHECK(fs::is_directory(dir / "d" / "inside"));

  fs::create_symlink(fifo, dir / "to-fifo");
  refused(dir / "to-fifo", std::errc::invalid_argument, "it is a symbolic link to a FIFO");
  fs::create_symlink(dir / "d", dir / "to-dir");
  refused(dir / "to-dir", std::errc::is_a_directory, "it is a link to a directory");
  fs::create_symlink(dir / "nothing", dir / "dangling");
  refused(dir / "dangling", std::errc::no_such_file_or_directory,
          "it is a symbolic link to nothing");
  CHECK_FALSE(fs::exists(dir / "nothing"));
  CHECK(fs::is_symlink(dir / "dangling"));

  // Nothing but what the test made: no temporary file left behind.
  std::vector<std::string> names = dir.entries();
  std::sort(names.begin(), names.end());
  CHECK(names == std::vector<std::string>{"d", "dangling", "fifo", "to-dir", "to-fifo"});
}

TEST_CASE("hostile: writing through a symbolic link to a regular file replaces the file it names",
          "[hostile][special]") {
  temp_dir dir;
  fs::create_directories(dir / "real");
  write_bytes(dir / "real" / "m.csv", "old");
  fs::create_symlink(dir / "real" / "m.csv", dir / "link.csv");
  io::write_atomically(dir / "link.csv", "new");
  CHECK(fs::is_symlink(dir / "link.csv"));  // the link stays a link
  CHECK(read_bytes(dir / "real" / "m.csv") == "new");
  io::save(dir / "link.csv", small());
  CHECK(fs::is_symlink(dir / "link.csv"));
  Small back{Eigen::MatrixXf::Zero(2, 3), Eigen::VectorXf::Zero(2)};
  io::load_into(dir / "real" / "m.csv", back);
  CHECK(back.w == small().w);
  // The temporary file went where the real file is, and is gone.
  CHECK(dir.entries().size() == 2);
  std::vector<std::string> real;
  for (const auto& e : fs::directory_iterator(dir / "real")) real.push_back(e.path().filename());
  CHECK(real == std::vector<std::string>{"m.csv"});
}

// --- gzip
// ------------------------------------------------------------------------------------------

TEST_CASE("hostile: a gzip IDX file cut anywhere, even in its CRC trailer, is truncated",
          "[hostile][gzip]") {
  temp_dir dir;
  const Bytes plain = idx_images(20, 4, 4);
  const Bytes z = gzip(plain);
  write_bytes(dir / "whole.gz", z);
  REQUIRE(io::read_idx_images<float>(dir / "whole.gz").cols() == 20);
  // The 8-byte trailer is the CRC-32 and the length: every cut inside it, and a few before.
  for (std::size_t cut = 1; cut <= 12; ++cut) {
    INFO("cut " << cut);
    const auto file = dir / ("cut" + std::to_string(cut) + ".gz");
    write_bytes(file, z.substr(0, z.size() - cut));
    const auto m = format_message([&] { (void)io::read_idx_images<float>(file); },
                                  "grove::io::read_idx_images", file);
    CHECK_THAT(m, Contains("truncated"));
  }
  // A flipped data bit with the trailer cut: the CRC that would catch it is missing, so the file
  // must fail as truncated rather than load wrong pixels.
  for (std::size_t bit = 0; bit < 8; ++bit) {
    Bytes bad = z.substr(0, z.size() - 8);
    bad[z.size() / 2] = static_cast<char>(bad[z.size() / 2] ^ (1 << bit));
    const auto file = dir / "flipped.gz";
    write_bytes(file, bad);
    CHECK_THROWS_AS(io::read_idx_images<float>(file), io::format_error);
  }
  // With the trailer whole, a flipped bit fails the CRC (or the deflate data).
  Bytes bad = z;
  bad[z.size() - 10] = static_cast<char>(bad[z.size() - 10] ^ 1);
  write_bytes(dir / "crc.gz", bad);
  CHECK_THROWS_AS(io::read_idx_images<float>(dir / "crc.gz"), io::format_error);
}

TEST_CASE("hostile: bytes after a gzip member are refused unless they are another member",
          "[hostile][gzip]") {
  temp_dir dir;
  const Bytes plain = idx_images(5, 2, 2);
  const Bytes z = gzip(plain);
  for (const Bytes& garbage :
       {Bytes("x"), Bytes(1, '\0'), Bytes(100, '\0'), Bytes("\x1f"), Bytes("\x1f\x8b garbage")}) {
    const auto file = dir / "trailing.gz";
    write_bytes(file, z + garbage);
    const auto m = format_message([&] { (void)io::read_idx(file); }, "grove::io::read_idx", file);
    // "\x1f\x8b garbage" starts like a member and is reported as a broken one.
    if (garbage.size() < 2 || garbage[1] != '\x8b')
      CHECK_THAT(m, Contains("the gzip stream ends at file byte " + std::to_string(z.size()) +
                             ", but " + std::to_string(garbage.size()) +
                             " more bytes follow that are not another gzip member"));
  }
  // Two members, as `cat a.gz b.gz` makes: one stream, valid gzip.
  const auto file = dir / "two.gz";
  write_bytes(file, gzip(plain.substr(0, 10)) + gzip(plain.substr(10)));
  const auto images = io::read_idx_images<float>(file, 1.0f);
  REQUIRE(images.cols() == 5);
  CHECK(images(3, 4) == static_cast<float>((7 * 4 + 3) % 256));
}

// --- claims larger than the file
// -------------------------------------------------------------------

TEST_CASE("hostile: an IDX header claiming gigabytes is refused before allocating",
          "[hostile][bomb]") {
  temp_dir dir;
  const auto t0 = std::chrono::steady_clock::now();
  // 8 bytes claiming 4 GB of labels, and 16 claiming 40 GB of images: plain, then gzip.
  const Bytes labels = idx_header(0x08, {0xFFFFFFFFu});
  const Bytes images = idx_header(0x08, {50000000u, 28, 28});
  for (const bool compressed : {false, true}) {
    const std::string suffix = compressed ? ".gz" : "";
    write_bytes(dir / ("labels" + suffix), compressed ? gzip(labels) : labels);
    write_bytes(dir / ("images" + suffix), compressed ? gzip(images) : images);
    const auto l = dir / ("labels" + suffix);
    const auto i = dir / ("images" + suffix);
    // Within a cap that allows them, the claims fail as truncated, after 0 data bytes.
    CHECK_THAT(format_message([&] { (void)io::read_idx_labels(l, 10, std::uint64_t{1} << 40); },
                              "grove::io::read_idx_labels", l),
               Contains("truncated data") && Contains("(0 data bytes)"));
    CHECK_THAT(format_message([&] { (void)io::read_idx(l, std::uint64_t{1} << 40); },
                              "grove::io::read_idx", l),
               Contains("truncated data"));
    CHECK_THAT(
        format_message([&] { (void)io::read_idx_images<float>(i, 1.0f, std::uint64_t{1} << 40); },
                       "grove::io::read_idx_images", i),
        Contains("truncated data") && Contains("(0 data bytes)"));
    // Under the default cap (2 GiB), the 40 GB claim is refused as too large, naming the cap.
    CHECK_THAT(format_message([&] { (void)io::read_idx_images<float>(i); },
                              "grove::io::read_idx_images", i),
               Contains("39200000000 data bytes, more than the limit of 2147483648 bytes"));
  }
  // A gzip file that does hold a lot, but less than it claims: read as it arrives, reported as
  // truncated with what it had.
  Bytes some = idx_header(0x08, {0xFFFFFFFFu});
  some.append(3 << 20, '\1');
  write_bytes(dir / "some.gz", gzip(some));
  CHECK_THAT(format_message(
                 [&] { (void)io::read_idx_labels(dir / "some.gz", 10, std::uint64_t{1} << 40); },
                 "grove::io::read_idx_labels", dir / "some.gz"),
             Contains("(3145728 data bytes)"));
  CHECK(since(t0) < 20 * time_scale);
}

TEST_CASE("hostile: the data cap is overridable and counts the whole MNIST directory",
          "[hostile][idx]") {
  temp_dir dir;
  const Bytes images = idx_images(3, 2, 2);  // 12 data bytes
  Bytes labels = idx_header(0x08, {3});
  labels += Bytes{1, 2, 3};  // 3 data bytes
  for (const char* split : {"train", "t10k"}) {
    write_bytes(dir / (std::string(split) + "-images-idx3-ubyte"), images);
    write_bytes(dir / (std::string(split) + "-labels-idx1-ubyte"), labels);
  }
  CHECK(io::load_mnist<float>(dir.path, 10, 30).test.size() == 3);  // exactly 2 * (12 + 3)
  const auto file = dir / "t10k-labels-idx1-ubyte";
  CHECK_THAT(format_message([&] { (void)io::load_mnist<float>(dir.path, 10, 29); },
                            "grove::io::read_idx_labels", file),
             Contains("3 data bytes, more than the limit of 2 bytes"));
  CHECK_THROWS_AS(io::read_idx(dir / "train-images-idx3-ubyte", 11), io::format_error);
  CHECK(io::read_idx(dir / "train-images-idx3-ubyte", 12).size() == 12);
}

TEST_CASE("hostile: zero images, zero pixels and dimensions whose product overflows",
          "[hostile][idx]") {
  temp_dir dir;
  write_bytes(dir / "none", idx_header(0x08, {0, 28, 28}));
  const auto none = io::read_idx_images<float>(dir / "none");
  CHECK(none.rows() == 784);  // the pixels of an image, even with no image
  CHECK(none.cols() == 0);
  write_bytes(dir / "flat", idx_header(0x08, {5, 0, 0}));
  const auto flat = io::read_idx_images<float>(dir / "flat");
  CHECK(flat.rows() == 0);
  CHECK(flat.cols() == 5);
  // 0 x 2^32 x 2^32 x 2^32: no elements, but an image of 2^96 pixels cannot be.
  write_bytes(dir / "huge", idx_header(0x08, {0, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}));
  CHECK_THAT(format_message([&] { (void)io::read_idx_images<float>(dir / "huge"); },
                            "grove::io::read_idx_images", dir / "huge"),
             Contains("are too large"));
}

// --- checkpoint headers --------------------------------------------------------------------------

TEST_CASE("hostile: a checkpoint header nesting 100,000 levels fails at once, briefly",
          "[hostile][bomb]") {
  temp_dir dir;
  const int depth = 100'000;
  const auto t0 = std::chrono::steady_clock::now();
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    out.reserve(s.size() * static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  const std::vector<std::pair<std::string, std::string>> bombs = {
      {"objects", "{" + repeat("\"a\":{", depth)},
      {"arrays", "{\"a\":" + repeat("[", depth)},
      {"in metadata", "{\"__metadata__\":" + repeat("{\"k\":", depth)},
      {"in a shape", "{\"w\":{\"shape\":" + repeat("[", depth)},
  };
  for (const auto& [name, open] : bombs) {
    INFO(name);
    // Closed properly or not: the reader must not get that far.
    for (const bool closed : {false, true}) {
      std::string text = open;
      if (closed) {
        text += "1";
        for (auto it = open.rbegin(); it != open.rend(); ++it)
          if (*it == '{' || *it == '[') text += (*it == '{' ? '}' : ']');
      }
      const auto file = dir / "deep.safetensors";
      write_bytes(file, safetensors(text, ""));
      const std::string m = every_checkpoint_reader_refuses(file);
      CHECK(m.size() < 600);  // never the attacker's JSON
    }
  }
  CHECK(since(t0) < 20 * time_scale);
}

TEST_CASE("hostile: messages quote at most 64 characters of a name from the file",
          "[hostile][header]") {
  temp_dir dir;
  const std::string name(1 << 20, 'n');
  const auto file = dir / "long.safetensors";
  write_bytes(file, safetensors("{\"" + name + "\":{\"dtype\":\"F99\"}}", ""));
  const std::string m = every_checkpoint_reader_refuses(file);
  CHECK_THAT(m, Contains("tensor \"" + name.substr(0, 64) + "\"...: unknown dtype \"F99\""));
  CHECK(m.size() < 600);
  // A string that never ends, and a number too large: nlohmann's message quotes the token.
  write_bytes(file, safetensors("{\"w\":\"" + std::string(1 << 20, 's'), ""));
  CHECK(every_checkpoint_reader_refuses(file).size() < 600);
  write_bytes(file, safetensors("{\"w\":{\"shape\":[1" + std::string(100000, '0') + "e999]}}", ""));
  CHECK(every_checkpoint_reader_refuses(file).size() < 600);
}

TEST_CASE("hostile: a header of 80,000 tensors parses in linear time", "[hostile][header]") {
  // Every tensor is U8 [1], one byte each; the structure does not match Small, so load_into
  // fails after parsing: the time is the parser's.
  const int n = 80'000;
  std::string text = "{";
  for (int i = 0; i < n; ++i) {
    if (i) text += ',';
    text += "\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
            std::to_string(i) + "," + std::to_string(i + 1) + "]}";
  }
  text += "}";
  temp_dir dir;
  const auto file = dir / "many.safetensors";
  write_bytes(file, safetensors(text, std::string(n, '\0')));
  const auto t0 = std::chrono::steady_clock::now();
  const auto info = io::inspect(file);
  CHECK(info.tensors.size() == static_cast<std::size_t>(n));
  CHECK(info.tensors[n - 1].name == "t" + std::to_string(n - 1));
  Small s = small();
  CHECK_THAT(format_message([&] { (void)io::load_into(file, s); }, "grove::io::load_into", file),
             Contains(std::to_string(n + 2) + " problems") &&
                 Contains("and " + std::to_string(n + 2 - 20) + " more"));
  // Two parses (inspect, load_into): a linear parser takes a fraction of a second each; the
  // quadratic one took tens.
  CHECK(since(t0) < 8 * time_scale);
}

TEST_CASE("hostile: a tree of 100,000 leaves saves and loads in linear time", "[hostile][header]") {
  std::vector<float> leaves(100'000);
  for (std::size_t i = 0; i < leaves.size(); ++i) leaves[i] = static_cast<float>(i) * 0.5f;
  temp_dir dir;
  const auto file = dir / "wide.safetensors";
  const auto t0 = std::chrono::steady_clock::now();
  io::save(file, leaves);
  std::vector<float> back(leaves.size(), -1.0f);
  io::load_into(file, back);
  CHECK(back == leaves);
  CHECK(since(t0) < 8 * time_scale);
  // The header is the one nlohmann writes for the same object: spot-check its start.
  const std::string bytes = read_bytes(file);
  CHECK_THAT(bytes.substr(8, 40), StartsWith("{\"__metadata__\":{\"grove.version\":"));
  CHECK(
      bytes.find(",\"99999\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[399996,400000]}}") !=
      std::string::npos);
}

TEST_CASE("hostile: a 99 MB header is parsed in memory proportional to it", "[hostile][bomb]") {
  // A header of 98 MB of small metadata entries (1.8 million of them): the ctest run under
  // `ulimit -v` (tests/checkpoint.cmake) bounds what the parser may allocate.
  temp_dir dir;
  const auto file = dir / "big.safetensors";
  {
    std::string text = "{\"__metadata__\":{";
    for (int i = 0; text.size() < 98'000'000; ++i) {
      if (i) text += ',';
      text += "\"k" + std::to_string(i) + "\":\"" + std::string(40, 'v') + "\"";
    }
    text += "}}";
    write_bytes(file, safetensors(text, ""));
  }
  const auto info = io::inspect(file);
  CHECK(info.metadata.size() > 1'800'000);
  CHECK(info.metadata.at("k7") == std::string(40, 'v'));
}

TEST_CASE("hostile: a shape of more than 1024 dimensions is refused as it is read",
          "[hostile][bomb]") {
  // 1 x 1 x ... x 1: 10 million dimensions of a one-byte tensor, 20 MB of header that would be
  // 80 MB of shape.
  temp_dir dir;
  const auto file = dir / "rank.safetensors";
  std::string text = "{\"w\":{\"dtype\":\"U8\",\"shape\":[1";
  while (text.size() < 20'000'000) text += ",1";
  text += "],\"data_offsets\":[0,1]}}";
  write_bytes(file, safetensors(text, "x"));
  CHECK_THAT(every_checkpoint_reader_refuses(file),
             Contains("tensor \"w\": shape has more than 1024 dimensions"));
  // 1024 are read.
  text = "{\"w\":{\"dtype\":\"U8\",\"shape\":[1";
  for (int i = 1; i < 1024; ++i) text += ",1";
  text += "],\"data_offsets\":[0,1]}}";
  write_bytes(file, safetensors(text, "x"));
  CHECK(io::inspect(file).tensors.at(0).shape.size() == 1024);
}

TEST_CASE("hostile: a sparse terabyte of data is not read when the structure does not match",
          "[hostile][bomb]") {
  temp_dir dir;
  const auto file = dir / "sparse.safetensors";
  const std::uint64_t size = std::uint64_t{1} << 40;  // 1 TiB of U8 data
  const std::string header = "{\"data\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(size) +
                             "],\"data_offsets\":[0," + std::to_string(size) + "]}}";
  const std::string prefix = safetensors(header, "");
  write_bytes(file, prefix);
  if (::truncate(file.c_str(), static_cast<off_t>(prefix.size() + size)) != 0) {
    WARN("skipped: this file system cannot hold a sparse file of 1 TiB");
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  Small s = small();
  CHECK_THAT(format_message([&] { (void)io::load_into(file, s); }, "grove::io::load_into", file),
             Contains("3 problems") &&
                 Contains("the file has tensor \"data\" (U8 [1099511627776]), which the tree "
                          "does not have"));
  CHECK(since(t0) < 10 * time_scale);
  CHECK(fs::file_size(file) == prefix.size() + size);
}

TEST_CASE("hostile: two small tensors load from a sparse 4 GiB file without reading the rest",
          "[hostile][bomb]") {
  // The file: 4 GiB of U8 the tree does not want (a hole), then w and b, and an unaligned F16
  // tensor at the very end. With strict = false only w and b are read: the bomb test's ceiling
  // on virtual memory (under 1 GB) fails a loader that reads or maps the whole data.
  temp_dir dir;
  const auto file = dir / "sparse4g.safetensors";
  const std::uint64_t big = std::uint64_t{4} << 30;
  const std::string header =
      "{\"big\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(big) + "],\"data_offsets\":[0," +
      std::to_string(big) + "]},\"model.w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[" +
      std::to_string(big + 1) + "," + std::to_string(big + 25) +
      "]},\"model.b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[" +
      std::to_string(big + 25) + "," + std::to_string(big + 29) +
      "]},\"pad\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" + std::to_string(big) + "," +
      std::to_string(big + 1) + "]}}";
  const std::string prefix = safetensors(header, "");
  write_bytes(file, prefix);
  const float w[6] = {1, -2, 3.5f, 0, -0.0f, 1e-40f};
  const std::uint16_t b[2] = {0x3c00, 0xfc00};  // F16 1 and -inf
  std::string tail(1, '\0');
  tail.append(reinterpret_cast<const char*>(w), sizeof w);
  tail.append(reinterpret_cast<const char*>(b), sizeof b);
  {
    const int fd = ::open(file.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    const auto at = static_cast<off_t>(prefix.size() + big);
    const bool wrote =
        ::pwrite(fd, tail.data(), tail.size(), at) == static_cast<ssize_t>(tail.size());
    ::close(fd);
    if (!wrote) {
      WARN("skipped: this file system cannot hold a sparse file of 4 GiB");
      return;
    }
  }
  REQUIRE(fs::file_size(file) == prefix.size() + big + tail.size());
  const auto t0 = std::chrono::steady_clock::now();
  Small s = small();
  const auto report = io::load_into(
      file, s, {.strict = false, .rename = [](std::string_view n) {
                  return n.starts_with("model.") ? std::string(n.substr(6)) : std::string(n);
                }});
  CHECK(since(t0) < 1 * time_scale);
  CHECK(report.missing.empty());
  CHECK(report.unexpected == std::vector<std::string>{"big", "pad"});
  for (int k = 0; k < 6; ++k) CHECK(std::memcmp(&s.w(k / 3, k % 3), &w[k], 4) == 0);
  CHECK(s.b(0) == 1.0f);
  CHECK(s.b(1) == -std::numeric_limits<float>::infinity());
  // Strictly, the unexpected tensors fail the load, also without reading the data.
  const Small before = s;
  CHECK_THAT(
      format_message([&] { (void)io::load_into(file, s, {}); }, "grove::io::load_into", file),
      Contains("the file has tensor \"big\" (U8 [4294967296])"));
  CHECK((s.w.array() == before.w.array()).all());
}
