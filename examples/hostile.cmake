# train_mlp on hostile and unlucky input: each case a ctest that runs train_mlp on crafted data,
# flags or checkpoints (made by tests/hostile/make_inputs.cpp and tests/hostile/setup.cmake) and
# checks with tests/hostile/run_case.cmake its exit status (1 or 2, never a signal or a hang), its
# message, and that nothing on disk changed. tests/hostile/README.md says how to add a case. None
# needs Fashion-MNIST: the datasets are small crafted ones.
if(NOT GROVE_BUILD_TESTS)
  return()
endif()
find_package(ZLIB REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
set(_hostile_src ${PROJECT_SOURCE_DIR}/tests/hostile)
add_executable(hostile_inputs ${_hostile_src}/make_inputs.cpp)
target_link_libraries(hostile_inputs PRIVATE grove_warnings ZLIB::ZLIB nlohmann_json::nlohmann_json)

# The train_mlp the cases run. In a sanitized build (GROVE_SANITIZE) it is a copy built with
# AddressSanitizer and UBSan, so that the cases also check for memory errors on these paths; the
# virtual-memory ceilings are dropped there (ASan reserves terabytes of address space), and
# LeakSanitizer is off under MPI (Open MPI's plugins leave allocations it cannot attribute; see
# tests/parallel.cmake).
set(_hostile_train train_mlp)
set(_hostile_asan)
if(TARGET grove_sanitize)
  set(_hostile_train train_mlp_sanitized)
  add_executable(train_mlp_sanitized train_mlp/main.cpp)
  get_target_property(_libraries train_mlp LINK_LIBRARIES)
  get_target_property(_definitions train_mlp COMPILE_DEFINITIONS)
  get_target_property(_options train_mlp COMPILE_OPTIONS)
  target_link_libraries(train_mlp_sanitized PRIVATE ${_libraries} grove_sanitize)
  if(_definitions)
    target_compile_definitions(train_mlp_sanitized PRIVATE ${_definitions})
  endif()
  if(_options)
    target_compile_options(train_mlp_sanitized PRIVATE ${_options})
  endif()
  target_link_libraries(hostile_inputs PRIVATE grove_sanitize)
  set(_hostile_asan "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1")
endif()

set(_hostile ${CMAKE_CURRENT_BINARY_DIR}/hostile)
add_test(NAME train_mlp_hostile_setup
         COMMAND ${CMAKE_COMMAND} -DINPUTS=$<TARGET_FILE:hostile_inputs>
                 -DTRAIN=$<TARGET_FILE:${_hostile_train}> -DWORK_DIR=${_hostile}
                 -P ${_hostile_src}/setup.cmake)
set_tests_properties(train_mlp_hostile_setup PROPERTIES FIXTURES_SETUP train_mlp_hostile TIMEOUT 120)

# grove_train_mlp_hostile(NAME EXIT status EXPECT regex ARGS args... [FORBID regex] [WATCH dir]
#                         [MEMORY_KIB n] [LAUNCH launcher args...] [ENV vars...]): train_mlp
# ARGS (after LAUNCH, an MPI launcher, if given) must exit with `status` saying `regex`.
# Without --data in ARGS the good crafted dataset is used; WATCH defaults to the inputs.
function(grove_train_mlp_hostile name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "EXIT;EXPECT;FORBID;WATCH;MEMORY_KIB"
                        "ARGS;LAUNCH;ENV")
  set(args ${arg_ARGS})
  if(NOT "--data" IN_LIST args)
    list(PREPEND args --data ${_hostile}/good)
  endif()
  if(NOT "--layers" IN_LIST args)
    list(APPEND args --layers 784,16,10)
  endif()
  if(NOT "--threads" IN_LIST args)
    list(APPEND args --threads 1)
  endif()
  if(NOT arg_WATCH)
    set(arg_WATCH ${_hostile}/inputs)
  endif()
  if(TARGET grove_sanitize)
    set(arg_MEMORY_KIB)
  endif()
  string(JOIN "|" command ${arg_LAUNCH} $<TARGET_FILE:${_hostile_train}> ${args})
  add_test(NAME train_mlp_hostile_${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${command}" -DEXPECT_RC=${arg_EXIT}
                   "-DEXPECT=${arg_EXPECT}" "-DFORBID=${arg_FORBID}" -DWATCH=${arg_WATCH}
                   -DMEMORY_KIB=${arg_MEMORY_KIB} -P ${_hostile_src}/run_case.cmake)
  set_tests_properties(train_mlp_hostile_${name} PROPERTIES
                       FIXTURES_REQUIRED train_mlp_hostile TIMEOUT 120 ENVIRONMENT "${arg_ENV}")
endfunction()

set(_in ${_hostile}/inputs)
set(_out ${_hostile}/outputs)
# No epoch may start in a case that must fail before training.
set(_no_epoch "epoch +1/")
# A ceiling on virtual memory for the bombs (KiB): far above a normal run of the small network,
# far below what the crafted headers claim.
set(_ceiling 1500000)

# --- crashes -------------------------------------------------------------------------------------
grove_train_mlp_hostile(zero_train EXIT 1 EXPECT "the training set has no images" FORBID ${_no_epoch}
                        ARGS --data ${_in}/zero-train)
grove_train_mlp_hostile(zero_train_raw EXIT 1 EXPECT "the training set has no images"
                        ARGS --data ${_in}/zero-train --no-standardize)
grove_train_mlp_hostile(zero_pixels EXIT 1 EXPECT "the images have no pixels"
                        ARGS --data ${_in}/zero-pixels)
grove_train_mlp_hostile(zero_pixels_raw EXIT 1 EXPECT "the images have no pixels"
                        ARGS --data ${_in}/zero-pixels --no-standardize)
grove_train_mlp_hostile(threads_100000 EXIT 2 EXPECT "train_mlp: --threads 100000: at most 1024"
                        ARGS --threads 100000)
grove_train_mlp_hostile(threads_40000 EXIT 2 EXPECT "train_mlp: --threads 40000: at most 1024"
                        ARGS --threads 40000)
grove_train_mlp_hostile(devices_100000 EXIT 2 EXPECT "train_mlp: --devices 100000: at most 1024"
                        ARGS --devices 100000 --batch-size 200000)

# --- hangs ---------------------------------------------------------------------------------------
grove_train_mlp_hostile(fifo_idx EXIT 1 EXPECT "train-images-idx3-ubyte, a FIFO, not a regular file"
                        ARGS --data ${_in}/fifo-data)
grove_train_mlp_hostile(fifo_resume EXIT 1 EXPECT "fifo, a FIFO, not a regular file"
                        ARGS --epochs 2 --resume ${_in}/fifo)

# --- silent corruption ---------------------------------------------------------------------------
grove_train_mlp_hostile(gzip_trailer_cut EXIT 1 EXPECT "the gzip stream is truncated"
                        ARGS --data ${_in}/gz-cut)
grove_train_mlp_hostile(gzip_trailing_garbage EXIT 1
                        EXPECT "7 more bytes follow that are not another gzip member"
                        ARGS --data ${_in}/gz-trailing)
# The checkpoints setup.cmake crafted from one train_mlp wrote after 1 epoch of 4 steps.
set(_resume --epochs 2 --batch-size 16 --save ${_out}/resumed.safetensors)
grove_train_mlp_hostile(resume_step_count EXIT 1
                        EXPECT "the optimizer's step count is 4611686018427387904, but 1 epochs of 4 steps make 4"
                        ARGS ${_resume} --resume ${_in}/steps.safetensors FORBID ${_no_epoch})
grove_train_mlp_hostile(resume_adam_step_count EXIT 1
                        EXPECT "the optimizer's step count is 3, but 1 epochs of 4 steps make 4"
                        ARGS ${_resume} --resume ${_in}/adam-steps.safetensors FORBID ${_no_epoch})
grove_train_mlp_hostile(resume_epoch_0 EXIT 1 EXPECT "the checkpoint is at epoch 0"
                        ARGS ${_resume} --resume ${_in}/epoch0.safetensors)
grove_train_mlp_hostile(resume_history_overflow EXIT 1
                        EXPECT "train_mlp.history has a malformed line `99999999999,"
                        ARGS ${_resume} --resume ${_in}/overflow.safetensors)
grove_train_mlp_hostile(resume_good EXIT 0 EXPECT "resumed from .* after epoch 1"
                        ARGS ${_resume} --resume ${_in}/base.safetensors WATCH ${_in})
grove_train_mlp_hostile(resume_other_optimizer EXIT 1
                        EXPECT "--clip-norm: none in the checkpoint, 1 now"
                        ARGS ${_resume} --clip-norm 1 --resume ${_in}/base.safetensors)
# The optimizer flags together: a run that trains, whose first line says what it trains with.
grove_train_mlp_hostile(optimizer_recipe EXIT 0
                        EXPECT "adamw lr 0.001 cosine to 0, warmup 2 steps, weight decay 0.01, clip norm 1"
                        ARGS --epochs 1 --batch-size 16 --optimizer adamw --weight-decay 0.01
                             --clip-norm 1 --schedule cosine --warmup-steps 2
                             --save ${_out}/recipe.safetensors)

# --- damage --------------------------------------------------------------------------------------
grove_train_mlp_hostile(save_onto_fifo EXIT 1 EXPECT "--save .*fifo: it is a special file"
                        ARGS --save ${_in}/fifo FORBID ${_no_epoch})
grove_train_mlp_hostile(metrics_onto_directory EXIT 1 EXPECT "--metrics .*a-directory: it is a directory"
                        ARGS --metrics ${_in}/a-directory FORBID ${_no_epoch})
grove_train_mlp_hostile(save_onto_directory EXIT 1 EXPECT "--save .*a-directory: it is a directory"
                        ARGS --save ${_in}/a-directory FORBID ${_no_epoch})

# --- outputs that are an input, or each other: refused before training, nothing touched ----------
# A missing file named twice (the same absolute path), an existing one through a symbolic link, a
# hard link or "..", and a dataset file, through a link to its directory.
set(_same ${_hostile}/same)
grove_train_mlp_hostile(same_save_plot EXIT 2 WATCH ${_same} FORBID ${_no_epoch}
                        EXPECT "--save .*/new.safetensors and --plot .*/new.safetensors are the same file"
                        ARGS --save ${_same}/new.safetensors --plot ${_same}/new.safetensors)
grove_train_mlp_hostile(same_metrics_plot_dotdot EXIT 2 WATCH ${_same} FORBID ${_no_epoch}
                        EXPECT "--metrics .*/m.csv and --plot .*/sub/../m.csv are the same file"
                        ARGS --metrics ${_same}/m.csv --plot ${_same}/sub/../m.csv)
grove_train_mlp_hostile(same_save_metrics_symlink EXIT 2 WATCH ${_same} FORBID ${_no_epoch}
                        EXPECT "--save .*/ck.safetensors and --metrics .*/ck-symlink.safetensors are the same file"
                        ARGS --save ${_same}/ck.safetensors --metrics ${_same}/ck-symlink.safetensors)
grove_train_mlp_hostile(same_resume_metrics EXIT 2 WATCH ${_same} FORBID ${_no_epoch}
                        EXPECT "--metrics .*/ck.safetensors is the same file as the checkpoint --resume"
                        ARGS --epochs 2 --batch-size 16 --resume ${_same}/ck.safetensors
                             --metrics ${_same}/ck.safetensors)
grove_train_mlp_hostile(same_resume_metrics_symlink EXIT 2 WATCH ${_same} FORBID ${_no_epoch}
                        EXPECT "--metrics .*/ck-symlink.safetensors is the same file as the checkpoint --resume"
                        ARGS --epochs 2 --batch-size 16 --resume ${_same}/ck.safetensors
                             --metrics ${_same}/ck-symlink.safetensors)
grove_train_mlp_hostile(same_resume_plot_hardlink_dotdot EXIT 2 WATCH ${_same} FORBID ${_no_epoch}
                        EXPECT "--plot .*/sub/../ck-hardlink.safetensors is the same file as the checkpoint --resume"
                        ARGS --epochs 2 --batch-size 16 --resume ${_same}/ck.safetensors
                             --plot ${_same}/sub/../ck-hardlink.safetensors)
grove_train_mlp_hostile(same_save_data EXIT 2 WATCH ${_hostile}/good FORBID ${_no_epoch}
                        EXPECT "--save .*/train-labels-idx1-ubyte is the same file as the dataset file"
                        ARGS --save ${_hostile}/good/train-labels-idx1-ubyte)
grove_train_mlp_hostile(same_metrics_data_symlink EXIT 2 WATCH ${_hostile}/good FORBID ${_no_epoch}
                        EXPECT "--metrics .*/data-link/t10k-images-idx3-ubyte is the same file as the dataset file"
                        ARGS --metrics ${_same}/data-link/t10k-images-idx3-ubyte)
# --save onto the checkpoint it resumes from continues the run (read first, replaced atomically
# after each epoch): allowed.
grove_train_mlp_hostile(resume_save_same_file EXIT 0 EXPECT "resumed from .* after epoch 1.*final test"
                        ARGS --epochs 2 --batch-size 16 --resume ${_out}/continued.safetensors
                             --save ${_out}/continued.safetensors)
# Outputs that only look alike are written.
grove_train_mlp_hostile(distinct_outputs EXIT 0 EXPECT "final test accuracy"
                        ARGS --epochs 1 --save ${_out}/distinct.safetensors
                             --metrics ${_out}/distinct.safetensors.csv)

# --- a failed run leaves the previous run's --metrics as it was ---------------------------------
add_test(NAME train_mlp_hostile_metrics_kept
         COMMAND ${CMAKE_COMMAND}
                 "-DTRAIN=$<TARGET_FILE:${_hostile_train}>|--data|${_hostile}/good|--layers|784,16,10|--threads|1|--epochs|1|--batch-size|64"
                 "-DFAILING=--optimizer|sgd|--lr|1e30|--lr-decay|1"
                 -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/hostile-metrics-kept
                 -P ${_hostile_src}/metrics_kept.cmake)
set_tests_properties(train_mlp_hostile_metrics_kept PROPERTIES FIXTURES_REQUIRED train_mlp_hostile
                     TIMEOUT 120 ENVIRONMENT "${_hostile_asan}")

# --- memory and time bombs -----------------------------------------------------------------------
grove_train_mlp_hostile(bomb_labels EXIT 1 MEMORY_KIB ${_ceiling}
                        EXPECT "read_idx_labels: .*train-labels-idx1-ubyte: .*the header describes 4294967295 elements"
                        ARGS --data ${_in}/bomb-labels)
grove_train_mlp_hostile(bomb_images EXIT 1 MEMORY_KIB ${_ceiling}
                        EXPECT "train-images-idx3-ubyte: the header describes .* more than the limit"
                        ARGS --data ${_in}/bomb-images)
grove_train_mlp_hostile(bomb_deep_json EXIT 1 MEMORY_KIB ${_ceiling}
                        EXPECT "grove::io::inspect: .*deep.safetensors: __metadata__ \"k\" is an object"
                        ARGS --epochs 2 --resume ${_in}/deep.safetensors)

# --- settings that lie ---------------------------------------------------------------------------
grove_train_mlp_hostile(lr_nan EXIT 2 EXPECT "train_mlp: --lr: must be a finite number, got nan"
                        ARGS --lr nan)
grove_train_mlp_hostile(lr_inf EXIT 2 EXPECT "--lr: must be a finite number" ARGS --lr inf)
grove_train_mlp_hostile(lr_decay_nan EXIT 2 EXPECT "--lr-decay: must be a finite number"
                        ARGS --lr-decay nan)
grove_train_mlp_hostile(weight_decay_nan EXIT 2 EXPECT "--weight-decay: must be a finite number"
                        ARGS --optimizer adamw --weight-decay nan)
grove_train_mlp_hostile(weight_decay_not_adamw EXIT 2
                        EXPECT "--weight-decay applies to --optimizer adamw \\(got --optimizer adam\\)"
                        ARGS --weight-decay 0.01)
grove_train_mlp_hostile(clip_norm_zero EXIT 2 EXPECT "--clip-norm" ARGS --clip-norm 0)
grove_train_mlp_hostile(schedule_unknown EXIT 2 EXPECT "--schedule" ARGS --schedule linear)
grove_train_mlp_hostile(lr_decay_not_exponential EXIT 2
                        EXPECT "--lr-decay applies to --schedule exponential \\(got --schedule cosine\\)"
                        ARGS --schedule cosine --lr-decay 0.5)
grove_train_mlp_hostile(warmup_beyond_run EXIT 2
                        EXPECT "--warmup-steps 1000000 must be fewer than the run's [0-9]+ steps"
                        FORBID ${_no_epoch} ARGS --schedule cosine --warmup-steps 1000000)
grove_train_mlp_hostile(final_loss_nan EXIT 1
                        EXPECT "the test loss is (-?nan|-?inf) after epoch 1: the loss diverged"
                        FORBID "test loss -?nan|final test accuracy"
                        ARGS --epochs 1 --batch-size 64 --optimizer sgd --lr 1e30 --lr-decay 1)
grove_train_mlp_hostile(layers_empty_field EXIT 2 EXPECT "--layers 784,,10: expected positive widths"
                        ARGS --layers 784,,10)
grove_train_mlp_hostile(layers_twice EXIT 2 EXPECT "--layers: At Most 1 required but received 2"
                        ARGS --layers 784,16,10 --layers 784,32,10)
grove_train_mlp_hostile(layers_absurd EXIT 2 MEMORY_KIB ${_ceiling} EXPECT "width 100000000000 is not in"
                        ARGS --layers 784,100000000000,10)
grove_train_mlp_hostile(layers_too_many_parameters EXIT 2 MEMORY_KIB ${_ceiling}
                        EXPECT "parameters, more than 268435456"
                        ARGS --layers 784,1000000,1000000,10)
# A model too large for memory says how large, and why it does not fit: here an allocation fails
# under the ceiling (std::bad_alloc, reported with the estimate), and a model beyond the machine's
# memory and swap (1025 copies of the parameters and adam's state, for 1024 local devices) is
# refused before anything of it is allocated.
grove_train_mlp_hostile(model_beyond_ulimit EXIT 1 MEMORY_KIB ${_ceiling} FORBID ${_no_epoch}
                        EXPECT "the MLP 784-300000-10 with adam needs about [0-9.]+ GB \\([0-9]+ MB of parameters, [0-9.]+ GB of adam's state"
                        ARGS --layers 784,300000,10)
grove_train_mlp_hostile(model_beyond_machine EXIT 1 FORBID "${_no_epoch}|MLP 784-300000-10 \\("
                        EXPECT "the MLP 784-300000-10 with adam needs about [0-9.]+ GB .*for 1024 local devices\\), more than the [0-9.]+ GB of memory"
                        ARGS --layers 784,300000,10 --devices 1024 --batch-size 1024)
# (A thread that the system refuses, to a pass's team or to --devices, is a grove::thread_error,
# which train_mlp reports with exit 1 like any grove error: tests/parallel_thread_limit.cmake
# tests both under real limits.)
grove_train_mlp_hostile(seed_negative EXIT 2 EXPECT "--seed: must be a non-negative decimal integer, got -1"
                        ARGS --seed -1)
# Integers beyond their type are refused, not clamped (CLI11 reads 2^64 as 2^64 - 1).
grove_train_mlp_hostile(seed_2_64 EXIT 2
                        EXPECT "--seed: must be at most 18446744073709551615, got 18446744073709551616"
                        ARGS --seed 18446744073709551616)
grove_train_mlp_hostile(seed_20_digits EXIT 2
                        EXPECT "--seed: must be at most 18446744073709551615, got 99999999999999999999"
                        ARGS --seed 99999999999999999999)
grove_train_mlp_hostile(seed_max EXIT 0 EXPECT "seed 18446744073709551615"
                        ARGS --epochs 1 --seed 18446744073709551615)
grove_train_mlp_hostile(warmup_steps_2_63 EXIT 2
                        EXPECT "--warmup-steps: must be at most 9223372036854775807, got 9223372036854775808"
                        ARGS --schedule cosine --warmup-steps 9223372036854775808)
grove_train_mlp_hostile(epochs_2_31 EXIT 2 EXPECT "--epochs: must be at most 2147483647, got 2147483648"
                        ARGS --epochs 2147483648)
grove_train_mlp_hostile(epochs_zero EXIT 2 EXPECT "--epochs: must be at least 1, got 0" ARGS --epochs 0)
grove_train_mlp_hostile(batch_size_hex EXIT 2 EXPECT "--batch-size: must be a non-negative decimal integer, got 0x10"
                        ARGS --batch-size 0x10)
grove_train_mlp_hostile(epochs_twice EXIT 2 EXPECT "--epochs: At Most 1 required but received 2" ARGS --epochs 1 --epochs 2)
grove_train_mlp_hostile(resume_names_batch_size EXIT 1
                        EXPECT "--batch-size: 16 in the checkpoint, 32 now"
                        ARGS --epochs 2 --batch-size 32 --resume ${_in}/base.safetensors)
grove_train_mlp_hostile(resume_names_lr_decay EXIT 1
                        EXPECT "--lr-decay: 0.90000000000000002 in the checkpoint, 0.5 now"
                        ARGS --epochs 2 --batch-size 16 --lr-decay 0.5 --resume ${_in}/base.safetensors)
grove_train_mlp_hostile(constant_pixels EXIT 1 EXPECT "all have the same pixel value \\(0.0274"
                        FORBID "diverged" ARGS --data ${_in}/constant)
grove_train_mlp_hostile(zero_test EXIT 1 EXPECT "the test set has no images" FORBID ${_no_epoch}
                        ARGS --data ${_in}/zero-test)
grove_train_mlp_hostile(data_regular_file EXIT 1
                        EXPECT "--data .*a-regular-file is not a directory \\(a regular file\\)"
                        ARGS --data ${_in}/a-regular-file)

# --- MPI: ranks that disagree on a setting -------------------------------------------------------
if(GROVE_MPI)
  # Two ranks through mpirun's MPMD syntax, each with its own arguments: A for rank 0, B for 1.
  function(grove_train_mlp_ranks_disagree name expect a b)
    set(rc 2)
    if(ARGC GREATER 4)
      set(rc ${ARGV4})
    endif()
    set(common $<TARGET_FILE:${_hostile_train}> --layers 784,16,10 --threads 1)
    string(REPLACE "," ";" a "${a}")
    string(REPLACE "," ";" b "${b}")
    if(NOT "--data" IN_LIST a)
      list(APPEND common --data ${_hostile}/good)
    endif()
    string(JOIN "|" command ${MPIEXEC_EXECUTABLE} ${GROVE_MPIEXEC_FLAGS} ${MPIEXEC_NUMPROC_FLAG} 1
           ${common} ${a} : ${MPIEXEC_NUMPROC_FLAG} 1 ${common} ${b})
    add_test(NAME train_mlp_hostile_mpi_${name}
             COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${command}" -DEXPECT_RC=${rc} "-DEXPECT=${expect}"
                     "-DFORBID=${_no_epoch}" -DWATCH=${_hostile}/inputs -DTIMEOUT=90
                     -P ${_hostile_src}/run_case.cmake)
    set_tests_properties(train_mlp_hostile_mpi_${name} PROPERTIES
                         FIXTURES_REQUIRED train_mlp_hostile TIMEOUT 120 PROCESSORS 2
                         ENVIRONMENT "${GROVE_MPI_TEST_ENV};OMP_WAIT_POLICY=PASSIVE;${_hostile_asan}")
  endfunction()
  grove_train_mlp_ranks_disagree(epochs "--epochs: rank 0 has 1, rank 1 has 2" "--epochs,1" "--epochs,2")
  grove_train_mlp_ranks_disagree(batch_size "--batch-size: rank 0 has 16, rank 1 has 32"
                                 "--batch-size,16" "--batch-size,32")
  grove_train_mlp_ranks_disagree(data "--data: rank 0 has .*good, rank 1 has .*good-gz"
                                 "--data,${_hostile}/good" "--data,${_hostile}/good-gz")
  grove_train_mlp_ranks_disagree(seed "--seed: rank 0 has 1, rank 1 has 2" "--seed,1" "--seed,2")
  grove_train_mlp_ranks_disagree(lr "--lr: rank 0 has 0.01, rank 1 has 0.02" "--lr,0.01" "--lr,0.02")
  grove_train_mlp_ranks_disagree(optimizer "--optimizer: rank 0 has sgd, rank 1 has adam"
                                 "--optimizer,sgd" "--optimizer,adam")
  grove_train_mlp_ranks_disagree(standardize "--standardize: rank 0 has yes, rank 1 has no"
                                 "--standardize" "--no-standardize")
  # A failure of one rank alone before training (its data is missing) ends all of them, status 1:
  # the others must not wait for it in their first collective.
  grove_train_mlp_ranks_disagree(one_rank_fails "the data directory .*missing does not exist"
                                 "--data,${_hostile}/good" "--data,${_hostile}/missing" 1)

  # grove_train_mlp_ranks(NAME EXIT status EXPECT regex [FORBID regex] A args... B args...): rank 0
  # runs train_mlp A, rank 1 train_mlp B (each with the good dataset, the small network and one
  # thread unless it says otherwise). A rank that cannot start (a bad flag, --help) must end both
  # within 45 s, mpirun's own timeout being minutes, with its message printed once.
  function(grove_train_mlp_ranks name)
    cmake_parse_arguments(PARSE_ARGV 1 arg "" "EXIT;EXPECT;FORBID" "A;B")
    set(sides)
    foreach(side A B)
      set(args $<TARGET_FILE:${_hostile_train}> ${arg_${side}})
      foreach(flag data layers threads)
        if(NOT "--${flag}" IN_LIST args)
          set(value ${_hostile}/good)
          if(flag STREQUAL "layers")
            set(value 784,16,10)
          elseif(flag STREQUAL "threads")
            set(value 1)
          endif()
          list(APPEND args --${flag} ${value})
        endif()
      endforeach()
      if(sides)
        list(APPEND sides :)
      endif()
      list(APPEND sides ${MPIEXEC_NUMPROC_FLAG} 1 ${args})
    endforeach()
    string(JOIN "|" command ${MPIEXEC_EXECUTABLE} ${GROVE_MPIEXEC_FLAGS} ${sides})
    set(forbid "${_no_epoch}")
    if(arg_FORBID)
      set(forbid "${_no_epoch}|${arg_FORBID}")
    endif()
    add_test(NAME train_mlp_hostile_mpi_${name}
             COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${command}" -DEXPECT_RC=${arg_EXIT}
                     "-DEXPECT=${arg_EXPECT}" "-DFORBID=${forbid}" -DWATCH=${_hostile}/inputs
                     -DTIMEOUT=45 -P ${_hostile_src}/run_case.cmake)
    set_tests_properties(train_mlp_hostile_mpi_${name} PROPERTIES
                         FIXTURES_REQUIRED train_mlp_hostile TIMEOUT 120 PROCESSORS 2
                         ENVIRONMENT "${GROVE_MPI_TEST_ENV};OMP_WAIT_POLICY=PASSIVE;${_hostile_asan}")
  endfunction()
  # A flag CLI11 refuses, one train_mlp's own checks refuse, an unknown flag, on rank 1 alone;
  # the same on rank 0 alone; the same bad flag on both (said once, without a rank); --help on
  # one rank only.
  grove_train_mlp_ranks(rank1_epochs_0 EXIT 2 A --epochs 1 B --epochs 0
                        EXPECT "train_mlp: rank 1: --epochs: must be at least 1, got 0")
  grove_train_mlp_ranks(rank1_epochs_0_rank0_says EXIT 2 A --epochs 1 B --epochs 0
                        EXPECT "train_mlp: rank 0: not training, since rank 1 could not start")
  grove_train_mlp_ranks(rank1_layers EXIT 2 A --epochs 1 B --layers 784
                        EXPECT "train_mlp: rank 1: --layers must start with 784 \\(the pixels\\) and end with 10")
  grove_train_mlp_ranks(rank1_bogus EXIT 2 A --epochs 1 B --epochs 1 --bogus
                        EXPECT "train_mlp: rank 1: The following argument was not expected: --bogus")
  grove_train_mlp_ranks(rank1_seed_2_64 EXIT 2 A --epochs 1 B --epochs 1 --seed 18446744073709551616
                        EXPECT "train_mlp: rank 1: --seed: must be at most 18446744073709551615")
  grove_train_mlp_ranks(rank1_same_file EXIT 2 A --epochs 1
                        B --epochs 1 --save ${_out}/mpi.safetensors --plot ${_out}/mpi.safetensors
                        EXPECT "train_mlp: rank 1: --save .* and --plot .* are the same file")
  grove_train_mlp_ranks(rank0_epochs_0 EXIT 2 A --epochs 0 B --epochs 1
                        EXPECT "train_mlp: rank 0: --epochs: must be at least 1, got 0")
  grove_train_mlp_ranks(both_bogus EXIT 2 A --bogus B --bogus FORBID "rank [01]:"
                        EXPECT "train_mlp: The following argument was not expected: --bogus")
  grove_train_mlp_ranks(rank1_help EXIT 2 A --epochs 1 B --help
                        EXPECT "train_mlp: rank 0: not training, since rank 1 was given --help")
endif()

# --- scripts/bench.sh --out: refused before anything is installed, configured or built --------
# A stand-in cmake first on PATH says so if bench.sh ever gets as far as configuring; WATCH shows
# that nothing was made. An existing directory bench.sh may not write in: as root, through
# setpriv as nobody (root writes anywhere); skipped where neither works.
set(_scripts ${CMAKE_CURRENT_BINARY_DIR}/hostile-scripts)
file(MAKE_DIRECTORY ${_scripts}/bin ${_scripts}/watched)
file(WRITE ${_scripts}/bin/cmake "#!/bin/sh\necho 'stand-in cmake ran' >&2\nexit 97\n")
file(CHMOD ${_scripts}/bin/cmake PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
           GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
file(WRITE ${_scripts}/watched/a-regular-file "not a directory\n")
file(MAKE_DIRECTORY ${_scripts}/watched/read-only)
file(CHMOD ${_scripts}/watched/read-only PERMISSIONS OWNER_READ OWNER_EXECUTE GROUP_READ
           GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
# grove_bench_out_hostile(NAME EXPECT regex ARGS flags... [AS prefix...]): `prefix bash
# scripts/bench.sh flags` must exit 2 saying `regex`, having run nothing and changed nothing.
function(grove_bench_out_hostile name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "EXPECT" "ARGS;AS")
  string(JOIN "|" command ${arg_AS} bash ${PROJECT_SOURCE_DIR}/scripts/bench.sh ${arg_ARGS})
  add_test(NAME bench_sh_hostile_${name}
           COMMAND ${CMAKE_COMMAND} "-DCOMMAND=${command}" -DEXPECT_RC=2 "-DEXPECT=${arg_EXPECT}"
                   "-DFORBID=stand-in cmake|== grove benchmarks|grove: installing"
                   -DWATCH=${_scripts}/watched -P ${_hostile_src}/run_case.cmake)
  set_tests_properties(bench_sh_hostile_${name} PROPERTIES TIMEOUT 60
                       ENVIRONMENT_MODIFICATION "PATH=path_list_prepend:${_scripts}/bin")
endfunction()
grove_bench_out_hostile(out_regular_file EXPECT "bench.sh: --out .*/a-regular-file: not a directory"
                        ARGS --quick --out ${_scripts}/watched/a-regular-file)
grove_bench_out_hostile(out_under_regular_file
                        EXPECT "bench.sh: --out .*/a-regular-file/results: cannot create it \\(Not a directory\\)"
                        ARGS --out ${_scripts}/watched/a-regular-file/results)
grove_bench_out_hostile(out_cannot_create EXPECT "bench.sh: --out /proc/grove-bench-results: cannot create it"
                        ARGS --out /proc/grove-bench-results)
execute_process(COMMAND id -u OUTPUT_VARIABLE _uid OUTPUT_STRIP_TRAILING_WHITESPACE)
find_program(GROVE_SETPRIV setpriv)
if(NOT _uid STREQUAL "0")
  grove_bench_out_hostile(out_read_only EXPECT "bench.sh: --out .*/read-only: cannot write in it"
                          ARGS --out ${_scripts}/watched/read-only)
elseif(GROVE_SETPRIV)
  grove_bench_out_hostile(out_read_only EXPECT "bench.sh: --out .*/read-only: cannot write in it"
                          ARGS --out ${_scripts}/watched/read-only
                          AS ${GROVE_SETPRIV} --reuid=65534 --regid=65534 --clear-groups)
endif()
