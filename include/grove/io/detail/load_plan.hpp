// grove/io/detail/load_plan.hpp: loading a checkpoint into a tree: the file's header checked
// against the leaves, only the matching tensors read and checked, then the leaves written, all or
// nothing.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "grove/io/checkpoint_types.hpp"
#include "grove/io/detail/file.hpp"
#include "grove/io/detail/leaf_codec.hpp"
#include "grove/io/detail/safetensors.hpp"
#include "grove/io/detail/shards.hpp"
#include "grove/io/error.hpp"
#include "grove/tree.hpp"

namespace grove::io::detail {

// --- loading into a tree -------------------------------------------------------------------------

// Transposes the row-major (rows, cols) array of `size`-byte elements at `data` in place (into
// row-major (cols, rows)), through `scratch` of as many bytes.
inline void transpose_bytes(std::byte* data, std::byte* scratch, std::uint64_t rows,
                            std::uint64_t cols, std::size_t size) noexcept {
  for (std::uint64_t i = 0; i < rows; ++i)
    for (std::uint64_t j = 0; j < cols; ++j)
      std::memcpy(scratch + (j * rows + i) * size, data + (i * cols + j) * size, size);
  std::memcpy(data, scratch, static_cast<std::size_t>(rows * cols * size));
}

// Copies a tensor's data bytes [begin, end) to `out`.
using tensor_reader = std::function<void(const tensor_entry&, std::byte*)>;

// A leaf's tensor name (keystr(path, "/")) and key path.
struct leaf_key {
  std::string name;
  KeyPath path;
};

// What read_matching leaves for the copy into the leaves: the matched tensors' bytes, in native
// byte order, each leaf's at buffer + place[k].
struct loaded_tensors {
  load_report report;
  std::vector<std::size_t> order;  // the leaves to write, in file order
  std::vector<const tensor_entry*> match;
  std::vector<std::uint64_t> place;
  std::vector<std::uint8_t> layout;  // a key leaf's: 0 keep the tree's, 1 partitionable, 2 legacy
  std::unique_ptr<std::uint64_t[]> buffer;
};

// Checks the file's header against the leaves (names after options.rename, dtypes, shapes) before
// any data is read, then reads only the tensors that match a leaf and checks their values: nothing
// is written into the tree here, so that it changes completely or not at all, and memory is
// proportional to what is loaded, not to the file. Not a template: the leaves come as their facts.
inline loaded_tensors read_matching(const reading& ctx, const header& head,
                                    const tensor_reader& read, const std::vector<leaf_key>& leaves,
                                    const std::vector<leaf_facts>& facts,
                                    const load_options& options) {
  // The file's names after rename: name -> position in head.tensors.
  std::unordered_map<std::string, std::size_t> by_name;
  std::vector<bool> skipped(head.tensors.size(), false);
  if (options.rename) {
    by_name.reserve(head.tensors.size());
    for (std::size_t i = 0; i < head.tensors.size(); ++i) {
      std::string renamed = options.rename(head.tensors[i].name);
      if (renamed.empty()) {
        skipped[i] = true;
        continue;
      }
      const auto [it, fresh] = by_name.emplace(std::move(renamed), i);
      if (!fresh)
        ctx.fail("tensors " + json_quoted(head.tensors[it->second].name) + " and " +
                 json_quoted(head.tensors[i].name) + " both rename to " + json_quoted(it->first));
    }
  }
  auto find = [&](const std::string& name) -> const std::size_t* {
    if (options.rename) {
      const auto it = by_name.find(name);
      return it == by_name.end() ? nullptr : &it->second;
    }
    const auto it = head.index.find(name);
    return it == head.index.end() ? nullptr : &it->second;
  };

  load_report report;
  std::vector<std::string> problems;
  std::vector<const tensor_entry*> match(leaves.size(), nullptr);
  std::vector<bool> transposed(leaves.size(), false);
  std::vector<bool> used(head.tensors.size(), false);
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const auto& nl = leaves[k];
    const auto& leaf = facts[k];
    {
      const auto* position = find(nl.name);
      const auto* t = position ? &head.tensors[*position] : nullptr;
      const std::string who =
          "tensor " + json_quoted(t ? t->name : nl.name) +
          (t && t->name != nl.name ? " (renamed " + json_quoted(nl.name) + ")" : std::string()) +
          " (key path " + keystr(nl.path) + ")";
      if (!t) {
        if (options.strict)
          problems.push_back(who + " is missing from the file; the tree has " +
                             leaf_description(leaf) + " there");
        else
          report.missing.push_back(nl.name);
        continue;
      }
      used[*position] = true;
      const auto& want = leaf.layout;
      const auto how = conversion_of(t->type, want.type);
      const std::string types = "dtype " + std::string(info(t->type).name) + " in the file, " +
                                std::string(info(want.type).name) + " (" +
                                std::string(info(want.type).numpy) + ") in the tree";
      if (how == conversion::impossible || (how != conversion::exact && leaf.key))
        problems.push_back(who + ": " + types + "; grove does not convert " +
                           std::string(info(t->type).name) + " to " +
                           std::string(info(want.type).name));
      else if (how == conversion::narrowing && !options.convert)
        problems.push_back(who + ": " + types + "; " + std::string(info(t->type).name) + " to " +
                           std::string(info(want.type).name) +
                           " narrows, which load_options::convert allows");
      else if (options.transpose && options.transpose(t->name)) {
        if (t->shape.size() != 2)
          problems.push_back(who +
                             ": load_options::transpose asks to transpose it, but its shape " +
                             shape_str(t->shape) + " is not 2-D");
        else if (std::vector<std::uint64_t>{t->shape[1], t->shape[0]} != want.shape)
          problems.push_back(who + ": shape " + shape_str(t->shape) + " in the file, transposed " +
                             shape_str({t->shape[1], t->shape[0]}) + ", " + shape_str(want.shape) +
                             " in the tree");
        else {
          match[k] = t;
          transposed[k] = true;
        }
      } else if (t->shape != want.shape)
        problems.push_back(who + ": shape " + shape_str(t->shape) + " in the file, " +
                           shape_str(want.shape) + " in the tree");
      else
        match[k] = t;
    }
  }
  for (std::size_t i = 0; i < head.tensors.size(); ++i) {
    if (used[i] || skipped[i]) continue;
    if (options.strict)
      problems.push_back("the file has tensor " + json_quoted(head.tensors[i].name) + " (" +
                         std::string(info(head.tensors[i].type).name) + " " +
                         shape_str(head.tensors[i].shape) + "), which the tree does not have");
    else
      report.unexpected.push_back(head.tensors[i].name);
  }
  auto fail_all = [&] {
    constexpr std::size_t shown = 20;
    if (problems.size() == 1) ctx.fail(problems.front());
    std::string msg =
        "the file does not match the tree (" + std::to_string(problems.size()) + " problems):";
    for (std::size_t i = 0; i < problems.size() && i < shown; ++i) msg += "\n  " + problems[i];
    if (problems.size() > shown)
      msg += "\n  ... and " + std::to_string(problems.size() - shown) + " more";
    ctx.fail(msg);
  };
  if (!problems.empty()) fail_all();

  // Only now is data read: the matched tensors, each at an 8-byte aligned place of one buffer (so
  // that data unaligned in the file is aligned here), in file order.
  std::vector<std::uint64_t> place(leaves.size(), 0);
  std::uint64_t total = 0;
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    if (!match[k]) continue;
    order.push_back(k);
    place[k] = total;
    total += (match[k]->end - match[k]->begin + 7) / 8 * 8;
  }
  std::unique_ptr<std::uint64_t[]> buffer(new std::uint64_t[total / 8 + 1]);
  auto* data = reinterpret_cast<std::byte*>(buffer.get());
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(match[a]->shard, match[a]->begin) < std::tie(match[b]->shard, match[b]->begin);
  });
  for (const auto k : order) read(*match[k], data + place[k]);

  // The tensors to transpose, in place through one scratch buffer as large as the largest.
  std::uint64_t scratch_size = 0;
  for (const auto k : order)
    if (transposed[k]) scratch_size = std::max(scratch_size, match[k]->end - match[k]->begin);
  if (scratch_size > 0) {
    std::vector<std::byte> scratch(static_cast<std::size_t>(scratch_size));
    for (const auto k : order)
      if (transposed[k])
        transpose_bytes(data + place[k], scratch.data(), match[k]->shape[0], match[k]->shape[1],
                        info(match[k]->type).size);
  }

  // The values: a BOOL tensor may hold only 0 and 1, and a narrowing integer load needs every
  // value to fit.
  for (const auto k : order) {
    const auto* t = match[k];
    std::byte* in = data + place[k];
    const std::uint64_t n = t->end - t->begin;
    if (t->type == dtype::BOOL) {
      for (std::uint64_t b = 0; b < n; ++b)
        if (in[b] != std::byte{0} && in[b] != std::byte{1})
          ctx.fail("tensor " + json_quoted(t->name) + " is BOOL, but its byte at file offset " +
                   (head.shards.empty()
                        ? std::to_string(head.data_start + t->begin + b)
                        : std::to_string(head.shards[t->shard].data_start + t->begin + b) +
                              " of shard " + json_quoted(head.shards[t->shard].name)) +
                   " is " + std::to_string(static_cast<int>(in[b])) + ", neither 0 nor 1");
    }
    from_little_endian(in, static_cast<std::size_t>(n / info(t->type).size), info(t->type).size);
    const dtype want = facts[k].layout.type;
    if (conversion_of(t->type, want) != conversion::narrowing || !facts[k].out_of_range) continue;
    std::string value;
    const std::size_t bad = facts[k].out_of_range(in, t->type, n / info(t->type).size, value);
    if (bad != static_cast<std::size_t>(-1))
      ctx.fail("tensor " + json_quoted(t->name) + " (key path " + keystr(leaves[k].path) +
               "): element " + std::to_string(bad) + " (row-major) is " + value + ", which " +
               std::string(info(want).numpy) + " cannot hold");
  }

  // Everything is checked. Prepare what the copy needs (the user's metadata, the keys' layouts),
  // so that the copy itself can neither fail nor allocate.
  for (const auto& [key, value] : head.metadata)
    if (!key.starts_with(reserved_prefix)) report.metadata.emplace(key, value);
  std::vector<std::uint8_t> layout(leaves.size(),
                                   0);  // 0: keep the tree's, 1: partitionable, 2: legacy
  for (const auto k : order) {
    if (!facts[k].key) continue;
    // The file's layout wins; a file that does not say (one written outside grove) keeps the
    // tree's.
    const auto it = head.metadata.find(std::string(key_layout_prefix) + match[k]->name);
    if (it != head.metadata.end()) layout[k] = it->second == "legacy" ? 2 : 1;
  }
  return {std::move(report), std::move(order),  std::move(match),
          std::move(place),  std::move(layout), std::move(buffer)};
}

// Checks the file's header against the tree's leaves and reads what matches (read_matching), then
// writes the values into the leaves, which can neither fail nor allocate.
template <class Tree>
load_report fill_tree(const reading& ctx, const header& head, const tensor_reader& read, Tree& tree,
                      const load_options& options) {
  auto leaves = named_leaves(tree, ctx.function);
  std::vector<leaf_key> keys;
  std::vector<leaf_facts> facts;
  keys.reserve(leaves.size());
  facts.reserve(leaves.size());
  for (auto& nl : leaves) {
    visit_leaf(nl.leaf, [&](const auto& leaf) { facts.push_back(facts_of(leaf)); });
    keys.push_back({std::move(nl.name), std::move(nl.path)});
  }
  loaded_tensors got = read_matching(ctx, head, read, keys, facts, options);
  std::byte* data = reinterpret_cast<std::byte*>(got.buffer.get());
  for (const auto k : got.order) {
    visit_leaf(leaves[k].leaf, [&](auto& leaf) noexcept {
      decode(data + got.place[k], got.match[k]->type, leaf);
      if constexpr (key_leaf<std::remove_cvref_t<decltype(leaf)>>) {
        if (got.layout[k] != 0)
          leaf.layout =
              got.layout[k] == 2 ? random::key_layout::legacy : random::key_layout::partitionable;
      }
    });
  }
  return std::move(got.report);
}

// Validates and loads a checkpoint held in memory (a whole file's bytes), as load_into does with
// a file. For the fuzzer and for tests.
template <class Tree>
load_report load_bytes_into(const std::byte* bytes, std::size_t size, Tree& tree,
                            const reading& ctx, const load_options& options = {}) {
  if (size == 0)
    ctx.fail("the file is empty; a safetensors file starts with an 8-byte header length");
  if (size < 8)
    ctx.fail("the file has " + std::to_string(size) +
             " bytes, fewer than the 8 of a header length");
  const std::uint64_t n = load_u64_le(bytes);
  if (n > size - 8)
    ctx.fail("the header length (file bytes 0 to 8) is " + std::to_string(n) +
             ", past the end of the file: only " + std::to_string(size - 8) + " bytes follow it");
  if (n > max_header_size)
    ctx.fail("the header length is " + std::to_string(n) + ", more than safetensors' limit");
  const header head = parse_header(std::string_view(reinterpret_cast<const char*>(bytes) + 8, n),
                                   8 + n, size - 8 - n, ctx);
  const std::byte* data = bytes + 8 + n;
  return fill_tree(
      ctx, head,
      [&](const tensor_entry& t, std::byte* out) {
        std::memcpy(out, data + t.begin, static_cast<std::size_t>(t.end - t.begin));
      },
      tree, options);
}

template <class Tree>
load_report load_into(std::string_view function, const std::filesystem::path& path, Tree& tree,
                      const load_options& options) {
  const reading ctx{function, path};
  if (is_index_path(path)) {
    auto set = read_sharded(ctx);
    return fill_tree(
        ctx, set.head, [&](const tensor_entry& t, std::byte* out) { set.read(t, out); }, tree,
        options);
  }
  auto file = read_checkpoint(ctx);
  return fill_tree(
      ctx, file.head,
      [&](const tensor_entry& t, std::byte* out) {
        read_checkpoint_range(ctx, file, t.begin, t.end - t.begin, out);
      },
      tree, options);
}

}  // namespace grove::io::detail
