// grove/random/detail/layouts.hpp: how jax.random turns a key into a stream of random words, in
// both of JAX's counter layouts (partitionable and legacy): the words of a request, hashed by the
// SIMD kernels where the CPU has them and delivered in runs to a sink.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "grove/config.hpp"
#include "grove/random/detail/math.hpp"  // block_size
#include "grove/random/detail/split.hpp"
#include "grove/random/detail/streams.hpp"
#include "grove/random/detail/threefry.hpp"
#include "grove/random/detail/threefry_avx2.hpp"
#include "grove/random/detail/threefry_avx512.hpp"

namespace grove::random::detail {

// Hands a run of words to the sink, telling it the kernel variant if it takes one (a sink whose
// transform has code of its own for an instruction set, like inverse_erf_values).
template <class Sink, class Bits, instruction_set I>
GROVE_ALWAYS_INLINE void deliver(Sink& sink, std::uint64_t first, const Bits* words, std::size_t m,
                                 instruction_set_tag<I> isa) {
  if constexpr (requires { sink(first, words, m, isa); }) {
    sink(first, words, m, isa);
  } else {
    sink(first, words, m);
  }
}

// For l < m: counter(l, x0, x1) gives a counter, threefry_2x32 hashes it, and emit(l, y0, y1)
// takes the result. The portable variant does all three in one loop, which the compiler
// vectorises without writing an intermediate array; the AVX2 and AVX-512 variants stage the
// counters in a block on the stack for their hand-written kernels (see threefry_avx2.hpp and
// threefry_avx512.hpp for why).
template <instruction_set I, class Counter, class Emit>
GROVE_ALWAYS_INLINE void hash_block(key_words key, std::size_t m, Counter&& counter,
                                    Emit&& emit) noexcept {
#if GROVE_DETAIL_DISPATCH
  if constexpr (I == instruction_set::avx2_fma || I == instruction_set::avx512) {
    word x0[block_size];
    word x1[block_size];
    for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA { counter(l, x0[l], x1[l]); });
    if constexpr (I == instruction_set::avx512) {
      avx512::threefry_2x32_lanes(key, x0, x1, x0, x1, m);
    } else {
      avx2::threefry_2x32_lanes(key, x0, x1, x0, x1, m);
    }
    for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA { emit(l, x0[l], x1[l]); });
    return;
  }
#endif
  const key_schedule schedule = schedule_of(key);
  for_each_in_block(m, [&](std::size_t l) GROVE_INLINE_LAMBDA {
    word x0;
    word x1;
    counter(l, x0, x1);
    threefry_2x32_rounds(schedule, x0, x1);
    emit(l, x0, x1);
  });
}

// The legacy layout caps one hash at 2^32 - 1 words (JAX's uint32 iota); longer requests are cut
// into blocks of that many words, each hashed with its own key from split(key, blocks + 1).
inline constexpr std::uint64_t legacy_block_words = 0xFFFFFFFFu;

// Random words for n elements of type Bits (uint32 or uint64) as JAX lays them out, delivered as
// sink(first, words, count) for disjoint runs of consecutive elements, each at most block_size
// long, possibly from several threads at once. `block_words` is a parameter only so that tests can
// exercise the multi-block legacy path with small sizes; callers use legacy_block_words.
template <class Bits, class Sink>
void generate_words(key_words key, bool legacy, std::uint64_t n, const schedule& plan, Sink& sink,
                    std::uint64_t block_words = legacy_block_words) {
  static_assert(std::is_same_v<Bits, std::uint32_t> || std::is_same_v<Bits, std::uint64_t>,
                "grove::random: random words are 32 or 64 bits wide");
  constexpr bool wide = std::is_same_v<Bits, std::uint64_t>;

  if (!legacy) {
    // Element i: threefry_2x32(key, counter(i)) -> y0 ^ y1 (32 bits) or (y0 << 32) | y1 (64 bits).
    auto body = [&](std::uint64_t begin, std::uint64_t end, auto isa) GROVE_INLINE_LAMBDA {
      Bits out[block_size];
      for (std::uint64_t start = begin; start < end; start += block_size) {
        const auto m = static_cast<std::size_t>(std::min<std::uint64_t>(block_size, end - start));
        hash_block<decltype(isa)::value>(
            key, m,
            [&](std::size_t l, word& hi, word& lo)
                GROVE_INLINE_LAMBDA { partitionable_counter(start, static_cast<word>(l), hi, lo); },
            [&](std::size_t l, word hi, word lo) GROVE_INLINE_LAMBDA {
              if constexpr (wide) {
                out[l] = (std::uint64_t{hi} << 32) | lo;
              } else {
                out[l] = hi ^ lo;
              }
            });
        deliver(sink, start, static_cast<const Bits*>(out), m, isa);
      }
    };
    parallel_kernel(n, plan, body);
    return;
  }

  const std::uint64_t words = wide ? 2 * n : n;
  if (words >= block_words) {
    // Rare (at least 2^32 - 1 words, 16 GiB of output): evaluated word by word.
    const std::uint64_t blocks = words / block_words;
    const std::uint64_t rest = words % block_words;
    const std::vector<key_words> keys = legacy_split(key, blocks + 1);
    auto word_at = [&](std::uint64_t w) {
      const std::uint64_t block = w / block_words;
      const std::uint64_t count = block < blocks ? block_words : rest;
      return legacy_hash_word(keys[static_cast<std::size_t>(block)], count, w % block_words);
    };
    parallel_chunks(n, plan, [&](std::uint64_t begin, std::uint64_t end) {
      Bits out[block_size];
      for (std::uint64_t start = begin; start < end; start += block_size) {
        const auto m = static_cast<std::size_t>(std::min<std::uint64_t>(block_size, end - start));
        for (std::size_t l = 0; l < m; ++l) {
          if constexpr (wide) {
            out[l] = (std::uint64_t{word_at(start + l)} << 32) | word_at(n + start + l);
          } else {
            out[l] = word_at(start + l);
          }
        }
        sink(start, static_cast<const Bits*>(out), m);
      }
    });
    return;
  }

  if constexpr (wide) {
    // 64-bit words: the hash of 2n counts splits into halves, the first half giving the high and
    // the second the low words, so element i is threefry_2x32(key, (i, n + i)) -> (y0 << 32) | y1.
    auto body = [&](std::uint64_t begin, std::uint64_t end, auto isa) GROVE_INLINE_LAMBDA {
      Bits out[block_size];
      for (std::uint64_t start = begin; start < end; start += block_size) {
        const auto m = static_cast<std::size_t>(std::min<std::uint64_t>(block_size, end - start));
        hash_block<decltype(isa)::value>(
            key, m,
            [&](std::size_t l, word& x0, word& x1) GROVE_INLINE_LAMBDA {
              x0 = static_cast<word>(start + l);
              x1 = static_cast<word>(n + start + l);
            },
            [&](std::size_t l, word y0, word y1)
                GROVE_INLINE_LAMBDA { out[l] = (std::uint64_t{y0} << 32) | y1; });
        deliver(sink, start, static_cast<const Bits*>(out), m, isa);
      }
    };
    parallel_kernel(n, plan, body);
  } else {
    // 32-bit words: pair j of the hash gives element j (y0) and element half + j (y1); the y1 of
    // the padding pair of an odd count is dropped. Work is split over pairs.
    const std::uint64_t half = (n + 1) / 2;
    auto body = [&](std::uint64_t begin, std::uint64_t end, auto isa) GROVE_INLINE_LAMBDA {
      word y0[block_size];
      word y1[block_size];
      for (std::uint64_t start = begin; start < end; start += block_size) {
        const auto m = static_cast<std::size_t>(std::min<std::uint64_t>(block_size, end - start));
        hash_block<decltype(isa)::value>(
            key, m,
            [&](std::size_t l, word& x0, word& x1) GROVE_INLINE_LAMBDA {
              const std::uint64_t partner = half + start + l;
              x0 = static_cast<word>(start + l);
              x1 = partner < n ? static_cast<word>(partner) : word{0};
            },
            [&](std::size_t l, word a, word b) GROVE_INLINE_LAMBDA {
              y0[l] = a;
              y1[l] = b;
            });
        deliver(sink, start, static_cast<const Bits*>(y0), m, isa);
        // Pairs j < n - half have a second element; n - half >= start because start < half.
        const std::uint64_t with_partner = std::min<std::uint64_t>(m, n - half - start);
        if (with_partner > 0) {
          deliver(sink, half + start, static_cast<const Bits*>(y1),
                  static_cast<std::size_t>(with_partner), isa);
        }
      }
    };
    parallel_kernel(half, plan, body);
  }
}

}  // namespace grove::random::detail
