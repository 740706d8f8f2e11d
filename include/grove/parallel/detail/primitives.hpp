// grove/parallel/detail/primitives.hpp: the optional primitives of a device_group (allgather,
// reduce_scatter_sum, sendrecv), called on the group where it has them, made of the required
// ones (allreduce_sum, broadcast) where it does not. grove's own groups have all three.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "grove/parallel/communicator.hpp"

namespace grove::parallel::detail {

// In place: buf holds comm.size() equal blocks, block rank() this device's; afterwards block r
// is device r's. Without the primitive: one broadcast per device.
template <device_group C>
void allgather_bytes(C& comm, std::span<std::byte> buf) {
  if constexpr (requires { comm.allgather(buf); }) {
    comm.allgather(buf);
  } else {
    const auto n = static_cast<std::size_t>(comm.size());
    const std::size_t block = buf.size() / n;
    for (std::size_t r = 0; r < n; ++r)
      comm.broadcast(buf.subspan(r * block, block), static_cast<int>(r));
  }
}

// out = the sum over devices of their block rank() of `in` (comm.size() blocks of out.size()).
// Without the primitive: an allreduce_sum of a copy of `in`, of which this device keeps its block
// (the same bits, sent size() times over).
template <reducible T, device_group C>
void reduce_scatter_sum(C& comm, std::span<const T> in, std::span<T> out) {
  if constexpr (requires { comm.reduce_scatter_sum(in, out); }) {
    comm.reduce_scatter_sum(in, out);
  } else {
    std::vector<T> all(in.begin(), in.end());
    comm.allreduce_sum(std::span<T>(all));
    const std::size_t at = static_cast<std::size_t>(comm.rank()) * out.size();
    std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(at), out.size(), out.begin());
  }
}

// A permutation of devices, as (source, destination) pairs that every device passes alike:
// sends `send` to this device's destination and receives `recv` from its source (the other
// entries are for groups without sendrecv, which broadcast from each source in turn).
template <device_group C>
void permute_bytes(C& comm, std::span<const std::pair<int, int>> perm, std::span<std::byte> send,
                   std::span<std::byte> recv) {
  const int me = comm.rank();
  int dest = -1, source = -1;
  for (const auto& [s, d] : perm) {
    if (s == me) dest = d;
    if (d == me) source = s;
  }
  if constexpr (requires { comm.sendrecv(std::span<const std::byte>(send), dest, recv, source); }) {
    comm.sendrecv(std::span<const std::byte>(send), dest, recv, source);
  } else {
    // Each source broadcasts its `send`; its destination receives into `recv`, the others into
    // scratch memory.
    std::vector<std::byte> scratch;
    for (const auto& [s, d] : perm) {
      if (s == me) {
        comm.broadcast(send, s);  // the root's buffer is left as it is
        if (d == me && recv.data() != send.data())
          std::memcpy(recv.data(), send.data(), send.size());
      } else if (d == me) {
        comm.broadcast(recv, s);
      } else {
        scratch.resize(send.size());
        comm.broadcast(std::span<std::byte>(scratch), s);
      }
    }
  }
}

}  // namespace grove::parallel::detail
