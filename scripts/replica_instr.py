#!/usr/bin/env python3
"""Instructions a replica spends per command it applies, counted by callgrind:
an A/B of replica builds on the same stream (issue 31: a replica that shares its
CPU with others, as in burst_ab.py's rows, takes less of it).

One primary (not counted, pinned to --primary-cpu) and every --replica attached
to it at once, each under valgrind's callgrind on --replica-cpu: all of them
apply the very same stream. Per round the replicas' counters are zeroed
(`callgrind_control -z`), ruvio-bench sends a fixed number of requests to the
primary, each replica is waited for until its offset is the primary's, and the
counters are dumped (`callgrind_control -d`): instructions executed by every
thread of the replica, divided by the requests. As in instr_ab.py, instructions
are not time (a cache miss costs none), and a replica under callgrind runs some
50x slower, so it reads the stream in larger pieces than at full speed (its
per-read costs are spread thinner; every replica alike).

  scripts/replica_instr.py -t set -n 100000 \\
    --primary 'target/release/ruvio --port {port} --shards 1 --cpus 0' \\
    --replica 'before=/tmp/ruvio-before --port {port} --shards 1 --cpus 1' \\
    --replica 'after=target/release/ruvio --port {port} --shards 1 --cpus 1'
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time

import benchlib as bl
import instr_ab

# A replica under callgrind applies some 20,000 commands a second.
CATCH_UP_TIMEOUT_S = 600


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--primary", required=True, metavar="COMMAND", help="the primary (COMMAND with {port})")
    p.add_argument("--replica", action="append", required=True, metavar="NAME=COMMAND",
                   help="a replica to count (two or more; the first is the baseline); COMMAND with {port}")
    p.add_argument("--primary-cpu", default="0")
    p.add_argument("--replica-cpu", default="1")
    p.add_argument("--client-cpu", default="1")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench())
    p.add_argument("-t", "--test", default="set", help="a ruvio-bench built-in test")
    p.add_argument("-c", "--clients", type=int, default=50)
    p.add_argument("-P", "--pipeline", type=int, default=16)
    p.add_argument("-d", "--datasize", type=int, default=3)
    p.add_argument("-r", "--keyspace", type=int, default=100000)
    p.add_argument("-n", "--requests", type=int, default=100000)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--warm-requests", type=int, default=20000)
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    p.add_argument("--cache-sim", action="store_true",
                   help="also simulate the caches (as instr_ab.py --cache-sim): each row keeps its misses per request")
    p.add_argument("--keep", metavar="DIR", help="keep each round's callgrind dump in DIR as NAME-rROUND.callgrind")
    args = p.parse_args()
    if len(args.replica) < 2:
        p.error("give two or more --replica")
    return args


def offset(server: bl.ServerProcess, field: bytes) -> int:
    """`field` of the server's INFO replication."""
    for line in server.client().call("INFO", "replication").splitlines():
        if line.startswith(field + b":"):
            return int(line.split(b":", 1)[1])
    raise RuntimeError(f"{server.spec.name}: no {field.decode()} in INFO replication")


def caught_up(primary: bl.ServerProcess, replicas: list[bl.ServerProcess]) -> None:
    """Wait until every replica applied the primary's whole stream so far."""
    target = offset(primary, b"master_repl_offset")
    deadline = time.monotonic() + CATCH_UP_TIMEOUT_S
    for replica in replicas:
        while offset(replica, b"slave_repl_offset") < target:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{replica.spec.name} did not catch up:\n{replica.log_tail()}")
            time.sleep(0.2)


def load(args: argparse.Namespace, primary: bl.ServerProcess, requests: int) -> bl.LoadResult:
    work = bl.Load(clients=args.clients, pipeline=args.pipeline, requests=requests,
                   keyspace=args.keyspace, datasize=args.datasize)
    return bl.ruvio_bench(primary.port, work, test=args.test, cpus=args.client_cpu, binary=args.ruvio_bench)


def main() -> None:
    args = parse_args()
    primary_spec = bl.custom_server(f"primary={args.primary}")
    specs = [bl.custom_server(entry) for entry in args.replica]
    for spec in [primary_spec, *specs]:
        spec.version = bl.binary_version(spec.binary)
    record = bl.record_header("replica-instr", args, [primary_spec, *specs])
    bl.SERVER_READY_TIMEOUT_S = instr_ab.CALLGRIND_READY_TIMEOUT_S
    primary = bl.ServerProcess(primary_spec, args.primary_cpu)
    replicas = [bl.ServerProcess(instr_ab.under_callgrind(s, args.cache_sim), args.replica_cpu) for s in specs]
    rounds = []
    try:
        primary.start()
        for replica in replicas:
            replica.start()
            replica.client().call("REPLICAOF", "127.0.0.1", str(primary.port))
        load(args, primary, args.warm_requests)
        caught_up(primary, replicas)
        for r in range(args.rounds):
            for replica in replicas:
                subprocess.run(["callgrind_control", "-z", str(replica.pid)], check=True, capture_output=True)
            result = load(args, primary, args.requests)
            caught_up(primary, replicas)
            row = {}
            for replica in replicas:
                events, dump = instr_ab.counts(replica)
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    shutil.copy(dump, os.path.join(args.keep, f"{replica.spec.name}-r{r + 1}.callgrind"))
                misses = {f"{event}_per_request": n / result.requests for event, n in events.items() if event != "Ir"}
                row[replica.spec.name] = {"instructions": events["Ir"], "requests": result.requests,
                                          "instructions_per_request": events["Ir"] / result.requests, **misses}
            rounds.append({"rows": row, **bl.row_conditions(result, primary)})
            print(f"round {r + 1}: " + "  ".join(
                f"{n}={v['instructions_per_request']:,.0f}" for n, v in row.items()), flush=True)
    finally:
        for replica in replicas:
            replica.stop()
        primary.stop()
    base = specs[0].name
    medians = {}
    for s in specs:
        per = [r["rows"][s.name]["instructions_per_request"] for r in rounds]
        ratios = [r["rows"][s.name]["instructions_per_request"] / r["rows"][base]["instructions_per_request"]
                  for r in rounds]
        medians[s.name] = {"instructions_per_request": bl.median(per), f"ratio_to_{base}": bl.median(ratios),
                           "ratios": ratios}
        print(f"{s.name:>12}: {bl.median(per):,.0f} instructions per applied request, "
              f"{bl.median(ratios):.3f}x {base} (rounds {min(ratios):.3f}-{max(ratios):.3f})")
    record.update({"rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "replica-instr"))


if __name__ == "__main__":
    main()
