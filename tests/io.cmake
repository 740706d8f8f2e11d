# grove/io/idx.hpp: the IDX reader on small files the test writes (plain and gzip), including
# every kind of bad file. zlib is linked only here and in the targets that read IDX files: a user
# of grove::grove who does not include grove/io/idx.hpp does not need it.
find_package(ZLIB REQUIRED)
grove_test(test_idx test_idx.cpp)
target_link_libraries(test_idx PRIVATE ZLIB::ZLIB)
