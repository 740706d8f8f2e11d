# train_mlp: the MLP on Fashion-MNIST (grove/nn.hpp, grove/io/idx.hpp, grove/io/checkpoint.hpp,
# grove/parallel.hpp and, under mpirun, grove/mpi.hpp). It needs CLI11 (Debian: libcli11-dev),
# zlib (zlib1g-dev), nlohmann-json for its checkpoints (nlohmann-json3-dev), OpenMP for its threads
# and, with GROVE_MPI (ON by default), MPI (libopenmpi-dev openmpi-bin); with -DGROVE_MPI=OFF it
# is built without MPI and still has --devices. grove::grove itself needs none of them.
find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND OR NOT TARGET grove::idx OR NOT TARGET grove::checkpoint)
  message(STATUS "grove: skipped train_mlp and regression (they need CLI11, zlib and nlohmann-json; "
                 "Debian: libcli11-dev zlib1g-dev nlohmann-json3-dev)")
  return()
endif()
grove_example(train_mlp train_mlp/main.cpp)
target_link_libraries(train_mlp PRIVATE CLI11::CLI11 grove::idx grove::checkpoint)
grove_nn_target(train_mlp)
if(GROVE_MPI)
  target_link_libraries(train_mlp PRIVATE MPI::MPI_CXX)
  target_compile_definitions(train_mlp PRIVATE GROVE_TRAIN_MLP_MPI=1)
endif()
# Hostile and unlucky input, on small crafted datasets (no Fashion-MNIST needed).
include(hostile.cmake)

# regression: a small MLP fitted to the diabetes data that Debian's python3-sklearn ships (mse).
grove_example(regression regression.cpp)
target_link_libraries(regression PRIVATE CLI11::CLI11 grove::idx)
grove_nn_target(regression)
set(_grove_diabetes /usr/lib/python3/dist-packages/sklearn/datasets/data/diabetes_target.csv.gz)
if(GROVE_BUILD_TESTS AND EXISTS ${_grove_diabetes})
  # The default fit must clearly beat predicting the mean (R^2 >= 0.3; it reaches 0.55).
  add_test(NAME regression_fits COMMAND regression)
  set_tests_properties(regression_fits PROPERTIES PASS_REGULAR_EXPRESSION "R\\^2 0\\.[3-9]")
endif()

# tabular: a classifier on a CSV file (by default the affairs survey that Debian's
# python3-statsmodels ships), its data path all grove::data. python3-statsmodels is in
# scripts/packages.txt, so a missing file fails the test rather than skipping it.
grove_example(tabular tabular.cpp)
target_link_libraries(tabular PRIVATE CLI11::CLI11)
grove_nn_target(tabular)
if(GROVE_BUILD_TESTS)
  # The default fit must beat always answering the majority class (66.3% of the test set; it
  # reaches 71-72%), with and without prefetching.
  add_test(NAME tabular_fits COMMAND tabular)
  add_test(NAME tabular_fits_prefetch COMMAND tabular --prefetch)
  set_tests_properties(tabular_fits tabular_fits_prefetch PROPERTIES PASS_REGULAR_EXPRESSION
                       "test accuracy (6[89]|7[0-9])\\.[0-9]+% \\(always the majority class: 66\\.30%\\)")
endif()

# --- tests of train_mlp itself, with the tests, when Fashion-MNIST is installed -----------------
set(_grove_fmnist /usr/share/datasets/fashion-mnist)
if(NOT GROVE_BUILD_TESTS OR NOT EXISTS ${_grove_fmnist})
  return()
endif()
# A small network and one or a few epochs: seconds each.
set(_grove_train "$<TARGET_FILE:train_mlp>|--data|${_grove_fmnist}|--batch-size|1000")
set(_grove_args "${_grove_train}|--layers|784,128,10")

# Data parallelism: one epoch on 2 local devices, and on 2 MPI processes, gives the metrics of one
# device (to 1e-4: the gradients are summed in another order). COMMAND: the other run, arguments
# separated by |; EXPECT: what its output must say; ENV: its environment (a list, may be empty).
set(_grove_one "${_grove_args}|--epochs|1|--devices|1|--threads|1")
function(grove_train_mlp_like_one_device name command expect env)
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND_A=${_grove_one}" "-DCOMMAND_B=${command}"
                   "-DEXPECT_B=${expect}" -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/${name}
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/compare_metrics.cmake)
  set_tests_properties(${name} PROPERTIES TIMEOUT 300 PROCESSORS 2 ENVIRONMENT "${env}")
endfunction()
grove_train_mlp_like_one_device(train_mlp_devices
  "${_grove_args}|--epochs|1|--devices|2|--threads|2" "2 local devices of 1 thread" "")
if(GROVE_MPI)
  string(JOIN "|" _grove_mpiexec ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2
         ${GROVE_MPIEXEC_FLAGS})
  grove_train_mlp_like_one_device(train_mlp_mpi
    "${_grove_mpiexec}|${_grove_args}|--epochs|1|--threads|1" "2 MPI ranks of 1 thread"
    "${GROVE_MPI_TEST_ENV}")
  # Processes × local devices (grove::mpi::GlobalDevice): 2 ranks of 2 devices, one group of 4.
  grove_train_mlp_like_one_device(train_mlp_mpi_devices
    "${_grove_mpiexec}|${_grove_args}|--epochs|1|--devices|2|--threads|2"
    "2 MPI ranks of 2 local devices of 1 thread" "${GROVE_MPI_TEST_ENV}")
  # Multi-host on one machine (examples/multihost_test.sh, MODE train or sigkill): the 2 ranks in
  # two network namespaces joined by a veth pair, over TCP, train exactly as on one host; a rank
  # killed with SIGKILL ends the run within a bound, saying so. Namespaces are named per run and
  # their addresses exist only inside them, so no RUN_SERIAL; where they cannot be made (no root,
  # no iproute2) the tests say SKIPPED.
  string(REPLACE "|" ";" _grove_multihost "${_grove_args}|--threads|1")
  function(grove_train_mlp_multihost name mode)
    add_test(NAME ${name}
             COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/multihost_test.sh ${mode}
                     ${CMAKE_CURRENT_BINARY_DIR}/${name} ${MPIEXEC_EXECUTABLE}
                     ${GROVE_MPIEXEC_FLAGS} -- ${_grove_multihost})
    set_tests_properties(${name} PROPERTIES TIMEOUT 300 PROCESSORS 2
                         SKIP_REGULAR_EXPRESSION "SKIPPED:" ENVIRONMENT "${GROVE_MPI_TEST_ENV}")
  endfunction()
  grove_train_mlp_multihost(train_mlp_multihost train)
  grove_train_mlp_multihost(train_mlp_multihost_sigkill sigkill)
endif()

# The model flags: a layer-normed, residual gelu network with dropout trains (one epoch), and a
# --residual with unequal hidden widths is a usage error.
add_test(NAME train_mlp_model_flags
         COMMAND train_mlp --data ${_grove_fmnist} --batch-size 1000 --layers 784,64,64,64,10
                 --epochs 1 --threads 1 --activation gelu --layer-norm --residual --dropout 0.1)
set_tests_properties(train_mlp_model_flags PROPERTIES TIMEOUT 300 PASS_REGULAR_EXPRESSION
  "784-64-64-64-10 \\(gelu, layer norm, residual, dropout 0.1\\).*test accuracy [7-9][0-9]\\.")
add_test(NAME train_mlp_residual_widths
         COMMAND train_mlp --data ${_grove_fmnist} --layers 784,64,32,10 --residual)
set_tests_properties(train_mlp_residual_widths PROPERTIES WILL_FAIL TRUE)

# --save / --resume: 3 epochs in one go, and 1 epoch then 2 more resumed from its checkpoint, end
# with byte-identical checkpoints; a resume with other settings is refused.
add_test(NAME train_mlp_resume
         COMMAND ${CMAKE_COMMAND} "-DTRAIN=${_grove_train}|--threads|1"
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/train_mlp_resume
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/resume_test.cmake)
set_tests_properties(train_mlp_resume PROPERTIES TIMEOUT 300)
