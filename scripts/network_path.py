#!/usr/bin/env python3
"""Network-path check for issue 2: GET and SET through the whole server, three loads.

Ruvio's claim is that its socket path beats Redis and Valkey both in requests per
second and in server CPU per request. This script measures exactly the loads of
the runtime notes (redis-benchmark `-d 64 -r 100000`, `-c 50 -P 16`,
`-c 200 -P 16`, `-c 50 -P 1`) with every server pinned to one CPU and the
generator to another, alternating server order over rounds, and prints whether
each requirement holds on the medians:

  pipeline 16: Ruvio >= 1.5x Redis rps, >= 1.15x Valkey rps, <= 0.65x Redis CPU/request
  pipeline 1:  Ruvio >= 1.0x Redis and Valkey rps, <= 1.0x Redis CPU/request

Example (the lead's run on a quiet machine):
  scripts/network_path.py --ruvio target/release/ruvio --rounds 5
Functional check with a small count and no record:
  scripts/network_path.py -n 20000 --rounds 1 --no-record
"""

from __future__ import annotations

import argparse
import sys

import benchlib as bl

LOADS = [("c50-P16", 50, 16), ("c200-P16", 200, 16), ("c50-P1", 50, 1)]
"""(label, clients, pipeline): the three loads the runtime notes measured."""

TESTS = ["set", "get"]
"""SET first so GET hits the keys the SET run wrote."""

REQUIREMENTS = {
    16: {"rps_vs_redis": 1.5, "rps_vs_valkey": 1.15, "cpu_vs_redis": 0.65},
    1: {"rps_vs_redis": 1.0, "rps_vs_valkey": 1.0, "cpu_vs_redis": 1.0},
}
"""Issue 2's bars per pipeline depth; rps bars are minimums, the CPU bar a maximum."""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    bl.add_generator_args(p, requests=2_000_000)
    return p.parse_args()


def run_server_round(server: bl.ServerProcess, args: argparse.Namespace) -> dict:
    """Every load and test against one fresh server."""
    out: dict = {}
    for label, clients, pipeline in LOADS:
        load = bl.Load(clients, pipeline, args.requests, args.keyspace, args.datasize)
        for test in TESTS:
            result, cpu_us = bl.measured(server, lambda: bl.run_load(
                args.generator, server.port, load, test=test, cpus=args.client_cpu,
                binary=bl.generator_binary(args)))
            out[f"{label}/{test}"] = {"rps": result.rps, "cpu_us_per_req": cpu_us,
                                      "p50_ms": result.p50_ms, "p99_ms": result.p99_ms,
                                      "client_cpu_s": result.client_cpu_s,
                                      **bl.row_conditions(result, server)}
            print(f"  {server.spec.name:8} {label:9} {test.upper():4} {bl.fmt_rate(result.rps):>8}"
                  f"  {bl.fmt_num(cpu_us)} us/req", flush=True)
    return out


def summarize(rounds: list[dict], names: list[str]) -> dict:
    """Medians per server and row: {row: {server: {'rps', 'cpu_us_per_req', 'p99_ms'}}}."""
    rows = {}
    for key in rounds[0]["results"][names[0]]:
        rows[key] = {}
        for n in names:
            samples = [r["results"][n][key] for r in rounds]
            rows[key][n] = {m: bl.median([s[m] for s in samples])
                            for m in ("rps", "cpu_us_per_req", "p99_ms")}
            rows[key][n]["rps_rounds"] = [s["rps"] for s in samples]
    return rows


def check(rows: dict, names: list[str]) -> list[dict]:
    """Every requirement on every row it applies to, with the measured value."""
    if "ruvio" not in names:
        return []
    verdicts = []
    for key, row in rows.items():
        pipeline = 16 if "P16" in key else 1
        bars = REQUIREMENTS[pipeline]
        ours = row["ruvio"]
        for ref, metric, what in (("redis", "rps", "rps_vs_redis"), ("valkey", "rps", "rps_vs_valkey"),
                                  ("redis", "cpu_us_per_req", "cpu_vs_redis")):
            if ref not in row:
                continue
            value = bl.ratio(ours[metric], row[ref][metric])
            bar = bars[what]
            ok = value <= bar if metric == "cpu_us_per_req" else value >= bar
            verdicts.append({"row": key, "requirement": what, "bar": bar, "value": value, "pass": ok})
    return verdicts


def print_table(rows: dict, names: list[str]) -> None:
    """Median rps and CPU per server, ratios against Redis and Valkey."""
    refs = [r for r in ("redis", "valkey") if r in names and "ruvio" in names]
    headers = ["row"] + [f"{n} rps" for n in names] + [f"{n} us/req" for n in names]
    headers += [f"ruvio/{r} rps" for r in refs] + [f"ruvio/{r} cpu" for r in refs]
    table = []
    for key, row in rows.items():
        cells = [key] + [bl.fmt_rate(row[n]["rps"]) for n in names]
        cells += [bl.fmt_num(row[n]["cpu_us_per_req"]) for n in names]
        cells += [bl.fmt_ratio(bl.ratio(row["ruvio"]["rps"], row[r]["rps"])) for r in refs]
        cells += [bl.fmt_ratio(bl.ratio(row["ruvio"]["cpu_us_per_req"], row[r]["cpu_us_per_req"])) for r in refs]
        table.append(cells)
    print(bl.format_table(headers, table))


def print_verdicts(verdicts: list[dict]) -> None:
    """One line per requirement and an overall verdict."""
    if not verdicts:
        print("\nno Ruvio in this run: requirements not checked")
        return
    print("\nrequirements (medians):")
    for v in verdicts:
        sign = "<=" if v["requirement"].startswith("cpu") else ">="
        print(f"  {'PASS' if v['pass'] else 'FAIL'}  {v['row']:14} {v['requirement']:14} "
              f"{bl.fmt_ratio(v['value'])} {sign} {v['bar']}x")
    passed = sum(v["pass"] for v in verdicts)
    print(f"  {passed} of {len(verdicts)} requirements pass")


def main() -> int:
    args = parse_args()
    specs = bl.build_servers(args)
    names = [s.name for s in specs]
    rounds = bl.run_rounds(specs, args.rounds, args.server_cpu, lambda srv: run_server_round(srv, args))
    rows = summarize(rounds, names)
    verdicts = check(rows, names)
    print()
    print_table(rows, names)
    print_verdicts(verdicts)
    if not args.no_record:
        record = bl.record_header("network-path", args, specs)
        record.update({"loads": LOADS, "requirements": REQUIREMENTS, "rounds": rounds,
                       "medians": rows, "verdicts": verdicts})
        print(f"\nrecord: {bl.write_record(record, args.out, 'network-path')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
