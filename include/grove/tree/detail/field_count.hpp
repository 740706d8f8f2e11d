// grove/tree/detail/field_count.hpp: how many fields an aggregate has, counted at compile time,
// so that GROVE_NODE can refuse a registration that would lose some.
#pragma once

#include <cstddef>
#include <type_traits>

// Boost.PFR's technique, with empty braces as the probes: an aggregate has N fields when T{{}, ...}
// with N empty braces is valid and with N + 1 is not. Empty braces initialise a member whatever its
// type (a C array as one field; a member with a greedy converting constructor, such as
// std::optional<Eigen::VectorXd>, without instantiating it), where a convert-to-anything probe
// counts array elements or fails to compile. A pack cannot expand to empty braces, so the lists are
// spelled out, eight at a time, up to 64 fields.
#define GROVE_DETAIL_BRACES8 \
  {}, {}, {}, {}, {}, {}, {}, {}

namespace grove::detail {

/// The number of fields of aggregate T (bases count as fields), or 64 if it has 64 or more.
template <class T>
constexpr std::size_t count_fields() {
  if constexpr (!requires { T{{}}; })
    return 0;
  else if constexpr (!requires { T{{}, {}}; })
    return 1;
  else if constexpr (!requires { T{{}, {}, {}}; })
    return 2;
  else if constexpr (!requires { T{{}, {}, {}, {}}; })
    return 3;
  else if constexpr (!requires { T{{}, {}, {}, {}, {}}; })
    return 4;
  else if constexpr (!requires { T{{}, {}, {}, {}, {}, {}}; })
    return 5;
  else if constexpr (!requires { T{{}, {}, {}, {}, {}, {}, {}}; })
    return 6;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8}; })
    return 7;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, {}}; })
    return 8;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, {}, {}}; })
    return 9;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, {}, {}, {}}; })
    return 10;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, {}, {}, {}, {}}; })
    return 11;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, {}, {}, {}, {}, {}}; })
    return 12;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, {}, {}, {}, {}, {}, {}}; })
    return 13;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, {}, {}, {}, {}, {}, {}, {}}; })
    return 14;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8}; })
    return 15;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}}; })
    return 16;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}, {}}; })
    return 17;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}, {}, {}}; })
    return 18;
  else if constexpr (!requires { T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}, {}, {}, {}}; })
    return 19;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}, {}, {}, {}, {}};
                     })
    return 20;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}, {}, {}, {}, {}, {}};
                     })
    return 21;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}, {}, {}, {}, {}, {}, {}};
                     })
    return 22;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8};
                     })
    return 23;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}};
                     })
    return 24;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}, {}};
                     })
    return 25;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {}};
                     })
    return 26;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {}};
                     })
    return 27;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 28;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 29;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 30;
  else if constexpr (
      !requires {
        T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8};
      })
    return 31;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {}};
                     })
    return 32;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {}};
                     })
    return 33;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {}};
                     })
    return 34;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {}};
                     })
    return 35;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 36;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 37;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 38;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8};
                     })
    return 39;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, {}};
                     })
    return 40;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {}};
                     })
    return 41;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {}};
                     })
    return 42;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {}};
                     })
    return 43;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 44;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 45;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 46;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8};
                     })
    return 47;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {}};
                     })
    return 48;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {}};
                     })
    return 49;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {}};
                     })
    return 50;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {}};
                     })
    return 51;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 52;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 53;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 54;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8};
                     })
    return 55;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, {}};
                     })
    return 56;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {}};
                     })
    return 57;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {}};
                     })
    return 58;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {}};
                     })
    return 59;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 60;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 61;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8,
                         {},
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
                     })
    return 62;
  else if constexpr (!requires {
                       T{GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8,
                         GROVE_DETAIL_BRACES8, GROVE_DETAIL_BRACES8};
                     })
    return 63;
  else
    return 64;
}

}  // namespace grove::detail
