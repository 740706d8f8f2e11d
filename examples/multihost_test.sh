#!/usr/bin/env bash
# Multi-host data-parallel training, tested on one machine: two network namespaces joined by a
# veth pair stand for two hosts, and Open MPI runs train_mlp's two ranks across them over TCP, as
# it would across machines (its rsh launcher, its TCP transport, no shared memory between the
# ranks). The namespaces, the pair and the private addresses exist only inside this test: made at
# the start, removed on every way out (a trap), so the machine's own network is never touched.
#
#   train    one epoch across the namespaces gives exactly what the same two ranks give on one
#            host (the metrics, and the checkpoint's tensors bit for bit: with two ranks each sum
#            of the allreduce is one addition, which is the same whichever transport or algorithm
#            carries it), and every step's gradients crossed the veth (its byte counters, both
#            ways, grew by at least steps x parameters x 4 bytes of float32 gradients).
#   sigkill  a rank killed with SIGKILL in the middle of training ends the run: mpirun exits
#            non-zero within KILL_BOUND seconds, saying which rank died of signal 9, and no
#            process of the run is left in either namespace. A hang fails, never waits forever.
#
# Without the means to make namespaces (no `ip`, no CAP_NET_ADMIN or CAP_SYS_ADMIN, no veth) or
# without Open MPI, it prints a line starting with `SKIPPED:` (ctest's SKIP_REGULAR_EXPRESSION)
# and exits 0: never a silent pass. Needs root (or those capabilities) and iproute2.
#
# Usage: multihost_test.sh train|sigkill WORK_DIR MPIEXEC [MPIEXEC_FLAG...] -- TRAIN_MLP [ARG...]
#   MPIEXEC_FLAGs are for the one-host reference run only (e.g. --oversubscribe --timeout 240);
#   TRAIN_MLP ARGs are the run's common flags (data, network, batch, threads); this script adds
#   --epochs, --metrics and --save. The environment must let mpirun run (as root,
#   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1).
set -euo pipefail

me=multihost_test.sh
fail() {
  echo "$me: FAILED: $*" >&2
  exit 1
}
skip() {
  echo "SKIPPED: $*"
  exit 0
}

[ $# -ge 5 ] || { echo "usage: $me train|sigkill WORK_DIR MPIEXEC [FLAG...] -- TRAIN_MLP [ARG...]" >&2; exit 2; }
mode=$1 work=$2 mpiexec=$3
shift 3
case $mode in train | sigkill) ;; *) echo "$me: unknown mode '$mode'" >&2; exit 2 ;; esac
reference_flags=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do reference_flags+=("$1"); shift; done
[ $# -ge 2 ] || { echo "$me: no -- TRAIN_MLP after the mpiexec flags" >&2; exit 2; }
shift
train=("$@")

# Bounds, in seconds, all below the ctest TIMEOUT, so that this script and its trap always run to
# the end: one training run, the SIGKILL's aftermath, the run's processes leaving afterwards.
RUN_BOUND=120
KILL_BOUND=60
LEAVE_BOUND=10

# --- can this machine make the two "hosts"? --------------------------------------------------------
command -v ip >/dev/null || skip "no \`ip\` (Debian: iproute2) to make network namespaces"
"$mpiexec" --version 2>&1 | grep -q -E "Open MPI|OpenRTE" ||
  skip "$mpiexec is not Open MPI's: this test drives Open MPI's rsh launcher and TCP transport"

# Names unique to this run (its PID), so that parallel ctest runs never share a namespace; the
# addresses live only inside the two namespaces, so every run can use the same ones.
ns_a=grove_mh_$$_a ns_b=grove_mh_$$_b
addr_a=10.213.7.1 addr_b=10.213.7.2 subnet=10.213.7.0/30
veth_a=grove_veth_a veth_b=grove_veth_b

# Ends every process left in a namespace of ours (by PID: only our run's processes are in there),
# then removes the namespace; the veth pair goes with it.
remove_namespace() {
  local ns=$1 pid
  ip netns list 2>/dev/null | grep -q "^$ns\b" || return 0
  for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
  ip netns delete "$ns" 2>/dev/null || true
}
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  remove_namespace "$ns_a"
  remove_namespace "$ns_b"
  # The backstop timeout of a run still going: its mpirun has just been killed with the rest, so
  # it ends on its own (the TERM only covers a mpirun not yet in its namespace).
  if [ -n "${run_pid:-}" ]; then
    kill -TERM "$run_pid" 2>/dev/null || true
    wait "$run_pid" 2>/dev/null || true
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 143' INT TERM HUP

# A run of this test killed outright (SIGKILL, where no trap runs) leaves its namespaces behind:
# remove those whose script is gone.
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(grove_mh_[0-9]*_[ab]\)\b.*/\1/p'); do
  owner=${ns#grove_mh_}
  owner=${owner%_*}
  if ! grep -qs "$me" "/proc/$owner/cmdline"; then remove_namespace "$ns"; fi
done

why=$(ip netns add "$ns_a" 2>&1) || skip "cannot make a network namespace (ip netns add: $why)"
why=$(ip netns add "$ns_b" 2>&1) || skip "cannot make a network namespace (ip netns add: $why)"
# The pair is made with its ends already inside the namespaces: no interface ever appears in the
# machine's own namespace.
why=$(ip link add "$veth_a" netns "$ns_a" type veth peer name "$veth_b" netns "$ns_b" 2>&1) ||
  skip "cannot make a veth pair between two namespaces (ip link add: $why)"
ip -n "$ns_a" address add "$addr_a/30" dev "$veth_a"
ip -n "$ns_b" address add "$addr_b/30" dev "$veth_b"
for ns in "$ns_a" "$ns_b"; do ip -n "$ns" link set lo up; done
ip -n "$ns_a" link set "$veth_a" up
ip -n "$ns_b" link set "$veth_b" up

rm -rf "$work"
mkdir -p "$work"

# mpirun's "ssh": Open MPI's rsh launcher runs `AGENT HOST COMMAND...` to start its daemon on
# HOST; this one runs COMMAND through a shell, as ssh does, in the namespace that has HOST's
# address, and notes the host so that the test can tell that the second "host" was launched.
launcher=$work/launcher.sh
cat >"$launcher" <<EOF
#!/bin/sh
# Written by $me: Open MPI's rsh agent for the namespaces $ns_a ($addr_a) and $ns_b ($addr_b).
host=\$1
shift
case \$host in
  $addr_a) ns=$ns_a ;;
  $addr_b) ns=$ns_b ;;
  *) echo "$me launcher: unknown host \$host" >&2; exit 255 ;;
esac
echo "\$host" >>"$work/launched-hosts"
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$launcher"

# mpirun starts in the first namespace and finds its own address there (rank 0, no launcher);
# rank 1 runs on the second, through the launcher. pml ob1 with the tcp and self transports only:
# no shared memory between the ranks, and no UCX, which would choose its own transports; both the
# daemons' and the ranks' TCP go over the veth's subnet.
hosts=$addr_a:1,$addr_b:1
across=(ip netns exec "$ns_a" "$mpiexec" --host "$hosts" -np 2
        --mca plm_rsh_agent "$launcher" --mca plm_rsh_no_tree_spawn 1
        --mca pml ob1 --mca btl "tcp,self"
        --mca btl_tcp_if_include "$subnet" --mca oob_tcp_if_include "$subnet")

veth_bytes() {  # rx or tx bytes of the first namespace's end of the pair
  ip netns exec "$ns_a" cat "/sys/class/net/$veth_a/statistics/$1_bytes"
}
# A safetensors file's tensors: the bytes after its 8-byte header length and JSON header (the
# header's metadata holds the epochs' wall-clock seconds, which differ from run to run).
tensor_bytes() {
  local header
  header=$(od -An -tu8 -N8 "$1" | tr -d ' ')
  tail -c +$((header + 9)) "$1"
}
# Processes of the run still in the namespaces, as "PID(name)".
leftovers() {
  local ns pid
  for ns in "$ns_a" "$ns_b"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      printf '%s(%s) ' "$pid" "$(cat "/proc/$pid/comm" 2>/dev/null || echo gone)"
    done
  done
}
wait_for_no_leftovers() {
  local deadline=$((SECONDS + LEAVE_BOUND))
  while [ -n "$(leftovers)" ]; do
    [ $SECONDS -lt $deadline ] ||
      fail "processes of the run are left in the namespaces ${LEAVE_BOUND} s after mpirun ended: $(leftovers)"
    sleep 0.2
  done
}

if [ "$mode" = train ]; then
  # The reference: the same two ranks on one host (shared memory), as train_mlp_mpi runs them.
  echo "== one host: $mpiexec -np 2 ${reference_flags[*]}"
  status=0
  timeout -k 10 $RUN_BOUND "$mpiexec" -np 2 "${reference_flags[@]}" "${train[@]}" --epochs 1 \
    --metrics "$work/one-host.csv" --save "$work/one-host.safetensors" >"$work/one-host.log" 2>&1 ||
    status=$?
  cat "$work/one-host.log"
  [ $status -eq 0 ] || fail "the one-host run exited with $status"

  echo "== two hosts: $ns_a ($addr_a) and $ns_b ($addr_b) over TCP"
  rx_before=$(veth_bytes rx) tx_before=$(veth_bytes tx)
  status=0
  timeout -k 10 $RUN_BOUND "${across[@]}" "${train[@]}" --epochs 1 \
    --metrics "$work/two-hosts.csv" --save "$work/two-hosts.safetensors" >"$work/two-hosts.log" 2>&1 ||
    status=$?
  cat "$work/two-hosts.log"
  [ $status -ne 124 ] || fail "the run across the namespaces did not end within $RUN_BOUND s"
  [ $status -eq 0 ] || fail "the run across the namespaces exited with $status"
  rx=$(($(veth_bytes rx) - rx_before)) tx=$(($(veth_bytes tx) - tx_before))
  wait_for_no_leftovers

  grep -qx "$addr_b" "$work/launched-hosts" 2>/dev/null ||
    fail "mpirun never launched anything on $addr_b: both ranks ran in $ns_a"
  grep -q "2 MPI ranks" "$work/two-hosts.log" || fail "the run does not say it trained on 2 MPI ranks"

  # Every step's allreduce must have crossed the veth: in each direction at least the whole
  # float32 gradient per step (each rank needs all of the other's sums or addends). The sizes come
  # from the run's own description: "60000 training ... MLP 784-128-10 (...) ... batch 1000".
  line=$(grep -m1 -E "^train_mlp: [0-9]+ training and" "$work/two-hosts.log") ||
    fail "the run does not describe its data and network"
  examples=$(sed -E 's/^train_mlp: ([0-9]+) training.*/\1/' <<<"$line")
  widths=$(sed -E 's/.* MLP ([0-9-]+) .*/\1/' <<<"$line")
  batch=$(sed -E 's/.*, batch ([0-9]+),.*/\1/' <<<"$line")
  parameters=0 previous=
  for width in ${widths//-/ }; do
    [ -z "$previous" ] || parameters=$((parameters + previous * width + width))
    previous=$width
  done
  steps=$(((examples + batch - 1) / batch))
  gradients=$((steps * parameters * 4))
  echo "veth $veth_a: received $rx bytes, sent $tx bytes; $steps steps of $parameters float32 gradients: $gradients bytes each way at least"
  if [ $rx -lt $gradients ] || [ $tx -lt $gradients ]; then
    fail "the gradients did not cross the veth (received $rx, sent $tx, expected at least $gradients each way): the ranks talked some other way"
  fi

  # Exactly the one-host run: the metrics (epoch, train loss, test loss, test accuracy; not the
  # seconds) and the trained state's tensors.
  echo "one host:  $(cut -d, -f1-4 "$work/one-host.csv" | tail -n +2 | tr '\n' ' ')"
  echo "two hosts: $(cut -d, -f1-4 "$work/two-hosts.csv" | tail -n +2 | tr '\n' ' ')"
  [ "$(wc -l <"$work/two-hosts.csv")" -ge 2 ] || fail "the run across the namespaces wrote no metrics"
  cmp -s <(cut -d, -f1-4 "$work/one-host.csv") <(cut -d, -f1-4 "$work/two-hosts.csv") ||
    fail "the metrics differ from the one-host run's"
  cmp -s <(tensor_bytes "$work/one-host.safetensors") <(tensor_bytes "$work/two-hosts.safetensors") ||
    fail "the trained parameters and optimizer state differ from the one-host run's"
  echo "the same training across two hosts as on one: metrics and tensors ($(tensor_bytes "$work/two-hosts.safetensors" | wc -c) bytes) identical"
  exit 0
fi

# --- sigkill --------------------------------------------------------------------------------------
# Many epochs, so that the run is still training when rank 1 is killed; mpirun's output goes to a
# file read while it runs. The outer timeout is a backstop only: the waits below give up first.
echo "== two hosts: $ns_a ($addr_a) and $ns_b ($addr_b) over TCP; rank 1 ($ns_b) killed mid-training"
log=$work/two-hosts.log
timeout -k 10 $((RUN_BOUND + KILL_BOUND + 30)) "${across[@]}" "${train[@]}" --epochs 50 >"$log" 2>&1 &
run_pid=$!

# Training: the first epoch has ended (rank 0 prints its line), so both ranks are in the steps of
# the second.
deadline=$((SECONDS + RUN_BOUND))
until grep -q -E "^epoch +1/50 " "$log"; do
  kill -0 "$run_pid" 2>/dev/null || { cat "$log"; fail "the run ended before its first epoch did"; }
  [ $SECONDS -lt $deadline ] || { cat "$log"; fail "no epoch ended within $RUN_BOUND s"; }
  sleep 0.1
done
victim=
for pid in $(ip netns pids "$ns_b"); do
  [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$(basename "${train[0]}" | cut -c1-15)" ] && victim=$pid
done
[ -n "$victim" ] || { cat "$log"; fail "no train_mlp process in $ns_b: rank 1 is not on the second host"; }

start=$EPOCHREALTIME
kill -KILL "$victim"
deadline=$((SECONDS + KILL_BOUND))
while kill -0 "$run_pid" 2>/dev/null; do
  if [ $SECONDS -ge $deadline ]; then
    cat "$log"
    fail "mpirun still runs ${KILL_BOUND} s after rank 1 (PID $victim) was killed: it hangs"
  fi
  sleep 0.05
done
status=0
wait "$run_pid" || status=$?
run_pid=
elapsed=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
cat "$log"
echo "mpirun exited with status $status, $elapsed s after rank 1 (PID $victim in $ns_b) was killed"
[ $status -ne 0 ] || fail "mpirun exited 0 although rank 1 was killed"
# Open MPI names the first rank it saw die: rank 1 of the SIGKILL, or now and then rank 0, killed
# by the SIGPIPE of writing to the dead peer's socket first. Either says clearly why the run ended.
grep -q -E "process rank 1 with PID $victim on node $addr_b exited on signal 9|process rank 0 with PID [0-9]+ on node [0-9.]+ exited on signal 13" "$log" ||
  fail "mpirun's output does not say that rank 1 (PID $victim on $addr_b) exited on signal 9"
wait_for_no_leftovers
echo "rank 1's death ended the run in $elapsed s (bound $KILL_BOUND s), nothing left behind"
