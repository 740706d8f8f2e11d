# The inputs of the train_mlp hostile-input cases (examples/hostile.cmake): the crafted datasets
# and special files (hostile_inputs data), a checkpoint train_mlp writes after 1 epoch of 4 steps
# on the good dataset, crafted edits of it, and links for the cases that name one file twice.
# Usage: cmake -DINPUTS=hostile_inputs -DTRAIN=train_mlp -DWORK_DIR=... -P setup.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/outputs)
set(in ${WORK_DIR}/inputs)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}: ${rc}\n${out}${err}")
  endif()
endfunction()
run(${INPUTS} data ${in})
# The good dataset is also what a case gets without --data (outside inputs/, so that the cases
# that watch inputs/ also see a resumed run write only to outputs/).
file(COPY ${in}/good DESTINATION ${WORK_DIR})
file(COPY ${in}/good-gz DESTINATION ${WORK_DIR})
run(${TRAIN} --data ${in}/good --epochs 1 --batch-size 16 --layers 784,16,10 --threads 1
    --save ${in}/base.safetensors)
# adam's state is (scale_by_adam's {count, mu, nu}, scale_by_learning_rate's {count}): one file
# for each count.
run(${INPUTS} set-scalar ${in}/base.safetensors ${in}/steps.safetensors opt_state/1/count
    4611686018427387904)
run(${INPUTS} set-scalar ${in}/base.safetensors ${in}/adam-steps.safetensors opt_state/0/count 3)
run(${INPUTS} set-scalar ${in}/base.safetensors ${in}/epoch0.safetensors epoch 0)
run(${INPUTS} set-metadata ${in}/base.safetensors ${in}/overflow.safetensors train_mlp.history
    "99999999999,1,1,0.5\n")
run(${INPUTS} deep ${in}/deep.safetensors)
# For the cases whose outputs are one of their inputs, or each other: a copy of the checkpoint,
# a symbolic and a hard link to it, a directory to go through with "..", and a symbolic link to
# the good dataset's directory.
set(same ${WORK_DIR}/same)
file(MAKE_DIRECTORY ${same}/sub)
file(COPY_FILE ${in}/base.safetensors ${same}/ck.safetensors)
file(CREATE_LINK ck.safetensors ${same}/ck-symlink.safetensors SYMBOLIC)
file(CREATE_LINK ${same}/ck.safetensors ${same}/ck-hardlink.safetensors)
file(CREATE_LINK ${WORK_DIR}/good ${same}/data-link SYMBOLIC)
# A checkpoint to resume from and save onto (resume_save_same_file).
file(COPY_FILE ${in}/base.safetensors ${WORK_DIR}/outputs/continued.safetensors)
