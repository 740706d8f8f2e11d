# Runs one hostile-input case of a program (see tests/hostile/README.md) and checks that it fails
# the way it should:
#   COMMAND     the command, arguments separated by |
#   EXPECT_RC   its exit status: 1 or 2 (a signal, a timeout or any other status fails the case)
#   EXPECT      a regular expression its output (stdout and stderr together) must match
#   FORBID      optional: a regular expression the output must not match (an epoch trained, say)
#   WATCH       optional: a directory whose every entry (kind, size, time, SHA-256 of the regular
#               files) must be the same after the run as before: nothing on disk changed
#   MEMORY_KIB  optional: run under `ulimit -v MEMORY_KIB`, a ceiling on virtual memory
#   TIMEOUT     optional: seconds before the run counts as a hang (default 60)
# Usage: cmake -DCOMMAND=... -DEXPECT_RC=... -DEXPECT=... [...] -P run_case.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" COMMAND "${COMMAND}")
if(NOT TIMEOUT)
  set(TIMEOUT 60)
endif()

# A listing of WATCH that never reads a special file (a FIFO would block a checksum).
function(snapshot out)
  if(NOT WATCH)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  execute_process(COMMAND find ${WATCH} -printf "%y %p %s %T@\n" OUTPUT_VARIABLE listing
                  RESULT_VARIABLE rc)
  execute_process(COMMAND find ${WATCH} -type f -exec sha256sum {} +
                  OUTPUT_VARIABLE sums RESULT_VARIABLE rc2)
  if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 0)
    message(FATAL_ERROR "cannot list ${WATCH}")
  endif()
  string(REPLACE "\n" ";" listing "${listing}")
  list(SORT listing)
  string(REPLACE "\n" ";" sums "${sums}")
  list(SORT sums)
  set(${out} "${listing}\n${sums}" PARENT_SCOPE)
endfunction()

snapshot(before)
set(shell "exec \"$@\"")
if(MEMORY_KIB)
  set(shell "ulimit -v ${MEMORY_KIB} && exec \"$@\"")
endif()
string(JOIN " " shown ${COMMAND})
execute_process(COMMAND sh -c "${shell}" sh ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
message(STATUS "${shown}\nexit status: ${rc}\n${out}${err}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the program did not exit with a status (a signal or a timeout): ${rc}")
endif()
if(NOT rc EQUAL EXPECT_RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "the output does not match: ${EXPECT}")
endif()
if(FORBID AND "${out}${err}" MATCHES "${FORBID}")
  message(FATAL_ERROR "the output matches what it must not: ${FORBID}")
endif()
if("${out}${err}" MATCHES "terminate called|what\\(\\):|Aborted|Segmentation")
  message(FATAL_ERROR "an uncaught exception or a crash")
endif()
snapshot(after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "the run changed ${WATCH}:\nbefore:\n${before}\nafter:\n${after}")
endif()
