// grove/io/idx.hpp: IDX files (MNIST's format), plain and gzip-compressed, and every kind of bad
// file: each must raise an error that names the file and says what is wrong and where.
#include <zlib.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <Eigen/Core>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <grove/io/idx.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "temp_dir.hpp"

namespace fs = std::filesystem;
namespace io = grove::io;
using Catch::Matchers::Contains;
using Bytes = std::vector<std::uint8_t>;

namespace {

void write_plain(const fs::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void write_gzip(const fs::path& file, const Bytes& bytes) {
  gzFile f = gzopen(file.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) ==
          static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}

Bytes read_raw(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void put_u32(Bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<std::uint8_t>(v >> shift));
}

// An IDX header: the magic number (type, number of dimensions) and the dimensions.
Bytes header(std::uint8_t type, const std::vector<std::uint32_t>& dims) {
  Bytes b{0, 0, type, static_cast<std::uint8_t>(dims.size())};
  for (auto d : dims) put_u32(b, d);
  return b;
}

// count images of rows x cols pixels, pixel value = 10 * image + position (row-major).
Bytes images_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  Bytes b = header(0x08, {count, rows, cols});
  for (std::uint32_t i = 0; i < count; ++i)
    for (std::uint32_t p = 0; p < rows * cols; ++p)
      b.push_back(static_cast<std::uint8_t>(10 * i + p));
  return b;
}

Bytes labels_file(const std::vector<std::uint8_t>& labels) {
  Bytes b = header(0x08, {static_cast<std::uint32_t>(labels.size())});
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}
}  // namespace

TEST_CASE("IDX images and labels, plain and gzip", "[io][idx]") {
  TempDir dir;
  const Bytes images = images_file(3, 2, 2), labels = labels_file({7, 0, 9});
  write_plain(dir / "images", images);
  write_gzip(dir / "images.gz", images);
  write_plain(dir / "labels", labels);
  write_gzip(dir / "labels.gz", labels);
  for (const char* suffix : {"", ".gz"}) {
    INFO("suffix '" << suffix << "'");
    const Eigen::MatrixXf x = io::read_idx_images<float>(dir / (std::string("images") + suffix));
    REQUIRE(x.rows() == 4);
    REQUIRE(x.cols() == 3);
    // Column i is image i, pixels in row-major order, scaled to [0, 1].
    CHECK(x(0, 0) == 0.0f);
    CHECK(x(3, 2) == Approx(23 / 255.0));
    CHECK(x(1, 1) == Approx(11 / 255.0));
    const Eigen::MatrixXd raw =
        io::read_idx_images<double>(dir / (std::string("images") + suffix), 1.0);
    CHECK(raw(2, 1) == 12.0);
    const Eigen::VectorXi y = io::read_idx_labels(dir / (std::string("labels") + suffix));
    CHECK(y == Eigen::Vector3i(7, 0, 9));
  }
  // Whether a file is compressed is read from its bytes, not its name.
  fs::copy_file(dir / "images.gz", dir / "compressed-but-named-plain");
  CHECK(io::read_idx_images<float>(dir / "compressed-but-named-plain").cols() == 3);
  const auto d = io::read_idx_dataset<float>(dir / "images.gz", dir / "labels");
  CHECK(d.size() == 3);
}

TEST_CASE("read_idx: any element type, big-endian", "[io][idx]") {
  TempDir dir;
  Bytes ints = header(0x0C, {2, 2});
  for (std::uint32_t v : {1u, 0xFFFFFFFEu, 300u, 7u}) put_u32(ints, v);
  write_gzip(dir / "ints.gz", ints);
  const auto a = io::read_idx(dir / "ints.gz");
  CHECK(a.type == io::idx_type::i32);
  CHECK(a.dims == std::vector<std::size_t>{2, 2});
  CHECK(a.values<int>() == std::vector<int>{1, -2, 300, 7});
  Bytes floats = header(0x0D, {1});
  put_u32(floats, 0x3FC00000u);  // 1.5f
  write_plain(dir / "floats", floats);
  CHECK(io::read_idx(dir / "floats").values<double>() == std::vector<double>{1.5});
}

TEST_CASE("MNIST directories: .gz or plain files", "[io][idx]") {
  TempDir dir;
  write_gzip(dir / "train-images-idx3-ubyte.gz", images_file(4, 3, 3));
  write_plain(dir / "train-labels-idx1-ubyte", labels_file({1, 2, 3, 4}));
  write_gzip(dir / "t10k-images-idx3-ubyte.gz", images_file(2, 3, 3));
  write_gzip(dir / "t10k-labels-idx1-ubyte.gz", labels_file({5, 6}));
  const auto [train, test] = io::load_mnist<float>(dir.path);
  CHECK(train.images.rows() == 9);
  CHECK(train.size() == 4);
  CHECK(test.labels == Eigen::Vector2i(5, 6));
  fs::remove(dir / "t10k-labels-idx1-ubyte.gz");
  try {
    io::load_mnist<float>(dir.path);
    FAIL("no error");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::no_such_file_or_directory);
    CHECK_THAT(e.what(),
               Contains("has neither t10k-labels-idx1-ubyte.gz nor t10k-labels-idx1-ubyte"));
  }
}

TEST_CASE("docs/nn.md's IDX snippet, run", "[io][idx][docs]") {
  // The page's block as it stands, in a directory that holds the files it names (the first line
  // reads the Fashion-MNIST package that the tests install).
  TempDir dir;
  write_gzip(dir / "t10k-images-idx3-ubyte.gz", images_file(3, 28, 28));
  write_gzip(dir / "t10k-labels-idx1-ubyte.gz", labels_file({1, 9, 0}));
  write_plain(dir / "file.idx", labels_file({7}));
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path);
  struct Back {
    fs::path to;
    ~Back() { fs::current_path(to); }
  } back{previous};
  // clang-format off
auto [train, test] = grove::io::load_mnist<float>("/usr/share/datasets/fashion-mnist");
// train.images: 784 x 60000, one column per image in [0, 1]; train.labels: Eigen::VectorXi
Eigen::MatrixXf x = grove::io::read_idx_images<float>("t10k-images-idx3-ubyte.gz");
Eigen::VectorXi y = grove::io::read_idx_labels("t10k-labels-idx1-ubyte.gz", 10);
grove::io::IdxArray any = grove::io::read_idx("file.idx");  // any element type and rank
  // clang-format on
  CHECK(train.images.rows() == 784);
  CHECK(train.size() == 60000);
  CHECK(test.size() == 10000);
  CHECK(x.cols() == 3);
  CHECK(y == Eigen::Vector3i(1, 9, 0));
  CHECK(any.values<int>() == std::vector<int>{7});
}

namespace {
// The format_error a reader raises for `file`, checked to name the file; returns the message.
template <class Read>
std::string format_problem(const fs::path& file, Read&& read) {
  try {
    read(file);
  } catch (const io::format_error& e) {
    CHECK(e.path() == file);
    CHECK_THAT(e.what(), Contains(file.string()));
    return e.what();
  }
  FAIL("no format_error for " << file);
  return {};
}
auto images_reader = [](const fs::path& f) { io::read_idx_images<float>(f); };
auto labels_reader = [](const fs::path& f) { io::read_idx_labels(f, 10); };
}  // namespace

TEST_CASE("Every kind of bad IDX file is reported with the file and the problem", "[io][idx]") {
  TempDir dir;
  const Bytes good = images_file(3, 2, 2);  // 16-byte header + 12 data bytes

  SECTION("wrong magic number") {
    Bytes b = good;
    b[0] = 0x12;
    write_plain(dir / "magic", b);
    CHECK_THAT(format_problem(dir / "magic", images_reader),
               Contains("grove::io::read_idx_images") &&
                   Contains("wrong magic number 0x12000803 at byte 0") &&
                   Contains("two zero bytes"));
    b = good;
    b[2] = 0x07;
    write_gzip(dir / "type.gz", b);
    CHECK_THAT(format_problem(dir / "type.gz", images_reader), Contains("unknown type code 0x07"));
    b = good;
    b[3] = 0;
    write_plain(dir / "nodims", b);
    CHECK_THAT(format_problem(dir / "nodims", images_reader), Contains("zero dimensions"));
    write_gzip(dir / "double.gz", read_raw([&] {
                 write_gzip(dir / "inner.gz", good);
                 return dir / "inner.gz";
               }()));
    CHECK_THAT(format_problem(dir / "double.gz", images_reader),
               Contains("gzip data inside a gzip file"));
  }
  SECTION("empty file and truncated header") {
    write_plain(dir / "empty", {});
    CHECK_THAT(format_problem(dir / "empty", images_reader), Contains("the file is empty"));
    write_plain(dir / "short-magic", {0, 0, 8});
    CHECK_THAT(format_problem(dir / "short-magic", images_reader), Contains("truncated header"));
    write_plain(dir / "short-dims", Bytes(good.begin(), good.begin() + 10));
    CHECK_THAT(format_problem(dir / "short-dims", images_reader),
               Contains("announces 3 dimensions (16 header bytes) but the file ends at byte 10"));
  }
  SECTION("truncated data, plain and gzip") {
    write_plain(dir / "short", Bytes(good.begin(), good.end() - 5));
    CHECK_THAT(format_problem(dir / "short", images_reader),
               Contains("truncated data: the header describes 3x2x2 elements of type unsigned byte "
                        "(0x08), 12 bytes") &&
                   Contains("the data ends at byte 23 (7 data bytes)"));
    write_gzip(dir / "short.gz", Bytes(good.begin(), good.end() - 5));
    CHECK_THAT(format_problem(dir / "short.gz", images_reader),
               Contains("ends at byte 23 of the decompressed data (7 data bytes)"));
    const Bytes labels = labels_file({1, 2, 3, 4});
    write_plain(dir / "short-labels", Bytes(labels.begin(), labels.end() - 1));
    CHECK_THAT(format_problem(dir / "short-labels", labels_reader), Contains("truncated data"));
  }
  SECTION("a truncated or corrupt gzip stream") {
    Bytes big = images_file(200, 28, 28);
    for (std::size_t i = 16; i < big.size(); ++i)
      big[i] = static_cast<std::uint8_t>((i * 7919) % 251);
    write_gzip(dir / "full.gz", big);
    const Bytes z = read_raw(dir / "full.gz");
    write_plain(dir / "cut.gz",
                Bytes(z.begin(), z.begin() + static_cast<std::ptrdiff_t>(z.size() / 2)));
    CHECK_THAT(format_problem(dir / "cut.gz", images_reader), Contains("truncated"));
    Bytes corrupt = z;
    corrupt[corrupt.size() - 6] ^= 0xFF;  // the CRC-32 in the gzip trailer
    write_plain(dir / "crc.gz", corrupt);
    CHECK_THAT(format_problem(dir / "crc.gz", images_reader), Contains("corrupt gzip data"));
    corrupt = z;
    for (std::size_t i = 20; i < 60; ++i) corrupt[i] = 0xFF;  // the deflate blocks
    write_plain(dir / "blocks.gz", corrupt);
    CHECK_THAT(format_problem(dir / "blocks.gz", images_reader), Contains("gzip"));
  }
  SECTION("bytes after the data") {
    Bytes b = good;
    b.push_back(1);
    b.push_back(2);
    write_gzip(dir / "trailing.gz", b);
    CHECK_THAT(format_problem(dir / "trailing.gz", images_reader),
               Contains("unexpected data after the end") &&
                   Contains("(28 bytes in all) but 2 more bytes follow"));
  }
  SECTION("the wrong kind of file") {
    write_plain(dir / "labels", labels_file({1, 2}));
    write_plain(dir / "images", good);
    CHECK_THAT(format_problem(dir / "labels", images_reader),
               Contains("expected images (at least 2 dimensions") && Contains("shape 2"));
    CHECK_THAT(format_problem(dir / "images", labels_reader),
               Contains("expected labels (1 dimension)"));
    Bytes ints = header(0x0C, {1, 2, 2});
    for (int i = 0; i < 4; ++i) put_u32(ints, 1);
    write_plain(dir / "ints", ints);
    CHECK_THAT(format_problem(dir / "ints", images_reader),
               Contains("expected unsigned-byte pixels"));
  }
  SECTION("a label outside the class range") {
    write_gzip(dir / "labels.gz", labels_file({1, 9, 10, 3}));
    CHECK_THAT(
        format_problem(dir / "labels.gz", labels_reader),
        Contains("label 10 of example 2 (at byte 10 of the decompressed data) is outside [0, 10)"));
    CHECK(io::read_idx_labels(dir / "labels.gz", 11).size() == 4);
    CHECK_THROWS_AS(io::read_idx_labels(dir / "labels.gz", 0), std::invalid_argument);
  }
  SECTION("images and labels of different counts") {
    write_plain(dir / "images", good);
    write_plain(dir / "labels", labels_file({1, 2}));
    try {
      io::read_idx_dataset<float>(dir / "images", dir / "labels");
      FAIL("no error");
    } catch (const io::format_error& e) {
      CHECK(e.path() == dir / "labels");
      CHECK_THAT(e.what(),
                 Contains("has 2 labels but " + (dir / "images").string() + " has 3 images"));
    }
  }
}

TEST_CASE("Files that cannot be read raise std::system_error", "[io][idx]") {
  TempDir dir;
  try {
    io::read_idx_images<float>(dir / "missing.gz");
    FAIL("no error");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::no_such_file_or_directory);
    CHECK_THAT(e.what(), Contains("cannot open") && Contains((dir / "missing.gz").string()));
  }
  try {
    io::read_idx(dir.path);
    FAIL("no error");
  } catch (const std::system_error& e) {
    CHECK(e.code() == std::errc::is_a_directory);
    CHECK_THAT(e.what(), Contains("cannot read"));
  }
}

TEST_CASE("A gzip file that inflates to more than its header declares is refused early",
          "[io][idx]") {
  // A gzip bomb: 10 labels as the header declares, then 64 MiB of zeros (some 64 KB of gzip).
  // The excess is refused as soon as 1 MiB of it has been inflated, without allocating for it
  // and without inflating the rest.
  TempDir dir;
  Bytes b = labels_file({1, 2, 3, 4, 5, 6, 7, 8, 9, 0});
  b.resize(b.size() + (std::size_t{64} << 20), 0);
  write_gzip(dir / "bomb.gz", b);
  REQUIRE(fs::file_size(dir / "bomb.gz") < (std::size_t{1} << 20));
  const std::string message = format_problem(dir / "bomb.gz", labels_reader);
  CHECK_THAT(message, Contains("unexpected data after the end: the header describes 10 elements "
                               "of type unsigned byte (0x08) (18 bytes in all) but more than "
                               "1048576 more bytes follow at byte 18 of the decompressed data "
                               "(decompressed no further: the data inflates to more than the "
                               "header declares)"));
  // A plain file says exactly how much follows, however much (a sparse 4 GiB tail, not read).
  write_plain(dir / "long", labels_file({1, 2}));
  REQUIRE(::truncate((dir / "long").c_str(), (off_t{1} << 32) + 10) == 0);
  CHECK_THAT(format_problem(dir / "long", labels_reader),
             Contains("(10 bytes in all) but 4294967296 more bytes follow at byte 10"));
  // A header declaring more than the cap is refused before anything is allocated for it.
  write_gzip(dir / "claim.gz", header(0x08, {0xFFFFFFFFu, 28, 28}));
  CHECK_THAT(format_problem(dir / "claim.gz", images_reader),
             Contains("3367254359280 data bytes, more than the limit of 2147483648 bytes"));
}

TEST_CASE("An MNIST directory whose files cannot be looked at is not reported as missing",
          "[io][idx]") {
  // A link loop where a file should be: the system's answer is ELOOP, not "no such file" (this
  // runs as any user, root included; the EACCES case below needs one whom permissions stop).
  TempDir dir;
  fs::create_symlink("train-images-idx3-ubyte.gz", dir / "train-images-idx3-ubyte.gz");
  try {
    io::load_mnist<float>(dir.path);
    FAIL("no error");
  } catch (const io::file_error& e) {
    CHECK(e.code() == std::errc::too_many_symbolic_link_levels);
    CHECK_THAT(e.what(), Contains("grove::io: cannot look for train-images-idx3-ubyte.gz or "
                                  "train-images-idx3-ubyte in " +
                                  dir.path.string() + ": cannot read " +
                                  (dir / "train-images-idx3-ubyte.gz").string() + ": " +
                                  std::strerror(ELOOP)));
    CHECK_THAT(e.what(), !Contains("has neither"));
  }
}

// Hidden from the test list: ctest runs it as an unprivileged user (tests/io.cmake), since
// permission bits do not stop root.
TEST_CASE("A data directory the user may not read is reported as unreadable, with the reason",
          "[.][unprivileged]") {
  if (::geteuid() == 0) {
    WARN(
        "skipped: as root, permission bits do not stop reading; ctest runs this case as uid "
        "65534 through setpriv");
    return;
  }
  TempDir dir;
  write_gzip(dir / "train-images-idx3-ubyte.gz", images_file(1, 2, 2));
  fs::permissions(dir.path, fs::perms::owner_read | fs::perms::owner_write);  // no search (x)
  try {
    io::load_mnist<float>(dir.path);
    FAIL("no error");
  } catch (const io::file_error& e) {
    CHECK(e.code() == std::errc::permission_denied);
    CHECK_THAT(e.what(), Contains("cannot look for train-images-idx3-ubyte.gz or "
                                  "train-images-idx3-ubyte in " +
                                  dir.path.string()) &&
                             Contains(std::strerror(EACCES)));
    CHECK_THAT(e.what(), !Contains("has neither"));
  }
  fs::permissions(dir.path, fs::perms::owner_all);  // so that TempDir can remove it
}
