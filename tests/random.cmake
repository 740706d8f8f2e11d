# grove::random's tests (included by tests/CMakeLists.txt).
#
# Random123 (Debian: librandom123-dev, header-only) is a test-only dependency: an independent
# threefry2x32 to cross-check against. Without it the cross-check is left out, with a warning.
find_package(Threads REQUIRED)
find_path(GROVE_RANDOM123_INCLUDE_DIR Random123/threefry.h)

grove_test(test_random
  ${CMAKE_CURRENT_LIST_DIR}/test_random_threefry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_random_jax.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_random_stats.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_random_determinism.cpp
  ${CMAKE_CURRENT_LIST_DIR}/test_random_docs.cpp)
target_link_libraries(test_random PRIVATE Threads::Threads)
if(GROVE_RANDOM123_INCLUDE_DIR)
  target_include_directories(test_random SYSTEM PRIVATE ${GROVE_RANDOM123_INCLUDE_DIR})
  target_compile_definitions(test_random PRIVATE GROVE_HAVE_RANDOM123=1)
else()
  message(WARNING "Random123 (librandom123-dev) not found: "
                  "test_random skips the cross-check of threefry2x32 against it")
  target_compile_definitions(test_random PRIVATE GROVE_HAVE_RANDOM123=0)
endif()
