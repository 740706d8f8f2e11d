// grove::io sharded checkpoints: the index (model.safetensors.index.json) is read in time and
// memory linear in its size, up to near the 100 MB cap. Measured by counting, not by the clock:
// this executable replaces operator new and delete to count allocations and the bytes live at
// the peak, and index_parser counts its events and the bytes it keeps.
//
// nlohmann's DOM parser with a callback (what grove used before) rescanned the parent container
// each time an object closed, quadratic in the number of `{}` in one array or object, and built a
// document of 26 to 32 times the index's size: the peak-memory bound below fails for it.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"

// --- a counting allocator: each block carries its size in a 16-byte prefix ---------------------

namespace {
std::atomic<std::int64_t> g_live{0};  // bytes requested and not yet freed
std::atomic<std::int64_t> g_peak{0};
std::atomic<std::int64_t> g_count{0};  // allocations

constexpr std::size_t prefix = 16;  // keeps the alignment of malloc's blocks for new's callers

void* counted_new(std::size_t n) {
  auto* raw = static_cast<unsigned char*>(std::malloc(n + prefix));
  if (!raw) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(raw) = n;
  g_count.fetch_add(1, std::memory_order_relaxed);
  const auto live = g_live.fetch_add(static_cast<std::int64_t>(n)) + static_cast<std::int64_t>(n);
  auto peak = g_peak.load(std::memory_order_relaxed);
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
  return raw + prefix;
}
void counted_delete(void* p) noexcept {
  if (!p) return;
  auto* raw = static_cast<unsigned char*>(p) - prefix;
  g_live.fetch_sub(static_cast<std::int64_t>(*reinterpret_cast<std::size_t*>(raw)));
  std::free(raw);
}

struct cost {
  std::int64_t peak_bytes;  // above what was live before
  std::int64_t allocations;
};

cost measure(const std::function<void()>& f) {
  const auto before = g_live.load();
  g_peak = before;
  const auto count = g_count.load();
  f();
  return {g_peak.load() - before, g_count.load() - count};
}
}  // namespace

// (GCC's check that sees an inlined `new` reach `free` cannot know that delete pairs with it.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t n) {
  return counted_new(n);
}
void* operator new[](std::size_t n) {
  return counted_new(n);
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return operator new(n, std::nothrow);
}
void operator delete(void* p) noexcept {
  counted_delete(p);
}
void operator delete[](void* p) noexcept {
  counted_delete(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_delete(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_delete(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  counted_delete(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  counted_delete(p);
}
// (Over-aligned new is not replaced: nothing measured here uses it.)

using namespace ckpt_test;
namespace io = grove::io;
namespace d = grove::io::detail;

namespace {

// The largest index measured: near the 100 MB cap in an optimised build; smaller under the
// sanitizers, which parse some ten times slower.
// (-DGROVE_INDEX_COST_LARGEST=N sets another, e.g. to try a slower parser on small indexes.)
#if defined(GROVE_INDEX_COST_LARGEST)
constexpr std::size_t largest = GROVE_INDEX_COST_LARGEST;
#elif defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
constexpr std::size_t largest = 24'000'000;
#else
constexpr std::size_t largest = 96'000'000;
#endif

// An index of about `bytes` bytes, made of one repeated item inside `open` ... `close`.
struct shape {
  const char* name;
  std::string open, close;
  std::function<std::string(std::size_t)> item;  // the i-th item, without its comma
};

std::string build(const shape& s, std::size_t bytes) {
  std::string text = s.open;
  text.reserve(bytes + 64);
  for (std::size_t i = 0; text.size() + s.close.size() < bytes; ++i) {
    if (i) text += ',';
    text += s.item(i);
  }
  return text + s.close;
}

const std::vector<shape>& shapes() {
  static const std::vector<shape> all = {
      {"metadata: an array of {}", R"({"weight_map": {"w": "w.safetensors"}, "metadata": {"k": [)",
       "]}}", [](std::size_t) { return std::string("{}"); }},
      {"metadata: keys with {} values", R"({"weight_map": {"w": "w.safetensors"}, "metadata": {)",
       "}}", [](std::size_t i) { return "\"" + std::to_string(i) + "\":{}"; }},
      {"metadata: an array of empty strings",
       R"({"weight_map": {"w": "w.safetensors"}, "metadata": {"k": [)", "]}}",
       [](std::size_t) { return std::string("\"\""); }},
      {"another member: an array of []", R"({"weight_map": {"w": "w.safetensors"}, "x": [)", "]}",
       [](std::size_t) { return std::string("[]"); }},
      {"a weight_map of many tensors", R"({"weight_map": {)", "}}",
       [](std::size_t i) { return "\"t" + std::to_string(i) + "\":\"w.safetensors\""; }},
  };
  return all;
}

// inspect() of `index` (next to a one-tensor shard w.safetensors), whatever it says: an index
// whose weight_map names tensors the shard lacks is refused after it has been read.
void inspect_index(const std::filesystem::path& index) {
  try {
    (void)io::inspect(index);
  } catch (const io::format_error&) {
  }
}

}  // namespace

TEST_CASE("an index is read in memory linear in its size, with no document built",
          "[io][checkpoint][shards][large]") {
  temp_dir dir;
  write_safetensors(dir / "w.safetensors", {{"w", "F32", {1}, std::string(4, '\0')}});
  const auto index = dir / "model.safetensors.index.json";
  for (const auto& s : shapes()) {
    INFO(s.name);
    cost previous{};
    std::size_t previous_size = 0;
    for (std::size_t bytes = largest / 16; bytes <= largest / 2; bytes *= 2) {
      const std::string text = build(s, bytes);
      write_bytes(index, text);
      const cost c = measure([&] { inspect_index(index); });
      INFO(text.size() << " bytes: peak " << c.peak_bytes << " bytes, " << c.allocations
                       << " allocations");
      // The text itself and what it describes: at most one std::map node of the metadata (96
      // bytes) for each 12-byte `"123456":{},`. A document (a 16-byte value for each {}, and a
      // container of its own) needs 26 to 32 times the text.
      CHECK(c.peak_bytes < 10 * static_cast<std::int64_t>(text.size()) + (1 << 20));
      if (previous_size) {
        // Twice the index, at most a little more than twice the allocations and the peak.
        const double grown = static_cast<double>(text.size()) / static_cast<double>(previous_size);
        CHECK(static_cast<double>(c.allocations) <=
              1.1 * grown * static_cast<double>(previous.allocations) + 100);
        CHECK(static_cast<double>(c.peak_bytes) <=
              1.1 * grown * static_cast<double>(previous.peak_bytes) + (1 << 20));
      }
      previous = c;
      previous_size = text.size();
    }
  }
}

TEST_CASE("an index near the 100 MB cap is read, in memory a small multiple of its size",
          "[io][checkpoint][shards][large]") {
  // 32 million {} in one array: 96 MB. The DOM parser would have needed about 3 GB (and, being
  // quadratic, days).
  temp_dir dir;
  write_safetensors(dir / "w.safetensors", {{"w", "F32", {1}, std::string(4, '\0')}});
  const auto index = dir / "model.safetensors.index.json";
  const shape& s = shapes()[0];
  const std::string text = build(s, largest);
  REQUIRE(text.size() <= 100'000'000);
  write_bytes(index, text);
  const cost c = measure([&] {
    const auto info = io::inspect(index);
    // The value's compact JSON text, "[{},{},...]": the text less what is around it.
    CHECK(info.metadata.at("k").size() == text.size() - s.open.size() - s.close.size() + 2);
  });
  CHECK(c.peak_bytes < 8 * static_cast<std::int64_t>(text.size()));
}

TEST_CASE("index_parser does work linear in the index: events and kept bytes per byte",
          "[io][checkpoint][shards]") {
  // The parser's own counts, on indexes of 1x, 2x, 4x and 8x a base size: each event costs the
  // parser a constant (no container is rescanned: there is no document), so events and kept
  // bytes both grow as the text does.
  const std::filesystem::path file = "model.safetensors.index.json";
  const d::reading ctx{"grove::io::inspect", file};
  for (const auto& s : shapes()) {
    INFO(s.name);
    std::vector<double> events_per_byte, kept_per_byte;
    for (std::size_t bytes = 250'000; bytes <= 2'000'000; bytes *= 2) {
      const std::string text = build(s, bytes);
      d::index_parse_stats stats;
      (void)d::parse_index(text, ctx, &stats);
      events_per_byte.push_back(static_cast<double>(stats.events) /
                                static_cast<double>(text.size()));
      kept_per_byte.push_back(static_cast<double>(stats.stored_bytes) /
                              static_cast<double>(text.size()));
      CHECK(stats.events <= text.size());
      CHECK(stats.stored_bytes <= 2 * text.size());
    }
    for (std::size_t i = 1; i < events_per_byte.size(); ++i) {
      CHECK(events_per_byte[i] <= 1.25 * events_per_byte[0]);
      CHECK(kept_per_byte[i] <= 1.25 * kept_per_byte[0] + 1e-6);
    }
  }
}
