// grove/tree/print.hpp: to_string(tree), a Python-style rendering of a whole tree, for logs and
// examples: `[Dense(w=float32[512,784], b=float32[512]), ...]`.
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "grove/tree/detail/eigen_tensor.hpp"
#include "grove/tree/detail/node_data.hpp"
#include "grove/tree/detail/prefix.hpp"
#include "grove/tree/node_traits.hpp"

namespace grove {

/// The name JAX gives an element type: float32, float64, int32, uint8, ...
template <class S>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<S, float>)
    return "float32";
  else if constexpr (std::is_same_v<S, double>)
    return "float64";
  else if constexpr (std::is_same_v<S, bool>)
    return "bool";
  else if constexpr (std::is_integral_v<S>) {
    constexpr bool s = std::is_signed_v<S>;
    switch (sizeof(S)) {
      case 1:
        return s ? "int8" : "uint8";
      case 2:
        return s ? "int16" : "uint16";
      case 4:
        return s ? "int32" : "uint32";
      default:
        return s ? "int64" : "uint64";
    }
  } else
    return "object";
}

namespace detail {

template <class T>
concept streamable = requires(std::ostream& os, const T& t) {
  os << t;
};
template <class T>
concept dense_array = requires(const T& t) {
  typename T::Scalar;
  t.rows();
  t.cols();
};

template <class T>
void write_leaf(std::ostream& os, const T& leaf) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (leaf ? "True" : "False");
  } else if constexpr (std::is_same_v<T, std::string>) {
    write_python_string(os, leaf);
  } else if constexpr (eigen_tensor<T>) {
    // A tensor prints as its type and dimensions, dimension 0 first: float32[2,3,4]; rank 0 as
    // float32[], as JAX prints a scalar's ShapeDtypeStruct.
    os << dtype_name<typename T::Scalar>() << '[';
    for (std::size_t d = 0; d < tensor_rank<T>; ++d)
      os << (d ? "," : "") << static_cast<std::int64_t>(leaf.dimensions()[d]);
    os << ']';
  } else if constexpr (dense_array<T>) {
    // Arrays print as their type and shape, like a jax.ShapeDtypeStruct: float32[512,784].
    os << dtype_name<typename T::Scalar>() << '[';
    if constexpr (T::ColsAtCompileTime == 1 || T::RowsAtCompileTime == 1)
      os << leaf.size();
    else
      os << leaf.rows() << ',' << leaf.cols();
    os << ']';
  } else if constexpr (streamable<T>) {
    os << leaf;
  } else {
    os << "<leaf>";
  }
}

template <class T>
void write_tree(std::ostream& os, const T& t) {
  if constexpr (!is_node<T>) {
    ::grove::detail::write_leaf(os, t);
  } else if constexpr (optional_node<T>) {
    if (t.has_value())
      ::grove::detail::write_tree(os, *t);
    else
      os << "None";
  } else if constexpr (node_traits<T>::kind == node_kind::none) {
    os << "None";
  } else {
    using traits = node_traits<T>;
    const node_kind kind = traits::kind;
    const node_info* info = info_of<T>();
    const bool is_struct = info && info->is_struct;
    if (kind == node_kind::tuple)
      os << '(';
    else if (kind == node_kind::list)
      os << '[';
    else if (kind == node_kind::dict)
      os << '{';
    else
      os << info->name << (is_struct ? "(" : "([");
    std::size_t n = 0;
    ::grove::detail::zip_children(
        [&](auto make_key, const auto& child) {
          if (n++) os << ", ";
          if (kind == node_kind::dict) {
            write_dict_key(os, std::get<DictKey>(make_key()));
            os << ": ";
          } else if (is_struct) {
            os << std::get<GetAttrKey>(make_key()).name << '=';
          }
          ::grove::detail::write_tree(os, child);
        },
        t);
    if constexpr (has_static_fields<T>) {
      // Static fields follow the leaf fields, as a dataclass's repr shows every field.
      [&]<std::size_t... J>(std::index_sequence<J...>) {
        ((os << (n++ ? ", " : "") << info->static_fields[J] << '=',
          ::grove::detail::write_static_value(os, ::grove::detail::static_at<T, J>(t))),
         ...);
      }
      (std::make_index_sequence<num_static_v<T>>{});
    }
    if (kind == node_kind::tuple)
      os << (n == 1 ? ",)" : ")");
    else if (kind == node_kind::list)
      os << ']';
    else if (kind == node_kind::dict)
      os << '}';
    else
      os << (is_struct ? ")" : "])");
  }
}

}  // namespace detail

/// The tree in Python's notation: tuples `(1, 2)`, lists `[...]`, dicts `{'a': ...}`, None,
/// registered structs `Point(x=1, y=2)` (static fields after the leaf fields:
/// `Conv(w=float32[3], name='conv1', stride=2)`), arrays as `float32[3,4]`, Eigen tensors as
/// `float32[2,3,4]` (their dimensions), other leaves with operator<<.
template <class Tree>
std::string to_string(const Tree& tree) {
  std::ostringstream os;
  detail::write_tree(os, tree);
  return os.str();
}

}  // namespace grove
