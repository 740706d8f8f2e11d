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
  using json = nlohmann::json;
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

  // Parsed into a document, with the depth bounded and duplicate keys refused as they arrive.
  std::vector<std::unordered_set<std::string>> keys(max_index_depth + 2);
  const json::parser_callback_t check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) {
      if (depth >= max_index_depth)
        ctx.fail("the index nests deeper than " + std::to_string(max_index_depth) +
                 " levels; an index is {\"metadata\": {...}, \"weight_map\": {...}}");
      if (event == json::parse_event_t::object_start)
        keys[static_cast<std::size_t>(depth) + 1].clear();
    } else if (event == json::parse_event_t::key) {
      if (!keys[static_cast<std::size_t>(depth)].insert(parsed.get<std::string>()).second)
        ctx.fail("the index has the key " + json_quoted(parsed.get<std::string>()) +
                 " twice in one object");
    }
    return true;
  };
  json doc;
  try {
    doc = json::parse(text, check);
  } catch (const json::exception& e) {
    ctx.fail("the index is not valid JSON: " + json_message(e));
  }
  std::string().swap(text);
  if (!doc.is_object())
    ctx.fail("the index is " + std::string(doc.type_name()) +
             ", not an object with \"weight_map\"");
  const auto map_it = doc.find("weight_map");
  if (map_it == doc.end()) ctx.fail("the index has no \"weight_map\"");
  if (!map_it->is_object())
    ctx.fail("the index's \"weight_map\" is " + std::string(map_it->type_name()) +
             ", not an object of tensor name -> shard file");

  // The index's metadata: strings as they are, other values as their JSON text (Hugging Face
  // writes "total_size" as a number). grove's reserved keys are not taken from an index.
  if (const auto meta = doc.find("metadata"); meta != doc.end() && !meta->is_null()) {
    if (!meta->is_object())
      ctx.fail("the index's \"metadata\" is " + std::string(meta->type_name()) + ", not an object");
    for (const auto& [key, value] : meta->items()) {
      if (key.starts_with(reserved_prefix)) continue;
      set.head.metadata.emplace(
          key, value.is_string() ? value.get<std::string>()
                                 : value.dump(-1, ' ', false, json::error_handler_t::replace));
    }
  }

  const std::filesystem::path dir =
      ctx.file.parent_path().empty() ? std::filesystem::path(".") : ctx.file.parent_path();

  // Tensor name -> shard, and the shards in order of first mention, each once (two names of one
  // file, through a symbolic link inside the directory, are one shard).
  std::unordered_map<std::string, std::uint32_t> shard_of_tensor;
  std::unordered_map<std::string, std::uint32_t> shard_of_name;
  std::map<std::filesystem::path, std::uint32_t> shard_of_file;
  shard_of_tensor.reserve(map_it->size());
  for (const auto& [tensor, file] : map_it->items()) {
    if (!file.is_string())
      ctx.fail("weight_map entry " + json_quoted(tensor) + " is " + std::string(file.type_name()) +
               ", not the name of a shard file");
    const auto& name = file.get_ref<const std::string&>();
    auto it = shard_of_name.find(name);
    if (it == shard_of_name.end()) {
      auto real = shard_path(tensor, name, dir, ctx);
      const auto [f, fresh] =
          shard_of_file.emplace(std::move(real), static_cast<std::uint32_t>(set.paths.size()));
      if (fresh) {
        set.paths.push_back(f->first);  // opened as resolved, so no link can change meanwhile
        set.head.shards.push_back({name, 0});
      }
      it = shard_of_name.emplace(name, f->second).first;
    }
    shard_of_tensor.emplace(tensor, it->second);
  }

  set.files.reserve(set.paths.size());
  for (std::uint32_t s = 0; s < set.paths.size(); ++s) {
    const reading shard_ctx{ctx.function, set.paths[s]};
    set.files.push_back(read_checkpoint(shard_ctx));
    auto& h = set.files.back().head;
    set.head.shards[s].data_start = h.data_start;
    for (auto& t : h.tensors) {
      const auto it = shard_of_tensor.find(t.name);
      if (it == shard_of_tensor.end())
        shard_ctx.fail("tensor " + json_quoted(t.name) + " is in this shard, but the index " +
                       quoted_path(ctx.file) + " does not list it in its weight_map");
      if (it->second != s)
        shard_ctx.fail("tensor " + json_quoted(t.name) + " is in this shard, but the index " +
                       quoted_path(ctx.file) + " maps it to shard " +
                       json_quoted(set.head.shards[it->second].name));
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
  if (set.head.tensors.size() != shard_of_tensor.size())
    for (const auto& [tensor, file] : map_it->items())  // in the index's (sorted) order
      if (!set.head.index.count(tensor))
        ctx.fail("weight_map entry " + json_quoted(tensor) + " says shard " +
                 json_quoted(file.get_ref<const std::string&>()) +
                 " holds it, but that shard has no such tensor");
  return set;
}

}  // namespace grove::io::detail
