// grove/data.hpp: grove::data, the data path of a training program: datasets of examples as
// columns, readers (CSV, numpy's .npy), shuffled batches in JAX's order, sharding over devices,
// prefetch, and the usual transforms. docs/data.md walks through it.
//
// The readers with a dependency of their own are separate includes: grove/data/idx.hpp and
// grove/data/csv_gz.hpp (zlib, grove::idx), grove/data/npz.hpp (libzip, grove::npz), and
// grove/data/npy_tensor.hpp (Eigen's Tensor module).
#pragma once

#include "grove/data/batches.hpp"
#include "grove/data/csv.hpp"
#include "grove/data/dataset.hpp"
#include "grove/data/npy.hpp"
#include "grove/data/transforms.hpp"
