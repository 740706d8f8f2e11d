// The main of test_parallel_mpi: Catch2 inside MPI (grove::mpi::Environment initializes and
// finalizes it). Compiled once, like catch_main.cpp, without grove's warning flags: it compiles
// Catch2's implementation.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <grove/mpi.hpp>

int main(int argc, char** argv) {
  grove::mpi::Environment env(argc, argv);
  return Catch::Session().run(argc, argv);
}
