// grove/tree/node_macros.hpp: GROVE_NODE and GROVE_NODE_STATIC, which register a struct (or a
// class template) as a pytree node, JAX's register_dataclass. grove/tree/node_traits.hpp, and so
// grove/tree.hpp, includes it; the registration they expand to is node_traits.hpp's.
#pragma once

#include <iterator>
#include <string_view>

#include "grove/detail/preprocessor.hpp"
#include "grove/tree/node_traits.hpp"

#define GROVE_DETAIL_FIELD_NAME(ctx, field) std::string_view{#field},
#define GROVE_DETAIL_MEMBER_POINTER(Self, field) , &Self::field
#define GROVE_DETAIL_COUNT_ONE(ctx, field) +1
// Each listed field appears once in all: a field listed twice would be a leaf twice (and the
// rebuilt struct would get one of its values twice while another field is lost), and a field that
// is both a leaf and static data would be reported as both.
#define GROVE_DETAIL_CHECK_LEAF_FIELD(Type, field)                                              \
  static_assert(::grove::detail::count_field_name(grove_node_field_names_##Type, #field) == 1,  \
                "grove: the registration of " #Type " lists the field " #field                  \
                " twice among its leaf fields: list each field once");                          \
  static_assert(::grove::detail::count_field_name(grove_node_static_names_##Type, #field) == 0, \
                "grove: the registration of " #Type " lists the field " #field                  \
                " both as a leaf field and as a static field: list it in one of the two");
#define GROVE_DETAIL_CHECK_STATIC_FIELD(Type, field)                                            \
  static_assert(::grove::detail::count_field_name(grove_node_static_names_##Type, #field) == 1, \
                "grove: the registration of " #Type " lists the field " #field                  \
                " twice among its static fields: list each field once");

// The registration behind both macros. Field names are stored with a trailing empty sentinel, so
// that a struct with no leaf fields (or no static ones) still has an array to point at.
#define GROVE_DETAIL_NODE(Type, data, statics)                                                     \
  inline constexpr std::string_view grove_node_field_names_##Type[] = {                            \
      GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_FIELD_NAME, _, data) std::string_view{}};            \
  inline constexpr std::string_view grove_node_static_names_##Type[] = {                           \
      GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_FIELD_NAME, _, statics) std::string_view{}};         \
  inline constexpr ::grove::node_info grove_node_info_##Type{                                      \
      #Type, grove_node_field_names_##Type,  std::size(grove_node_field_names_##Type) - 1,         \
      true,  grove_node_static_names_##Type, std::size(grove_node_static_names_##Type) - 1};       \
  GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_CHECK_LEAF_FIELD, Type, data)                            \
  GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_CHECK_STATIC_FIELD, Type, statics)                       \
  template <class GroveSelf>                                                                       \
  requires(::grove::detail::same_or_instance<GroveSelf, Type>()) constexpr auto grove_node_fields( \
      ::grove::detail::type_tag<GroveSelf>) noexcept {                                             \
    static_assert(                                                                                 \
        ::grove::detail::lists_every_field<                                                        \
            GroveSelf, 0 GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_COUNT_ONE, _, data)               \
                           GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_COUNT_ONE, _, statics)>(),      \
        "grove: the registration of " #Type " lists fewer fields than " #Type                      \
        " has, so rebuilding it would lose the others: list every field, the ones that are not "   \
        "leaves as static fields: GROVE_NODE_STATIC(" #Type                                        \
        ", (leaf fields...), (static "                                                             \
        "fields...))");                                                                            \
    return ::grove::detail::struct_fields<                                                         \
        GroveSelf, &grove_node_info_##Type,                                                        \
        ::grove::detail::member_list<0 GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_MEMBER_POINTER,     \
                                                                  GroveSelf, data)>,               \
        ::grove::detail::member_list<0 GROVE_DETAIL_FOR_EACH_LIST(GROVE_DETAIL_MEMBER_POINTER,     \
                                                                  GroveSelf, statics)>>{};         \
  }                                                                                                \
  static_assert(true, "GROVE_NODE ends with a semicolon")

/// Registers a struct or class template as a pytree node whose children are the listed fields,
/// in that order, with key paths `.field` (JAX's register_dataclass with data_fields only). Write
/// it right after the type, in the type's own namespace, and end it with a semicolon:
///
///   struct Point { double x, y; };
///   GROVE_NODE(Point, x, y);
///
///   template <class T> struct Dense { Eigen::MatrixX<T> w; Eigen::VectorX<T> b; };
///   GROVE_NODE(Dense, w, b);
///
/// The list decides the leaf order only: rebuilding the struct (tree_map, tree_unflatten)
/// value-initialises it and assigns each field by name, so the struct must be default
/// constructible with assignable fields. Every field must be listed, here or as a static field
/// (GROVE_NODE_STATIC): for an aggregate this is checked at compile time (its fields are counted,
/// a base class as one field, so an aggregate with a base cannot always be registered);
/// a non-aggregate's unlisted members keep the values its default constructor gives them. A field
/// listed twice, or both as a leaf and as a static field, is a compile-time error naming it.
#define GROVE_NODE(Type, ...) GROVE_DETAIL_NODE(Type, (__VA_ARGS__), ())

/// Registers a struct with leaf fields and static fields (JAX's register_dataclass with
/// data_fields and meta_fields), each list in parentheses; either may be empty:
///
///   struct Conv { Eigen::MatrixXf w; std::string name; int stride; };
///   GROVE_NODE_STATIC(Conv, (w), (name, stride));
///
/// Static fields are not leaves: they are the node's data, kept in its TreeDef (compared by ==,
/// hashed where hashable, printed `CustomNode(Conv[('conv1', 2)], [*])`), copied from the first
/// tree by tree_map (the other trees must hold equal values, else tree_error) and restored by
/// tree_unflatten. Their types must have operator==.
#define GROVE_NODE_STATIC(Type, data, statics) GROVE_DETAIL_NODE(Type, data, statics)
