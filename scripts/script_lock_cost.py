#!/usr/bin/env python3
"""What the script lock costs (docs/scripting.md, crates/ruvio-server/src/mesh/script_lock.rs).

One Lua body runs in two shapes: its declared key and an undeclared key on the two
shards of a 2-shard Ruvio in forward mode (the script takes the script lock and
borrows the undeclared key while it runs), and both keys in one hash-tag slot (the
script is confined to one shard after its first run, no lock). Redis 7 and Valkey
(one server each: no difference between the shapes) run the same. The load is
ruvio-bench (-c clients, -P pipeline) on --client-cpu; Ruvio's shards are pinned to
--ruvio-cpus (default 0,1: on a 2-CPU machine its second shard shares CPU 1 with the
load generator, as in scripts/acor_workload.py), the others to --server-cpu.
Servers alternate within each round; medians over --rounds. A record goes to
records/ with the start time, the commit and the sha256 of every binary.

    python3 scripts/script_lock_cost.py --rounds 3
"""

from __future__ import annotations

import argparse
import sys

import benchlib as bl

# Bodies carry no spaces (ruvio-bench splits its command on them); two bodies, so
# that the confined shape is not taken for the one that reaches another shard.
LOCKED_BODY = "redis.call('incr',KEYS[1]);return(redis.call('incr',ARGV[1]))"
CONFINED_BODY = "redis.call('incr',KEYS[1]);return(redis.call('incrby',ARGV[1],1))"


def key_on_shard(prefix: str, shard: int, shards: int) -> str:
    """A key of `prefix` whose slot shard `shard` of `shards` owns (Ruvio's even split)."""
    per = 16384 // shards
    for i in range(100_000):
        key = f"{prefix}{i}"
        slot = bl.key_slot(key.encode())
        if min(slot // per, shards - 1) == shard:
            return key
    raise RuntimeError("no key found")


def shapes() -> list[tuple[str, list[str]]]:
    """The two rows: label and command."""
    a, b = key_on_shard("lk", 0, 2), key_on_shard("lk", 1, 2)
    return [
        ("declared key on shard 0, undeclared key on shard 1 (script lock)",
         ["EVAL", LOCKED_BODY, "1", a, b]),
        ("both keys in one hash-tag slot (confined, no lock)",
         ["EVAL", CONFINED_BODY, "1", "{t}a", "{t}b"]),
    ]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    bl.add_load_args(p, requests=200_000)
    p.add_argument("--ruvio-cpus", default="0,1", help="CPUs of Ruvio's two shards")
    args = p.parse_args()
    args.generator = "ruvio-bench"
    servers = bl.build_servers(args, ruvio_shards=2)
    for spec in servers:
        if spec.kind == "ruvio":
            spec.argv = bl.ruvio_argv(spec.binary, 2, args.ruvio_cpus) + args.ruvio_args.split()
            spec.name = "ruvio-2"
    load = bl.Load(clients=args.clients, pipeline=args.pipeline, requests=args.requests, keyspace=0)
    results: dict = {label: {s.name: [] for s in servers} for label, _ in shapes()}
    for round_no in range(args.rounds):
        for spec in servers:
            # Another Ruvio build given with --server (an A/B) runs on Ruvio's CPUs.
            two_shards = spec.kind == "ruvio" or spec.name.startswith("ruvio")
            cpus = args.ruvio_cpus if two_shards else args.server_cpu
            with bl.ServerProcess(spec, cpus) as server:
                for label, command in shapes():
                    # A first run outside the measurement: Ruvio's probation run.
                    client = bl.RespClient(server.port)
                    client.call(*command)
                    client.close()
                    result, cpu_us = bl.measured(server, lambda: bl.ruvio_bench(
                        server.port, load, command, cpus=args.client_cpu, binary=args.ruvio_bench))
                    # Resident memory after the run: flat from run to run (a 2-shard
                    # server once grew by about 1 KB per locked script).
                    results[label][spec.name].append({"rps": result.rps, "server_cpu_us": cpu_us,
                                                      "p99_ms": result.p99_ms,
                                                      "rss_kib_after": server.rss_kib(),
                                                      **bl.row_conditions(result, server)})
                    print(f"round {round_no + 1} {spec.name:8} {label}: {bl.fmt_rate(result.rps)}/s",
                          file=sys.stderr)
    summary = {}
    headers = ["shape"] + [s.name for s in servers]
    rows = []
    for label, per_server in results.items():
        medians = {name: bl.median([r["rps"] for r in runs]) for name, runs in per_server.items()}
        summary[label] = medians
        rows.append([label] + [bl.fmt_rate(medians[s.name]) + "/s" for s in servers])
    print(bl.format_table(headers, rows))
    if not args.no_record:
        record = bl.record_header("script-lock-cost", args, servers)
        record["shapes"] = {label: command for label, command in shapes()}
        record["rounds"] = results
        record["medians_rps"] = summary
        print(bl.write_record(record, args.out, "script-lock"))


if __name__ == "__main__":
    main()
