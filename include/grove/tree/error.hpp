// grove/tree/error.hpp: the exception every run-time structure error throws.
#pragma once

#include <stdexcept>
#include <string>

namespace grove {

/// Thrown when trees that must share a structure do not, or a TreeDef and its leaves disagree.
/// The message names the key path of the first difference and what differed.
class tree_error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace grove
