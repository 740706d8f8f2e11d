# GROVE_PYTHON, the Python 3 with numpy that the interoperability tests run (checkpoints, .npy and
# .npz files): the cache entry when set, else found here by whichever suite includes this first.
# The interpreter: GROVE_PYTHON if given, else the first of python3 on PATH and /usr/bin/python3
# that has numpy (a pyenv or venv python on PATH often lacks Debian's python3-numpy).
if(NOT GROVE_PYTHON)
  find_program(_grove_path_python NAMES python3)
  set(_grove_candidates ${_grove_path_python} /usr/bin/python3)
  foreach(candidate IN LISTS _grove_candidates)
    if(candidate AND EXISTS ${candidate})
      execute_process(COMMAND ${candidate} -c "import numpy" RESULT_VARIABLE _grove_rc OUTPUT_QUIET ERROR_QUIET)
      if(_grove_rc EQUAL 0)
        set(GROVE_PYTHON ${candidate} CACHE FILEPATH "Python 3 with numpy, for the interoperability tests")
        break()
      endif()
      if(NOT _grove_first_python)
        set(_grove_first_python ${candidate})
      endif()
    endif()
  endforeach()
  if(NOT GROVE_PYTHON)
    # No numpy anywhere: the tests run and report themselves skipped.
    set(GROVE_PYTHON ${_grove_first_python})
  endif()
endif()
