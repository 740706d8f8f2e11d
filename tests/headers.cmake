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
  grove_nn_target(grove_headers_self_contained)
  # Parsing is the check; nothing here needs optimising.
  target_compile_options(grove_headers_self_contained PRIVATE -O0)
endif()

add_test(NAME house_layers COMMAND ${PROJECT_SOURCE_DIR}/scripts/check-layers.sh
                                   ${PROJECT_SOURCE_DIR}/include)
set_tests_properties(house_layers PROPERTIES
  PASS_REGULAR_EXPRESSION "every header includes only its own layer and those below")
