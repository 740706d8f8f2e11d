// libFuzzer target for grove::data::parse_csv: any input either parses into a dataset whose
// inputs and targets hold as many examples, or raises grove::io::format_error or
// grove::argument_error, with each of the options below. Anything else (another exception, a
// sanitizer report, a crash, a hang) is a finding.
//   cmake -S . -B build/fuzz -DCMAKE_CXX_COMPILER=clang++ -DGROVE_FUZZ=ON
//   cmake --build build/fuzz --target fuzz_csv && build/fuzz/tests/fuzz_csv
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <grove/data/csv.hpp>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* bytes, std::size_t size) {
  namespace data = grove::data;
  const std::string_view text(reinterpret_cast<const char*>(bytes), size);
  for (const data::csv_options& o :
       {data::csv_options{}, data::csv_options{.target = "y"},
        data::csv_options{.delimiter = ' ', .header = data::csv_header::absent, .target_index = -1},
        data::csv_options{.delimiter = ';', .allow_non_finite = true}}) {
    try {
      const auto d = data::parse_csv<float>(text, "fuzz.csv", o);
      if (d.inputs.cols() != d.targets.cols()) std::abort();
      if (o.target_index) {
        const auto labels = data::parse_csv<double, Eigen::VectorXi>(text, "fuzz.csv", o);
        if (labels.inputs.cols() != labels.targets.size()) std::abort();
      }
    } catch (const grove::io::format_error&) {
    } catch (const grove::argument_error&) {
    }
  }
  return 0;
}
