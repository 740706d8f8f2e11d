# Checks train_mlp's --save and --resume (TRAIN: the train_mlp command, arguments separated by |,
# without --layers: each run here gives its own):
#   a: --epochs 3 --save a.safetensors
#   b: --epochs 1 --save b.safetensors, then --epochs 3 --resume b.safetensors --save b.safetensors
# The two checkpoints must be byte-identical (parameters, optimizer state, key, epoch, settings
# and metrics), and so must the metrics of the three epochs. Then resuming with another --lr, or
# from a file that is not a checkpoint, must fail with a message that says so, leaving the
# checkpoint as it was.
# Usage: cmake -DTRAIN=... -DWORK_DIR=... -P resume_test.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "|" ";" TRAIN "${TRAIN}")
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(train expect_rc out_var)
  set(args ${ARGN})
  if(NOT "--layers" IN_LIST args)
    list(APPEND args --layers 784,128,10)
  endif()
  execute_process(COMMAND ${TRAIN} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  message(STATUS "train_mlp ${args}: exit ${rc}\n${out}${err}")
  if(expect_rc STREQUAL "0" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "train_mlp ${args} exited with ${rc}")
  elseif(NOT expect_rc STREQUAL "0" AND rc EQUAL 0)
    message(FATAL_ERROR "train_mlp ${args} should have failed")
  endif()
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

set(a ${WORK_DIR}/a.safetensors)
set(b ${WORK_DIR}/b.safetensors)
train(0 out --epochs 3 --save ${a} --metrics ${WORK_DIR}/a.csv)
train(0 out --epochs 1 --save ${b})
train(0 out --epochs 3 --resume ${b} --save ${b} --metrics ${WORK_DIR}/b.csv)
if(NOT out MATCHES "resumed from .* after epoch 1")
  message(FATAL_ERROR "the resumed run does not say that it resumed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${a} ${b} RESULT_VARIABLE differ)
if(differ)
  message(FATAL_ERROR "the resumed run's checkpoint differs from the uninterrupted run's")
endif()

# The metrics: the same rows but for the wall times (empty for the epoch read from the checkpoint).
foreach(which IN ITEMS a b)
  file(STRINGS ${WORK_DIR}/${which}.csv rows)
  list(LENGTH rows n)
  if(NOT n EQUAL 4)
    message(FATAL_ERROR "${which}.csv has ${n} lines, not a header and 3 epochs")
  endif()
  list(TRANSFORM rows REPLACE ",[0-9.]*$" "")
  set(rows_${which} "${rows}")
endforeach()
if(NOT rows_a STREQUAL rows_b)
  message(FATAL_ERROR "the metrics differ:\n${rows_a}\n${rows_b}")
endif()

# Other settings: refused, naming the setting; the checkpoint is untouched.
file(SHA256 ${b} before)
train(1 out --epochs 4 --lr 0.002 --resume ${b} --save ${b})
if(NOT out MATCHES "--lr: 0.001 in the checkpoint, 0.002 now")
  message(FATAL_ERROR "the refusal does not name --lr and both values")
endif()
train(1 out --epochs 4 --layers 784,64,10 --resume ${b} --save ${b})
if(NOT out MATCHES "--layers: 784-128-10 in the checkpoint, 784-64-10 now")
  message(FATAL_ERROR "the refusal does not name --layers and both values")
endif()
file(WRITE ${WORK_DIR}/not-a-checkpoint "hello")
train(1 out --epochs 4 --resume ${WORK_DIR}/not-a-checkpoint)
if(NOT out MATCHES "not-a-checkpoint")
  message(FATAL_ERROR "the error does not name the file")
endif()
file(SHA256 ${b} after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "a refused resume changed the checkpoint")
endif()
message(STATUS "train_mlp --resume: byte-identical checkpoints and metrics; mismatches refused")
