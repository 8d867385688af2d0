# Checkpoints (executor/checkpoint.c) and the train_mlp example's command line.
# Included from test/CMakeLists.txt.

pebble_test(test_checkpoint test_checkpoint.c)
# a version-1 checkpoint of the old library, which must still load
target_compile_definitions(test_checkpoint PRIVATE PBL_TEST_DATA="${CMAKE_CURRENT_SOURCE_DIR}/data")

# train_mlp's --plot picture on runs that go wrong (huge and non-finite losses): numbers for
# every coordinate, short tick labels (examples/plot_svg.c, compiled in).
pebble_test(test_plot_svg test_plot_svg.c ${PROJECT_SOURCE_DIR}/examples/plot_svg.c)

# The script makes its own tiny IDX data sets, so it needs no installed data set.
if(TARGET train_mlp)
  # with the pebble program, whose command-line convention train_mlp's must match
  add_test(NAME train_mlp_cli
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_mlp_cli.sh $<TARGET_FILE:train_mlp>
                   $<$<TARGET_EXISTS:pebble_cli>:$<TARGET_FILE:pebble_cli>>)
  set_tests_properties(train_mlp_cli PROPERTIES
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1" TIMEOUT 300)
endif()

# train_mlp --backend cuda on the host CUDA emulator against the CPU, within a tolerance
# (train_mlp_cuda.sh): a Fashion-MNIST subset where installed, else synthetic images; about
# 10 s plain. Skipped (77) where the emulator module is not built.
if(TARGET train_mlp)
  add_test(NAME train_mlp_cuda
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train_mlp_cuda.sh $<TARGET_FILE:train_mlp>
                   $<$<TARGET_EXISTS:pebble_cuda_emu>:$<TARGET_FILE:pebble_cuda_emu>>)
  set_tests_properties(train_mlp_cuda PROPERTIES SKIP_RETURN_CODE 77 LABELS numerics
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1" TIMEOUT 300)
endif()
