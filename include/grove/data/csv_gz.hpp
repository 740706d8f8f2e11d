// grove/data/csv_gz.hpp: read_csv for CSV files that may be gzip-compressed (`.csv.gz`, as
// scikit-learn and many others ship their data).
//
//   auto d = grove::data::read_csv_gz<float>("diabetes_data_raw.csv.gz", {.delimiter = ' '});
//
// Needs zlib (link grove::idx; Debian: zlib1g-dev).
#pragma once

#include <filesystem>

#include "grove/data/csv.hpp"
#include "grove/io/gzip.hpp"

namespace grove::data {

/// read_csv of a plain or gzip-compressed file (told apart by its first bytes): the file holds
/// at most options.max_bytes once decompressed, checked as it inflates. Throws as read_csv, and
/// format_error for corrupt or truncated gzip data.
template <class T = float, target_storage Y = Matrix<T>>
csv_dataset<T, Y> read_csv_gz(const std::filesystem::path& path, const csv_options& options = {}) {
  const std::string text = io::read_maybe_gzip(path, "grove::data::read_csv", options.max_bytes);
  return parse_csv<T, Y>(text, path, options);
}

}  // namespace grove::data
