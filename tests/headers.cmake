# The house rules that a build can check (docs/CONVENTIONS.md):
#  * every public header compiles on its own, and twice in one translation unit: an object
#    library with one source per header (generated at configure time), built in the normal build
#    only (the sanitizer build would repeat the same check);
#  * no header includes a header of a higher layer (scripts/check-layers.sh).
if(NOT GROVE_SANITIZE)
    file(GLOB_RECURSE _grove_public_headers RELATIVE ${PROJECT_SOURCE_DIR}/include
         CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/grove/*.hpp)
    list(FILTER _grove_public_headers EXCLUDE REGEX "/detail/")
    set(_grove_header_sources)
    foreach(header IN LISTS _grove_public_headers)
      string(REGEX REPLACE "[/.]" "_" stem ${header})
      set(source ${CMAKE_CURRENT_BINARY_DIR}/headers/${stem}.cpp)
      file(CONFIGURE OUTPUT ${source}
           CONTENT "// Generated: ${header} compiles on its own, and included twice.\n#include <${header}>\n#include <${header}>\n")
      list(APPEND _grove_header_sources ${source})
    endforeach()
    add_library(grove_headers_self_contained OBJECT ${_grove_header_sources})
    target_link_libraries(grove_headers_self_contained PRIVATE grove::grove grove_warnings)
    foreach(component IN ITEMS checkpoint idx mpi)
      if(TARGET grove::${component})
        target_link_libraries(grove_headers_self_contained PRIVATE grove::${component})
      endif()
    endforeach()
    # And grove/nn.hpp as a build with GROVE_NO_DISPATCH sees it: Eigen's kernels alone, the path
  # that test_nn_gemm runs through force_eigen_kernel().
  set(source ${CMAKE_CURRENT_BINARY_DIR}/headers/grove_nn_hpp_no_dispatch.cpp)
  file(CONFIGURE OUTPUT ${source}
       CONTENT "// Generated: grove/nn.hpp compiles with GROVE_NO_DISPATCH.\n#define GROVE_NO_DISPATCH 1\n#include <grove/nn.hpp>\n")
  target_sources(grove_headers_self_contained PRIVATE ${source})
  grove_nn_target(grove_headers_self_contained)
    # Parsing is the check; nothing here needs optimising.
    target_compile_options(grove_headers_self_contained PRIVATE -O0)
endif()

if(NOT GROVE_SANITIZE)
  # The preprocessed size of every public header against its recorded ceiling.
  set(_grove_header_includes)
  foreach(_grove_dependency IN ITEMS Eigen3::Eigen nlohmann_json::nlohmann_json)
    if(TARGET ${_grove_dependency})
      get_target_property(_grove_dirs ${_grove_dependency} INTERFACE_INCLUDE_DIRECTORIES)
      list(APPEND _grove_header_includes ${_grove_dirs})
    endif()
  endforeach()
  if(MPI_CXX_FOUND)
    list(APPEND _grove_header_includes ${MPI_CXX_INCLUDE_DIRS})
  endif()
  # The compiler's own directories stay out (-isystem /usr/include breaks #include_next); the list
  # travels with '|' between its entries.
  list(REMOVE_ITEM _grove_header_includes /usr/include /usr/local/include)
  list(REMOVE_DUPLICATES _grove_header_includes)
  string(REPLACE ";" "|" _grove_header_includes "${_grove_header_includes}")
  add_test(NAME house_header_sizes
           COMMAND ${CMAKE_COMMAND} -DCXX=${CMAKE_CXX_COMPILER} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   "-DINCLUDES=${_grove_header_includes}"
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/header_sizes.cmake)
  set_tests_properties(house_header_sizes PROPERTIES TIMEOUT 300)
  add_test(NAME house_layers COMMAND ${PROJECT_SOURCE_DIR}/scripts/check-layers.sh
                                     ${PROJECT_SOURCE_DIR}/include)
  set_tests_properties(house_layers PROPERTIES
    PASS_REGULAR_EXPRESSION "every header includes only its own layer and those below")
endif()
