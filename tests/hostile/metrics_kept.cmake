# A run that fails must leave the previous run's --metrics file as it was: a good run writes
# the file, then a run with the same --metrics that diverges in its first epoch (exit 1) must
# leave it byte for byte, with no temporary file beside it.
#   TRAIN     train_mlp and the arguments both runs share, separated by |
#   FAILING   the arguments that make the second run fail, separated by |
#   WORK_DIR  a directory of its own (emptied first)
# Usage: cmake -DTRAIN=... -DFAILING=... -DWORK_DIR=... -P metrics_kept.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" TRAIN "${TRAIN}")
string(REPLACE "|" ";" FAILING "${FAILING}")
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
set(metrics ${WORK_DIR}/metrics.csv)

execute_process(COMMAND ${TRAIN} --metrics ${metrics} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0 OR NOT EXISTS ${metrics})
  message(FATAL_ERROR "the good run: exit status ${rc}\n${out}${err}")
endif()
file(READ ${metrics} before)
if(NOT before MATCHES "^epoch,train_loss,[^\n]*\n1,")
  message(FATAL_ERROR "the good run wrote no epoch to ${metrics}:\n${before}")
endif()

execute_process(COMMAND ${TRAIN} --metrics ${metrics} ${FAILING} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message(STATUS "the failing run: exit status ${rc}\n${out}${err}")
if(NOT rc EQUAL 1)
  message(FATAL_ERROR "the failing run: exit status ${rc}, expected 1")
endif()
file(READ ${metrics} after)
if(NOT after STREQUAL before)
  message(FATAL_ERROR "the failing run changed ${metrics}:\nbefore:\n${before}\nafter:\n${after}")
endif()
file(GLOB left RELATIVE ${WORK_DIR} ${WORK_DIR}/*)
if(NOT left STREQUAL "metrics.csv")
  message(FATAL_ERROR "files left in ${WORK_DIR}: ${left}")
endif()
