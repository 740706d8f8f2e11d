# grove's checkpoints against the real `safetensors` package (tests/oracle/files_oracle.py):
# files its numpy and flax APIs write load into grove bit for bit, grove's files load with
# safetensors.numpy.load_file bit for bit, and a flax MLP with LayerNorms saved with
# safetensors.flax loads with io::flax_dense_names(params) and gives flax's apply's outputs.
find_package(nlohmann_json 3 REQUIRED)
grove_oracle_driver(files_driver SOURCES oracle/files_driver.cpp
                    LIBRARIES nlohmann_json::nlohmann_json)
foreach(_grove_files_case safetensors_to_grove grove_to_safetensors flax_model)
  grove_oracle_test(files_${_grove_files_case} SCRIPT files_oracle.py
                    ARGS $<TARGET_FILE:files_driver> ${_grove_files_case} TIMEOUT 120)
endforeach()
