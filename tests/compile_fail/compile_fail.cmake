# Compile-fail tests: each source must fail to compile with grove's static_assert message.
# grove_compile_fail(NAME "expected words")
function(grove_compile_fail name expected)
  add_executable(cf_${name} EXCLUDE_FROM_ALL ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/${name}.cpp)
  target_link_libraries(cf_${name} PRIVATE grove::grove)
  add_test(NAME compile_fail_${name}
           COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target cf_${name})
  # The build must fail, and fail for the expected reason.
  set_tests_properties(compile_fail_${name} PROPERTIES
    PASS_REGULAR_EXPRESSION "${expected}" LABELS build RESOURCE_LOCK grove_build_tree)
endfunction()

grove_compile_fail(function_rejects_leaf "grove: the function given to tree_map cannot be called with this leaf")
grove_compile_fail(node_vs_leaf "grove: the trees' structures differ")
grove_compile_fail(map_key_type "grove: a std::map is a pytree node only with std::string or integer keys")
grove_compile_fail(tree_all_arrays "grove: tree_all/tree_any need leaves that convert to bool")
grove_compile_fail(ravel_mixed_scalars "grove: ravel needs every leaf to be an Eigen array or scalar of one scalar type")
grove_compile_fail(unflatten_untyped "grove: tree_unflatten needs a TreeDef<T> that knows its C\\+\\+ type")
grove_compile_fail(node_unlisted_field "grove: the registration of Conv lists fewer fields than Conv has.*GROVE_NODE_STATIC\\(Conv, \\(leaf fields...\\), \\(static fields...\\)\\)")
grove_compile_fail(node_field_twice "grove: the registration of S lists the field x twice among its leaf fields: list each field once")
grove_compile_fail(node_leaf_and_static "grove: the registration of T lists the field n both as a leaf field and as a static field: list it in one of the two")
grove_compile_fail(node_static_twice "grove: the registration of U lists the field n twice among its static fields: list each field once")
grove_compile_fail(psum_key_leaf "grove::parallel: every leaf of a tree given to a collective must be an arithmetic scalar")
grove_compile_fail(broadcast_string_leaf "grove::parallel::broadcast: every leaf must be a number")
grove_compile_fail(all_gather_stacked_matrix "grove::parallel::all_gather: stacking an Eigen matrix leaf would need three dimensions")
grove_compile_fail(all_gather_tiled_number "grove::parallel::all_gather: a number has no axis to tile along")
grove_compile_fail(all_gather_key_leaf "grove::parallel::all_gather: a leaf that is a value \\(such as a random::Key\\) has no array to be gathered into")
grove_compile_fail(psum_scatter_number "grove::parallel::psum_scatter: a number has no dimension to scatter along")
grove_compile_fail(pmax_bool_leaf "grove::parallel::pmax/pmin: every leaf must be a number \\(not bool\\)")
