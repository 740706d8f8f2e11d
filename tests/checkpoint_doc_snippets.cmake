# Script mode: every ```cpp block of docs/checkpoint.md after its first (the program that
# grove_doc_program compiles and runs) must appear in tests/test_checkpoint_layouts.cpp, which is
# compiled and runs them, so the page never shows code that does not build. Blanks are normalised
# first, as for README.md. Usage: cmake -DSOURCE_DIR=... -P checkpoint_doc_snippets.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/doc_blocks.cmake)
file(READ ${SOURCE_DIR}/docs/checkpoint.md page)
file(READ ${SOURCE_DIR}/tests/test_checkpoint_layouts.cpp contents)
grove_normalise_blanks(contents)
grove_check_cpp_blocks(page contents 1 docs/checkpoint.md count missing)
if(count LESS 2)
  message(FATAL_ERROR "docs/checkpoint.md has no C++ block after its program")
endif()
if(missing GREATER 0)
  message(FATAL_ERROR "${missing} of docs/checkpoint.md's ${count} C++ blocks are compiled nowhere")
endif()
math(EXPR shown "${count} - 1")
message(STATUS "all ${shown} C++ snippets of docs/checkpoint.md are compiled in test_checkpoint (test_checkpoint_layouts.cpp)")
