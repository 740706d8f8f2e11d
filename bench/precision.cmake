# bench_precision: bf16 mixed precision against float32 on the MLP step's products, grove's next to
# oneDNN's matmul in the same run, and the register-only peaks of vdpbf16ps and the f32 FMA (see
# bench_precision.cpp). oneDNN is this benchmark's baseline only, never a dependency of grove
# (Debian: libdnnl-dev). Without it bench_precision is left out, and configuring says so.
#
# Found by its header and library, not find_package(dnnl): Debian's dnnl-config.cmake requires
# the OpenCL development files (its GPU runtime), which libdnnl-dev only recommends and which
# scripts/ensure-packages.sh (--no-install-recommends) leaves out; the CPU engine used here needs
# neither them nor their headers.
find_path(GROVE_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp)
find_library(GROVE_DNNL_LIBRARY dnnl)
if(GROVE_DNNL_INCLUDE_DIR AND GROVE_DNNL_LIBRARY)
  grove_benchmark(bench_precision ${CMAKE_CURRENT_LIST_DIR}/bench_precision.cpp)
  grove_nn_target(bench_precision)
  target_include_directories(bench_precision SYSTEM PRIVATE ${GROVE_DNNL_INCLUDE_DIR})
  target_link_libraries(bench_precision PRIVATE ${GROVE_DNNL_LIBRARY})
else()
  set(_grove_skipped ${_grove_skipped} "bench_precision (oneDNN not found, Debian: libdnnl-dev)"
      PARENT_SCOPE)
endif()
