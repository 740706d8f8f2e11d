// grove/mpi.hpp: forwards to grove/parallel/mpi.hpp, where the MPI communicator now lives. Kept
// for one release so that existing includes keep compiling; include grove/parallel/mpi.hpp.
#pragma once

#include "grove/parallel/mpi.hpp"
