# grove::optim against optax (tests/oracle/optax_oracle.py): every transformation, optimizer,
# wrapper and schedule of grove/optim.hpp, 50 steps on random gradients in float32 and float64,
# through update + apply_updates and through the fused step, and the schedules' values.
grove_oracle_driver(optax_driver SOURCES oracle/optax_driver.cpp)
foreach(group transforms aliases wrappers schedules)
  grove_oracle_test(optax_${group} SCRIPT optax_oracle.py ARGS $<TARGET_FILE:optax_driver> ${group})
endforeach()
