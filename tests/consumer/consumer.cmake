# grove consumed as a user would: through find_package against an installed copy, and through
# add_subdirectory of the source tree (which must add no install rules to the parent), both for a
# program that uses Eigen and checkpoints (grove::checkpoint) and for one that uses the tree core
# alone on a machine without Eigen; and grove::compiled, installed and found. Each test configures, builds and runs a tiny project.
set(_consumer_src ${CMAKE_CURRENT_SOURCE_DIR}/consumer)
set(_consumer_bin ${CMAKE_CURRENT_BINARY_DIR}/consumer)
add_test(NAME consumer_find_package
  COMMAND ${CMAKE_COMMAND}
    -DGROVE_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORK_DIR=${_consumer_bin}/find_package
    -DCONSUMER_DIR=${_consumer_src} -DMODE=find_package -DCXX=${CMAKE_CXX_COMPILER}
    -P ${_consumer_src}/run_consumer.cmake)
add_test(NAME consumer_add_subdirectory
  COMMAND ${CMAKE_COMMAND}
    -DGROVE_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORK_DIR=${_consumer_bin}/add_subdirectory
    -DCONSUMER_DIR=${_consumer_src} -DMODE=add_subdirectory -DCXX=${CMAKE_CXX_COMPILER}
    -P ${_consumer_src}/run_consumer.cmake)
foreach(mode IN ITEMS find_package add_subdirectory)
  add_test(NAME consumer_tree_only_${mode}
    COMMAND ${CMAKE_COMMAND}
      -DGROVE_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORK_DIR=${_consumer_bin}/tree_only_${mode}
      -DCONSUMER_DIR=${_consumer_src} -DMODE=${mode} -DTREE_ONLY=ON -DCXX=${CMAKE_CXX_COMPILER}
      -P ${_consumer_src}/run_consumer.cmake)
  set_tests_properties(consumer_tree_only_${mode} PROPERTIES LABELS build
    PASS_REGULAR_EXPRESSION "consumer ok: PyTreeDef\\({'a': \\(\\*, \\[\\*, \\*\\]\\)}\\)")
endforeach()
# grove::compiled, installed and found: the consumer's own units compile no product.
add_test(NAME consumer_compiled_find_package
  COMMAND ${CMAKE_COMMAND}
    -DGROVE_SOURCE_DIR=${PROJECT_SOURCE_DIR} -DWORK_DIR=${_consumer_bin}/compiled_find_package
    -DCONSUMER_DIR=${_consumer_src} -DMODE=find_package -DCOMPILED=ON -DCXX=${CMAKE_CXX_COMPILER}
    -P ${_consumer_src}/run_consumer.cmake)
set_tests_properties(consumer_compiled_find_package PROPERTIES LABELS build TIMEOUT 600
  PASS_REGULAR_EXPRESSION "calls [1-9][0-9]* of grove::compiled's products and defines none.*consumer ok: compiled mode [1-4], the loss fell to under half")
set_tests_properties(consumer_find_package consumer_add_subdirectory PROPERTIES
  LABELS build PASS_REGULAR_EXPRESSION "consumer ok: PyTreeDef\\(\\(\\*, \\(\\*, \\*\\)\\)\\)")

# A machine without grove's optional dependencies: configuring (tests, examples and benchmarks on)
# still succeeds and lists what it skipped.
set(_grove_optional "-DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON;-DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON"
    "-DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=ON;-DCMAKE_DISABLE_FIND_PACKAGE_nlohmann_json=ON"
    "-DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON")
add_test(NAME configure_without_optional_dependencies
  COMMAND ${CMAKE_COMMAND} -S ${PROJECT_SOURCE_DIR} -B ${_consumer_bin}/without_optional
          -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER} ${_grove_optional})
set_tests_properties(configure_without_optional_dependencies PROPERTIES LABELS build
  PASS_REGULAR_EXPRESSION "grove::checkpoint \\(nlohmann-json not found\\).*grove::idx \\(zlib not found\\).*grove::mpi \\(MPI not found\\).*benchmarks")
