// grove/grove.hpp: every layer that needs nothing beyond Eigen and the standard library: pytrees
// with Eigen support, random numbers, optax-style optimizers (grove::optim), datasets and batches
// (grove::data), networks (grove::nn, grove::vmap) and data-parallel collectives over local
// devices (grove::parallel). Headers with extra dependencies are included separately, so that a
// program pays only for what it uses: grove/io/checkpoint.hpp (nlohmann-json), grove/io/idx.hpp,
// grove/data/idx.hpp and grove/data/csv_gz.hpp (zlib), grove/data/npz.hpp (libzip) and
// grove/parallel/mpi.hpp (MPI).
#pragma once

#include "grove/data.hpp"
#include "grove/nn.hpp"
#include "grove/optim.hpp"
#include "grove/parallel.hpp"
#include "grove/parallel/train.hpp"
#include "grove/random.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
#include "grove/vmap.hpp"
