# grove::data (grove/data.hpp): datasets, epochs of batches (order, resume, shards, prefetch,
# allocations), the transforms, and the CSV reader (plain and gzip, every refusal). The suite
# links zlib for read_csv_gz.
grove_threaded_test(test_data test_data.cpp test_data_csv.cpp)
target_link_libraries(test_data PRIVATE grove::idx)

# docs/data.md: its program compiled, run and its output compared; its other C++ blocks are in
# the examples.
grove_doc_program(TARGET data_snippet TEST docs_data_program_output DOC docs/data.md
                  SNIPPETS_TEST docs_data_snippets)

# --- libFuzzer (optional): cmake -DCMAKE_CXX_COMPILER=clang++ -DGROVE_FUZZ=ON ----------------------
if(GROVE_FUZZ)
  add_executable(fuzz_csv fuzz_csv.cpp)
  target_link_libraries(fuzz_csv PRIVATE grove::grove)
  target_compile_options(fuzz_csv PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all)
  target_link_options(fuzz_csv PRIVATE -fsanitize=fuzzer,address,undefined)
  add_test(NAME csv_fuzz_smoke COMMAND fuzz_csv -runs=50000 -seed=1 -max_len=512)
endif()

# grove/data/safetensors.hpp: datasets from safetensors files, through the checkpoint reader
# (nlohmann-json).
if(TARGET grove::checkpoint)
  grove_test(test_data_safetensors test_data_safetensors.cpp)
  target_link_libraries(test_data_safetensors PRIVATE grove::checkpoint)
endif()
