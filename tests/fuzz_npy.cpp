// libFuzzer target for the .npy and .npz readers: any input either loads (and converts, or is
// refused by the conversion with grove::argument_error) or raises grove::io::format_error.
// Anything else (another exception, a sanitizer report, a crash, a hang) is a finding.
//   cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ -DGROVE_FUZZ=ON
//   cmake --build build/fuzz --target fuzz_npy data_npy_interop
//   build/fuzz/tests/data_npy_interop seed corpus
//   build/fuzz/tests/fuzz_npy corpus
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <grove/data/npy.hpp>
#include <grove/data/npy_tensor.hpp>
#include <grove/data/npz.hpp>
#include <iostream>
#include <string>
#include <system_error>

namespace {

// The input as a file (the readers take paths), one per process, removed when it exits.
const std::filesystem::path& input_path() {
  static const struct Input {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("grove_fuzz_npy_" + std::to_string(::getpid()));
    ~Input() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } input;
  return input.path;
}

void write_input(const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(input_path().c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

void convert(const grove::data::NpyArray& a) {
  try {
    if (a.shape.size() <= 2) {
      (void)a.as_matrix<double>();
      (void)a.as_matrix<std::int32_t>();
    } else if (a.shape.size() == 3) {
      (void)a.as_tensor<float, 3>();
    }
  } catch (const grove::argument_error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  write_input(data, size);
  const bool zip = size >= 2 && data[0] == 'P' && data[1] == 'K';
  try {
    if (zip) {
      for (const auto& [key, array] : grove::data::load_npz(input_path(), 1 << 20)) convert(array);
    } else {
      convert(grove::data::read_npy(input_path()));
    }
  } catch (const grove::io::format_error&) {
  } catch (const std::exception& e) {
    std::cerr << "fuzz_npy: unexpected exception: " << e.what() << "\n";
    std::abort();
  }
  return 0;
}
