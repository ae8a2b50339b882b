#!/usr/bin/env python3
"""Short alternating bursts against servers that all stay up: an A/B for small
differences on a machine whose speed drifts.

On this kind of VM the same server measured twice a few seconds apart can differ
by a third (docs/durability.md); a fresh server per long run (the other scripts)
carries that drift into each ratio. Here every server starts once (all pinned to
the server CPU, idle but for the one under load), each is warmed, then each round
loads every server in turn for `--burst` seconds with ruvio-bench, the order
rotating; each round's ratio against the first server cancels drift slower than
one round. Medians of the per-round rates and ratios go into records/.

Example (everysec against memory, and a binary before a change):
  scripts/burst_ab.py --rounds 14 \\
    --server 'memory=target/release/ruvio --port {port} --shards 1 --cpus 0' \\
    --server 'everysec=target/release/ruvio --port {port} --shards 1 --cpus 0 --durability everysec --dir {dir} --save ""'
"""

from __future__ import annotations

import argparse

import benchlib as bl


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", required=True, metavar="NAME=COMMAND",
                   help="server to compare (two or more; the first is the baseline); COMMAND may use {port} and {dir}")
    p.add_argument("--server-cpu", default="0", help="CPU list every server is pinned to")
    p.add_argument("--client-cpu", default="1", help="CPU list the load generator is pinned to")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench(), help="path to ruvio-bench")
    p.add_argument("-t", "--test", default="set", help="ruvio-bench test")
    p.add_argument("-c", "--clients", type=int, default=200)
    p.add_argument("-P", "--pipeline", type=int, default=16)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("-r", "--keyspace", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=14)
    p.add_argument("--burst", type=float, default=1.5, help="seconds of load per server per round")
    p.add_argument("--warm", type=float, default=3.0, help="seconds of load per server before the rounds")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"), help="directory for the JSON record")
    p.add_argument("--no-record", action="store_true", help="print only, write no record")
    args = p.parse_args()
    if len(args.server) < 2:
        p.error("give two or more --server")
    return args


def burst(args: argparse.Namespace, server: bl.ServerProcess, seconds: float) -> float:
    load = bl.Load(clients=args.clients, pipeline=args.pipeline, requests=10**12,
                   keyspace=args.keyspace, datasize=args.datasize)
    result = bl.ruvio_bench(server.port, load, test=args.test, cpus=args.client_cpu,
                            binary=args.ruvio_bench, extra=["--duration", str(seconds)])
    return result.rps


def main() -> None:
    args = parse_args()
    specs = [bl.custom_server(entry) for entry in args.server]
    for spec in specs:
        spec.version = bl.binary_version(spec.binary)
    record = bl.record_header("burst-ab", args, specs)
    servers = [bl.ServerProcess(s, args.server_cpu) for s in specs]
    rounds = []
    try:
        for server in servers:
            server.start()
        for server in servers:
            burst(args, server, args.warm)
        for r, order in enumerate(bl.round_orders(range(len(servers)), args.rounds)):
            rps = {specs[i].name: burst(args, servers[i], args.burst) for i in order}
            rounds.append({"order": [specs[i].name for i in order], "rps": rps})
            print(f"round {r + 1}: " + "  ".join(f"{n}={v:,.0f}" for n, v in rps.items()), flush=True)
    finally:
        for server in servers:
            server.stop()
    base = specs[0].name
    medians = {}
    for s in specs:
        rates = [r["rps"][s.name] for r in rounds]
        ratios = [r["rps"][s.name] / r["rps"][base] for r in rounds]
        medians[s.name] = {"rps": bl.median(rates), f"ratio_to_{base}": bl.median(ratios),
                           "ratios": ratios}
        print(f"{s.name:>12}: median {bl.median(rates):,.0f}/s, median ratio to {base} "
              f"{bl.median(ratios):.3f} (rounds {min(ratios):.2f}-{max(ratios):.2f})")
    record.update({"rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "burst-ab"))


if __name__ == "__main__":
    main()
