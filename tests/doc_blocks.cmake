# grove_doc_blocks(DOC CODE_VAR OUTPUT_VAR): reads a docs page whose first ```cpp block is a whole
# program and whose ```text block after it is that program's exact output; sets CODE_VAR and
# OUTPUT_VAR to the two. Used at configure time (grove_doc_program) and in script mode
# (parallel_docs.cmake).
function(grove_doc_blocks doc code_var output_var)
  file(READ ${doc} md)
  string(FIND "${md}" "```cpp\n" begin)
  if(begin EQUAL -1)
    message(FATAL_ERROR "${doc} has no ```cpp block")
  endif()
  math(EXPR begin "${begin} + 7")
  string(SUBSTRING "${md}" ${begin} -1 rest)
  string(FIND "${rest}" "```" end)
  string(SUBSTRING "${rest}" 0 ${end} code)
  string(SUBSTRING "${rest}" ${end} -1 rest)
  string(FIND "${rest}" "```text\n" out)
  if(out EQUAL -1)
    message(FATAL_ERROR "${doc} has no ```text block after its program")
  endif()
  math(EXPR out "${out} + 8")
  string(SUBSTRING "${rest}" ${out} -1 rest)
  string(FIND "${rest}" "```" end)
  string(SUBSTRING "${rest}" 0 ${end} output)
  set(${code_var} "${code}" PARENT_SCOPE)
  set(${output_var} "${output}" PARENT_SCOPE)
endfunction()

# grove_normalise_blanks(VAR): collapses every run of blanks in VAR to one space and drops blanks
# at line starts and ends, so that a snippet may be indented or aligned differently from the
# source that compiles it.
function(grove_normalise_blanks var)
  string(REGEX REPLACE "[ \t]+" " " text "${${var}}")
  string(REGEX REPLACE "\n " "\n" text "${text}")
  string(REGEX REPLACE " \n" "\n" text "${text}")
  set(${var} "${text}" PARENT_SCOPE)
endfunction()

# grove_check_cpp_blocks(PAGE_VAR SOURCES_VAR SKIP NAME COUNT_VAR MISSING_VAR): every ```cpp block
# of the text in PAGE_VAR after the first SKIP must appear, blanks normalised, in the text in
# SOURCES_VAR (normalised already); each one that does not is a SEND_ERROR quoting it. Sets
# COUNT_VAR to the number of blocks (the skipped ones included) and MISSING_VAR to the number not
# found. NAME says which page, in the messages.
function(grove_check_cpp_blocks page_var sources_var skip name count_var missing_var)
  set(page "${${page_var}}")
  set(count 0)
  set(missing 0)
  while(TRUE)
    string(FIND "${page}" "```cpp\n" start)
    if(start EQUAL -1)
      break()
    endif()
    math(EXPR start "${start} + 7")
    string(SUBSTRING "${page}" ${start} -1 page)
    string(FIND "${page}" "\n```" stop)
    string(SUBSTRING "${page}" 0 ${stop} block)
    string(SUBSTRING "${page}" ${stop} -1 page)
    math(EXPR count "${count} + 1")
    if(count LESS_EQUAL skip)
      continue()
    endif()
    grove_normalise_blanks(block)
    string(REGEX REPLACE "^ " "" block "${block}")
    string(FIND "${${sources_var}}" "${block}" found)
    if(found EQUAL -1)
      math(EXPR missing "${missing} + 1")
      message(SEND_ERROR "${name}'s C++ block ${count} is not in any compiled source:\n${block}\n")
    endif()
  endwhile()
  set(${count_var} ${count} PARENT_SCOPE)
  set(${missing_var} ${missing} PARENT_SCOPE)
endfunction()

# grove_compiled_sources(SOURCE_DIR OUT_VAR): the text of every source file that is compiled and
# may hold a docs snippet (examples/, tests/, bench/), each followed by a separator line, blanks
# normalised, in OUT_VAR.
function(grove_compiled_sources source_dir out_var)
  file(GLOB sources ${source_dir}/examples/*.cpp ${source_dir}/examples/*.hpp
       ${source_dir}/tests/*.cpp ${source_dir}/tests/*.hpp ${source_dir}/bench/*.cpp)
  set(contents)
  foreach(source IN LISTS sources)
    file(READ ${source} text)
    string(APPEND contents "${text}\n@@@\n")
  endforeach()
  grove_normalise_blanks(contents)
  set(${out_var} "${contents}" PARENT_SCOPE)
endfunction()
