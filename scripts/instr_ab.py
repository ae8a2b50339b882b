#!/usr/bin/env python3
"""Instructions per request, counted by callgrind: an A/B for costs of a few per
cent, which this VM's timing cannot show.

burst_ab.py measures CPU time, and on this kind of host the same server measured
twice a few seconds apart differs by 10-25 % (records/burst-ab-2026-12-04-13.json:
round ratios 0.74-1.21 between two identical builds), so a 2 % cost (latency
tracking, an ACL check) is below its noise. An instruction count does not drift:
each server here runs under valgrind's callgrind, pinned to the server CPU, is
warmed, then per row and round its counters are zeroed (`callgrind_control -z`),
ruvio-bench sends a fixed number of requests, and the counters are dumped
(`callgrind_control -d`): instructions executed by every thread of the server,
divided by the requests. Instructions are not time (a cache miss costs no
instruction), so a record of both says the most; under callgrind a server runs
some 50x slower, so each loop iteration takes larger batches of the pipelined
requests than at full speed (per-iteration costs are spread thinner; both sides
alike).

Example (latency tracking and the slow log on, against both off):
  scripts/instr_ab.py -t get,set --command 'EVALSHA=EVALSHA {sha_get} 1 key:__rand_int__' \\
    --server 'off=target/release/ruvio --port {port} --shards 1 --cpus 0' \\
    --server 'on=target/release/ruvio --port {port} --shards 1 --cpus 0' \\
    --after-start 'off=CONFIG SET latency-tracking no slowlog-log-slower-than -1'

Rows, `--after-start`, `--replica`, `--warm-command`, `--bench-args`, `--server-bench-args` and
`{sha_get}` work as in burst_ab.py (the warm-up runs without the bench args).
`--cache-sim` adds callgrind's cache simulation (its model's 32 KiB L1s and last
level, not this CPU's): misses per request beside the instructions, for code that
runs the same instructions but no longer fits the instruction cache.
"""

import argparse
import glob
import os
import shutil
import subprocess
import time

import benchlib as bl
import burst_ab

# Under callgrind a server starts and warms some 50x slower than natively.
CALLGRIND_READY_TIMEOUT_S = 120.0
# How long a counter dump may take to appear.
CALLGRIND_DUMP_TIMEOUT_S = 300.0


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", required=True, metavar="NAME=COMMAND",
                   help="server to compare (two or more; the first is the baseline); COMMAND may use {port}")
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--client-cpu", default="1")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench())
    p.add_argument("-t", "--test", default="", help="ruvio-bench built-in tests, comma separated")
    p.add_argument("--command", action="append", default=[], metavar="NAME=TEMPLATE")
    p.add_argument("-c", "--clients", type=int, default=50)
    p.add_argument("-P", "--pipeline", type=int, default=16)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("-r", "--keyspace", type=int, default=100_000)
    p.add_argument("-n", "--requests", type=int, default=100_000, help="requests per row, server and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--warm-requests", type=int, default=100_000)
    p.add_argument("--warm-command", metavar="TEMPLATE")
    p.add_argument("--after-start", action="append", default=[], metavar="NAME=COMMAND")
    p.add_argument("--bench-args", default="", metavar="ARGS",
                   help="extra ruvio-bench flags for every run, as burst_ab.py's (e.g. '--tracking')")
    p.add_argument("--server-bench-args", action="append", default=[], metavar="NAME=ARGS",
                   help="extra ruvio-bench flags for server NAME's runs, after --bench-args")
    p.add_argument("--replica", action="append", default=[], metavar="NAME=COMMAND",
                   help="a replica of server NAME for the whole run, as burst_ab.py's (COMMAND with "
                        "{port}; pinned to the generator's CPU, not counted): what a replica costs the primary")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    p.add_argument("--cache-sim", action="store_true",
                   help="also simulate the caches (callgrind --cache-sim=yes): each row keeps its "
                        "L1 instruction and data misses and last-level misses per request")
    p.add_argument("--keep", metavar="DIR", help="keep each row's callgrind dump in DIR as SERVER-ROW-rROUND.callgrind")
    args = p.parse_args()
    if len(args.server) < 2:
        p.error("give two or more --server")
    if not args.test and not args.command:
        args.test = "set"
    return args


def under_callgrind(spec: bl.ServerSpec, cache_sim: bool) -> bl.ServerSpec:
    """`spec` run by callgrind, its counts written into the server's directory."""
    sim = ["--cache-sim=yes"] if cache_sim else []
    argv = ["valgrind", "--tool=callgrind", *sim, "--callgrind-out-file={dir}/callgrind.out.%p", *spec.argv]
    return bl.ServerSpec(spec.name, spec.kind, argv, spec.binary, spec.version)


def counts(server: bl.ServerProcess) -> tuple[dict[str, int], str]:
    """Dump the server's counts and read them since the last zeroing, by event
    (`Ir` the instructions; with the cache simulation also `I1mr`, `D1mr`,
    `D1mw`, `ILmr`, `DLmr`, `DLmw`), and the dump's path."""
    before = set(glob.glob(os.path.join(server.workdir, "callgrind.out.*")))
    subprocess.run(["callgrind_control", "-d", str(server.pid)], check=True, capture_output=True)
    # A dump of a busy server under valgrind can take minutes on a loaded host.
    deadline = time.monotonic() + CALLGRIND_DUMP_TIMEOUT_S
    while time.monotonic() < deadline:
        for path in set(glob.glob(os.path.join(server.workdir, "callgrind.out.*"))) - before:
            events = ["Ir"]
            with open(path) as f:
                for line in f:
                    if line.startswith("events:"):
                        events = line.split()[1:]
                    if line.startswith(("summary:", "totals:")):
                        return dict(zip(events, map(int, line.split()[1:]))), path
        time.sleep(0.2)
    raise RuntimeError(f"{server.spec.name}: no callgrind dump")


def run(args: argparse.Namespace, server: bl.ServerProcess, row: dict, requests: int, bench: bool = True,
        keep_as: str = "") -> dict:
    load = bl.Load(clients=args.clients, pipeline=args.pipeline, requests=requests,
                   keyspace=args.keyspace, datasize=args.datasize)
    subprocess.run(["callgrind_control", "-z", str(server.pid)], check=True, capture_output=True)
    result = bl.ruvio_bench(server.port, load, command=row.get("command"), test=row.get("test"),
                            cpus=args.client_cpu, binary=args.ruvio_bench,
                            extra=burst_ab.bench_args(args, server) if bench else [])
    events, dump = counts(server)
    count = events["Ir"]
    if args.keep and keep_as:
        # For a per-function diff of two servers (`callgrind_annotate` of each).
        os.makedirs(args.keep, exist_ok=True)
        shutil.copy(dump, os.path.join(args.keep, f"{keep_as}.callgrind"))
    misses = {f"{event}_per_request": n / result.requests for event, n in events.items() if event != "Ir"}
    return {"instructions": count, "requests": result.requests,
            "instructions_per_request": count / result.requests, **misses, "rps_under_callgrind": result.rps,
            **bl.row_conditions(result, server)}


def main() -> None:
    args = parse_args()
    specs = [bl.custom_server(entry) for entry in args.server]
    for spec in specs:
        spec.version = bl.binary_version(spec.binary)
    record = bl.record_header("instr-ab", args, specs)
    rows = burst_ab.rows_of(args)
    bl.SERVER_READY_TIMEOUT_S = CALLGRIND_READY_TIMEOUT_S
    servers = [bl.ServerProcess(under_callgrind(s, args.cache_sim), args.server_cpu) for s in specs]
    rounds = []
    replicas = []
    try:
        for server in servers:
            server.start()
            server.client().call("SCRIPT", "LOAD", burst_ab.SCRIPT_GET)
            for entry in args.after_start:
                name, _, command = entry.partition("=")
                if name == server.spec.name:
                    print(f"{name}: {command} -> {server.client().call(*command.split())!r}", flush=True)
            for entry in args.replica:
                name, _, command = entry.partition("=")
                if name == server.spec.name:
                    replicas.append(burst_ab.attach_replica(server, command, args.client_cpu))
        warm = {"command": args.warm_command.split()} if args.warm_command else {"test": "set"}
        for server in servers:
            run(args, server, warm, args.warm_requests, bench=False)
        for r, order in enumerate(bl.round_orders(range(len(servers)), args.rounds)):
            result = {"order": [specs[i].name for i in order], "rows": {}}
            for name, row in rows:
                result["rows"][name] = {
                    specs[i].name: run(args, servers[i], row, args.requests,
                                       keep_as=f"{specs[i].name}-{name}-r{r + 1}") for i in order}
                print(f"round {r + 1} {name}: " + "  ".join(
                    f"{n}={v['instructions_per_request']:,.0f}"
                    + (f" (I1 misses {v['I1mr_per_request']:.1f})" if "I1mr_per_request" in v else "")
                    for n, v in result["rows"][name].items()), flush=True)
            rounds.append(result)
    finally:
        for replica in replicas:
            replica.stop()
        for server in servers:
            server.stop()
    base = specs[0].name
    medians = {}
    for name, _ in rows:
        medians[name] = {}
        for s in specs:
            per = [r["rows"][name][s.name]["instructions_per_request"] for r in rounds]
            ratios = [r["rows"][name][s.name]["instructions_per_request"]
                      / r["rows"][name][base]["instructions_per_request"] for r in rounds]
            medians[name][s.name] = {"instructions_per_request": bl.median(per),
                                     f"ratio_to_{base}": bl.median(ratios), "ratios": ratios}
            misses = ""
            for event in ("I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw"):
                key = f"{event}_per_request"
                if key in rounds[0]["rows"][name][s.name]:
                    m = bl.median([r["rows"][name][s.name][key] for r in rounds])
                    medians[name][s.name][key] = m
                    misses += f" {event} {m:.1f}"
            print(f"{name:>10} {s.name:>12}: {bl.median(per):,.0f} instructions per request, "
                  f"{bl.median(ratios):.3f}x {base} (rounds {min(ratios):.3f}-{max(ratios):.3f})"
                  + (f"; misses per request:{misses}" if misses else ""))
    record.update({"rows": [name for name, _ in rows], "rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "instr-ab"))


if __name__ == "__main__":
    main()
