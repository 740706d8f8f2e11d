// grove/version.hpp: the library's version, the one CMake's project() declares (a test checks
// that the two agree).
#pragma once

#include <string_view>

#define GROVE_VERSION_MAJOR 0
#define GROVE_VERSION_MINOR 1
#define GROVE_VERSION_PATCH 0
/// "MAJOR.MINOR.PATCH", as a string literal.
#define GROVE_VERSION "0.1.0"

namespace grove {

/// grove's version, "MAJOR.MINOR.PATCH" (checkpoints record it in their metadata).
inline constexpr std::string_view version = GROVE_VERSION;

}  // namespace grove
