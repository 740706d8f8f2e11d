# grove::random against jax.random on XLA:CPU: one case per function family, each covering both
# counter layouts (jax_threefry_partitionable on and off) and both float widths (jax_enable_x64 off
# and on). random_driver prints grove's values and each case's parameters; random_oracle.py calls
# jax.random with the same parameters and compares (docs/random.md, "How close to JAX").
grove_oracle_driver(random_driver SOURCES oracle/random_driver.cpp)
foreach(family bits uniform normal truncated_normal gumbel bernoulli randint permutation categorical
               split_fold_in)
  grove_oracle_test(random_${family} SCRIPT random_oracle.py
                    ARGS $<TARGET_FILE:random_driver> ${family} TIMEOUT 120)
endforeach()
