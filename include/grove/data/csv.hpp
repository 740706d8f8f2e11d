// grove/data/csv.hpp: a dataset from a CSV file of numbers, one example per row.
//
//   auto wine = grove::data::read_csv<float>("wine.csv", {.target = "quality"});
//   // wine.inputs: features x n (the other columns), wine.targets: 1 x n
//   auto iris = grove::data::read_csv<float, Eigen::VectorXi>("iris.csv", {.target_index = -1});
//   // iris.targets: n integer labels
//
// What it accepts: numbers as std::from_chars reads them (a leading '+' too), fields separated by
// `delimiter` (',' by default; ' ' means any run of spaces and tabs, as numpy.loadtxt splits),
// spaces and tabs around a field, fields in double quotes ("" inside is a quote), LF or CRLF line
// ends, a UTF-8 byte-order mark, blank lines (skipped), and a header row of names, found by
// `header` (detect: the first row is a header when one of its fields is not a number).
//
// What it refuses, with a grove::io::format_error naming the file, the line, the column (and
// its name) and the text: an empty field (a missing value), a field that is not a number, a row
// with more or fewer fields than the first, a number out of the element type's range, a label
// target that is not an integer, a quote left open, a file with no examples. NaN and infinities
// ("nan", "inf") are refused unless allow_non_finite: in most files they stand for a missing
// value, and one NaN in an input silently turns every loss and gradient of its batch into NaN.
// The file is read whole (regular files only, at most max_bytes); parse_csv parses text that is
// already in memory.
#pragma once

#include <Eigen/Core>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grove/data/dataset.hpp"
#include "grove/error.hpp"
#include "grove/io/error.hpp"
#include "grove/io/file.hpp"

namespace grove::data {

/// Whether a CSV file's first row holds the columns' names.
enum class csv_header {
  detect,   ///< a header when one of the first row's fields is not a number
  present,  ///< always a header
  absent,   ///< never: the first row is an example
};

/// How read_csv and parse_csv read a file.
struct csv_options {
  /// The field separator; ' ' stands for any run of spaces and tabs.
  char delimiter = ',';
  csv_header header = csv_header::detect;
  /// The target column by its name in the header...
  std::optional<std::string> target = std::nullopt;
  /// ...or by its position, from 0 (negative counts from the end, as in Python: -1 is the last).
  /// Neither: every column is an input and the targets are empty (a 0 x n matrix).
  std::optional<std::int64_t> target_index = std::nullopt;
  /// Accept "nan", "inf" and "infinity" (any case, signed) as values.
  bool allow_non_finite = false;
  /// The largest file read_csv reads, in bytes.
  std::uint64_t max_bytes = std::uint64_t{1} << 31;
};

/// A dataset read from a CSV file, with its columns' names (empty when the file has no header).
template <class T, target_storage Y>
struct csv_dataset : Dataset<T, Y> {
  std::vector<std::string> input_names;
  std::string target_name;
};

namespace detail {

inline std::string quoted(const std::filesystem::path& p) {
  return "\"" + p.string() + "\"";
}

struct csv_field {
  std::string_view text;  // unquoted and trimmed (a view into the line, or into `unquoted`)
  bool quoted = false;
};

struct csv_reader {
  const std::filesystem::path& source;
  const csv_options& options;
  static constexpr const char* function = "grove::data::read_csv";

  [[noreturn]] void fail(std::size_t line, const std::string& problem) const {
    throw io::format_error(function, source, "line " + std::to_string(line) + ": " + problem);
  }

  static bool blank(char c) { return c == ' ' || c == '\t'; }

  static std::string_view trim(std::string_view s) {
    while (!s.empty() && blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && blank(s.back())) s.remove_suffix(1);
    return s;
  }

  // The fields of one line. Quoted fields with "" inside are unescaped into `scratch`, which
  // must not be reallocated while the fields are used (it is reserved to the line's length).
  void split(std::string_view line, std::size_t number, std::vector<csv_field>& fields,
             std::string& scratch) const {
    fields.clear();
    scratch.clear();
    scratch.reserve(line.size());
    if (options.delimiter == ' ') {
      std::size_t i = 0;
      while (i < line.size()) {
        while (i < line.size() && blank(line[i])) ++i;
        if (i == line.size()) break;
        const std::size_t start = i;
        while (i < line.size() && !blank(line[i])) ++i;
        fields.push_back({line.substr(start, i - start), false});
      }
      return;
    }
    std::size_t i = 0;
    for (;;) {
      while (i < line.size() && blank(line[i])) ++i;
      if (i < line.size() && line[i] == '"') {
        const std::size_t begin = scratch.size();
        ++i;
        for (;;) {
          if (i >= line.size())
            fail(number, "a quoted field (column " + std::to_string(fields.size() + 1) +
                             ") is not closed before the line ends (fields cannot span lines)");
          if (line[i] == '"') {
            if (i + 1 < line.size() && line[i + 1] == '"') {
              scratch.push_back('"');
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          scratch.push_back(line[i++]);
        }
        while (i < line.size() && blank(line[i])) ++i;
        if (i < line.size() && line[i] != options.delimiter)
          fail(number,
               "column " + std::to_string(fields.size() + 1) + " has text after its closing quote");
        fields.push_back({std::string_view(scratch).substr(begin), true});
      } else {
        const std::size_t start = i;
        while (i < line.size() && line[i] != options.delimiter) ++i;
        fields.push_back({trim(line.substr(start, i - start)), false});
      }
      if (i >= line.size()) break;
      ++i;  // the delimiter; a line ending in one has an empty last field
      if (i == line.size()) {
        fields.push_back({std::string_view(), false});
        break;
      }
    }
  }

  // The number `text` holds, or nothing if it is not one (whole, nothing after it).
  static std::optional<double> number(std::string_view text) {
    std::string_view s = text;
    if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || end != s.data() + s.size()) return std::nullopt;
    if (ec == std::errc::result_out_of_range) {
      // Too large (an infinity) or too small (zero or a subnormal): strtod tells which.
      const std::string copy(s);
      return std::strtod(copy.c_str(), nullptr);
    }
    if (ec != std::errc()) return std::nullopt;
    return v;
  }

  static std::string shown(std::string_view text) {
    std::string s(text.substr(0, 40));
    if (text.size() > 40) s += "...";
    return "\"" + s + "\"";
  }
};

}  // namespace detail

namespace detail {

// Calls f(line, number) for each line of `text` that is not blank (numbers from 1; a CR before
// the LF is not part of the line).
template <class F>
void for_each_csv_line(std::string_view text, F&& f) {
  std::size_t pos = 0, number = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!csv_reader::trim(line).empty()) f(line, number);
  }
}

// The table being read: its columns (from the first row), the target's place, and the values
// of the rows so far (inputs in the file's order, which is a features x n matrix's).
template <class T, class Y>
struct csv_table {
  const csv_reader& reader;
  std::vector<std::string> names = {};
  std::size_t columns = 0, target = 0, rows = 0, first_line = 0;
  bool has_target = false;
  std::vector<T> inputs = {};
  std::vector<typename Y::Scalar> targets = {};

  const csv_options& options() const { return reader.options; }

  // Reads the columns from the first row; true when it is a header (its fields are names).
  bool first_row(const std::vector<csv_field>& fields, std::size_t line) {
    first_line = line;
    columns = fields.size();
    bool all_numbers = true;
    for (const auto& f : fields)
      if (!csv_reader::number(f.text)) all_numbers = false;
    const bool is_header = options().header == csv_header::present ||
                           (options().header == csv_header::detect && !all_numbers);
    if (options().target && !is_header)
      throw argument_error("grove::data::read_csv: " + quoted(reader.source) +
                           " has no header row, so its target cannot be found by name (" +
                           csv_reader::shown(*options().target) + "): give target_index");
    if (is_header) {
      for (const auto& f : fields) names.emplace_back(f.text);
      if (options().target) find_target_by_name(line);
    }
    if (options().target_index) {
      const auto k = *options().target_index;
      const auto c = static_cast<std::int64_t>(columns);
      if (k < -c || k >= c)
        throw argument_error("grove::data::read_csv: target_index " + std::to_string(k) +
                             " is outside the " + std::to_string(columns) + " columns of " +
                             quoted(reader.source));
      target = static_cast<std::size_t>(k < 0 ? k + c : k);
      has_target = true;
    }
    if constexpr (is_labels_v<Y>)
      if (!has_target)
        throw argument_error(
            "grove::data::read_csv: labels need a target column: give target or target_index");
    if (has_target && columns < 2)
      reader.fail(line, "the only column is the target: there are no inputs");
    return is_header;
  }

  void find_target_by_name(std::size_t line) {
    const std::string& wanted = *options().target;
    std::size_t found = columns;
    for (std::size_t c = 0; c < columns; ++c)
      if (names[c] == wanted) {
        if (found != columns)
          reader.fail(line, "the header names the target " + csv_reader::shown(wanted) + " twice");
        found = c;
      }
    if (found == columns) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + csv_reader::shown(n);
      reader.fail(
          line, "the header has no column " + csv_reader::shown(wanted) + " (it has " + list + ")");
    }
    target = found;
    has_target = true;
  }

  // The number in field `column` of line `line`, refused as the header's comment says.
  double value(const csv_field& f, std::size_t line, std::size_t column) const {
    std::string where = "column " + std::to_string(column + 1);
    if (!names.empty()) where += " (" + csv_reader::shown(names[column]) + ")";
    if (f.text.empty()) reader.fail(line, where + " is empty (a missing value)");
    const auto v = csv_reader::number(f.text);
    if (!v) reader.fail(line, where + ": " + csv_reader::shown(f.text) + " is not a number");
    if (!std::isfinite(*v)) {
      const bool written = std::isnan(*v) || f.text.find_first_of("iI") != std::string_view::npos;
      if (!written)
        reader.fail(line,
                    where + ": " + csv_reader::shown(f.text) + " is out of the range of double");
      if (!options().allow_non_finite)
        reader.fail(line,
                    where + ": " + csv_reader::shown(f.text) +
                        " is not finite (pass allow_non_finite to accept NaN and infinities)");
    }
    return *v;
  }

  void data_row(const std::vector<csv_field>& fields, std::size_t line) {
    if (fields.size() != columns)
      reader.fail(line, "has " + std::to_string(fields.size()) + " fields, but line " +
                            std::to_string(first_line) + " has " + std::to_string(columns));
    for (std::size_t c = 0; c < columns; ++c) {
      const double v = value(fields[c], line, c);
      if (has_target && c == target) {
        if constexpr (is_labels_v<Y>) {
          using L = typename Y::Scalar;
          if (!(v == std::floor(v)) || v < static_cast<double>(std::numeric_limits<L>::min()) ||
              v > static_cast<double>(std::numeric_limits<L>::max()))
            reader.fail(line, "the target (column " + std::to_string(c + 1) + "): " +
                                  csv_reader::shown(fields[c].text) + " is not an integer label");
          targets.push_back(static_cast<L>(v));
        } else {
          targets.push_back(static_cast<typename Y::Scalar>(v));
        }
      } else {
        if (std::isfinite(v) && std::abs(v) > static_cast<double>(std::numeric_limits<T>::max()))
          reader.fail(line, "column " + std::to_string(c + 1) + ": " +
                                csv_reader::shown(fields[c].text) +
                                " is out of the range of the element type");
        inputs.push_back(static_cast<T>(v));
      }
    }
    ++rows;
  }

  csv_dataset<T, Y> dataset() const {
    csv_dataset<T, Y> out;
    const auto n = static_cast<Eigen::Index>(rows);
    const auto features = static_cast<Eigen::Index>(columns - (has_target ? 1 : 0));
    // The file's rows one after the other are the columns of a features x n matrix.
    out.inputs = Eigen::Map<const Matrix<T>>(inputs.data(), features, n);
    if constexpr (is_labels_v<Y>)
      out.targets = Eigen::Map<const Y>(targets.data(), n);
    else
      out.targets = Eigen::Map<const Y>(targets.data(), has_target ? 1 : 0, n);
    for (std::size_t c = 0; c < names.size(); ++c) {
      if (has_target && c == target)
        out.target_name = names[c];
      else
        out.input_names.push_back(names[c]);
    }
    return out;
  }
};

}  // namespace detail

/// The dataset in CSV text (see the header's comment for what is accepted and refused);
/// `source` names the text in messages. Inputs are the columns other than the target, in the
/// file's order; each row is an example (a column of `inputs`).
template <class T = float, target_storage Y = Matrix<T>>
csv_dataset<T, Y> parse_csv(std::string_view text, const std::filesystem::path& source,
                            const csv_options& options = {}) {
  static_assert(std::is_floating_point_v<T>, "grove::data::read_csv: inputs are floating-point");
  if (options.target && options.target_index)
    throw argument_error(
        "grove::data::read_csv: give the target column by name or by index, not both");
  if (options.delimiter == '"' || options.delimiter == '\n' || options.delimiter == '\r')
    throw argument_error("grove::data::read_csv: '" + std::string(1, options.delimiter) +
                         "' cannot separate fields");
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);

  const detail::csv_reader reader{source, options};
  detail::csv_table<T, Y> table{reader};
  std::vector<detail::csv_field> fields;
  std::string scratch;
  bool first = true;
  detail::for_each_csv_line(text, [&](std::string_view line, std::size_t number) {
    reader.split(line, number, fields, scratch);
    if (std::exchange(first, false) && table.first_row(fields, number)) return;
    table.data_row(fields, number);
  });
  if (table.rows == 0)
    throw io::format_error(
        "grove::data::read_csv", source,
        first ? "the file holds no rows" : "the file holds no examples, only a header");
  return table.dataset();
}

/// The dataset in the CSV file `path` (a regular file of at most options.max_bytes); see
/// parse_csv. file_error when it cannot be read; format_error when its contents are refused.
template <class T = float, target_storage Y = Matrix<T>>
csv_dataset<T, Y> read_csv(const std::filesystem::path& path, const csv_options& options = {}) {
  io::input_file in(path, "grove::data::read_csv");
  if (in.size() > options.max_bytes)
    throw io::format_error("grove::data::read_csv", path,
                           "the file has " + std::to_string(in.size()) +
                               " bytes, more than max_bytes (" + std::to_string(options.max_bytes) +
                               ")");
  std::string text(static_cast<std::size_t>(in.size()), '\0');
  if (!in.read_at(0, text.data(), text.size()))
    throw io::format_error("grove::data::read_csv", path, "the file shrank while it was read");
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b)
    throw io::format_error("grove::data::read_csv", path,
                           "the file is gzip-compressed: read it with grove::data::read_csv_gz "
                           "(grove/data/csv_gz.hpp)");
  return parse_csv<T, Y>(text, path, options);
}

}  // namespace grove::data
