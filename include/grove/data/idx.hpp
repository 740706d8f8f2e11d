// grove/data/idx.hpp: datasets from IDX files (MNIST, Fashion-MNIST), through grove::io's reader.
//
//   auto [train, test] = grove::data::load_mnist<float>("/usr/share/datasets/fashion-mnist");
//   // train.inputs: 784 x 60000 in [0, 1], train.targets: 60000 labels in [0, 10)
//
// Needs zlib (link grove::idx; Debian: zlib1g-dev).
#pragma once

#include <cstdint>
#include <filesystem>
#include <utility>

#include "grove/data/dataset.hpp"
#include "grove/io/idx.hpp"

namespace grove::data {

/// An IDX images file and its labels file as a dataset (pixels scaled by `scale`, one column per
/// image); throws as io::read_idx_dataset.
template <class T = float>
Dataset<T> read_idx(const std::filesystem::path& images_file,
                    const std::filesystem::path& labels_file, int num_classes = 10,
                    std::type_identity_t<T> scale = T(1) / T(255)) {
  auto d = io::read_idx_dataset<T>(images_file, labels_file, num_classes, scale);
  return {std::move(d.images), std::move(d.labels)};
}

/// The training and test sets of MNIST or Fashion-MNIST.
template <class T = float>
struct mnist_splits {
  Dataset<T> train, test;
};

/// The four files of `dir` (see io::load_mnist), which together may hold at most `max_bytes` of
/// data; throws as io::load_mnist.
template <class T = float>
mnist_splits<T> load_mnist(const std::filesystem::path& dir, int num_classes = 10,
                           std::uint64_t max_bytes = io::default_max_idx_bytes) {
  auto s = io::load_mnist<T>(dir, num_classes, max_bytes);
  return {{std::move(s.train.images), std::move(s.train.labels)},
          {std::move(s.test.images), std::move(s.test.labels)}};
}

}  // namespace grove::data
