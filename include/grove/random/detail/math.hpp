// grove/random/detail/math.hpp: elementwise math for grove::random: log, log1p, erf and erf_inv as
// XLA evaluates them for jax.random, written for SIMD loops and for reproducibility.
//
// Reproducibility rule for this file: every product that feeds an addition is written as an
// explicit std::fma. GCC contracts `a * b + c` into a fused multiply-add whenever the target has
// one (-ffp-contract=fast is its default), so code written with plain `*` and `+` would give
// different last bits with and without -march=native. std::fma is correctly rounded everywhere
// (hardware instruction or libm), so the numbers are the same in every build. It also matches
// XLA, whose CPU and GPU back ends always fuse multiply-adds.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "grove/config.hpp"

namespace grove::random::detail {

// Elements handled per inner block: large enough for long SIMD loops, small enough that a block's
// scratch arrays stay in L1.
inline constexpr std::size_t block_size = 128;

// f(l) for l < m, m <= Whole. A whole block runs a loop of exactly Whole iterations: at -O2 GCC
// vectorises only loops whose trip count is a known multiple of the vector width (its "very
// cheap" cost model), and nearly every block is whole.
template <std::size_t Whole = block_size, class F>
GROVE_ALWAYS_INLINE void for_each_in_block(std::size_t m, F&& f) {
  if (m == Whole) {
    for (std::size_t l = 0; l < Whole; ++l) f(l);
  } else {
    for (std::size_t l = 0; l < m; ++l) f(l);
  }
}

// Horner's rule, highest power first, with fused steps: c[0] * t^(N-1) + ... + c[N-1]. Written as
// a fold so that no inner loop is left for the vectoriser to trip over.
template <class T, std::size_t N, std::size_t... K>
GROVE_ALWAYS_INLINE T horner_fold(const T (&c)[N], T t, std::index_sequence<K...>) noexcept {
  T p = c[0];
  ((p = std::fma(p, t, c[K + 1])), ...);
  return p;
}

template <class T, std::size_t N>
GROVE_ALWAYS_INLINE T horner(const T (&c)[N], T t) noexcept {
  return horner_fold(c, t, std::make_index_sequence<N - 1>{});
}

// The constants of log_f32 and of erf_inv_scaled(float), which their AVX2 forms
// (math_avx2.hpp) share: both must give the same bits.
// Cephes logf's polynomial P(f), highest power first.
inline constexpr float log_f32_polynomial[9] = {
    7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,  -1.2420140846E-1f, 1.4249322787E-1f,
    -1.6668057665E-1f, 2.0000714765E-1f,  -2.4999993993E-1f, 3.3333331174E-1f};
// ln 2 = ln2_hi + ln2_lo, ln2_hi exact in 9 bits.
inline constexpr float log_f32_ln2_hi = 0.693359375f;
inline constexpr float log_f32_ln2_lo = -2.12194440e-4f;
// XLA's single-precision erf_inv for w < erf_inv_tail_from, in w - erf_inv_centre; highest power
// first (erf_inv_tail_polynomial has the other one).
inline constexpr float erf_inv_polynomial[9] = {2.81022636e-08f,  3.43273939e-07f, -3.5233877e-06f,
                                                -4.39150654e-06f, 0.00021858087f,  -0.00125372503f,
                                                -0.00417768164f,  0.246640727f,    1.50140941f};
inline constexpr float erf_inv_tail_from = 5.0f;
inline constexpr float erf_inv_centre = 2.5f;

// Natural logarithm of a positive, finite, normal float, within one ulp of the correctly rounded
// result. Cephes' logf: reduce to x = 2^k * m with m in [sqrt(2)/2, sqrt(2)), then
// log(m) = f - f^2/2 + f^3 P(f) with f = m - 1 and k * ln 2 added in two parts. It has no division
// and no branch, so it vectorises well, and it does not depend on the platform's libm, so every
// platform gets the same bits.
GROVE_ALWAYS_INLINE float log_f32(float x) noexcept {
  // 0x3f3504f3 is the bit pattern of sqrt(2)/2: shifting by it puts m in [sqrt(2)/2, sqrt(2)).
  std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  bits += 0x3f800000u - 0x3f3504f3u;
  const int k = static_cast<int>(bits >> 23) - 0x7f;
  bits = (bits & 0x007fffffu) + 0x3f3504f3u;
  const float f = std::bit_cast<float>(bits) - 1.0f;  // exact (Sterbenz)
  const float kf = static_cast<float>(k);

  const float poly = horner(log_f32_polynomial, f);
  const float f2 = f * f;
  // Summed from the smallest terms: f^3 P(f) + k ln2_lo - f^2/2, then f, then k ln2_hi.
  const float small = std::fma(-0.5f, f2, std::fma(f * f2, poly, kf * log_f32_ln2_lo));
  return std::fma(kf, log_f32_ln2_hi, f + small);
}

// XLA:CPU's single-precision log, bit for bit (checked against jax 0.10.2 on 2 * 10^6 arguments,
// and by tests/oracle/random_oracle.py's gumbel cases): Eigen's plog, which is log_f32's reduction
// and Cephes polynomial evaluated in another order: the polynomial in three parts of three terms;
// then, as LLVM contracts XLA's code, the last product fused with the addition of k ln2_lo; then
// f - f^2/2, the result and k ln2_hi summed (f^2/2 and k ln2_hi are exact: fused or not, the
// same). For positive, finite, normal x, like log_f32; no branch either. Used where XLA applies
// log itself (gumbel); erf_inv keeps log_f32, which the AVX2 and AVX-512 kernels share.
GROVE_ALWAYS_INLINE float xla_log_f32(float x) noexcept {
  // The reduction of log_f32: x = 2^k * (1 + f), 1 + f in [sqrt(2)/2, sqrt(2)), the same k and f
  // as Eigen's frexp to [0.5, 1) followed by doubling below sqrt(1/2).
  std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  bits += 0x3f800000u - 0x3f3504f3u;
  const int k = static_cast<int>(bits >> 23) - 0x7f;
  bits = (bits & 0x007fffffu) + 0x3f3504f3u;
  const float f = std::bit_cast<float>(bits) - 1.0f;  // exact (Sterbenz)
  const float kf = static_cast<float>(k);
  const float f2 = f * f;
  const float f3 = f2 * f;
  const float(&p)[9] = log_f32_polynomial;
  float y = std::fma(p[0], f, p[1]);
  float y1 = std::fma(p[3], f, p[4]);
  float y2 = std::fma(p[6], f, p[7]);
  y = std::fma(y, f, p[2]);
  y1 = std::fma(y1, f, p[5]);
  y2 = std::fma(y2, f, p[8]);
  y = std::fma(y, f3, y1);
  y = std::fma(y, f3, y2);
  y = std::fma(y, f3, std::fma(kf, log_f32_ln2_lo, 0.0f));  // the rounded product k ln2_lo
  return std::fma(kf, log_f32_ln2_hi, std::fma(-0.5f, f2, f) + y);
}

// log(1 + y) for y in (-1, 0] (the range erf_inv needs), within one ulp. 1 + y is rounded to u;
// (y - (u - 1)) / u adds back what the rounding lost (Goldberg), with u - 1 exact here. The term is
// below half an ulp of u, so 1/u is replaced by 2 - u (exact at u = 1, and the difference stays far
// below an ulp of the result) to save a division. log1p_f32(-1) is not -inf: erf_inv handles
// |x| == 1 itself, and a special case here would stop the loops around it from vectorising.
GROVE_ALWAYS_INLINE float log1p_f32(float y) noexcept {
  const float u = 1.0f + y;
  return std::fma(y - (u - 1.0f), 2.0f - u, log_f32(u));
}

// log(1 + y) in double for y in (-1, 0] (the range the double erf_inv needs), within one ulp, with
// no branch and no call, so that the loop around it vectorises (the platform's std::log1p branches
// on its argument, and on random arguments it mispredicts often enough to cost more than all the
// rest of a double normal). The method is fdlibm's log (whose polynomial in s^2, s = f / (2 + f),
// is Lg1..Lg7 below) on u = 1 + y rounded, reduced as log_f32 reduces, plus Goldberg's correction
// (y - (u - 1)) / u for what the rounding of 1 + y lost, added with the smallest terms. It does not
// depend on the platform's libm, so every platform gets the same bits. y = -1 gives no -inf: the
// double erf_inv handles |x| == 1 itself.
GROVE_ALWAYS_INLINE double log1p_f64(double y) noexcept {
  constexpr double lg[7] = {6.666666666666735130e-01, 3.999999999940941908e-01,
                            2.857142874366239149e-01, 2.222219843214978396e-01,
                            1.818357216161805012e-01, 1.531383769920937332e-01,
                            1.479819860511658591e-01};
  constexpr double ln2_hi = 6.93147180369123816490e-01;  // exact in 32 bits
  constexpr double ln2_lo = 1.90821492927058770002e-10;
  const double u = 1.0 + y;
  const double correction = (y - (u - 1.0)) / u;
  // 0x3fe6a09e667f3bcd is the bit pattern of sqrt(2)/2: shifting by it puts m in [sqrt(2)/2,
  // sqrt(2)), as in log_f32. k is converted through the mantissa of 2^52 + k (exact, and plain
  // integer and floating-point arithmetic on every instruction set).
  std::uint64_t bits = std::bit_cast<std::uint64_t>(u);
  bits += 0x3ff0000000000000u - 0x3fe6a09e667f3bcdu;
  const double biased_k =
      std::bit_cast<double>((bits >> 52) | 0x4330000000000000u) - 4503599627370496.0;
  const double k = biased_k - 1023.0;
  bits = (bits & 0x000fffffffffffffu) + 0x3fe6a09e667f3bcdu;
  const double f = std::bit_cast<double>(bits) - 1.0;  // exact (Sterbenz)
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double w = z * z;
  // Every multiply-add is an explicit fma, and each product that feeds an addition goes through
  // one (fma(a, b, 0) is the rounded product): a compiler that contracts a * b + c into an fma
  // where the instruction set has one, and not elsewhere, would give each kernel variant its own
  // bits.
  const double even = std::fma(w, std::fma(w, lg[5], lg[3]), lg[1]);
  const double odd = z * std::fma(w, std::fma(w, std::fma(w, lg[6], lg[4]), lg[2]), lg[0]);
  const double r = std::fma(w, even, odd);
  const double half_f2 = std::fma(0.5 * f, f, 0.0);
  // log(m) = f - half_f2 + s (half_f2 + r), summed from the smallest terms, as fdlibm does.
  const double small = std::fma(s, half_f2 + r, std::fma(k, ln2_lo, correction));
  return std::fma(k, ln2_hi, f - (half_f2 - small));
}

// The polynomial of XLA's single-precision erf_inv for w >= 5, in sqrt(w) - 3. Rare (|x| > 0.9966),
// so plain scalar code: std::sqrt is correctly rounded on every platform.
inline float erf_inv_tail_polynomial(float w) noexcept {
  constexpr float b[9] = {-0.000200214257f, 0.000100950558f, 0.00134934322f,
                          -0.00367342844f,  0.00573950773f,  -0.0076224613f,
                          0.00943887047f,   1.00167406f,     2.83297682f};
  return horner(b, std::sqrt(w) - 3.0f);
}

// p * x, the value of erf_inv for a polynomial value p, except x * inf at |x| == 1, where
// erf_inv(+-1) = +-inf and the polynomial is meaningless. Both values are computed and one is
// picked with a bit mask: compilers do not turn `c ? x * inf : p * x` into a blend (the
// multiplications may raise floating-point flags), and without AVX-512's masked operations the
// loops around it would then stay scalar.
template <class T>
GROVE_ALWAYS_INLINE T erf_inv_value(T x, T p) noexcept {
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const T at_one = x * std::numeric_limits<T>::infinity();
  const T inside = p * x;
  const Bits pick_at_one = std::fabs(x) == T(1) ? ~Bits{0} : Bits{0};
  return std::bit_cast<T>((std::bit_cast<Bits>(at_one) & pick_at_one) |
                          (std::bit_cast<Bits>(inside) & ~pick_at_one));
}

// XLA's single-precision erf_inv (M. Giles, "Approximating the erfinv function", GPU Computing Gems
// Jade Edition, 2011), evaluated for n values: out[i] = scale * erf_inv(x[i]).
//
// XLA evaluates both polynomials and selects; so does this, per element, except that the tail
// polynomial (w >= 5, i.e. |x| > 0.9966) and its square root are skipped for blocks where no
// element needs them. Every element's value is the same either way.
GROVE_ALWAYS_INLINE void erf_inv_scaled(const float* GROVE_RESTRICT x, float* GROVE_RESTRICT out,
                                        std::size_t n, float scale) noexcept {
  // Small blocks, so that a block without tail elements is the common case (about 95% of them).
  constexpr std::size_t lanes = 16;
  float w[lanes];
  for (std::size_t start = 0; start < n; start += lanes) {
    const std::size_t m = n - start < lanes ? n - start : lanes;
    const float* xs = x + start;
    float* os = out + start;
    std::uint32_t tail =
        0;  // an integer: compilers vectorise an OR-reduction of these, not of bool
    for_each_in_block<lanes>(m, [&](std::size_t i) GROVE_INLINE_LAMBDA {
      // -x * x, rounded, as XLA computes it. fma(-x, x, 0) keeps the product out of the addition
      // inside log1p, which a compiler would otherwise fuse into it.
      w[i] = -log1p_f32(std::fma(-xs[i], xs[i], 0.0f));
      tail |= w[i] < erf_inv_tail_from ? 0u : 1u;
    });
    for_each_in_block<lanes>(m, [&](std::size_t i) GROVE_INLINE_LAMBDA {
      const float p = horner(erf_inv_polynomial, w[i] - erf_inv_centre);
      os[i] = scale * erf_inv_value(xs[i], p);
    });
    if (tail == 0) continue;
    for (std::size_t i = 0; i < m; ++i) {
      if (w[i] < erf_inv_tail_from) continue;
      os[i] = scale * erf_inv_value(xs[i], erf_inv_tail_polynomial(w[i]));
    }
  }
}

// XLA's double-precision erf_inv (Giles' double-precision approximation: three polynomials, for
// w < 6.25, w < 16 and beyond), evaluated for n values: out[i] = scale * erf_inv(x[i]), with
// log1p_f64 for XLA's log1p.
//
// As in the float version, the first polynomial (every element with |x| < 0.998, nearly all of
// them) is evaluated for the whole block in a loop without branches, which the compiler vectorises:
// a 23-term Horner chain per element is a long chain of dependent FMAs, and element by element
// it bounds the whole loop. The few elements beyond are redone with the other two polynomials.
GROVE_ALWAYS_INLINE void erf_inv_scaled(const double* GROVE_RESTRICT x, double* GROVE_RESTRICT out,
                                        std::size_t n, double scale) noexcept {
  constexpr double c1[23] = {
      -3.6444120640178196996e-21, -1.685059138182016589e-19,  1.2858480715256400167e-18,
      1.115787767802518096e-17,   -1.333171662854620906e-16,  2.0972767875968561637e-17,
      6.6376381343583238325e-15,  -4.0545662729752068639e-14, -8.1519341976054721522e-14,
      2.6335093153082322977e-12,  -1.2975133253453532498e-11, -5.4154120542946279317e-11,
      1.051212273321532285e-09,   -4.1126339803469836976e-09, -2.9070369957882005086e-08,
      4.2347877827932403518e-07,  -1.3654692000834678645e-06, -1.3882523362786468719e-05,
      0.0001867342080340571352,   -0.00074070253416626697512, -0.0060336708714301490533,
      0.24015818242558961693,     1.6536545626831027356};
  constexpr double c2[19] = {
      2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
      1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
      2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
      6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
      0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
      -0.0037512085075692412107, 0.005370914553590063617,   1.0052589676941592334,
      3.0838856104922207635};
  constexpr double c3[17] = {
      -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
      -3.7894654401267369937e-09, 7.6157012080783393804e-09,  -1.4960026627149240478e-08,
      2.9147953450901080826e-08,  -6.7711997758452339498e-08, 2.2900482228026654717e-07,
      -9.9298272942317002539e-07, 4.5260625972231537039e-06,  -1.9681778105531670567e-05,
      7.5995277030017761139e-05,  -0.00021503011930044477347, -0.00013871931833623122026,
      1.0103004648645343977,      4.8499064014085844221};
  // Where Giles' first polynomial ends and the second: w < 6.25, w < 16.
  constexpr double central_below = 6.25, middle_below = 16.0;
  double w[block_size];
  for (std::size_t start = 0; start < n; start += block_size) {
    const std::size_t m = n - start < block_size ? n - start : block_size;
    const double* xs = x + start;
    double* os = out + start;
    // -x * x, rounded, as XLA computes it; fma(-x, x, 0) keeps the product out of the addition
    // inside log1p_f64, which a compiler would otherwise fuse into it.
    for_each_in_block(m, [&](std::size_t i) GROVE_INLINE_LAMBDA {
      w[i] = -log1p_f64(std::fma(-xs[i], xs[i], 0.0));
    });
    std::uint64_t beyond = 0;  // an integer, as in the float version
    for_each_in_block(m, [&](std::size_t i) GROVE_INLINE_LAMBDA {
      os[i] = scale * erf_inv_value(xs[i], horner(c1, w[i] - 3.125));
      beyond |= w[i] < central_below ? 0u : 1u;
    });
    if (beyond == 0) continue;
    for (std::size_t i = 0; i < m; ++i) {
      if (w[i] < central_below) continue;
      const double p = w[i] < middle_below ? horner(c2, std::sqrt(w[i]) - 3.25)
                                           : horner(c3, std::sqrt(w[i]) - 5.0);
      os[i] = scale * erf_inv_value(xs[i], p);
    }
  }
}

// XLA's single-precision erf: the rational interpolant x * P(x^2) / Q(x^2) that Eigen and XLA use
// (accurate to a few ulp), and +-1 from |x| >= 3.7439211627767994 (XLA's kErfInvOneMinusHalfULP,
// rounded to 3.7439213f), where jax 0.10.2 on XLA:CPU returns +-1 (some XLA versions switch at
// 3.832506856900711 instead).
inline float erf_f32(float x) noexcept {
  constexpr float clamp = 3.7439211627767994f;
  if (clamp <= std::fabs(x)) return std::copysign(1.0f, x);
  const float x2 = x * x;
  float p = std::fma(x2, 0.00022905065861350646f, 0.0034082910107109506f);
  p = std::fma(x2, p, 0.050955695062380861f);
  p = std::fma(x2, p, 0.18520832239976145f);
  p = std::fma(x2, p, 1.128379143519084f);
  p = x * p;
  float q = std::fma(x2, -1.1791602954361697e-7f, 0.000023547966471313185f);
  q = std::fma(x2, q, 0.0010179625278914885f);
  q = std::fma(x2, q, 0.014070470171167667f);
  q = std::fma(x2, q, 0.11098505178285362f);
  q = std::fma(x2, q, 0.49746925110067538f);
  q = std::fma(x2, q, 1.0f);
  return p / q;
}

inline double erf_f64(double x) noexcept {
  return std::erf(x);
}
inline float log_of(float x) noexcept {
  return xla_log_f32(x);
}
inline double log_of(double x) noexcept {
  return std::log(x);
}
inline float erf_of(float x) noexcept {
  return erf_f32(x);
}
inline double erf_of(double x) noexcept {
  return erf_f64(x);
}

}  // namespace grove::random::detail
