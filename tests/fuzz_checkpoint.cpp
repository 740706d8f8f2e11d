// libFuzzer target for the checkpoint loader: any input either loads into a Sample tree (and into
// a tree of Eigen tensors) or raises grove::io::format_error that leaves the tree untouched, with
// each of the load_options below.
// Anything else (another exception, a sanitizer report, a crash) is a finding.
//   cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ -DGROVE_FUZZ=ON
//   cmake --build build/fuzz --target fuzz_checkpoint checkpoint_interop
//   build/fuzz/tests/checkpoint_interop write corpus/seed.safetensors
//   build/fuzz/tests/fuzz_checkpoint corpus
#include <cstdlib>
#include <iostream>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"
#include "grove/tree/tensor.hpp"

namespace {

// Some of Sample's tensors by their names, as Eigen tensors (either storage order, dynamic and
// fixed-size), loaded leniently from the same inputs: N-D leaves on the same paths.
struct Tensors {
  Eigen::Tensor<double, 2> f64;                             // (2, 3)
  Eigen::Tensor<std::int32_t, 2, Eigen::RowMajor> i32;      // (3, 2)
  Eigen::Tensor<std::int64_t, 1> i64;                       // (4,)
  Eigen::TensorFixedSize<float, Eigen::Sizes<2, 2>> fixed;  // (2, 2)
  Eigen::Tensor<float, 0> f32_scalar;                       // ()
};
GROVE_NODE(Tensors, f64, i32, i64, fixed, f32_scalar);

Tensors tensors() {
  Tensors t;
  t.f64.resize(2, 3);
  t.i32.resize(3, 2);
  t.i64.resize(4);
  grove::tree_for_each([](auto& x) { x.setZero(); }, t);
  return t;
}

bool same_bits(const Tensors& a, const Tensors& b) {
  bool same = true;
  grove::tree_for_each(
      [&](const auto& x, const auto& y) {
        using S = typename std::remove_cvref_t<decltype(x)>::Scalar;
        same = same && grove::shape(x) == grove::shape(y) &&
               std::memcmp(x.data(), y.data(), sizeof(S) * static_cast<std::size_t>(x.size())) == 0;
      },
      a, b);
  return same;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const ckpt_test::Sample baseline = ckpt_test::zeroed();
  static const std::filesystem::path name = "fuzz-input";
  const grove::io::detail::reading ctx{"fuzz", name};
  // Strict; lenient with dtype conversion and a rename that skips one tensor; and lenient with
  // the 2-D tensors transposed (each of Sample's matrices, and a vector, which is refused).
  const grove::io::load_options options[] = {
      {},
      {.strict = false,
       .rename = [](std::string_view n) { return n == "f64" ? std::string() : std::string(n); },
       .convert = true},
      {.strict = false, .convert = true, .transpose = [](std::string_view n) {
         return n == "f64" || n == "i32" || n == "u8" || n == "fixed" || n.ends_with("/w");
       }}};
  for (const auto& o : options) {
    ckpt_test::Sample target = baseline;
    try {
      (void)grove::io::detail::load_bytes_into(reinterpret_cast<const std::byte*>(data), size,
                                               target, ctx, o);
    } catch (const grove::io::format_error&) {
      if (!ckpt_test::bits_equal(target, baseline)) {
        std::cerr << "a rejected input changed the target\n";
        std::abort();
      }
    }
  }
  static const Tensors tensor_baseline = tensors();
  for (const bool convert : {false, true}) {
    Tensors target = tensor_baseline;
    try {
      (void)grove::io::detail::load_bytes_into(reinterpret_cast<const std::byte*>(data), size,
                                               target, ctx, {.strict = false, .convert = convert});
    } catch (const grove::io::format_error&) {
      if (!same_bits(target, tensor_baseline)) {
        std::cerr << "a rejected input changed the tensor target\n";
        std::abort();
      }
    }
  }
  return 0;
}
