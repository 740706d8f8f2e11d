// hostile_inputs: writes the crafted inputs that tests/hostile/run_case.cmake runs train_mlp on
// (see tests/hostile/README.md), and edits checkpoints that train_mlp wrote.
//
//   hostile_inputs data DIR                       datasets, one directory each, and special files
//   hostile_inputs set-scalar IN OUT TENSOR VALUE  an I64 scalar tensor (the epoch, a step count)
//                                                 set to VALUE, everything else kept
//   hostile_inputs set-metadata IN OUT KEY VALUE   one __metadata__ entry replaced
//   hostile_inputs deep OUT                        a checkpoint whose header nests 100,000 levels
//
// It writes bytes directly (IDX with its own big-endian writer, gzip with zlib's deflate, the
// safetensors header with nlohmann-json), so that what it makes does not depend on the readers
// under test.
#include <sys/stat.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using Bytes = std::string;

namespace {

void put_u32(Bytes& b, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<char>(v >> shift));
}

Bytes idx_header(const std::vector<std::uint32_t>& dims) {
  Bytes b{0, 0, 0x08, static_cast<char>(dims.size())};
  for (auto d : dims) put_u32(b, d);
  return b;
}

// count images of `pixels` bytes; pixel p of image i is (31 * i + 7 * p) % 256, or `constant`.
Bytes images(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, int constant = -1) {
  Bytes b = idx_header({count, rows, cols});
  for (std::uint32_t i = 0; i < count; ++i)
    for (std::uint32_t p = 0; p < rows * cols; ++p)
      b.push_back(static_cast<char>(constant >= 0 ? constant : (31 * i + 7 * p) % 256));
  return b;
}

Bytes labels(std::uint32_t count) {
  Bytes b = idx_header({count});
  for (std::uint32_t i = 0; i < count; ++i) b.push_back(static_cast<char>(i % 10));
  return b;
}

Bytes gzip(const Bytes& bytes) {
  z_stream z{};
  if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("deflateInit2");
  Bytes out(deflateBound(&z, static_cast<uLong>(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void write(const fs::path& file, const Bytes& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + file.string());
}

Bytes read(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

// A dataset directory: the four files, plain, each of them given (empty: the good one).
struct Split {
  Bytes train_images, train_labels, test_images, test_labels;
};
constexpr std::uint32_t kTrain = 64, kTest = 32;

Split good() {
  return {images(kTrain, 28, 28), labels(kTrain), images(kTest, 28, 28), labels(kTest)};
}

void dataset(const fs::path& dir, const Split& s, bool compressed = false) {
  fs::create_directories(dir);
  const std::string gz = compressed ? ".gz" : "";
  auto put = [&](const std::string& name, const Bytes& b) {
    write(dir / (name + gz), compressed ? gzip(b) : b);
  };
  put("train-images-idx3-ubyte", s.train_images);
  put("train-labels-idx1-ubyte", s.train_labels);
  put("t10k-images-idx3-ubyte", s.test_images);
  put("t10k-labels-idx1-ubyte", s.test_labels);
}

void make_data(const fs::path& root) {
  fs::create_directories(root);
  dataset(root / "good", good());
  dataset(root / "good-gz", good(), true);
  Split s = good();
  s.train_images = images(0, 28, 28);
  s.train_labels = labels(0);
  dataset(root / "zero-train", s);
  s = good();
  s.train_images = images(kTrain, 0, 0);
  s.test_images = images(kTest, 0, 0);
  dataset(root / "zero-pixels", s);
  s = good();
  s.test_images = images(0, 28, 28);
  s.test_labels = labels(0);
  dataset(root / "zero-test", s);
  s = good();
  s.train_images = images(kTrain, 28, 28, 7);
  dataset(root / "constant", s);
  // 8 bytes claiming 4 GB of labels; 16 claiming 40 GB of images.
  s = good();
  s.train_labels = idx_header({0xFFFFFFFFu});
  dataset(root / "bomb-labels", s);
  s = good();
  s.train_images = idx_header({50'000'000u, 28, 28});
  dataset(root / "bomb-images", s);
  // gzip: the trailer cut (the last 4 bytes of the length), and garbage after the stream.
  dataset(root / "gz-cut", good(), true);
  const Bytes z = read(root / "gz-cut" / "train-labels-idx1-ubyte.gz");
  write(root / "gz-cut" / "train-labels-idx1-ubyte.gz", z.substr(0, z.size() - 4));
  dataset(root / "gz-trailing", good(), true);
  write(root / "gz-trailing" / "train-labels-idx1-ubyte.gz", z + "garbage");
  // Special files where a regular one is expected.
  dataset(root / "fifo-data", good());
  fs::remove(root / "fifo-data" / "train-images-idx3-ubyte");
  if (::mkfifo((root / "fifo-data" / "train-images-idx3-ubyte").c_str(), 0600) != 0)
    throw std::runtime_error("mkfifo");
  if (::mkfifo((root / "fifo").c_str(), 0600) != 0) throw std::runtime_error("mkfifo");
  fs::create_directories(root / "a-directory");
  write(root / "a-regular-file", "not a directory\n");
}

// A safetensors file as its header (JSON) and data.
struct Checkpoint {
  nlohmann::ordered_json header;
  Bytes data;
};

Checkpoint read_checkpoint(const fs::path& file) {
  const Bytes bytes = read(file);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  return {nlohmann::ordered_json::parse(bytes.substr(8, n)), bytes.substr(8 + n)};
}

Bytes assemble(const std::string& header_text, const Bytes& data) {
  std::string text = header_text;
  text.append((8 - text.size() % 8) % 8, ' ');
  Bytes out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  return out + text + data;
}

void write_checkpoint(const fs::path& file, const Checkpoint& c) {
  write(file, assemble(c.header.dump(), c.data));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 2 && a[0] == "data") {
      make_data(a[1]);
    } else if (a.size() == 5 && a[0] == "set-scalar") {
      Checkpoint c = read_checkpoint(a[1]);
      const auto& t = c.header.at(a[3]);
      if (t.at("dtype") != "I64" || !t.at("shape").empty())
        throw std::runtime_error(a[3] + " is not an I64 scalar");
      const std::int64_t v = std::stoll(a[4]);
      std::memcpy(c.data.data() + t.at("data_offsets")[0].get<std::size_t>(), &v, 8);  // LE host
      write_checkpoint(a[2], c);
    } else if (a.size() == 5 && a[0] == "set-metadata") {
      Checkpoint c = read_checkpoint(a[1]);
      c.header["__metadata__"][a[3]] = a[4];
      write_checkpoint(a[2], c);
    } else if (a.size() == 2 && a[0] == "deep") {
      std::string text = "{\"__metadata__\":";
      for (int i = 0; i < 100'000; ++i) text += "{\"k\":";
      write(a[1], assemble(text, ""));
    } else {
      std::fprintf(stderr,
                   "usage: hostile_inputs data DIR | set-scalar IN OUT TENSOR VALUE | "
                   "set-metadata IN OUT KEY VALUE | deep OUT\n");
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hostile_inputs: %s\n", e.what());
    return 1;
  }
  return 0;
}
