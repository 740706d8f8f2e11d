// grove/io/detail/shards.hpp: sharded safetensors checkpoints, as Hugging Face writes them: an
// index `model.safetensors.index.json` of
//   {"metadata": {...}, "weight_map": {"tensor name": "model-00001-of-00002.safetensors", ...}}
// next to the shard files, each an ordinary safetensors file.
//
// The index is the attacker's as much as the shards are: its shard names must stay inside the
// index's directory (relative, no "." or ".." components; symbolic links the directory holds are
// its owner's and are followed), the
// shards and the weight_map must agree tensor for tensor, and each shard is opened once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grove/io/detail/atomic_file.hpp"
#include "grove/io/detail/file.hpp"
#include "grove/io/detail/safetensors.hpp"

namespace grove::io::detail {

// A path that names an index rather than a safetensors file: its name ends in ".json", as
// "model.safetensors.index.json" does. (A file's first bytes cannot tell: a safetensors header
// length may start with the byte of '{'.)
inline bool is_index_path(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  return name.size() > 5 && name.ends_with(".json");
}

// The index's JSON nests no deeper than {"weight_map": {NAME: FILE}, "metadata": {KEY: VALUE}}
// (a metadata value may itself be a small array or object); anything deeper is refused as it is
// read, before a document of it is built.
inline constexpr int max_index_depth = 4;

// The JSON type names nlohmann's type_name() gives, which the index's messages use.
enum class index_kind : std::uint8_t { null, boolean, number, string, array, object };
inline const char* index_kind_name(index_kind k) {
  static constexpr const char* names[] = {"null", "boolean", "number", "string", "array", "object"};
  return names[static_cast<unsigned>(k)];
}

// What an index holds that loading uses: its weight_map and its metadata.
struct index_contents {
  // Tensor name -> the position of its shard's name in shard_names; sorted by tensor name, the
  // order in which shards are numbered and entries are checked.
  std::map<std::string, std::uint32_t, std::less<>> weight_map;
  std::vector<std::string> shard_names;  // each distinct name once, in the index's order
  // The metadata: strings as they are, other values as their compact JSON text, as nlohmann's
  // dump() writes it (Hugging Face writes "total_size" as a number). grove's reserved keys are
  // not taken from an index.
  std::map<std::string, std::string> metadata;
};

// Counts of the work index_parser did, for the test that shows it linear in the index's size.
struct index_parse_stats {
  std::uint64_t events = 0;        // SAX events handled
  std::uint64_t stored_bytes = 0;  // bytes of names, values and keys kept or copied
};

// Parses the index as a stream of JSON events (nlohmann's SAX interface, as header_parser does
// for a safetensors header), keeping only what loading uses and checking each event as it
// arrives: the nesting (at most max_index_depth levels), no key twice in one object, the root an
// object, "weight_map" an object of strings, "metadata" an object or null. Other members of the
// root are read and checked as JSON, then dropped. Time is linear in the index and constant per
// event (no document is built, so nothing is rescanned); memory is the weight_map, the metadata's
// text and the keys of the objects open at the moment. Messages quote at most 64 characters of
// the index.
class index_parser {
 public:
  using json = nlohmann::json;

  index_parser(index_contents& out, const reading& ctx, index_parse_stats* stats = nullptr)
      : out_(out), ctx_(ctx), stats_(stats) {}

  bool null() { return scalar(index_kind::null, "null"); }
  bool boolean(bool v) { return scalar(index_kind::boolean, v ? "true" : "false"); }
  bool number_integer(json::number_integer_t v) {
    return scalar(index_kind::number, wants_text() ? std::to_string(v) : std::string());
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return scalar(index_kind::number, wants_text() ? std::to_string(v) : std::string());
  }
  bool number_float(json::number_float_t v, const json::string_t&) {
    return scalar(index_kind::number, wants_text() ? dump_text(json(v)) : std::string());
  }
  bool string(json::string_t& v) {
    count(v.size());
    if (depth_ == 2 && where_ == place::weight_map) {
      auto name = shard_names_.find(v);
      if (name == shard_names_.end()) {
        name = shard_names_.emplace(v, static_cast<std::uint32_t>(out_.shard_names.size())).first;
        out_.shard_names.push_back(std::move(v));
      }
      out_.weight_map.emplace(std::move(key_), name->second);
      return true;
    }
    if (depth_ == 2 && where_ == place::metadata) {
      out_.metadata.emplace(std::move(key_), std::move(v));
      return true;
    }
    return scalar(index_kind::string, wants_text() ? dump_text(json(std::move(v))) : std::string());
  }
  bool binary(json::binary_t&) { return scalar(index_kind::string, ""); }  // not in JSON text

  bool start_object(std::size_t) { return start(index_kind::object); }
  bool start_array(std::size_t) { return start(index_kind::array); }
  bool end_object() { return end(); }
  bool end_array() { return end(); }

  bool key(json::string_t& k) {
    count(k.size());
    const auto d = static_cast<std::size_t>(depth_);
    if (d == 1) {
      if (!root_keys_.insert(k).second) twice(k);
      where_ = k == "weight_map" ? place::weight_map
               : k == "metadata" ? place::metadata
                                 : place::other;
    } else if (d == 2 && where_ == place::weight_map) {
      if (out_.weight_map.count(k)) twice(k);
    } else if (d == 2 && where_ == place::metadata) {
      if (out_.metadata.count(k)) twice(k);
    } else if (!keys_[d].insert(k).second) {
      twice(k);
    }
    if (dumping_) {  // a key inside a metadata value
      if (need_comma_[d]) dump_ += ',';
      need_comma_[d] = false;  // the value that follows the key needs none
      dump_ += dump_text(json(k));
      dump_ += ':';
    }
    key_ = std::move(k);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    ctx_.fail("the index is not valid JSON: " + json_message(e));
  }

  // After the last event: what only the whole index can tell.
  void finish() const {
    if (root_ != index_kind::object)
      ctx_.fail("the index is " + std::string(index_kind_name(root_)) +
                ", not an object with \"weight_map\"");
    if (!root_keys_.count("weight_map")) ctx_.fail("the index has no \"weight_map\"");
  }

 private:
  enum class place : std::uint8_t { weight_map, metadata, other };

  void count(std::size_t bytes) {
    if (stats_) {
      ++stats_->events;
      stats_->stored_bytes += bytes;
    }
  }
  static std::string dump_text(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
  }
  // Whether a value here is kept as its JSON text: a metadata value, or a part of one.
  bool wants_text() const { return where_ == place::metadata && depth_ >= 2; }

  // Checks that a value of `kind` may stand here.
  void check_value(index_kind kind) {
    if (depth_ == 0) {
      // Refused once the whole text has been read, as JSON first: an index of 100,000 '['
      // nests too deeply before it is an array.
      root_ = kind;
      return;
    }
    if (root_ != index_kind::object) return;  // the index is not one; its JSON is still read
    if (depth_ != 1) {
      if (depth_ == 2 && where_ == place::weight_map)
        ctx_.fail("weight_map entry " + json_quoted(key_) + " is " + index_kind_name(kind) +
                  ", not the name of a shard file");
      return;
    }
    if (where_ == place::weight_map && kind != index_kind::object)
      ctx_.fail("the index's \"weight_map\" is " + std::string(index_kind_name(kind)) +
                ", not an object of tensor name -> shard file");
    if (where_ == place::metadata && kind != index_kind::object && kind != index_kind::null)
      ctx_.fail("the index's \"metadata\" is " + std::string(index_kind_name(kind)) +
                ", not an object");
  }

  bool scalar(index_kind kind, const std::string& text) {
    count(text.size());
    check_value(kind);
    if (depth_ == 2 && where_ == place::metadata) {  // a metadata value that is not a string
      out_.metadata.emplace(std::move(key_), text);
    } else if (dumping_) {
      const auto d = static_cast<std::size_t>(depth_);
      if (need_comma_[d]) dump_ += ',';
      need_comma_[d] = true;
      dump_ += text;
    }
    return true;
  }

  bool start(index_kind kind) {
    count(0);
    if (depth_ >= max_index_depth)
      ctx_.fail("the index nests deeper than " + std::to_string(max_index_depth) +
                " levels; an index is {\"metadata\": {...}, \"weight_map\": {...}}");
    check_value(kind);
    if (where_ == place::metadata && depth_ >= 2) {
      if (depth_ == 2) {  // a metadata value that is an array or object: its text, compact
        dumping_ = true;
        dump_.clear();
        dump_key_ = std::move(key_);
      } else {
        const auto d = static_cast<std::size_t>(depth_);
        if (need_comma_[d]) dump_ += ',';
        need_comma_[d] = true;
      }
      dump_ += kind == index_kind::object ? '{' : '[';
    }
    ++depth_;
    const auto d = static_cast<std::size_t>(depth_);
    is_object_[d] = kind == index_kind::object;
    need_comma_[d] = false;
    if (kind == index_kind::object && d >= 2 && !(d == 2 && where_ != place::other))
      keys_[d].clear();
    return true;
  }

  bool end() {
    count(0);
    const auto d = static_cast<std::size_t>(depth_);
    if (d > 2 || (d == 2 && where_ == place::other)) {
      keys_[d].clear();  // the keys of a closed object are no longer needed
      keys_[d].rehash(0);
    }
    if (dumping_) {
      dump_ += is_object_[d] ? '}' : ']';
      if (d == 3) {  // the metadata value is complete
        count(dump_.size());
        out_.metadata.emplace(std::move(dump_key_), std::move(dump_));
        dump_ = std::string();
        dumping_ = false;
      }
    }
    --depth_;
    if (depth_ == 1) where_ = place::other;  // between the root's members
    return true;
  }

  [[noreturn]] void twice(const std::string& k) const {
    ctx_.fail("the index has the key " + json_quoted(k) + " twice in one object");
  }

  index_contents& out_;
  const reading& ctx_;
  index_parse_stats* stats_;
  int depth_ = 0;  // containers open
  index_kind root_ = index_kind::object;
  place where_ = place::other;
  std::string key_;  // the last key read
  std::unordered_set<std::string> root_keys_;
  std::unordered_map<std::string, std::uint32_t> shard_names_;  // name -> out_.shard_names
  // The keys of the objects open at each depth, other than the root, the weight_map and the
  // metadata (whose maps hold their keys).
  std::unordered_set<std::string> keys_[max_index_depth + 1];
  bool is_object_[max_index_depth + 1] = {};
  bool need_comma_[max_index_depth + 1] = {};
  bool dumping_ = false;
  std::string dump_;  // the compact text of the metadata value being read
  std::string dump_key_;
};

// Parses an index's text (the whole file) into what loading uses; format_error if it is not an
// index.
inline index_contents parse_index(std::string_view text, const reading& ctx,
                                  index_parse_stats* stats = nullptr) {
  index_contents out;
  index_parser parser(out, ctx, stats);
  nlohmann::json::sax_parse(text.begin(), text.end(), &parser);
  check_nothing_after_json(text, 0, "the index", ctx);
  parser.finish();
  for (auto it = out.metadata.begin(); it != out.metadata.end();)
    it = it->first.starts_with(reserved_prefix) ? out.metadata.erase(it) : std::next(it);
  return out;
}

// The shards of a sharded checkpoint, open, with all their tensors in one header.
struct shard_set {
  header head;                               // tensors of every shard, each with its shard's index
  std::vector<std::filesystem::path> paths;  // the shard files (resolved), as head.shards
  std::vector<checkpoint_file> files;        // open, one per shard
  std::string_view function;

  // Copies tensor t's data bytes to `out`.
  void read(const tensor_entry& t, std::byte* out) const {
    const reading ctx{function, paths[t.shard]};
    read_checkpoint_range(ctx, files[t.shard], t.begin, t.end - t.begin, out);
  }
};

// The index's shard name `file` for weight_map entry `tensor`, checked and resolved: a relative
// path below the index's directory `dir`, with symbolic links followed. The name is the index's
// (an attacker's) and is checked word by word; the links are the directory's owner's, and
// Hugging Face's hub cache is made of them (snapshots/<revision>/*.safetensors lead to
// ../../blobs/<hash>), so they are followed wherever they lead.
inline std::filesystem::path shard_path(const std::string& tensor, const std::string& file,
                                        const std::filesystem::path& dir, const reading& ctx) {
  const std::string who =
      "weight_map entry " + json_quoted(tensor) + " names shard " + json_quoted(file);
  if (file.empty()) ctx.fail("weight_map entry " + json_quoted(tensor) + " names an empty shard");
  if (file.find('\0') != std::string::npos) ctx.fail(who + ", which holds a NUL character");
  if (file.front() == '/' || std::filesystem::path(file).has_root_path())
    ctx.fail(who + ", an absolute path; shards are named relative to the index's directory");
  std::size_t begin = 0;
  while (begin <= file.size()) {
    std::size_t end = file.find('/', begin);
    if (end == std::string::npos) end = file.size();
    const std::string_view part(file.data() + begin, end - begin);
    if (part.empty() || part == "." || part == "..")
      ctx.fail(who + ", which has a component \"" + std::string(part) +
               "\"; shard names must stay inside the index's directory");
    begin = end + 1;
  }
  const std::filesystem::path joined = dir / file;
  std::error_code ec;
  auto real = std::filesystem::canonical(joined, ec);
  if (ec)
    throw_errno(ec.value(), std::string(ctx.function) + ": cannot open " + quoted_path(joined) +
                                " (" + who + " in " + quoted_path(ctx.file) + ")");
  return real;
}

// Reads the index at ctx.file and opens its shards, checking that each shard's tensors are those
// the weight_map gives it. Throws format_error (a malformed index, a hostile shard name, a shard
// that disagrees with the index) or file_error (a shard missing or unreadable).
inline shard_set read_sharded(const reading& ctx) {
  shard_set set;
  set.function = ctx.function;

  std::string text;
  {
    auto opened = open_for_reading(ctx.file, ctx.function);
    if (opened.size > max_header_size)
      ctx.fail("the index has " + std::to_string(opened.size) + " bytes, more than the " +
               std::to_string(max_header_size) + " grove reads");
    text.resize(static_cast<std::size_t>(opened.size));
    if (!read_at(opened.fd.get(), 0, reinterpret_cast<std::byte*>(text.data()), opened.size, ctx))
      ctx.fail("the index ended while it was being read (did it shrink meanwhile?)");
  }

  index_contents index = parse_index(text, ctx);
  std::string().swap(text);
  set.head.metadata = std::move(index.metadata);

  const std::filesystem::path dir =
      ctx.file.parent_path().empty() ? std::filesystem::path(".") : ctx.file.parent_path();

  // Each shard name resolved when the weight_map (in sorted order) first mentions it, and the
  // shards numbered in that order, each once (two names of one file, through a symbolic link
  // inside the directory, are one shard).
  constexpr auto unresolved = static_cast<std::uint32_t>(-1);
  std::vector<std::uint32_t> shard_of_name(index.shard_names.size(), unresolved);
  std::map<std::filesystem::path, std::uint32_t> shard_of_file;
  for (const auto& [tensor, name_id] : index.weight_map) {
    auto& shard = shard_of_name[name_id];
    if (shard == unresolved) {
      const std::string& name = index.shard_names[name_id];
      auto real = shard_path(tensor, name, dir, ctx);
      const auto [f, fresh] =
          shard_of_file.emplace(std::move(real), static_cast<std::uint32_t>(set.paths.size()));
      if (fresh) {
        set.paths.push_back(f->first);  // opened as resolved, so no link can change meanwhile
        set.head.shards.push_back({name, 0});
      }
      shard = f->second;
    }
  }
  const auto& name_of_tensor = index.weight_map;

  set.files.reserve(set.paths.size());
  for (std::uint32_t s = 0; s < set.paths.size(); ++s) {
    const reading shard_ctx{ctx.function, set.paths[s]};
    set.files.push_back(read_checkpoint(shard_ctx));
    auto& h = set.files.back().head;
    set.head.shards[s].data_start = h.data_start;
    for (auto& t : h.tensors) {
      const auto it = name_of_tensor.find(t.name);
      if (it == name_of_tensor.end())
        shard_ctx.fail("tensor " + json_quoted(t.name) + " is in this shard, but the index " +
                       quoted_path(ctx.file) + " does not list it in its weight_map");
      if (shard_of_name[it->second] != s)
        shard_ctx.fail("tensor " + json_quoted(t.name) + " is in this shard, but the index " +
                       quoted_path(ctx.file) + " maps it to shard " +
                       json_quoted(set.head.shards[shard_of_name[it->second]].name));
      t.shard = s;
      set.head.index.emplace(t.name, set.head.tensors.size());
      set.head.tensors.push_back(std::move(t));
    }
    // grove's key layouts (a shard grove wrote) apply to the shard's own tensors, which check_
    // grove_metadata has checked; the shards' other metadata is the index's to give.
    for (auto& [key, value] : h.metadata)
      if (key.starts_with(key_layout_prefix)) set.head.metadata.emplace(key, std::move(value));
    h.tensors.clear();
    h.tensors.shrink_to_fit();
    h.index.clear();
    h.metadata.clear();
  }
  if (set.head.tensors.size() != name_of_tensor.size())
    for (const auto& [tensor, name_id] : name_of_tensor)  // in sorted order
      if (!set.head.index.count(tensor))
        ctx.fail("weight_map entry " + json_quoted(tensor) + " says shard " +
                 json_quoted(index.shard_names[name_id]) +
                 " holds it, but that shard has no such tensor");
  return set;
}

}  // namespace grove::io::detail
