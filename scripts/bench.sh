#!/usr/bin/env bash
# Runs grove's benchmarks on a fresh Debian 12 machine and prints one table per family with
# grove's figure, the baseline's and the ratio, all measured in this run: tree ops vs a
# hand-written loop and vs torch.utils._pytree, random numbers vs the standard library, the MLP
# step vs its bare GEMMs and vs PyTorch, the pytree allreduce vs a bare MPI_Allreduce (2 ranks),
# bf16 mixed precision: the step's products in bf16 and f32, grove's vs oneDNN's matmul (oneDNN
# on the widest instruction set it has, AMX included; on a CPU with AVX-512 the f32 products once
# more with both held to AVX2), the vdpbf16ps and f32 FMA peaks, PyTorch's autocast step vs its
# f32 step; the MLP step and the main job in JAX (jax.jit, optax; the test oracles' pinned
# environment, scripts/oracle-env.sh, left out with GROVE_OFFLINE=1).
# Installs what is missing (scripts/packages.txt), builds the benchmarks (Release, build/bench),
# keeps the benchmarks' JSON and writes the tables as CSV (one file per family).
#
# Usage: scripts/bench.sh [--quick] [--build-dir DIR] [--out DIR] [--plot DIR]
#   --quick          a short run (one iteration or so of each case, few sizes, one round against
#                    PyTorch): it checks that the whole chain still works; its figures are rough
#   --build-dir DIR  use this configured CMake build directory (e.g. scripts/test.sh's
#                    build/release) instead of configuring build/bench: benchmarks are switched on
#                    in it (GROVE_BUILD_BENCHMARKS=ON, the rest of its cache kept) and only the
#                    benchmark programs are built, so that CI compiles no second tree
#   --out DIR        where the JSON, the CSV and the logs go (default: BUILD_DIR/bench-results)
#   --plot DIR       also draw one bar chart of the ratios per family, DIR/FAMILY.png
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '/^# Usage:/,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
die() { echo "bench.sh: $2" >&2; exit "$1"; }

command="scripts/bench.sh${*:+ $*}"
quick=0 build="" out="" plot=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --build-dir | --out | --plot)
      [ $# -ge 2 ] && [ -n "$2" ] || die 2 "$1 needs a directory"
      case "$1" in --build-dir) build=$2 ;; --out) out=$2 ;; --plot) plot=$2 ;; esac
      shift ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die 2 "unknown argument: $1" ;;
  esac
  shift
done
if [ -n "$plot" ]; then
  [ -e "$plot" ] && [ ! -d "$plot" ] && die 2 "--plot $plot: not a directory"
  [ -d "$plot" ] || [ -d "$(dirname "$plot")" ] ||
    die 2 "--plot $plot: its parent directory $(dirname "$plot") does not exist"
fi
if [ -n "$build" ] && [ ! -f "$build/CMakeCache.txt" ]; then
  die 2 "--build-dir $build: not a configured CMake build directory (leave --build-dir out and bench.sh configures build/bench)"
fi
# --out is made (and a file written in it) now, not after minutes of building: a regular file, a
# directory that cannot be made or one that cannot be written in is refused before anything runs.
if [ -n "$out" ]; then
  [ -e "$out" ] && [ ! -d "$out" ] && die 2 "--out $out: not a directory"
  what="create it"
  [ -d "$out" ] && what="write in it"
  err=$(mkdir -p "$out/logs" 2>&1) || die 2 "--out $out: cannot $what (${err##*: })"
  probe=$(mktemp "$out/logs/.bench-write-test.XXXXXX" 2>&1) ||
    die 2 "--out $out: cannot write in it (${probe##*: })"
  rm -f "$probe"
fi

scripts/ensure-packages.sh $(grep -v '^#' scripts/packages.txt)
# Old OpenBLAS builds needed these on some of these machines; OpenBLAS chooses better by itself.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
py=/usr/bin/python3  # Debian's, which has python3-torch and python3-matplotlib

if [ -z "$build" ]; then
  build=build/bench
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGROVE_BUILD_TESTS=OFF \
    -DGROVE_BUILD_EXAMPLES=ON -DGROVE_BUILD_BENCHMARKS=ON >/dev/null
else
  cmake -S . -B "$build" -DGROVE_BUILD_BENCHMARKS=ON >/dev/null
fi
type=$(sed -n 's/^CMAKE_BUILD_TYPE:[A-Z]*=//p' "$build/CMakeCache.txt")
if [ "$type" != Release ]; then
  echo "bench.sh: warning: $build is a ${type:-no-type} build, not Release: its figures mean little" >&2
fi
# bench_precision exists where configuring found oneDNN (bench/precision.cmake); its package is
# in scripts/packages.txt, so only a build directory configured without it lacks it.
targets=(bench_tree bench_random bench_nn bench_parallel bench_data)
# The main job against JAX's runs train_mlp (an example; only that one is built).
main_job=0
if grep -q '^GROVE_BUILD_EXAMPLES:BOOL=ON' "$build/CMakeCache.txt"; then
  targets+=(train_mlp)
  main_job=1
fi
precision=0
if grep -q '^GROVE_DNNL_LIBRARY:FILEPATH=/' "$build/CMakeCache.txt"; then
  targets+=(bench_precision)
  precision=1
fi
echo "== grove benchmarks: building in $build ($type)"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
bin=$build/bench
out=${out:-$build/bench-results}
mkdir -p "$out/logs"
rm -f "$out"/{tree,tree_torch,random,nn,nn_torch,nn_jax,main_jax,parallel,precision,precision_avx2,precision_torch,data}.json \
  "$out"/parallel.rank*.json

echo "== $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   command: $command"
gb() {  # gb NAME PROGRAM ARGS...: one Google Benchmark program, JSON to $out/NAME.json
  local name=$1 prog=$2
  shift 2
  echo "== $name: $prog $* (log: $out/logs/$name.log)"
  "$bin/$prog" --benchmark_out="$out/$name.json" --benchmark_out_format=json "$@" \
    >"$out/logs/$name.log" 2>&1 || { tail -20 "$out/logs/$name.log" >&2; die 1 "$prog failed"; }
}
if [ $quick = 1 ]; then
  gb tree bench_tree --benchmark_min_time=0.01
  py_seconds=(--seconds 0.05)
  gb random bench_random --benchmark_min_time=0.01 \
    '--benchmark_filter=^(std_into/mt19937_(uniform|normal)_float|grove_into_float/(uniform|normal)_float/threads:1)'
  gb nn bench_nn '--benchmark_filter=^step_((sgd_fused|adam|precision)/batch:128/threads:1|loaded/batch:128/busy:1)/'
  torch_args=(--batches 128 --threads 1 --rounds 1 --seconds 0.2)
  precision_args=(--benchmark_min_time=0.05
    '--benchmark_filter=^precision_(products/[a-z0-9_]+/batch:128/threads:1|peak/.*)$')
  precision_f32_args=(--benchmark_min_time=0.05
    '--benchmark_filter=^precision_products/[a-z]+_f32/batch:128/threads:1$')
  main_job_args=(--epochs 1)
  gb data bench_data --benchmark_min_time=0.01 '--benchmark_filter=^(data_epoch/examples:12800|npy_read)'
else
  gb tree bench_tree
  py_seconds=(--seconds 0.5)
  gb random bench_random
  gb nn bench_nn '--benchmark_filter=^(step_|apply_precision)'
  torch_args=()
  # Repetitions in random order, the fastest counting (bench_report.py): a shared machine's
  # changing load then weighs on grove's and oneDNN's products alike.
  precision_args=(--benchmark_repetitions=3 --benchmark_enable_random_interleaving=true)
  precision_f32_args=("${precision_args[@]}" '--benchmark_filter=^precision_products/[a-z]+_f32/')
  main_job_args=()
  gb data bench_data --benchmark_repetitions=3
fi
# oneDNN picks the widest instruction set the CPU has (AMX's tiles where present), as grove's bf16
# products do (its AMX kernel), and so does the oneDNN inside PyTorch's autocast step. A caller's
# ONEDNN_MAX_CPU_ISA (AVX512_CORE_BF16 keeps oneDNN off the tiles) is passed on as it is.
if [ $precision = 1 ]; then
  gb precision bench_precision "${precision_args[@]}"
  # On a CPU with AVX-512, the float32 products once more with both libraries held to AVX2: grove's
  # AVX2 kernel against oneDNN's AVX2 code, what a CPU without AVX-512 (AMD Zen 3) runs.
  if grep -qw avx512f /proc/cpuinfo && grep -qw avx2 /proc/cpuinfo; then
    ONEDNN_MAX_CPU_ISA=AVX2 GROVE_MAX_CPU_ISA=AVX2 \
      gb precision_avx2 bench_precision "${precision_f32_args[@]}"
  fi
else
  echo "== precision: bench_precision skipped ($build was configured without oneDNN: libdnnl-dev)"
fi
echo "== tree_torch: bench/pytree_torch.py"
$py bench/pytree_torch.py --out "$out/tree_torch.json" "${py_seconds[@]}"
echo "== nn_torch: bench/torch_step.py (PyTorch in a fresh process per thread setting)"
$py bench/torch_step.py --bench "$bin/bench_nn" --out "$out/nn_torch.json" "${torch_args[@]}"
echo "== precision_torch: bench/torch_step.py --autocast (PyTorch's f32 and autocast bf16 steps)"
$py bench/torch_step.py --autocast \
  --out "$out/precision_torch.json" "${torch_args[@]}"

# JAX: the step (jax.jit of value_and_grad + optax) and the main job's epochs, in the pinned
# environment of the test oracles (built here when missing, as scripts/test.sh builds it).
if [ "${GROVE_OFFLINE:-0}" = 1 ]; then
  echo "== nn_jax, main_jax: SKIPPED (GROVE_OFFLINE=1: no JAX environment)"
else
  jax_py=$(scripts/oracle-env.sh build/oracle-venv)
  echo "== nn_jax: bench/jax_step.py (JAX in a fresh process per thread budget)"
  $jax_py bench/jax_step.py --bench "$bin/bench_nn" --out "$out/nn_jax.json" "${torch_args[@]}"
  if [ $main_job = 1 ]; then
    echo "== main_jax: bench/main_job_jax.py ${main_job_args[*]} (train_mlp's defaults against JAX)"
    $jax_py bench/main_job_jax.py --train-mlp "$build/examples/train_mlp" \
      --out "$out/main_jax.json" "${main_job_args[@]}"
  else
    echo "== main_jax: skipped ($build was configured without the examples: no train_mlp)"
  fi
fi

# The allreduce needs two MPI ranks; Open MPI wants --oversubscribe for more ranks than cores
# and, as root, --allow-run-as-root (as the tests' mpirun does).
if command -v mpirun >/dev/null && "$bin/bench_parallel" --benchmark_list_tests 2>/dev/null | grep -q '^train/mpi'; then
  mpi_flags=()
  if mpirun --version 2>&1 | grep -q 'Open MPI\|OpenRTE'; then
    mpi_flags+=(--oversubscribe --timeout 240)
    [ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
    export OMPI_MCA_btl_vader_single_copy_mechanism=none
  fi
  echo "== parallel: mpirun -np 2 bench_parallel --benchmark_filter=^allreduce/mpi (log: $out/logs/parallel.log)"
  # Each rank writes its own JSON (two writers of one file would mix them); rank 0's is kept.
  mpirun -np 2 "${mpi_flags[@]}" bash -c \
    'exec "$1" --benchmark_filter=^allreduce/mpi --benchmark_out_format=json \
       --benchmark_out="$2/parallel.rank${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}.json"' \
    _ "$bin/bench_parallel" "$out" >"$out/logs/parallel.log" 2>&1 ||
    { tail -20 "$out/logs/parallel.log" >&2; die 1 "bench_parallel under mpirun failed"; }
  mv "$out/parallel.rank0.json" "$out/parallel.json"
  rm -f "$out"/parallel.rank*.json
else
  echo "== parallel: skipped (no mpirun, or bench_parallel built without MPI)"
fi

echo "== done; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
$py scripts/bench_report.py --results "$out" ${plot:+--plot "$plot"}
