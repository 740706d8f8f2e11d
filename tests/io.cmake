# grove/io/idx.hpp: the IDX reader on small files the test writes (plain and gzip), including
# every kind of bad file. zlib is linked only here and in the targets that read IDX files: a user
# of grove::grove who does not include grove/io/idx.hpp does not need it.
find_package(ZLIB REQUIRED)
grove_test(test_io_idx test_io_idx.cpp)
target_link_libraries(test_io_idx PRIVATE ZLIB::ZLIB)
# A data directory the user may not read: permission bits do not stop root, so as root the case
# runs as uid 65534 (nobody) through setpriv (util-linux); as any other user, as that user.
execute_process(COMMAND id -u OUTPUT_VARIABLE _grove_uid OUTPUT_STRIP_TRAILING_WHITESPACE)
find_program(GROVE_SETPRIV setpriv)
if(_grove_uid STREQUAL "0" AND GROVE_SETPRIV)
  add_test(NAME test_io_idx_unreadable_directory
           COMMAND ${GROVE_SETPRIV} --reuid=65534 --regid=65534 --clear-groups
                   $<TARGET_FILE:test_io_idx> "[unprivileged]")
elseif(NOT _grove_uid STREQUAL "0")
  add_test(NAME test_io_idx_unreadable_directory COMMAND test_io_idx "[unprivileged]")
endif()
