// grove/grove.hpp: the core layers (pytrees with Eigen support, random numbers). Headers with
// extra dependencies (grove/io/checkpoint.hpp needs nlohmann-json) are included separately, so
// that a program pays only for what it uses.
#pragma once

#include "grove/random.hpp"
#include "grove/tree.hpp"
#include "grove/tree/eigen.hpp"
