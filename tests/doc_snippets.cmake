# Script mode: every ```cpp block of a docs page after its first (the program that
# grove_doc_program compiles and runs) must appear in a source file that is compiled (examples/,
# tests/, bench/), so the page never shows code that does not build. Blanks are normalised first,
# as for README.md. Usage: cmake -DSOURCE_DIR=... -DDOC=docs/nn.md -P doc_snippets.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/doc_blocks.cmake)
file(READ ${SOURCE_DIR}/${DOC} page)
grove_compiled_sources(${SOURCE_DIR} contents)
grove_check_cpp_blocks(page contents 1 ${DOC} count missing)
if(count LESS 2)
  message(FATAL_ERROR "${DOC} has no C++ block after its program")
endif()
if(missing GREATER 0)
  message(FATAL_ERROR "${missing} of ${DOC}'s ${count} C++ blocks are compiled nowhere")
endif()
math(EXPR shown "${count} - 1")
message(STATUS "all ${shown} C++ snippets of ${DOC} after its program are in compiled sources")
