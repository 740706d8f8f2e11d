// grove::compiled (CMake option GROVE_COMPILED): the network's matrix products, compiled once.
//
// Header-only, every translation unit that runs a pass of grove::nn compiles gemm_slice for the
// products it runs, and with it grove's GEMM kernels (AVX-512, AVX2, AVX512-BF16, AMX) and Eigen's:
// a large part of such a unit's compile time. A program that links grove::compiled gets
// GROVE_COMPILED defined, and in its units configured as this library (grove/nn/detail/gemm.hpp's
// GROVE_NN_GEMM_CONFIG) gemm_slice is an explicit instantiation declaration: they call these.
#include <grove/nn/detail/gemm.hpp>

static_assert(GROVE_COMPILED == GROVE_NN_GEMM_CONFIG,
              "grove::compiled: CMake defined GROVE_COMPILED to another configuration of the "
              "products than this compiler gives this library's own unit (see "
              "grove/nn/detail/gemm.hpp's GROVE_NN_GEMM_CONFIG)");

namespace grove::nn::detail {

GROVE_NN_GEMM_PRODUCTS(GROVE_NN_GEMM_INSTANCE)

}  // namespace grove::nn::detail
