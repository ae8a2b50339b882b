#!/bin/bash
# What a replica costs the primary, counted rather than timed (issue 31): on a
# shared machine CPU time drifts by a third between runs, while the number of
# syscalls, io_uring sends and wake-ups per request does not.
#
# Starts one Ruvio (pinned to CPU 0), optionally attaches a redis-server
# replica (pinned to CPU 1, with the load generator, as scripts/burst_ab.py
# does), warms it with 200,000 SETs, then counts with `perf stat` (kernel
# tracepoints, no hardware counters needed) over N more SETs from ruvio-bench:
# syscalls, eventfd writes (the doorbells between shards), io_uring_enter
# calls (loop iterations that waited), io_uring sends (one per client batch of
# PIPELINE replies, plus those to the replica), wake-ups, and the server's
# user and system CPU (from /proc, for orientation only). Prints each per
# request.
#
# Usage: scripts/repl_counts.sh RUVIO RUVIO_BENCH SHARDS REPLICA(0|1) [N] [CLIENTS] [PIPELINE]
# Example (1 shard, a replica, 8 clients of pipeline 16, 500,000 SETs):
#   scripts/repl_counts.sh target/release/ruvio target/release/ruvio-bench 1 1 500000 8 16
set -euo pipefail
RUVIO=$1 BENCH=$2 SHARDS=$3 REPLICA=$4 N=${5:-1000000} CLIENTS=${6:-50} PIPELINE=${7:-16}
# io_uring's IORING_OP_SEND.
OP_SEND=26
PORT=$((20000 + RANDOM % 20000))
REPLICA_PORT=$((PORT + 100))
DIR=$(mktemp -d /tmp/ruvio-repl-counts.XXXXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT

taskset -c 0 "$RUVIO" --port "$PORT" --shards "$SHARDS" --cpus 0 --dir "$DIR" --save "" \
    >"$DIR/ruvio.log" 2>&1 &
SERVER=$!
PIDS+=("$SERVER")
for _ in $(seq 50); do redis-cli -p "$PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
if [ "$REPLICA" = 1 ]; then
    taskset -c 1 redis-server --port "$REPLICA_PORT" --save "" --appendonly no --dir "$DIR" \
        >"$DIR/replica.log" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 50); do redis-cli -p "$REPLICA_PORT" ping 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    redis-cli -p "$REPLICA_PORT" replicaof 127.0.0.1 "$PORT" >/dev/null
    for _ in $(seq 100); do
        redis-cli -p "$PORT" info replication | grep -q state=online && break
        sleep 0.2
    done
    redis-cli -p "$PORT" info replication | grep -q state=online || { echo "no replica online" >&2; exit 1; }
fi
load() {
    taskset -c 1 "$BENCH" -p "$PORT" -c "$CLIENTS" -P "$PIPELINE" -n "$1" -d 64 -r 1000000 -t set --json
}
load 200000 >/dev/null
read -r user0 sys0 < <(awk '{print $14, $15}' "/proc/$SERVER/stat")
perf stat -x, -p "$SERVER" -o "$DIR/perf.txt" \
    -e raw_syscalls:sys_enter -e syscalls:sys_enter_write -e syscalls:sys_enter_io_uring_enter \
    -e io_uring:io_uring_submit_req --filter "opcode == $OP_SEND" -e sched:sched_wakeup &
PERF=$!
sleep 0.3
load "$N" >"$DIR/bench.json"
kill -INT "$PERF"
wait "$PERF" || true
read -r user1 sys1 < <(awk '{print $14, $15}' "/proc/$SERVER/stat")
python3 - "$DIR" "$N" "$user0" "$sys0" "$user1" "$sys1" "$(getconf CLK_TCK)" <<'PY'
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
user0, sys0, user1, sys1, hz = map(int, sys.argv[3:8])
test = json.load(open(d + "/bench.json"))["tests"][0]
print(f"rps {test['rps']:.0f}  server user {(user1 - user0) / hz * 1e6 / n:.3f} us/req"
      f"  system {(sys1 - sys0) / hz * 1e6 / n:.3f} us/req (timing: orientation only)")
names = {"raw_syscalls:sys_enter": "syscalls", "syscalls:sys_enter_write": "eventfd/other writes",
         "syscalls:sys_enter_io_uring_enter": "io_uring_enter", "io_uring:io_uring_submit_req": "io_uring sends",
         "sched:sched_wakeup": "wake-ups"}
for line in open(d + "/perf.txt"):
    fields = line.strip().split(",")
    if len(fields) > 2 and fields[0][:1].isdigit():
        print(f"  {names.get(fields[2], fields[2]):22s} {float(fields[0]) / n:.4f} per request")
PY
