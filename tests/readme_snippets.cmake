# Script mode: every ```cpp block of README.md must appear in a source file that is compiled
# (examples/, tests/, bench/), so the README never shows code that does not build. Blanks are
# normalised first (indentation and runs of spaces), so a snippet may be indented or aligned
# differently from its source. Usage: cmake -DSOURCE_DIR=... -P readme_snippets.cmake
cmake_minimum_required(VERSION 3.25)
include(${CMAKE_CURRENT_LIST_DIR}/doc_blocks.cmake)
file(READ ${SOURCE_DIR}/README.md readme)
grove_compiled_sources(${SOURCE_DIR} contents)
grove_check_cpp_blocks(readme contents 0 README.md count missing)
if(count EQUAL 0)
  message(FATAL_ERROR "README.md has no cpp snippets: the check would be empty")
endif()
message(STATUS "${count} README snippets found in compiled sources, ${missing} missing")
