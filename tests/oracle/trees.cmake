# grove's tree core against jax.tree_util and optree on random trees: trees_driver.cpp fills 13
# families of C++ tree types from a seeded generator (770 trees each: 10,010 trees, some 5,000
# distinct structures) and prints each tree with grove's answers; trees_oracle.py rebuilds every
# tree in Python and compares leaves, TreeDef text, counts, key paths, tree_map over 2 and 3 trees,
# flatten_up_to, broadcast_prefix and structure-mismatch errors.
grove_oracle_driver(trees_driver SOURCES oracle/trees_driver.cpp)
grove_oracle_test(trees_vs_jax_optree SCRIPT trees_oracle.py
                  ARGS $<TARGET_FILE:trees_driver> 770 1 TIMEOUT 300)
