# grove::optim (grove/optim.hpp): schedules and transformations against optax's formulas
# evaluated in the tests, wrappers, the optimizers, errors; thread-count independence on the MLP's
# parameters; a separate executable that counts heap allocations in steps (it replaces malloc and
# operator new); torch.optim's numbers (a Python script, skipped without PyTorch); and the program
# of docs/optim.md, compiled, run and its output compared.
#
# The tests are compiled with OpenMP (grove_threaded_test), so that the threaded passes are the
# ones tested.
grove_threaded_test(test_optim test_optim_schedule.cpp test_optim_transform.cpp
                    test_optim_wrappers.cpp test_optim_nn.cpp)
grove_threaded_test(test_optim_alloc test_optim_alloc.cpp)

if(NOT GROVE_SANITIZE)
  # --- torch.optim's numbers: the driver prints grove's trajectories, the script compares ---------
  add_executable(optim_torch_driver optim_torch_driver.cpp)
  target_link_libraries(optim_torch_driver PRIVATE grove::grove grove_warnings)
  # Debian's python3-torch is installed for /usr/bin/python3; prefer it when it has torch.
  set(_grove_optim_python ${GROVE_PYTHON})
  if(EXISTS /usr/bin/python3)
    execute_process(COMMAND /usr/bin/python3 -c "import torch" RESULT_VARIABLE _grove_rc
                    OUTPUT_QUIET ERROR_QUIET)
    if(_grove_rc EQUAL 0)
      set(_grove_optim_python /usr/bin/python3)
    endif()
  endif()
  if(_grove_optim_python)
    add_test(NAME optim_torch
             COMMAND ${_grove_optim_python} ${CMAKE_CURRENT_SOURCE_DIR}/optim_torch.py
                     $<TARGET_FILE:optim_torch_driver>)
    set_tests_properties(optim_torch PROPERTIES SKIP_RETURN_CODE 77)
  else()
    message(STATUS "grove: no python3 found; the torch.optim comparison is not added")
  endif()
endif()

# --- the program of docs/optim.md: compiled, run, and its output compared ------------------------
grove_doc_program(TARGET optim_snippet TEST docs_optim_program_output DOC docs/optim.md)

