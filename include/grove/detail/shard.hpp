// grove/detail/shard.hpp: how a batch is split over devices, in one place for the layers that
// split it (grove::parallel's training step, grove::data's batches), so that a device always
// gathers exactly the examples the step weights it by.
#pragma once

#include <algorithm>
#include <cstddef>

namespace grove::detail {

struct shard_range {
  std::ptrdiff_t begin = 0, size = 0;
};

// Device `index` of `count`'s part of a batch of `batch` examples, as pmap splits a leading axis:
// contiguous, in device order, sizes differing by at most one (the first batch % count devices
// take one more). The caller has checked 0 <= index < count and batch >= 0.
constexpr shard_range shard_of(std::ptrdiff_t batch, int index, int count) {
  const std::ptrdiff_t q = batch / count, r = batch % count;
  return {index * q + std::min<std::ptrdiff_t>(index, r), q + (index < r ? 1 : 0)};
}

}  // namespace grove::detail
