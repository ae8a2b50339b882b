#!/usr/bin/env python3
"""Under load: throughput and p99 latency together, as on the benchmarks page.

Rows: SET/GET with 50 and 200 clients without pipelining, SET/HSET with 200
clients and pipeline 16, and SET/GET at pipeline 16 against Ruvio with 2 and 4
shards (forward mode, one port), each against the same Redis (and Valkey). The
load generator is ruvio-bench, because it reports per-request percentiles from
HdrHistogram; redis-benchmark's p99 is coarser.

The fsync-on-every-write rows (Ruvio durability=always against Redis
appendfsync always, each logging into its own fresh work directory) run with
--fsync; the once-a-second rows (durability=everysec against appendfsync
everysec, beside the same row without a log) with --everysec. --rows selects
rows by a regular expression on their labels.

Examples:
  scripts/under_load.py
  scripts/under_load.py --no-ruvio -n 20000 --rounds 1 --no-record     # functional check
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass

import benchlib as bl


@dataclass
class Scenario:
    """One row: a built-in test at a client count and pipeline depth.

    `shards` names the Ruvio configuration the row needs (1 is the plain one);
    `log` rows ("always", "everysec") need durability on both sides.
    """

    test: str
    clients: int
    pipeline: int
    shards: int = 1
    log: str = ""

    def label(self) -> str:
        parts = [self.test.upper(), f"{self.clients} clients"]
        parts[-1] += ", no pipeline" if self.pipeline == 1 else f", pipeline {self.pipeline}"
        if self.shards > 1:
            parts.append(f"Ruvio {self.shards} shards")
        label = " · ".join(parts)
        return label + LOG_LABELS[self.log]


SCENARIOS = [
    Scenario("set", 50, 1), Scenario("get", 50, 1),
    Scenario("set", 200, 1), Scenario("get", 200, 1),
    Scenario("set", 200, 16), Scenario("hset", 200, 16),
    Scenario("set", 200, 16, shards=2), Scenario("set", 200, 16, shards=4),
    Scenario("get", 200, 16, shards=2),
    Scenario("set", 50, 1, log="always"), Scenario("set", 200, 1, log="always"),
    Scenario("set", 50, 16, log="always"), Scenario("set", 200, 16, shards=2, log="always"),
    Scenario("set", 200, 16, log="everysec"),
]

LOG_LABELS = {"": "", "always": " · fsync always", "everysec": " · fsync everysec"}
"""Label suffix of the rows of each log mode."""

LOG_NAMES = {"": "", "always": "-fsync", "everysec": "-everysec"}
"""Server name suffix of each log mode (the always rows' names as in older records)."""

SKIPPED_NOTE = {"always": "skipped: pass --fsync to run the durability=always rows",
                "everysec": "skipped: pass --everysec to run the durability=everysec rows"}

REDIS_LOG_ARGS = {"": [], "always": ["--appendonly", "yes", "--appendfsync", "always"],
                  "everysec": ["--appendonly", "yes", "--appendfsync", "everysec"]}
# No save rules on either side (Redis runs with --save ""): no background save
# lands inside a measured row.
RUVIO_LOG_ARGS = {"": [], "always": ["--durability", "always", "--dir", "{dir}", "--save", ""],
                  "everysec": ["--durability", "everysec", "--dir", "{dir}", "--save", ""]}


def wanted(s: Scenario, args: argparse.Namespace) -> bool:
    """The row runs: its log mode was asked for and its label matches --rows."""
    mode_on = {"": True, "always": args.fsync, "everysec": args.everysec}[s.log]
    return mode_on and re.search(args.rows, s.label()) is not None


def shard_cpus(server_cpus: str, shards: int) -> str:
    """The CPU list for N shards: the server CPUs, repeated when there are fewer."""
    cpus = [c for part in server_cpus.split(",") for c in expand_range(part)]
    return ",".join(cpus[i % len(cpus)] for i in range(shards))


def expand_range(part: str) -> list[str]:
    if "-" in part:
        lo, hi = part.split("-")
        return [str(c) for c in range(int(lo), int(hi) + 1)]
    return [part]


def variants(specs: list[bl.ServerSpec], args: argparse.Namespace) -> list[tuple[bl.ServerSpec, list]]:
    """Each server configuration with the scenarios it runs.

    Reference servers run every 1-shard-style row (the shard rows compare Ruvio
    with N shards against the same single Redis). Ruvio gets one configuration
    per shard count and per durability.
    """
    rows = [s for s in SCENARIOS if wanted(s, args)]
    out = []
    for spec in specs:
        if spec.kind != "ruvio":
            for log in sorted({s.log for s in rows}):
                v = bl.ServerSpec(spec.name + LOG_NAMES[log], spec.kind, spec.argv + REDIS_LOG_ARGS[log],
                                  spec.binary, spec.version)
                out.append((v, [s for s in rows if s.log == log]))
            continue
        for shards, log in sorted({(s.shards, s.log) for s in rows}):
            argv = bl.ruvio_argv(spec.binary, shards, shard_cpus(args.server_cpu, shards))
            argv += RUVIO_LOG_ARGS[log] + spec.argv[len(bl.ruvio_argv(spec.binary)):]
            name = f"ruvio-{shards}sh" + LOG_NAMES[log]
            out.append((bl.ServerSpec(name, "ruvio", argv, spec.binary, spec.version),
                        [s for s in rows if s.shards == shards and s.log == log]))
    return out


def run_variant(server: bl.ServerProcess, rows: list[Scenario], args: argparse.Namespace) -> dict:
    """All rows of one configuration against one fresh server.

    A row whose command the server lacks is recorded as missing; any other
    error reply marks the row failed, loudly, and the other rows go on.
    """
    bl.seed_strings(server.port, args.keyspace, args.datasize)
    out = {}
    for s in rows:
        load = bl.Load(s.clients, s.pipeline, args.requests, args.keyspace, args.datasize)
        try:
            result, cpu_us = bl.measured(server, lambda: bl.ruvio_bench(
                server.port, load, test=s.test, cpus=args.client_cpu, binary=args.ruvio_bench))
        except RuntimeError as e:
            status = "missing" if "unknown command" in str(e) else "failed"
            out[s.label()] = {"status": status, "detail": str(e)[:300]}
            print(f"  {server.spec.name:14} {s.label():48} {status.upper()}: {str(e)[:120]}", flush=True)
            continue
        out[s.label()] = {"status": "ok", "rps": result.rps, "p99_ms": result.p99_ms, "p50_ms": result.p50_ms,
                          "cpu_us_per_req": cpu_us, "latency_ms": result.extra.get("latency_ms"),
                          **bl.row_conditions(result, server)}
        print(f"  {server.spec.name:14} {s.label():48} {bl.fmt_rate(result.rps):>8} "
              f"p99 {bl.fmt_num(result.p99_ms, 3)} ms", flush=True)
    return out


def summarize(rounds: list[dict], names: list[str]) -> dict:
    """Median rps and p99 per row and configuration; a configuration that never
    measured a row shows its status (missing, failed) instead."""
    rows: dict = {}
    for r in rounds:
        for name, results in r["results"].items():
            for label, m in results.items():
                rows.setdefault(label, {}).setdefault(name, []).append(m)
    return {label: {name: median_entry(ms) for name, ms in per.items()} for label, per in rows.items()}


def median_entry(entries: list[dict]) -> dict:
    """Medians over the rounds that measured; the first problem when none did."""
    ok = [m for m in entries if m["status"] == "ok"]
    if not ok:
        return {"status": entries[0]["status"], "detail": entries[0].get("detail")}
    return {"status": "ok", "rps": bl.median([m["rps"] for m in ok]), "p99_ms": bl.median([m["p99_ms"] for m in ok]),
            "rps_rounds": [m["rps"] for m in ok], "p99_rounds": [m["p99_ms"] for m in ok]}


def print_report(medians: dict, args: argparse.Namespace) -> None:
    """One line per row: each server's rps and p99, Ruvio's ratio to Redis."""
    table = []
    for s in SCENARIOS:
        label = s.label()
        if s.log and not wanted(s, args) and re.search(args.rows, label):
            table.append([label, SKIPPED_NOTE[s.log], ""])
            continue
        if not wanted(s, args):
            continue
        per = medians.get(label, {})
        ruvio = next((v for k, v in per.items() if k.startswith("ruvio") and v["status"] == "ok"), None)
        redis = next((v for k, v in per.items() if k.startswith("redis") and v["status"] == "ok"), None)
        cells = "  ".join(f"{k} {bl.fmt_rate(v['rps'])} p99 {bl.fmt_num(v['p99_ms'], 3)}ms" if v["status"] == "ok"
                          else f"{k} {v['status']}" for k, v in sorted(per.items()))
        both = ruvio and redis
        table.append([label, cells, bl.fmt_ratio(bl.ratio(ruvio["rps"], redis["rps"]) if both else float("nan"))])
    print(bl.format_table(["scenario", "servers (median)", "ruvio/redis rps"], table))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    bl.add_generator_args(p, requests=1_000_000)
    p.add_argument("--fsync", action="store_true", help="also run the fsync-always rows")
    p.add_argument("--everysec", action="store_true", help="also run the fsync-everysec rows")
    p.add_argument("--rows", default="", help="regular expression selecting rows by label")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    specs = bl.build_servers(args)
    configs = variants(specs, args)
    by_name = {v.name: (v, rows) for v, rows in configs}
    rounds = bl.run_rounds([v for v, _ in configs], args.rounds, args.server_cpu,
                           lambda srv: run_variant(srv, by_name[srv.spec.name][1], args),
                           failed=lambda spec, err: {s.label(): {"status": "failed", "detail": err[:300]}
                                                     for s in by_name[spec.name][1]})
    medians = summarize(rounds, list(by_name))
    print()
    print_report(medians, args)
    if not args.no_record:
        record = bl.record_header("under-load", args, [v for v, _ in configs])
        record.update({"scenarios": [s.__dict__ | {"label": s.label()} for s in SCENARIOS],
                       "fsync_note": None if args.fsync else SKIPPED_NOTE["always"],
                       "everysec_note": None if args.everysec else SKIPPED_NOTE["everysec"],
                       "rounds": rounds, "medians": medians})
        print(f"\nrecord: {bl.write_record(record, args.out, 'under-load')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
