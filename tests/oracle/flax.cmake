# grove::nn against flax and jax.value_and_grad (tests/oracle/flax_oracle.py): each case runs the
# driver in float32 (JAX's default precision) and again, in a process of its own with
# jax_enable_x64, in float64.
if(OpenMP_CXX_FOUND)
  set(_grove_flax_openmp OpenMP::OpenMP_CXX)  # the model's passes on a team of two, too
endif()
grove_oracle_driver(flax_driver SOURCES oracle/flax_driver.cpp LIBRARIES ${_grove_flax_openmp})
foreach(_grove_flax_case init layer_norm dropout model_grads)
  grove_oracle_test(flax_${_grove_flax_case} SCRIPT flax_oracle.py
                    ARGS $<TARGET_FILE:flax_driver> ${_grove_flax_case} TIMEOUT 120)
endforeach()
# libgomp's waiting threads must not spin beside the other tests (as in grove_threaded_test).
set_property(TEST oracle_flax_model_grads APPEND PROPERTY ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE")
