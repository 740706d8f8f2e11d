# Runs tests/test_parallel_thread_limit.cpp under a real limit on threads and checks that
# LocalDevices (MODE devices) or a threaded pass's team (MODE team) refuses with
# grove::thread_error, within TIMEOUT seconds (a hang fails):
#   PROGRAM  the test program
#   LIMIT    processes: `ulimit -u 40` as an unprivileged user (as root, where RLIMIT_NPROC does not
#            hold, through `setpriv` as uid 65534; skipped without setpriv), other processes of
#            that user count too;
#            address_space: `ulimit -v` of 400 MB, which 200 threads' 8 MB stacks do not fit in
# Usage: cmake -DPROGRAM=... -DLIMIT=processes|address_space [-DMODE=devices|team]
#        -P parallel_thread_limit.cmake
cmake_minimum_required(VERSION 3.25)
set(TIMEOUT 60)
set(devices 200)
if(LIMIT STREQUAL "processes")
  set(shell "ulimit -u 40 && exec \"$@\"")
  set(launch)
  execute_process(COMMAND id -u OUTPUT_VARIABLE uid OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(uid STREQUAL "0")
    find_program(SETPRIV setpriv)
    if(NOT SETPRIV)
      message(STATUS "SKIPPED: as root RLIMIT_NPROC does not hold, and setpriv (util-linux) is "
                     "missing")
      return()
    endif()
    set(launch ${SETPRIV} --reuid=65534 --regid=65534 --clear-groups)
    execute_process(COMMAND ${launch} test -x ${PROGRAM} RESULT_VARIABLE readable)
    if(NOT readable EQUAL 0)
      message(STATUS "SKIPPED: uid 65534 cannot run ${PROGRAM} (a directory above it is closed)")
      return()
    endif()
  endif()
elseif(LIMIT STREQUAL "address_space")
  set(shell "ulimit -v 400000 && exec \"$@\"")
  set(launch)
else()
  message(FATAL_ERROR "LIMIT must be processes or address_space, not '${LIMIT}'")
endif()
# (bash: POSIX sh's ulimit has only -f, and dash's no -u)
find_program(BASH bash REQUIRED)
if(NOT MODE)
  set(MODE devices)
endif()
execute_process(COMMAND ${launch} ${BASH} -c "${shell}" bash ${PROGRAM} ${devices} ${MODE}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT ${TIMEOUT})
message(STATUS "${LIMIT}: exit status ${rc}\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "expected a thread_error and status 0 (a hang shows as a timeout)")
endif()
if(MODE STREQUAL "team")
  string(CONCAT expect "^grove: a team of [0-9]+ threads \\(OMP_NUM_THREADS, "
         "omp_set_num_threads or Eigen::setNbThreads\\) could start only [0-9]+ of them "
         "\\(.*RLIMIT_NPROC.*RLIMIT_AS.*\\)[;] use fewer threads or raise the limit: Resource "
         "temporarily unavailable")
else()
  string(CONCAT expect "^grove::parallel::LocalDevices: ${devices} devices need ${devices} "
         "threads, and the operating system refused to start more than [0-9]+ \\(.*RLIMIT_NPROC"
         ".*RLIMIT_AS.*\\)[;] ask for fewer devices or raise the limit: Resource temporarily "
         "unavailable")
endif()
if(NOT out MATCHES "${expect}")
  message(FATAL_ERROR "the message does not match: ${expect}")
endif()
