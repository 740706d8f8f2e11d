// bf16 mixed precision against float32, on the products of one training step of the
// [784, 512, 512, 10] MLP, and the register-only peaks of the instructions that bound them:
//
//   precision_products/IMPL/batch:B/threads:T
//       the step's 8 products: 3 forward (W A), 3 weight gradients (dZ A^T), 2 input gradients
//       (W^T dZ, layers 2 and 3; the first layer's is not needed), each C = op(A) op(B) into a C
//       that it overwrites. The time is the sum of the eight; the counter best_ms sums each
//       product's fastest run over the iterations (what scripts/bench_report.py compares: on a
//       shared machine the fastest run is the one least disturbed), GFLOP/s is computed from it.
//       IMPL is one of
//         grove_f32    nn::detail::gemm_slice with Precision::full, on grove's threads
//         grove_bf16   the same with Precision::bf16: rounding the inputs to bfloat16 is part of
//                      its products, as it is of a training step's
//         onednn_f32   oneDNN's dnnl::matmul, float32 in and out
//         onednn_bf16  dnnl::matmul with bfloat16 inputs and a float32 output; the inputs are
//                      converted to bfloat16 once, before the timing (a framework that trains in
//                      bf16 keeps bf16 copies), so its time does not include what grove_bf16's does
//       Both libraries read the same column-major matrices in place (oneDNN's plain strided
//       layouts, no weights prepacked into its blocked formats). The label says what ran: grove's
//       kernel and whether its bf16 products round their inputs yet (checked against a reference
//       on rounded inputs), oneDNN's implementation and instruction set (a `ref` implementation is
//       oneDNN's slow reference code: it has no kernel for this CPU). Every implementation's
//       results are checked against that reference once, before the timing (counter
//       max_rel_err); the summary at the end also lists the products one by one.
//   precision_peak/fma_f32    the float32 FMA's register-only peak, on AVX-512F or AVX2 as the
//                             CPU has
//   precision_peak/vdpbf16ps  AVX512-BF16's dot-product instruction's; on a CPU without it the
//                             benchmark is skipped with a message that says so
//
// ONEDNN_MAX_CPU_ISA (read by oneDNN, printed here) caps the instruction set oneDNN may use:
// scripts/bench.sh leaves it unset, since grove's bf16 products run on AMX where the CPU has it;
// AVX512_CORE_BF16 (for comparisons on the vector units alone) makes oneDNN's bf16 products run on
// the same vector units as grove's rather than on the tile unit. GROVE_MAX_CPU_ISA=AVX2 makes
// grove's float products run its AVX2 kernel on a CPU with AVX-512F: with ONEDNN_MAX_CPU_ISA=AVX2
// it compares the two libraries' AVX2 code (what an AVX2-only CPU such as AMD's Zen 3 runs).
//
//   build/bench/bench/bench_precision --benchmark_filter='batch:128/threads:1|peak'
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <grove/detail/bf16.hpp>
#include <grove/detail/cpu.hpp>
#include <grove/nn/detail/gemm.hpp>
#include <grove/random.hpp>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
#include <immintrin.h>
#endif
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace d = grove::nn::detail;

namespace {

using Index = Eigen::Index;
using Matrix = Eigen::MatrixXf;
using clock_type = std::chrono::steady_clock;

const std::vector<Index> kSizes{784, 512, 512, 10};

void set_threads(int threads) {
  Eigen::setNbThreads(threads);
#if defined(_OPENMP)
  // oneDNN's OpenMP runtime and grove's max_threads() both read the calling thread's setting.
  omp_set_num_threads(threads);
#endif
}

// --- the products -------------------------------------------------------------------------------

// Which of a product's operands are transposed: C = A B, A B^T (weight gradients), A^T B (input
// gradients).
enum class Op { nn, nt, tn };

struct Product {
  std::string name;
  Op op;
  const Matrix* a;
  const Matrix* b;
  Index m, n, k;
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * k; }
};

// C = op(A) op(B) in float, from the given (possibly rounded) operands.
Matrix product_of(const Product& p, const Matrix& a, const Matrix& b) {
  Matrix c(p.m, p.n);
  switch (p.op) {
    case Op::nn:
      c.noalias() = a * b;
      break;
    case Op::nt:
      c.noalias() = a * b.transpose();
      break;
    case Op::tn:
      c.noalias() = a.transpose() * b;
      break;
  }
  return c;
}

Matrix rounded(const Matrix& x) {
  Matrix r = x;
  grove::detail::round_to_bf16(r.data(), r.size());
  return r;
}

// The step's operands at one batch (values like a step's: no NaN, no denormals), its 8 products,
// and each product's reference result from the operands as they are and rounded to bf16.
struct Step {
  std::vector<Matrix> w, a, dz;
  std::vector<Product> products;
  std::vector<Matrix> reference, reference_bf16;

  explicit Step(Index batch) {
    const std::size_t L = kSizes.size() - 1;
    std::uint64_t seed = 0;
    auto uniform = [&](Index rows, Index cols, float scale) {
      return Matrix(scale * grove::random::uniform<float>(grove::random::key(seed++), rows, cols,
                                                          -1.0f, 1.0f));
    };
    for (std::size_t l = 0; l < L; ++l) {
      w.push_back(uniform(kSizes[l + 1], kSizes[l], 0.05f));
      a.push_back(uniform(kSizes[l], batch, 1.0f));
      dz.push_back(uniform(kSizes[l + 1], batch, 1.0f));
    }
    for (std::size_t l = 0; l < L; ++l)
      products.push_back({"fwd W" + std::to_string(l) + "*A", Op::nn, &w[l], &a[l], kSizes[l + 1],
                          batch, kSizes[l]});
    for (std::size_t l = L; l-- > 0;) {
      products.push_back({"dW" + std::to_string(l) + "=dZ*A^T", Op::nt, &dz[l], &a[l],
                          kSizes[l + 1], kSizes[l], batch});
      if (l > 0)
        products.push_back({"dA" + std::to_string(l) + "=W^T*dZ", Op::tn, &w[l], &dz[l], kSizes[l],
                            batch, kSizes[l + 1]});
    }
    for (const auto& p : products) {
      reference.push_back(product_of(p, *p.a, *p.b));
      reference_bf16.push_back(product_of(p, rounded(*p.a), rounded(*p.b)));
    }
  }

  double flops() const {
    double f = 0;
    for (const auto& p : products) f += p.flops();
    return f;
  }
};

Step& step_at(Index batch) {
  static std::map<Index, std::unique_ptr<Step>> steps;
  auto& s = steps[batch];
  if (!s) s = std::make_unique<Step>(batch);
  return *s;
}

// max |c - ref| / max |ref|: the error relative to the product's scale.
double relative_error(const Matrix& c, const Matrix& ref) {
  return (c - ref).cwiseAbs().maxCoeff() / std::max(ref.cwiseAbs().maxCoeff(), 1e-30f);
}

// --- the implementations ------------------------------------------------------------------------

class Impl {
 public:
  virtual ~Impl() = default;
  virtual void run(std::size_t i) = 0;
  const Matrix& out(std::size_t i) const { return out_[i]; }
  std::string label;  // what ran
  std::string error;  // why it cannot run here (then it is skipped with this message)
  double max_error = 0;

 protected:
  std::vector<Matrix> out_;
};

d::View<const float> in_view(const Matrix& m) {
  return {m.data(), m.rows(), m.cols(), m.rows()};
}

// Room for a slice's product at this precision, where GemmScratch::reserve takes the precision
// (bf16 products may need more room than float ones: the bf16 kernels' work adds the argument);
// else the float product's room. A template, so that this file compiles with and without it.
template <class Scratch>
void reserve(Scratch& scratch, Index m, Index n, Index k, d::Precision precision) {
  if constexpr (requires { scratch.reserve(m, n, k, precision); })
    scratch.reserve(m, n, k, precision);
  else
    scratch.reserve(m, n, k);
}

class Grove final : public Impl {
 public:
  Grove(const Step& step, d::Precision precision, int threads)
      : step_(step), precision_(precision), threads_(threads), scratch_(threads) {
    for (const auto& p : step.products) {
      out_.emplace_back(p.m, p.n);
      for (int tid = 0; tid < threads; ++tid) {
        const d::Slice s = d::slice_of(p.m, p.n, p.k, tid, threads);
        if (!s.empty())
          reserve(scratch_[static_cast<std::size_t>(tid)], s.rows.size(), s.cols.size(), p.k,
                  precision);
      }
    }
  }

  void run(std::size_t i) override {
    const Product& p = step_.products[i];
    const auto a = in_view(*p.a), b = in_view(*p.b);
    Matrix& c = out_[i];
    const d::View<float> cv{c.data(), c.rows(), c.cols(), c.rows()};
    d::parallel(threads_, [&](int tid, int team) {
      const d::Slice s = d::slice_of(p.m, p.n, p.k, tid, team);
      auto& sc = scratch_[static_cast<std::size_t>(tid)];
      switch (p.op) {
        case Op::nn:
          d::gemm_slice<false, false>(s, a, b, cv, 1.0f, sc, d::Into::overwrite, precision_);
          break;
        case Op::nt:
          d::gemm_slice<false, true>(s, a, b, cv, 1.0f, sc, d::Into::overwrite, precision_);
          break;
        case Op::tn:
          d::gemm_slice<true, false>(s, a, b, cv, 1.0f, sc, d::Into::overwrite, precision_);
          break;
      }
    });
  }

 private:
  const Step& step_;
  d::Precision precision_;
  int threads_;
  std::vector<d::GemmScratch<float>> scratch_;
};

}  // namespace

// What gemm.hpp calls its bf16 kernel, where it has nn::detail::bf16_kernel_name() (the bf16
// kernels' work adds it). This fallback, found by the same unqualified lookup, loses overload
// resolution to that function (a function beats a template when both match equally), so that
// this file compiles with and without it.
namespace grove_bench_fallback {
template <class = void>
const char* bf16_kernel_name() {
  return nullptr;
}
}  // namespace grove_bench_fallback

namespace {

// The kernel of grove's bf16 products in words, or null where gemm.hpp does not say.
const char* grove_bf16_kernel_name() {
  using namespace grove::nn::detail;
  using namespace grove_bench_fallback;
  return bf16_kernel_name();
}

const char* isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}

class OneDnn final : public Impl {
 public:
  OneDnn(const Step& step, bool bf16) : engine_(dnnl::engine::kind::cpu, 0), stream_(engine_) {
    using tag_dims = dnnl::memory::dims;
    using dt = dnnl::memory::data_type;
    std::set<std::string> impls;
    try {
      for (const auto& p : step.products) {
        out_.emplace_back(p.m, p.n);
        // oneDNN's matmul is row-major: dst (M x N) = src (M x K) weights (K x N). grove's C
        // (m x n, column-major) is a row-major n x m matrix, C^T = op(B)^T op(A)^T: src is
        // op(B)^T, weights op(A)^T, both described by strides over the column-major storage.
        const Index lda = p.a->rows(), ldb = p.b->rows();
        const bool ta = p.op == Op::tn, tb = p.op == Op::nt;
        const tag_dims src_dims{p.n, p.k}, wei_dims{p.k, p.m}, dst_dims{p.n, p.m};
        const tag_dims src_strides = tb ? tag_dims{1, ldb} : tag_dims{ldb, 1};
        const tag_dims wei_strides = ta ? tag_dims{1, lda} : tag_dims{lda, 1};
        const dnnl::memory::desc src_f32(src_dims, dt::f32, src_strides);
        const dnnl::memory::desc wei_f32(wei_dims, dt::f32, wei_strides);
        const dnnl::memory::desc dst(dst_dims, dt::f32, tag_dims{p.m, 1});
        // oneDNN takes non-const handles; it only reads a matmul's src and weights.
        dnnl::memory src(src_f32, engine_, const_cast<float*>(p.b->data()));
        dnnl::memory wei(wei_f32, engine_, const_cast<float*>(p.a->data()));
        if (bf16) {
          // The conversion to bf16, once, outside the timed loop (see the top of this file).
          dnnl::memory src16({src_dims, dt::bf16, src_strides}, engine_);
          dnnl::memory wei16({wei_dims, dt::bf16, wei_strides}, engine_);
          dnnl::reorder(src, src16).execute(stream_, src, src16);
          dnnl::reorder(wei, wei16).execute(stream_, wei, wei16);
          stream_.wait();
          src = src16;
          wei = wei16;
        }
        const dnnl::matmul::primitive_desc pd(
            dnnl::matmul::desc(src.get_desc(), wei.get_desc(), dst), engine_);
        impls.insert(pd.impl_info_str());
        matmuls_.emplace_back(pd);
        args_.push_back({{DNNL_ARG_SRC, src},
                         {DNNL_ARG_WEIGHTS, wei},
                         {DNNL_ARG_DST, dnnl::memory(dst, engine_, out_.back().data())}});
      }
    } catch (const dnnl::error& e) {
      error = std::string("unsupported: oneDNN makes no ") + (bf16 ? "bf16" : "f32") +
              " matmul for these products with instruction set " +
              isa_name(dnnl::get_effective_cpu_isa()) + " (" + e.what() + ")";
    }
    label = std::string("oneDNN ") + isa_name(dnnl::get_effective_cpu_isa()) + ":";
    for (const auto& s : impls) label += " " + s;
  }

  void run(std::size_t i) override {
    matmuls_[i].execute(stream_, args_[i]);
    stream_.wait();
  }

 private:
  dnnl::engine engine_;
  dnnl::stream stream_;
  std::vector<dnnl::matmul> matmuls_;
  std::vector<std::unordered_map<int, dnnl::memory>> args_;
};

// Each implementation is made once per configuration (Google Benchmark calls a benchmark several
// times while it sizes the iterations): the operands, oneDNN's primitives and the check of the
// results are not part of any timing.
Impl& impl_at(const std::string& name, Index batch, int threads) {
  static std::map<std::tuple<std::string, Index, int>, std::unique_ptr<Impl>> impls;
  auto& impl = impls[{name, batch, threads}];
  if (impl) return *impl;
  const Step& step = step_at(batch);
  const bool bf16 = name.ends_with("bf16");
  if (name.starts_with("grove")) {
    impl = std::make_unique<Grove>(step, bf16 ? d::Precision::bf16 : d::Precision::full, threads);
    const char* kernel = bf16 ? grove_bf16_kernel_name() : nullptr;
    impl->label = kernel ? kernel : d::kernel_name<float>();
  } else {
    impl = std::make_unique<OneDnn>(step, bf16);
  }
  if (!impl->error.empty()) return *impl;
  // One run of each product, checked against the reference its precision promises: a wrong
  // layout or a kernel bug shows as an error of order 1, rounding as one far below.
  double full = 0, round = 0;
  for (std::size_t i = 0; i < step.products.size(); ++i) {
    impl->run(i);
    full = std::max(full, relative_error(impl->out(i), step.reference[i]));
    round = std::max(round, relative_error(impl->out(i), step.reference_bf16[i]));
  }
  impl->max_error = bf16 ? round : full;
  if (name == "grove_bf16")
    impl->label += round < 0.1 * full ? " (checked: products of the rounded inputs)"
                                      : " (checked: float32 products, the inputs are not rounded)";
  if (std::min(full, round) > 1e-2)
    impl->error = name + "'s products differ from the reference (relative error " +
                  std::to_string(std::min(full, round)) + ")";
  return *impl;
}

// Each product's fastest run per implementation and configuration, over every call and
// repetition, for the summary's product-by-product table.
std::map<std::tuple<std::string, Index, int>, std::vector<double>> g_fastest;

void products(benchmark::State& state, const std::string& name) {
  const Index batch = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  set_threads(threads);
  Impl& impl = impl_at(name, batch, threads);
  if (!impl.error.empty()) {
    state.SkipWithError(impl.error.c_str());
    return;
  }
  const Step& step = step_at(batch);
  std::vector<double> best(step.products.size(), 1e30);
  for (auto _ : state) {
    for (std::size_t i = 0; i < step.products.size(); ++i) {
      const auto t0 = clock_type::now();
      impl.run(i);
      const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
      best[i] = std::min(best[i], s);
    }
    benchmark::ClobberMemory();
  }
  double sum = 0;
  for (double s : best) sum += s;
  auto& fastest = g_fastest[{name, batch, threads}];
  fastest.resize(best.size(), 1e30);
  for (std::size_t i = 0; i < best.size(); ++i) fastest[i] = std::min(fastest[i], best[i]);
  state.counters["best_ms"] = 1e3 * sum;
  state.counters["GFLOP/s"] = step.flops() / sum / 1e9;
  state.counters["max_rel_err"] = impl.max_error;
  state.SetLabel(impl.label);
}

// --- register-only peaks ------------------------------------------------------------------------

#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
// One loop per instruction, as a macro: the vectors must not cross a function boundary (their ABI
// depends on the target), and the instruction must be inlined into the loop. Twelve independent
// chains cover the latency of two pipes on the CPUs these run on (the dot product's latency is
// longer than the FMA's), and leave the chains and the two inputs in registers. Many short
// trials, the fastest counting: on a shared machine a long loop measures the sharing.
#define GROVE_BENCH_PEAK(NAME, TARGET, ACC, IN, MAKE_ACC, X, Y, OP, LANE0, FLOPS_PER_OP)      \
  __attribute__((target(TARGET))) double NAME() {                                             \
    constexpr long reps = 40'000;                                                             \
    const IN x = X, y = Y;                                                                    \
    /* different starting values, so that the compiler cannot merge the chains */             \
    ACC a0 = MAKE_ACC(1.0f), a1 = MAKE_ACC(1.1f), a2 = MAKE_ACC(1.2f), a3 = MAKE_ACC(1.3f);   \
    ACC a4 = MAKE_ACC(1.4f), a5 = MAKE_ACC(1.5f), a6 = MAKE_ACC(1.6f), a7 = MAKE_ACC(1.7f);   \
    ACC a8 = MAKE_ACC(1.8f), a9 = MAKE_ACC(1.9f), a10 = MAKE_ACC(2.0f), a11 = MAKE_ACC(2.1f); \
    double best = 0;                                                                          \
    for (int trial = 0; trial < 20; ++trial) {                                                \
      const auto t0 = clock_type::now();                                                      \
      for (long r = 0; r < reps; ++r) {                                                       \
        a0 = OP(a0, x, y), a1 = OP(a1, x, y), a2 = OP(a2, x, y), a3 = OP(a3, x, y);           \
        a4 = OP(a4, x, y), a5 = OP(a5, x, y), a6 = OP(a6, x, y), a7 = OP(a7, x, y);           \
        a8 = OP(a8, x, y), a9 = OP(a9, x, y), a10 = OP(a10, x, y), a11 = OP(a11, x, y);       \
      }                                                                                       \
      const double s = std::chrono::duration<double>(clock_type::now() - t0).count();         \
      float sink = LANE0(a0) + LANE0(a1) + LANE0(a2) + LANE0(a3) + LANE0(a4) + LANE0(a5) +    \
                   LANE0(a6) + LANE0(a7) + LANE0(a8) + LANE0(a9) + LANE0(a10) + LANE0(a11);   \
      benchmark::DoNotOptimize(sink);                                                         \
      best = std::max(best, (FLOPS_PER_OP)*12.0 * static_cast<double>(reps) / s / 1e9);       \
    }                                                                                         \
    return best;                                                                              \
  }
// An FMA is 2 FLOPs per float lane; vdpbf16ps adds two bf16 products into each float lane, 4.
GROVE_BENCH_PEAK(fma_peak_avx2, "avx2,fma", __m256, __m256, _mm256_set1_ps,
                 _mm256_set1_ps(0.999999f), _mm256_set1_ps(1e-7f), _mm256_fmadd_ps,
                 _mm256_cvtss_f32, 2.0 * 8)
GROVE_BENCH_PEAK(fma_peak_avx512, "avx512f", __m512, __m512, _mm512_set1_ps,
                 _mm512_set1_ps(0.999999f), _mm512_set1_ps(1e-7f), _mm512_fmadd_ps,
                 _mm512_cvtss_f32, 2.0 * 16)
GROVE_BENCH_PEAK(dpbf16_peak_avx512, "avx512f,avx512bf16", __m512, __m512bh, _mm512_set1_ps,
                 _mm512_cvtne2ps_pbh(_mm512_set1_ps(0.999f), _mm512_set1_ps(0.998f)),
                 _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-7f), _mm512_set1_ps(2e-7f)),
                 _mm512_dpbf16_ps, _mm512_cvtss_f32, 4.0 * 16)
#undef GROVE_BENCH_PEAK

bool has_avx512_bf16() {
  return grove::detail::this_cpu().avx512f && __builtin_cpu_supports("avx512bf16");
}
#endif

void peak_fma_f32(benchmark::State& state) {
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
  const auto& cpu = grove::detail::this_cpu();
  if (cpu.avx512f || cpu.avx2_fma) {
    double gflops = 0;
    for (auto _ : state)
      gflops = std::max(gflops, cpu.avx512f ? fma_peak_avx512() : fma_peak_avx2());
    state.counters["GFLOP/s"] = gflops;
    state.SetLabel(cpu.avx512f ? "AVX-512F vfmadd231ps zmm" : "AVX2 vfmadd231ps ymm");
    return;
  }
#endif
  state.SkipWithError("absent: this CPU has neither AVX-512F nor AVX2 with FMA");
}

void peak_vdpbf16ps(benchmark::State& state) {
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
  if (has_avx512_bf16()) {
    double gflops = 0;
    for (auto _ : state) gflops = std::max(gflops, dpbf16_peak_avx512());
    state.counters["GFLOP/s"] = gflops;
    state.SetLabel("AVX512-BF16 vdpbf16ps zmm");
    return;
  }
#endif
  state.SkipWithError("absent: this CPU has no AVX512-BF16");
}

// Keeps each benchmark's fastest repetition for the summary.
class Collector : public benchmark::ConsoleReporter {
 public:
  struct Row {
    double ms = 0, gflops = 0;
    std::string label, error;
  };
  std::map<std::string, Row> rows;  // the benchmark's name
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type != Run::RT_Iteration) continue;
      const std::string key = r.run_name.str();
      Row row;
      if (r.error_occurred) {
        row.error = r.error_message;
      } else {
        row.label = r.report_label;
        if (auto it = r.counters.find("best_ms"); it != r.counters.end()) row.ms = it->second;
        if (auto it = r.counters.find("GFLOP/s"); it != r.counters.end()) row.gflops = it->second;
      }
      // The fastest products, the highest peak; a run that failed only where none succeeded.
      const auto old = rows.find(key);
      const bool better =
          old == rows.end() ||
          (row.error.empty() &&
           (!old->second.error.empty() ||
            (row.ms > 0 ? row.ms < old->second.ms : row.gflops > old->second.gflops)));
      if (better) rows[key] = row;
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

const std::vector<std::string> kImpls{"grove_f32", "grove_bf16", "onednn_f32", "onednn_bf16"};

}  // namespace

int main(int argc, char** argv) {
  const dnnl_version_t* v = dnnl_version();
  const std::string version =
      std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
  const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
  const char* isa = isa_name(dnnl::get_effective_cpu_isa());
  // GROVE_MAX_CPU_ISA=AVX2 is grove's counterpart: its float products run the AVX2 kernel on a CPU
  // with AVX-512F, to be compared with oneDNN's AVX2 code (ONEDNN_MAX_CPU_ISA=AVX2) in one run.
  const char* grove_cap = std::getenv("GROVE_MAX_CPU_ISA");
  if (grove_cap && std::string(grove_cap) == "AVX2") {
    d::force_avx2_kernel() = true;
  } else if (grove_cap && *grove_cap) {
    std::fprintf(stderr, "bench_precision: GROVE_MAX_CPU_ISA=%s: the only cap is AVX2\n",
                 grove_cap);
    return 2;
  }
#if GROVE_DETAIL_DISPATCH && defined(__x86_64__)
  const char* bf16 = has_avx512_bf16() ? "present" : "absent";
#else
  const char* bf16 = "absent";
#endif
  std::printf("grove: %s; oneDNN %s, instruction set %s (ONEDNN_MAX_CPU_ISA=%s)\n",
              d::kernel_name<float>(), version.c_str(), isa, cap ? cap : "unset");
  std::printf("AVX512-BF16 (vdpbf16ps): %s\n", bf16);
  // In the JSON's context too, for scripts/bench_report.py.
  benchmark::AddCustomContext("grove_kernel", d::kernel_name<float>());
  benchmark::AddCustomContext("onednn_version", version);
  benchmark::AddCustomContext("onednn_isa", isa);
  benchmark::AddCustomContext("onednn_max_cpu_isa", cap ? cap : "");
  benchmark::AddCustomContext("avx512_bf16", bf16);
  for (const auto& name : kImpls)
    benchmark::RegisterBenchmark(("precision_products/" + name).c_str(), products, name)
        ->ArgsProduct({{128, 1024}, {1, 2}})
        ->ArgNames({"batch", "threads"})
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("precision_peak/fma_f32", peak_fma_f32)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("precision_peak/vdpbf16ps", peak_vdpbf16ps)
      ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  Collector collector;
  benchmark::RunSpecifiedBenchmarks(&collector);

  std::printf("\nThe step's 8 products, each one's fastest run summed (ms), and / grove_f32:\n");
  std::printf("%-6s %-8s", "batch", "threads");
  for (const auto& name : kImpls) std::printf(" %12s", name.c_str());
  std::printf(" %12s %12s %12s\n", "g16/g32", "g32/dnn32", "g16/dnn16");
  for (long batch : {128, 1024})
    for (long threads : {1, 2}) {
      const std::string suffix =
          "/batch:" + std::to_string(batch) + "/threads:" + std::to_string(threads);
      std::map<std::string, double> ms;
      for (const auto& name : kImpls)
        if (auto it = collector.rows.find("precision_products/" + name + suffix);
            it != collector.rows.end() && it->second.ms > 0)
          ms[name] = it->second.ms;
      if (ms.empty()) continue;
      const auto cell = [](bool known, double value) {
        if (known)
          std::printf(" %12.3f", value);
        else
          std::printf(" %12s", "-");
      };
      const auto get = [&](const std::string& name) {
        const auto it = ms.find(name);
        return it == ms.end() ? 0.0 : it->second;
      };
      std::printf("%-6ld %-8ld", batch, threads);
      for (const auto& name : kImpls) cell(get(name) > 0, get(name));
      const auto ratio = [&](const char* x, const char* y) {
        cell(get(x) > 0 && get(y) > 0, get(x) / get(y));
      };
      ratio("grove_bf16", "grove_f32");
      ratio("grove_f32", "onednn_f32");
      ratio("grove_bf16", "onednn_bf16");
      std::printf("\n");
    }
  std::printf("\nProduct by product (ms, each one's fastest run in any repetition):\n");
  std::printf("%-6s %-8s %-16s %-14s", "batch", "threads", "product", "m x n x k");
  for (const auto& name : kImpls) std::printf(" %12s", name.c_str());
  std::printf(" %12s\n", "g32/dnn32");
  for (long batch : {128, 1024})
    for (int threads : {1, 2}) {
      std::vector<const std::vector<double>*> columns;
      for (const auto& name : kImpls) {
        const auto it = g_fastest.find({name, batch, threads});
        columns.push_back(it == g_fastest.end() ? nullptr : &it->second);
      }
      if (std::all_of(columns.begin(), columns.end(), [](auto* c) { return c == nullptr; }))
        continue;
      const Step& step = step_at(batch);
      for (std::size_t i = 0; i < step.products.size(); ++i) {
        const Product& p = step.products[i];
        std::printf(
            "%-6ld %-8d %-16s %-14s", batch, threads, p.name.c_str(),
            (std::to_string(p.m) + "x" + std::to_string(p.n) + "x" + std::to_string(p.k)).c_str());
        for (const auto* c : columns)
          if (c)
            std::printf(" %12.4f", 1e3 * (*c)[i]);
          else
            std::printf(" %12s", "-");
        if (columns[0] && columns[2])
          std::printf(" %12.3f\n", (*columns[0])[i] / (*columns[2])[i]);
        else
          std::printf(" %12s\n", "-");
      }
    }
  std::printf("\nWhat ran:\n");
  for (const auto& name : kImpls)
    for (const auto& [key, row] : collector.rows)
      if (key.starts_with("precision_products/" + name + "/")) {
        std::printf("  %-12s %s\n", name.c_str(),
                    row.error.empty() ? row.label.c_str() : row.error.c_str());
        break;
      }
  double peaks[2] = {0, 0};
  const char* names[2] = {"precision_peak/fma_f32", "precision_peak/vdpbf16ps"};
  for (int i = 0; i < 2; ++i)
    if (auto it = collector.rows.find(names[i]); it != collector.rows.end()) {
      peaks[i] = it->second.gflops;
      std::printf("%-26s %s\n", names[i],
                  it->second.error.empty()
                      ? (std::to_string(peaks[i]) + " GFLOP/s, " + it->second.label).c_str()
                      : it->second.error.c_str());
    }
  if (peaks[0] > 0 && peaks[1] > 0) std::printf("vdpbf16ps / fma_f32: %.3f\n", peaks[1] / peaks[0]);
}
