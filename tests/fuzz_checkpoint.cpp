// libFuzzer target for the checkpoint loader: any input either loads into a Sample tree or raises
// grove::io::format_error that leaves the tree untouched, with each of the load_options below.
// Anything else (another exception, a sanitizer report, a crash) is a finding.
//   cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ -DGROVE_FUZZ=ON
//   cmake --build build/fuzz --target fuzz_checkpoint checkpoint_interop
//   build/fuzz/tests/checkpoint_interop write corpus/seed.safetensors
//   build/fuzz/tests/fuzz_checkpoint corpus
#include <cstdlib>
#include <iostream>

#include "checkpoint_fixture.hpp"
#include "grove/io/checkpoint.hpp"

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
  return 0;
}
