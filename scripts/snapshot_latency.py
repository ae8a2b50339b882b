#!/usr/bin/env python3
"""GET latency while a background snapshot runs: Ruvio's forkless BGSAVE (every
shard writes its snapshot in 0.5 ms slices while it serves, docs/durability.md)
against Redis 7's BGSAVE with fork, on the same keyspace (~1 GB by default:
1,000,000 keys of 1000 bytes).

Per server and round: seed the keyspace; time one BGSAVE with no load (its
duration D); measure GET at 50 clients, no pipeline, for about D seconds with no
save (the baseline); then start BGSAVE and measure the same load for about D
seconds while it runs (the row that matters: issue 8 asks p99 below 2 ms). The
record says whether the save was still running when the measured load ended
(when not, part of the run saw no save and the p99 flatters the server).

Ruvio runs with `--durability everysec` (BGSAVE needs its log directory) and no
save rules; Redis with `--save ""` (BGSAVE still forks and writes dump.rdb).

Examples:
  scripts/snapshot_latency.py
  scripts/snapshot_latency.py -r 100000 -d 100 --rounds 1 --no-record   # quick check
"""

from __future__ import annotations

import argparse
import sys
import time

import benchlib as bl

RUVIO_ARGS = ["--durability", "everysec", "--dir", "{dir}", "--save", ""]
SAVE_TIMEOUT_S = 600.0


def persistence(port: int) -> dict:
    """INFO persistence as a dict of strings."""
    with bl.RespClient(port) as c:
        text = c.call("INFO", "persistence").decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def bgsave(port: int) -> float:
    """Start BGSAVE; return the time it started (monotonic)."""
    with bl.RespClient(port) as c:
        reply = c.call("BGSAVE")
    if reply != "Background saving started":
        raise RuntimeError(f"BGSAVE answered {reply!r}")
    return time.monotonic()


def saving(port: int) -> bool:
    return persistence(port).get("rdb_bgsave_in_progress") == "1"


def wait_saved(port: int) -> float:
    """Wait for the running save to end; return when it ended (monotonic)."""
    deadline = time.monotonic() + SAVE_TIMEOUT_S
    while saving(port):
        if time.monotonic() > deadline:
            raise RuntimeError("BGSAVE did not end")
        time.sleep(0.01)
    status = persistence(port).get("rdb_last_bgsave_status")
    if status != "ok":
        raise RuntimeError(f"BGSAVE ended with status {status}")
    return time.monotonic()


def gets(server: bl.ServerProcess, args: argparse.Namespace, requests: int) -> bl.LoadResult:
    load = bl.Load(args.clients, 1, requests, args.keyspace, args.datasize)
    return bl.ruvio_bench(server.port, load, test="get", cpus=args.client_cpu, binary=args.ruvio_bench)


def run_server(server: bl.ServerProcess, args: argparse.Namespace) -> dict:
    """Seed, time an idle save, then the baseline and the during-save runs."""
    bl.seed_strings(server.port, args.keyspace, args.datasize)
    started = bgsave(server.port)
    idle_save_s = wait_saved(server.port) - started
    probe = gets(server, args, 20_000)
    # About as many requests as the save lasts, a little less so the load ends
    # inside the save.
    requests = max(10_000, int(probe.rps * idle_save_s * 0.8))
    baseline = gets(server, args, requests)
    started = bgsave(server.port)
    during = gets(server, args, requests)
    covered = saving(server.port)
    loaded_save_s = wait_saved(server.port) - started
    out = {"idle_save_s": idle_save_s, "loaded_save_s": loaded_save_s, "requests": requests,
           "save_outlasted_load": covered,
           "baseline": {"rps": baseline.rps, "p50_ms": baseline.p50_ms, "p99_ms": baseline.p99_ms,
                        "max_ms": baseline.max_ms, **bl.row_conditions(baseline, server)},
           "during_save": {"rps": during.rps, "p50_ms": during.p50_ms, "p99_ms": during.p99_ms,
                           "max_ms": during.max_ms, **bl.row_conditions(during, server)}}
    print(f"  {server.spec.name:8} save {idle_save_s:6.2f}s idle, {loaded_save_s:6.2f}s loaded;  GET p99 "
          f"{bl.fmt_num(baseline.p99_ms, 3)} ms -> {bl.fmt_num(during.p99_ms, 3)} ms during the save"
          f"{'' if covered else ' (the save ended before the load)'}", flush=True)
    return out


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    bl.add_generator_args(p, requests=0)
    p.add_argument("-c", "--clients", type=int, default=50)
    p.set_defaults(keyspace=1_000_000, datasize=1000, rounds=3)
    return p.parse_args()


def main() -> int:
    args = parse_args()
    args.ruvio_args = " ".join(f"'{a}'" if a == "" else a for a in RUVIO_ARGS) + " " + args.ruvio_args
    specs = bl.build_servers(args)
    rounds = bl.run_rounds(specs, args.rounds, args.server_cpu, lambda srv: run_server(srv, args),
                           failed=lambda spec, err: {"status": "failed", "detail": err[:300]})
    rows = []
    for s in specs:
        ok = [r["results"][s.name] for r in rounds if "during_save" in r["results"].get(s.name, {})]
        if not ok:
            rows.append([s.name, "failed", "", ""])
            continue
        base = bl.median([r["baseline"]["p99_ms"] for r in ok])
        during = bl.median([r["during_save"]["p99_ms"] for r in ok])
        save = bl.median([r["loaded_save_s"] for r in ok])
        rows.append([s.name, bl.fmt_num(base, 3), bl.fmt_num(during, 3), bl.fmt_num(save, 2)])
    print()
    print(bl.format_table(["server", "GET p99 ms, no save", "GET p99 ms, during BGSAVE", "save s"], rows))
    if not args.no_record:
        record = bl.record_header("snapshot-latency", args, specs)
        record.update({"rounds": rounds, "table": rows})
        print(f"\nrecord: {bl.write_record(record, args.out, 'snapshot-latency')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
