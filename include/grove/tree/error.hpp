// grove/tree/error.hpp: the exception every run-time structure error throws.
#pragma once

#include "grove/error.hpp"

namespace grove {

/// Thrown when trees that must share a structure do not, or a TreeDef and its leaves disagree.
/// The message names the key path of the first difference and what differed. A
/// grove::argument_error, hence a std::invalid_argument.
class tree_error : public argument_error {
 public:
  using argument_error::argument_error;
};

}  // namespace grove
