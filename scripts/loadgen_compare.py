#!/usr/bin/env python3
"""redis-benchmark against ruvio-bench: same server, same settings, one pinned core each.

The seeds show redis-benchmark stopping near 3.5M requests per second and so
hiding differences between fast servers. This script runs both generators in
alternating rounds against one server with identical flags, the generator
pinned to one CPU, and reports the rate each reached and the generator's own CPU
microseconds per request. Where the server is the bottleneck (a small machine)
the rates tie and the CPU column still shows how much load one core of each
generator could produce: 1 / (CPU per request).

  scripts/loadgen_compare.py --server-cmd 'redis-server --port {port} --save "" --appendonly no'
  scripts/loadgen_compare.py -n 20000 --rounds 1 --no-record          # functional check
"""

from __future__ import annotations

import argparse
import shlex
import sys

import benchlib as bl

TESTS = ["set", "get"]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server-cmd", default="redis-server --port {port} --save '' --appendonly no",
                   help="the server to load; {port} is filled in")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench())
    p.add_argument("--redis-benchmark", default="redis-benchmark")
    p.add_argument("-n", "--requests", type=int, default=5_000_000)
    p.add_argument("-c", "--clients", type=int, default=50)
    p.add_argument("-P", "--pipeline", type=int, default=64)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("-r", "--keyspace", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--client-cpu", default="1", help="the one core both generators get")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    return p.parse_args()


def run_generators(server: bl.ServerProcess, args: argparse.Namespace, order: list[str]) -> dict:
    """Each generator on each test, in the given order."""
    load = bl.Load(args.clients, args.pipeline, args.requests, args.keyspace, args.datasize)
    out: dict = {}
    for gen in order:
        binary = args.redis_benchmark if gen == "redis-benchmark" else args.ruvio_bench
        for test in TESTS:
            res, server_cpu_us = bl.measured(server, lambda: bl.run_load(gen, server.port, load, test=test,
                                                                          cpus=args.client_cpu, binary=binary))
            out[f"{gen}/{test}"] = {"rps": res.rps, "client_cpu_us_per_req": res.client_cpu_s * 1e6 / res.requests,
                                    "server_cpu_us_per_req": server_cpu_us, "p99_ms": res.p99_ms,
                                    **bl.row_conditions(res, server)}
            print(f"  {gen:16} {test.upper():4} {bl.fmt_rate(res.rps):>9}  generator "
                  f"{out[f'{gen}/{test}']['client_cpu_us_per_req']:.3f} us/req", flush=True)
    return out


def main() -> int:
    args = parse_args()
    spec = bl.ServerSpec("server", "custom", shlex.split(args.server_cmd), shlex.split(args.server_cmd)[0])
    spec.version = bl.binary_version(spec.binary)
    gens = list(bl.GENERATORS)
    rounds = []
    with bl.ServerProcess(spec, args.server_cpu) as server:
        for i, order in enumerate(bl.round_orders(gens, args.rounds)):
            print(f"round {i + 1}/{args.rounds}: {' -> '.join(order)}", flush=True)
            rounds.append({"order": order, "results": run_generators(server, args, order)})
    keys = rounds[0]["results"].keys()
    med = {k: {m: bl.median([r["results"][k][m] for r in rounds])
               for m in ("rps", "client_cpu_us_per_req", "server_cpu_us_per_req")} for k in keys}
    rows = [[k, bl.fmt_rate(v["rps"]), bl.fmt_num(v["client_cpu_us_per_req"], 3),
             bl.fmt_rate(1e6 / v["client_cpu_us_per_req"]) if v["client_cpu_us_per_req"] else "-"]
            for k, v in med.items()]
    print()
    print(bl.format_table(["generator/test", "rps", "generator us/req", "one-core capacity"], rows))
    if not args.no_record:
        record = bl.record_header("loadgen-compare", args, [spec])
        record.update({"rounds": rounds, "medians": med})
        print(f"\nrecord: {bl.write_record(record, args.out, 'loadgen')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
