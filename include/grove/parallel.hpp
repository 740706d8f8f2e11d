// grove/parallel.hpp: data parallelism the JAX way. Collectives on whole pytrees (JAX's psum,
// pmean, all_gather, psum_scatter, pmax, pmin, ppermute, and broadcast, a replicated put), over
// any `device_group`: the
// devices of grove::parallel::LocalDevices (threads of one process, JAX's pmap on a CPU) or MPI
// ranks (grove::mpi::Communicator, in grove/parallel/mpi.hpp, the only header that needs MPI).
// They need only the tree core. The data-parallel training step for grove::nn's networks joins
// this layer and nn, so it is a header of its own: grove/parallel/train.hpp.
//
//   grove::parallel::LocalDevices devices(2);
//   devices.run([&](grove::parallel::LocalDevice& dev) {
//     auto params = grove::parallel::broadcast(initial_params, dev, 0);
//     ...
//     float loss = grove::parallel::train_step(params, X, Y, opt, state, dev, ws);
//   });
#pragma once

#include "grove/parallel/collectives.hpp"
#include "grove/parallel/communicator.hpp"
#include "grove/parallel/extrema.hpp"
#include "grove/parallel/gather.hpp"
#include "grove/parallel/local_devices.hpp"
#include "grove/parallel/permute.hpp"
#include "grove/parallel/single_device.hpp"
