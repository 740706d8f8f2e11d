// grove/parallel.hpp: data parallelism the JAX way. Collectives on whole pytrees (psum, pmean,
// broadcast, JAX's lax.psum / lax.pmean and a replicated put), over any `communicator`: the
// devices of grove::parallel::LocalDevices (threads of one process, JAX's pmap on a CPU) or MPI
// ranks (grove::mpi::Communicator, in grove/mpi.hpp, the only header that needs MPI); and a
// data-parallel training step for grove::nn's MLP.
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
#include "grove/parallel/local_devices.hpp"
#include "grove/parallel/train.hpp"
