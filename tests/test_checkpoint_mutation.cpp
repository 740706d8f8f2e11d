// grove::io checkpoints: thousands of random mutations of a valid file (bit flips, truncations,
// edits of the header's bytes and of its JSON). Each either loads or raises format_error and
// leaves the target untouched: no other exception, no crash, no leak (the sanitizer build runs
// this test too).
#include <catch2/catch.hpp>

#include <random>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"
#include "grove/tree/tensor.hpp"

using namespace ckpt_test;
namespace io = grove::io;
using json = nlohmann::ordered_json;

namespace {

struct mutator {
  std::mt19937_64 rng;
  explicit mutator(std::uint64_t seed) : rng(seed) {}

  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng() % n; }
  bool coin() { return rng() & 1; }

  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

  static std::uint64_t header_length(const std::string& f) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<unsigned char>(f[static_cast<std::size_t>(i)]);
    return n;
  }
  static std::string with_length(std::uint64_t n) {
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i)
      out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
    return out;
  }
  static std::string reassemble(const std::string& header, const std::string& data) {
    return with_length(header.size()) + header + data;
  }

  json random_value() {
    switch (below(12)) {
      case 0:
        return 0;
      case 1:
        return 1;
      case 2:
        return std::uint64_t{1} << 32;
      case 3:
        return std::uint64_t{1} << 63;
      case 4:
        return std::numeric_limits<std::uint64_t>::max();
      case 5:
        return -1;
      case 6:
        return 1.5;
      case 7: {
        static const char* const dtypes[] = {"F32",     "F16", "BF16", "F8_E4M3", "F4",
                                             "F6_E2M3", "C64", "F64",  "I16",     "U64"};
        return dtypes[below(std::size(dtypes))];
      }
      case 8:
        return json::array({below(64), below(64)});
      case 9:
        return nullptr;
      case 10:
        return json::object({{"a", "b"}});
      default:
        return json::array();
    }
  }

  // Edits the header's JSON and re-encodes it with a correct length.
  std::string edit_json(const std::string& file, std::string& what) {
    const std::uint64_t n = header_length(file);
    json head = json::parse(file.substr(8, n));
    std::string data = file.substr(8 + n);
    std::vector<std::string> names;
    for (const auto& [k, v] : head.items()) names.push_back(k);
    const std::string name = pick(names);
    static const std::vector<std::string> fields = {"dtype", "shape", "data_offsets"};
    static const std::vector<std::string> dtypes = {
        "F32", "F64", "I32", "I64", "U32", "U8", "BOOL", "F16", "BF16", "I8", "U64", "X", ""};
    switch (below(10)) {
      case 0:
        what = "remove entry " + name;
        head.erase(name);
        break;
      case 1:
        what = "rename entry " + name;
        head[name + "x"] = head[name];
        head.erase(name);
        break;
      case 2: {
        const std::string& field = pick(fields);
        what = "set " + name + "." + field + " to a random value";
        if (head[name].is_object())
          head[name][field] = random_value();
        else
          head[name] = random_value();
        break;
      }
      case 3:
        what = "set dtype of " + name;
        if (head[name].is_object() && name != "__metadata__") head[name]["dtype"] = pick(dtypes);
        break;
      case 4:
        what = "change a dimension of " + name;
        if (head[name].contains("shape") && !head[name]["shape"].empty())
          head[name]["shape"][below(head[name]["shape"].size())] = below(8);
        else if (head[name].contains("shape"))
          head[name]["shape"].push_back(below(3));
        break;
      case 5:
        what = "shift data_offsets of " + name;
        if (head[name].contains("data_offsets")) {
          auto& off = head[name]["data_offsets"];
          off[below(2)] = static_cast<std::uint64_t>(off[0].get<std::uint64_t>() + below(16));
        }
        break;
      case 6: {
        const std::string other = pick(names);
        what = "swap offsets of " + name + " and " + other;
        if (head[name].contains("data_offsets") && head[other].contains("data_offsets"))
          std::swap(head[name]["data_offsets"], head[other]["data_offsets"]);
        break;
      }
      case 7:
        what = "edit metadata";
        head["__metadata__"]
            [pick(std::vector<std::string>{"grove.key_layout:key", "grove.key_layout:f64",
                                           "grove.key_layout:zz", "x", "grove.treedef"})] =
                coin() ? json("legacy") : random_value();
        break;
      case 8:
        what = "truncate or extend the data";
        if (coin() && !data.empty())
          data.resize(below(data.size()));
        else
          data.append(below(9) + 1, static_cast<char>(below(256)));
        break;
      default:
        what = "duplicate entry " + name;
        {
          std::string text = head.dump();
          const std::string extra = ",\"" + name + "\":" + head[name].dump();
          text.insert(text.size() - 1, extra);
          return reassemble(text, data);
        }
    }
    return reassemble(head.dump(), data);
  }

  std::string mutate(const std::string& original, std::string& what) {
    std::string f = original;
    const std::uint64_t n = header_length(f);
    switch (below(8)) {
      case 0: {
        const auto flips = below(8) + 1;
        what = std::to_string(flips) + " bit flips anywhere";
        for (std::uint64_t i = 0; i < flips; ++i)
          f[below(f.size())] ^= static_cast<char>(1u << below(8));
        break;
      }
      case 1: {
        const auto flips = below(4) + 1;
        what = std::to_string(flips) + " bit flips in the header";
        for (std::uint64_t i = 0; i < flips; ++i)
          f[below(8 + n)] ^= static_cast<char>(1u << below(8));
        break;
      }
      case 2:
        what = "truncation";
        f.resize(below(f.size()));
        break;
      case 3: {
        what = "header length changed";
        std::uint64_t m = n;
        switch (below(4)) {
          case 0:
            m = n + below(33) - 16;
            break;
          case 1:
            m = rng();
            break;
          case 2:
            m = 0;
            break;
          default:
            m = f.size() - 8 - below(8);
            break;
        }
        f.replace(0, 8, with_length(m));
        break;
      }
      case 4: {
        // A byte-level edit of the JSON text; the length field follows it.
        std::string header = f.substr(8, n);
        static const std::string alphabet = "{}[]\":,0123456789-.eE \\ntrufalsF\x01\xff";
        const auto pos = below(header.size());
        switch (below(3)) {
          case 0:
            what = "JSON bytes deleted";
            header.erase(pos, below(8) + 1);
            break;
          case 1:
            what = "JSON bytes inserted";
            header.insert(pos, 1, alphabet[below(alphabet.size())]);
            break;
          default:
            what = "JSON byte replaced";
            header[pos] = alphabet[below(alphabet.size())];
            break;
        }
        f = reassemble(header, f.substr(8 + n));
        break;
      }
      case 5:
        f = edit_json(f, what);
        break;
      case 6:
        what = "junk appended";
        for (auto k = below(16) + 1; k > 0; --k) f.push_back(static_cast<char>(below(256)));
        break;
      default: {
        what = "data bytes overwritten";
        const auto data_size = f.size() - 8 - n;
        for (auto k = below(4) + 1; k > 0; --k)
          f[8 + n + below(data_size)] = static_cast<char>(below(256));
        break;
      }
    }
    return f;
  }
};

}  // namespace

TEST_CASE("checkpoint mutations: nothing but format_error, and the target untouched",
          "[io][checkpoint]") {
  temp_dir dir;
  const auto good = dir / "good.safetensors";
  io::save(good, sample(), {{"epoch", "7"}});
  const std::string original = read_bytes(good);
  const auto file = dir / "mutant.safetensors";
  const Sample baseline = zeroed();

  mutator m(20240611);
  int loaded = 0, rejected = 0;
  constexpr int rounds = 2000;
  for (int round = 0; round < rounds; ++round) {
    std::string what;
    const std::string mutant = m.mutate(original, what);
    write_bytes(file, mutant);
    Sample target = baseline;
    try {
      io::load_into(file, target);
      ++loaded;
    } catch (const io::format_error& e) {
      ++rejected;
      if (!bits_equal(target, baseline)) {
        INFO("round " << round << ": " << what << ": " << e.what());
        FAIL("a rejected file changed the target");
      }
      if (e.path() != file) FAIL("format_error names another file: " << e.what());
    } catch (const std::exception& e) {
      INFO("round " << round << ": " << what);
      FAIL("not a format_error: " << e.what());
    }
    if (round % 4 == 0) {
      try {
        (void)io::inspect(file);
      } catch (const io::format_error&) {
      } catch (const std::exception& e) {
        INFO("round " << round << ": " << what);
        FAIL("inspect: not a format_error: " << e.what());
      }
    }
  }
  // Both outcomes occur: the mutations reach past the first check, and the valid ones load.
  CHECK(rejected > rounds / 2);
  CHECK(loaded > rounds / 20);
}

TEST_CASE("checkpoint mutations: the same from memory, through the loader's core",
          "[io][checkpoint]") {
  temp_dir dir;
  const auto good = dir / "good.safetensors";
  io::save(good, sample());
  const std::string original = read_bytes(good);
  const Sample baseline = zeroed();
  mutator m(77);
  for (int round = 0; round < 1500; ++round) {
    std::string what;
    const std::string mutant = m.mutate(original, what);
    Sample target = baseline;
    const grove::io::detail::reading ctx{"test", good};
    try {
      (void)grove::io::detail::load_bytes_into(reinterpret_cast<const std::byte*>(mutant.data()),
                                               mutant.size(), target, ctx);
    } catch (const io::format_error&) {
      if (!bits_equal(target, baseline))
        FAIL("round " << round << ": " << what << ": the target changed");
    } catch (const std::exception& e) {
      FAIL("round " << round << ": " << what << ": not a format_error: " << e.what());
    }
  }
}

namespace {

struct Mixed {
  Eigen::MatrixXf w;  // saved as BF16
  Eigen::Matrix<Eigen::half, Eigen::Dynamic, 1> h;
  Eigen::VectorXd d;
  Eigen::Matrix<std::int16_t, Eigen::Dynamic, 1> n;
  float s = 0;
  Eigen::Matrix3f q;          // square, so that a transposed load of it fits
  Eigen::Tensor<float, 3> t;  // N-D, column-major: permuted on save and load (saved as BF16)
  Eigen::TensorFixedSize<double, Eigen::Sizes<2, 1, 3>, Eigen::RowMajor> f;
};
GROVE_NODE(Mixed, w, h, d, n, s, q, t, f);

template <class Tree>
bool same_bits(const Tree& a, const Tree& b) {
  bool same = true;
  grove::tree_for_each(
      [&](const auto& x, const auto& y) {
        using L = std::remove_cvref_t<decltype(x)>;
        if constexpr (std::is_arithmetic_v<L>)
          same = same && std::memcmp(&x, &y, sizeof(L)) == 0;
        else
          same = same && x.size() == y.size() &&
                 (x.size() == 0 || std::memcmp(x.data(), y.data(),
                                               sizeof(typename L::Scalar) *
                                                   static_cast<std::size_t>(x.size())) == 0);
      },
      a, b);
  return same;
}

}  // namespace

TEST_CASE("checkpoint mutations: 16-bit dtypes, renames, strict = false, convert and transpose",
          "[io][checkpoint]") {
  temp_dir dir;
  const auto good = dir / "good.safetensors";
  Mixed m0;
  m0.w = Eigen::MatrixXf::Random(3, 4);
  m0.h = Eigen::Matrix<Eigen::half, Eigen::Dynamic, 1>::Constant(5, Eigen::half(1.5f));
  m0.d = Eigen::VectorXd::Random(3);
  m0.n = Eigen::Matrix<std::int16_t, Eigen::Dynamic, 1>::Constant(4, -3);
  m0.s = 2.0f;
  m0.q = Eigen::Matrix3f::Random();
  m0.t.resize(2, 3, 2);
  m0.t.setRandom();
  m0.f.setRandom();
  io::save(good, m0, {}, {.floats = io::float_storage::bf16});
  const std::string original = read_bytes(good);
  Mixed baseline = m0;
  baseline.w.setZero();
  baseline.d.setZero();
  baseline.t.setZero();
  const io::load_options options[] = {
      {},
      {.strict = false, .convert = true},
      {.strict = false,
       .rename =
           [](std::string_view n) {
             std::string out;  // (appended: GCC 12 warns falsely under -Wrestrict about "x" + s)
             if (n != "d") out.append("x").append(n);
             return out;
           }},
      {.rename = [](std::string_view n) { return std::string(n); }, .convert = true},
      {.transpose = [](std::string_view n) { return n == "q"; }},
      {.strict = false, .convert = true, .transpose = [](std::string_view n) { return n != "s"; }},
  };
  mutator m(4242);
  int loaded = 0;
  for (int round = 0; round < 1500; ++round) {
    std::string what;
    const std::string mutant = m.mutate(original, what);
    const grove::io::detail::reading ctx{"test", good};
    for (const auto& o : options) {
      Mixed target = baseline;
      try {
        (void)grove::io::detail::load_bytes_into(reinterpret_cast<const std::byte*>(mutant.data()),
                                                 mutant.size(), target, ctx, o);
        ++loaded;
      } catch (const io::format_error&) {
        if (!same_bits(target, baseline))
          FAIL("round " << round << ": " << what << ": the target changed");
      } catch (const std::exception& e) {
        FAIL("round " << round << ": " << what << ": not a format_error: " << e.what());
      }
    }
  }
  CHECK(loaded > 1500 / 20);
}

namespace {

// A tree in two shards: w in one file, d in the other.
struct Split {
  Eigen::MatrixXf w;
  Eigen::VectorXd d;
};
GROVE_NODE(Split, w, d);
struct OnlyW {
  Eigen::MatrixXf w;
};
GROVE_NODE(OnlyW, w);
struct OnlyD {
  Eigen::VectorXd d;
};
GROVE_NODE(OnlyD, d);

}  // namespace

TEST_CASE("checkpoint mutations: a sharded checkpoint's index and shards", "[io][checkpoint]") {
  // Mutations of the index's JSON (bytes, truncation, weight_map entries set to other values or to
  // hostile names) and of either shard. Each loads, or is a format_error, or (a shard name
  // mutated to one that does not exist) a file_error; the target is untouched unless it loads.
  temp_dir dir;
  const auto a = dir / "a.safetensors";
  const auto b = dir / "b.safetensors";
  io::save(a, OnlyW{Eigen::MatrixXf::Random(3, 4)});
  io::save(b, OnlyD{Eigen::VectorXd::Random(3)});
  const std::string shard_a = read_bytes(a), shard_b = read_bytes(b);
  const json index = {{"metadata", {{"total_size", 72}}},
                      {"weight_map", {{"w", "a.safetensors"}, {"d", "b.safetensors"}}}};
  const std::string original = index.dump();
  const auto index_path = dir / "model.safetensors.index.json";
  const Split baseline{Eigen::MatrixXf::Zero(3, 4), Eigen::VectorXd::Zero(3)};
  const std::vector<json> hostile = {"/etc/passwd",
                                     "../a.safetensors",
                                     "./a.safetensors",
                                     "a.safetensors/",
                                     "",
                                     "missing.safetensors",
                                     "b.safetensors",
                                     "a.safetensors",
                                     json::array(),
                                     7,
                                     nullptr};
  mutator m(15);
  int loaded = 0, rejected = 0;
  constexpr int rounds = 600;
  for (int round = 0; round < rounds; ++round) {
    std::string what;
    std::string text = original, ma = shard_a, mb = shard_b;
    switch (m.below(5)) {
      case 0: {
        const auto at = m.below(text.size());
        text[at] = static_cast<char>(text[at] ^ (1 << m.below(8)));
        what = "flip a bit of index byte " + std::to_string(at);
        break;
      }
      case 1:
        text.resize(m.below(text.size()));
        what = "cut the index at " + std::to_string(text.size());
        break;
      case 2: {
        json j = index;
        j["weight_map"][m.coin() ? "w" : "d"] = m.pick(hostile);
        if (m.coin()) j["weight_map"]["extra"] = m.pick(hostile);
        if (m.coin()) j["metadata"] = m.random_value();
        text = j.dump();
        what = "edit the index: " + text;
        break;
      }
      case 3:
        ma = m.mutate(shard_a, what);
        break;
      default:
        mb = m.mutate(shard_b, what);
        break;
    }
    write_bytes(index_path, text);
    write_bytes(a, ma);
    write_bytes(b, mb);
    Split target = baseline;
    auto untouched = [&] { return target.w == baseline.w && target.d == baseline.d; };
    try {
      io::load_into(index_path, target);
      ++loaded;
    } catch (const io::format_error& e) {
      ++rejected;
      if (!untouched()) FAIL("round " << round << ": " << what << ": changed: " << e.what());
    } catch (const io::file_error& e) {
      ++rejected;
      if (!untouched()) FAIL("round " << round << ": " << what << ": changed: " << e.what());
    } catch (const std::exception& e) {
      FAIL("round " << round << ": " << what << ": not a format_error: " << e.what());
    }
  }
  CHECK(rejected > rounds / 4);
  CHECK(loaded > rounds / 20);
}
