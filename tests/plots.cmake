# The pictures and the benchmark report (tests/plot_test.py): plot_training.py and
# bench_report.py render small PNGs from tiny metrics and benchmark JSON (checked for a valid PNG
# of a sane size), the report's ratios against hand-computed ones, and hostile output paths (a
# directory, /dev/null, a missing directory, a FIFO, a dangling link) refused with exit 1 or 2 and
# nothing changed. Debian's /usr/bin/python3 runs them (python3-matplotlib is installed for it);
# the cases that draw are skipped (77) where matplotlib is missing, the others need only Python.
# train_mlp --plot is tested when train_mlp is built (its target is defined later, in examples/,
# so those tests are added at the end of the top-level directory).
# Python only: the normal build runs them; the sanitizer build has nothing of its own to add.
if(GROVE_SANITIZE)
  return()
endif()
find_program(GROVE_DEBIAN_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(NOT GROVE_DEBIAN_PYTHON3)
  message(STATUS "grove: no /usr/bin/python3; the plot tests are not added")
  return()
endif()
set(_grove_plot_test ${PROJECT_SOURCE_DIR}/tests/plot_test.py)
foreach(_grove_case IN ITEMS training training_hostile bench bench_hostile)
  add_test(NAME plot_${_grove_case}
           COMMAND ${GROVE_DEBIAN_PYTHON3} ${_grove_plot_test} ${_grove_case}
                   ${CMAKE_CURRENT_BINARY_DIR}/plot_${_grove_case})
  set_tests_properties(plot_${_grove_case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()

function(_grove_train_mlp_plot_tests)
  set(_grove_plot_test ${PROJECT_SOURCE_DIR}/tests/plot_test.py)  # run at the top level
  if(NOT TARGET train_mlp)
    return()
  endif()
  add_test(NAME plot_train_mlp_hostile
           COMMAND ${GROVE_DEBIAN_PYTHON3} ${_grove_plot_test} train_mlp_hostile
                   ${PROJECT_BINARY_DIR}/tests/plot_train_mlp_hostile $<TARGET_FILE:train_mlp>)
  set_tests_properties(plot_train_mlp_hostile PROPERTIES TIMEOUT 300)
  set(_grove_fmnist /usr/share/datasets/fashion-mnist)
  if(EXISTS ${_grove_fmnist})
    add_test(NAME plot_train_mlp
             COMMAND ${GROVE_DEBIAN_PYTHON3} ${_grove_plot_test} train_mlp_plot
                     ${PROJECT_BINARY_DIR}/tests/plot_train_mlp $<TARGET_FILE:train_mlp>
                     ${_grove_fmnist})
    set_tests_properties(plot_train_mlp PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  endif()
endfunction()
cmake_language(DEFER DIRECTORY ${PROJECT_SOURCE_DIR} CALL _grove_train_mlp_plot_tests)
