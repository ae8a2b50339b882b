#!/usr/bin/env python3
"""Whole machine: Ruvio with N shards against a Redis Cluster of N nodes and one Redis.

Ruvio runs N shards in one process in per-shard mode (shard i on port+i). The
Redis Cluster has N masters, one per server CPU, created with
`redis-cli --cluster create` (N >= 3; below that Redis refuses, so the slots
are assigned with CLUSTER ADDSLOTSRANGE and MEET, which is what it does). One
load generator per shard, pinned to its own CPU, sends each row's command to
that shard's port with every key inside a hash tag the shard owns, so nothing
crosses shards. Rates are summed over the shards. The single Redis gets one
generator and gives the per-core reference.

Rows are the 60 commands of redis_compare_features.py (select with --rows).
With --memory the 12 data shapes are loaded once per shard (N copies on the
N-shard systems, one on the single Redis) and resident memory is compared per
shard.

On this 2-CPU development machine N=1 and N=2 are functional runs only: at N=2
servers and generators share the CPUs. On a 16-CPU machine:
  scripts/shard_compare.py --shards 8 --server-cpus 8-15 --client-cpus 0-7 --memory
Functional check:
  scripts/shard_compare.py --shards 2 --rows '^(GET|SET)$' -n 20000 --rounds 1 --no-record
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import benchlib as bl
import memory_shapes as ms
import redis_compare_features as rcf

CLUSTER_READY_TIMEOUT_S = 30.0
"""How long a new Redis Cluster may take to agree on its slots."""


def cpu_list(text: str) -> list[str]:
    """'0-2,5' -> ['0', '1', '2', '5']."""
    out: list[str] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out += [str(c) for c in range(int(lo), int(hi or lo) + 1)]
    return out


@dataclass
class Shard:
    """Where one generator sends: port, the tag its keys carry, its CPU."""

    port: int
    tag: str
    client_cpu: str


@dataclass
class System:
    """A running system under test: its shards and its processes (for CPU and RSS)."""

    name: str
    shards: list[Shard]
    processes: list[bl.ServerProcess] = field(default_factory=list)

    def cpu_seconds(self) -> float:
        return sum(p.cpu_seconds() for p in self.processes)

    def rss_kib(self) -> int:
        return sum(p.rss_kib() for p in self.processes)

    def stop(self) -> None:
        for p in self.processes:
            p.stop()


def shards_from_slots(port: int, client_cpus: list[str]) -> list[Shard]:
    """Shards from CLUSTER SLOTS with a hash tag each shard owns."""
    found = bl.cluster_shards(port)
    return [Shard(s["port"], bl.tag_for_slots(s["ranges"]), client_cpus[i % len(client_cpus)])
            for i, s in enumerate(found)]


def start_ruvio(args: argparse.Namespace, server_cpus: list[str], client_cpus: list[str]) -> System:
    """One Ruvio process, N shards, per-shard ports."""
    n = args.shards
    argv = bl.ruvio_argv(args.ruvio, n, ",".join(server_cpus[:n]), "per-shard") + args.ruvio_args.split()
    spec = bl.ServerSpec("ruvio", "ruvio", argv, args.ruvio, bl.binary_version(args.ruvio))
    proc = bl.ServerProcess(spec, ",".join(server_cpus[:n]), port=bl.free_port(block=n)).start()
    try:
        for i in range(1, n):
            bl.wait_for_ping(proc.port + i, bl.SERVER_READY_TIMEOUT_S)
        wait_cluster_ok([proc.port + i for i in range(n)])
        return System(f"ruvio-{n}", shards_from_slots(proc.port, client_cpus), [proc])
    except Exception:
        proc.stop()
        raise


def slot_ranges(n: int) -> list[tuple[int, int]]:
    """16384 slots split into n contiguous ranges, as redis-cli would."""
    bounds = [round(i * 16384 / n) for i in range(n + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(n)]


def create_cluster(ports: list[int], redis_cli: str) -> None:
    """Join the nodes into one cluster of masters and wait until it is ok."""
    if len(ports) >= 3:
        subprocess.run([redis_cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                        "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True)
    else:
        for port, (lo, hi) in zip(ports, slot_ranges(len(ports))):
            with bl.RespClient(port) as c:
                reply = c.call("CLUSTER", "ADDSLOTSRANGE", lo, hi)
                if reply != "OK":
                    raise RuntimeError(f"ADDSLOTSRANGE on {port}: {reply}")
                if port != ports[0]:
                    c.call("CLUSTER", "MEET", "127.0.0.1", ports[0])
    wait_cluster_ok(ports)


def wait_cluster_ok(ports: list[int]) -> None:
    """Every node reports cluster_state:ok and sees all masters."""
    deadline = time.monotonic() + CLUSTER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        ok = True
        for port in ports:
            with bl.RespClient(port) as c:
                info = c.call("CLUSTER", "INFO")
                info = info.decode() if isinstance(info, bytes) else str(info)
                ok &= "cluster_state:ok" in info and len(bl.cluster_shards(port)) == len(ports)
        if ok:
            return
        time.sleep(0.2)
    raise TimeoutError("Redis Cluster did not reach cluster_state:ok")


def start_redis_cluster(args: argparse.Namespace, server_cpus: list[str], client_cpus: list[str]) -> System:
    """N Redis nodes, each pinned to its own server CPU, joined into a cluster."""
    spec = bl.ServerSpec("redis-node", "redis", bl.redis_like_argv(args.redis), args.redis)
    extra = ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
    procs: list[bl.ServerProcess] = []
    try:
        for i in range(args.shards):
            port = bl.free_port(bus=True)
            procs.append(bl.ServerProcess(spec, server_cpus[i % len(server_cpus)], port, extra).start())
        create_cluster([p.port for p in procs], args.redis_cli)
        return System(f"cluster-{args.shards}", shards_from_slots(procs[0].port, client_cpus), procs)
    except Exception:
        for p in procs:
            p.stop()
        raise


def start_single_redis(args: argparse.Namespace, server_cpus: list[str], client_cpus: list[str]) -> System:
    """One Redis process on the first server CPU, one generator on the first client CPU."""
    spec = bl.ServerSpec("redis", "redis", bl.redis_like_argv(args.redis), args.redis)
    proc = bl.ServerProcess(spec, server_cpus[0]).start()
    return System("redis-1", [Shard(proc.port, "", client_cpus[0])], [proc])


STARTERS = {"ruvio": start_ruvio, "cluster": start_redis_cluster, "single": start_single_redis}


def measure_row(system: System, row: rcf.Row, args: argparse.Namespace) -> dict:
    """Seed and check the row on every shard, then load all shards at once."""
    kind = "ruvio" if system.name.startswith("ruvio") else "redis"
    cmd = rcf.bench_args(row, bl.ServerSpec("", kind, []), args.datasize)
    for shard in system.shards:
        status, detail = rcf.prepare_row(shard.port, row, bl.tagged(cmd, shard.tag), shard.tag)
        if status != "ok":
            return {"status": status, "detail": f"port {shard.port}: {detail}"}
    load = bl.Load(args.clients, args.pipeline, max(1, int(args.requests * row.scale)),
                   args.keyspace, args.datasize)
    cpu0 = system.cpu_seconds()
    host0 = bl.host_snapshot()
    with cf.ThreadPoolExecutor(len(system.shards)) as pool:
        results = list(pool.map(lambda s: bl.run_load(
            args.generator, s.port, load, command=bl.tagged(cmd, s.tag), cpus=s.client_cpu,
            binary=bl.generator_binary(args)), system.shards))
    cpu = system.cpu_seconds() - cpu0
    # One generator per shard at once: their CPU together is the row's generator CPU.
    host = bl.host_since(host0, generator_cpu_s=sum(r.client_cpu_s for r in results), servers=system.processes)
    total = sum(r.requests for r in results)
    return {"status": "ok", "rps": sum(r.rps for r in results), "per_shard_rps": [r.rps for r in results],
            "cpu_us_per_req": bl.ratio(cpu * 1e6, total), **host}


def run_system(name: str, rows: list[rcf.Row], args, server_cpus, client_cpus) -> dict:
    """Start one system fresh, seed strings on every shard, measure every row."""
    system = STARTERS[name](args, server_cpus, client_cpus)
    try:
        for s in system.shards:
            bl.seed_strings(s.port, args.keyspace, args.datasize, s.tag)
        out = {}
        for row in rows:
            out[row.label] = measure_row(system, row, args)
            e = out[row.label]
            shown = bl.fmt_rate(e["rps"]) if e["status"] == "ok" else f"{e['status'].upper()}: {e['detail']}"
            print(f"  {system.name:10} {row.label[:44]:44} {shown}", flush=True)
        return out
    finally:
        system.stop()


def memory_system(name: str, shapes: list[ms.Shape], args, server_cpus, client_cpus) -> dict:
    """Added RSS per shape: fresh system, one copy of the shape per shard."""
    out = {}
    for shape in shapes:
        system = STARTERS[name](args, server_cpus, client_cpus)
        try:
            host0 = bl.host_snapshot()
            time.sleep(ms.SETTLE_S)
            idle = system.rss_kib()
            errors = [ms.load_shape(s.port, shape, shape.scaled(args.scale), s.tag) for s in system.shards]
            err = next((e for e in errors if e), None)
            time.sleep(ms.SETTLE_S)
            out[shape.label] = ({"status": "failed", "detail": err} if err else
                                {"status": "ok", "added_kib": system.rss_kib() - idle,
                                 "copies": len(system.shards)})
            out[shape.label].update(bl.host_since(host0, servers=system.processes))
        finally:
            system.stop()
        print(f"  {name:8} {shape.label:40} {out[shape.label].get('added_kib', out[shape.label]['status'])}",
              flush=True)
    return out


def summarize(rounds: list[dict], rows: list[rcf.Row], n: int) -> dict:
    """Medians; Ruvio against the cluster, and per core against one Redis."""
    table = []
    for row in rows:
        med, status = dict.fromkeys(STARTERS), dict.fromkeys(STARTERS, "not run")
        for name in rounds[0]["results"]:
            entries = [r["results"][name][row.label] for r in rounds]
            ok = [e["rps"] for e in entries if e["status"] == "ok"]
            med[name] = bl.median(ok) if len(ok) == len(entries) else None
            status[name] = next((e["status"] for e in entries if e["status"] != "ok"), "ok")
        table.append({"label": row.label, "median_rps": med, "status": status,
                      "vs_cluster": bl.ratio(med["ruvio"], med["cluster"]),
                      "per_core_vs_one_redis": bl.ratio((med["ruvio"] or float("nan")) / n, med["single"])})
    vs = [t["vs_cluster"] for t in table]
    return {"rows": table, "geomean_vs_cluster": bl.geomean(vs),
            "rows_at_or_above_0_97": sum(math.isfinite(v) and v >= 0.97 for v in vs),
            "geomean_per_core_vs_one_redis": bl.geomean(t["per_core_vs_one_redis"] for t in table)}


def memory_summary(mem: dict, n: int) -> list[dict]:
    """Per shape: Ruvio per shard against one Redis, and Ruvio total against the cluster."""
    rows = []
    for label in next(iter(mem.values())):
        added = {k: mem[k][label].get("added_kib") if k in mem else None for k in STARTERS}
        rows.append({"label": label, "added_kib": added,
                     "per_shard_vs_one_redis": bl.ratio((added["ruvio"] or float("nan")) / n, added["single"]),
                     "vs_cluster": bl.ratio(added["ruvio"], added["cluster"])})
    return rows


def print_report(result: dict, mem_rows: list[dict] | None, n: int) -> None:
    headers = ["command", f"ruvio {n} shards", f"cluster {n}", "one redis", "vs cluster", "per core"]
    print(bl.format_table(headers, [[t["label"]] + [bl.fmt_rate(t["median_rps"][k]) if t["median_rps"][k]
                                                    else t["status"][k] for k in STARTERS]
                                    + [bl.fmt_ratio(t["vs_cluster"]), bl.fmt_ratio(t["per_core_vs_one_redis"])]
                                    for t in result["rows"]]))
    print(f"\ngeometric mean vs cluster {bl.fmt_ratio(result['geomean_vs_cluster'])}; "
          f"{result['rows_at_or_above_0_97']} of {len(result['rows'])} at 0.97x or better; "
          f"per core vs one Redis {bl.fmt_ratio(result['geomean_per_core_vs_one_redis'])}")
    if mem_rows:
        print()
        print(bl.format_table(["data shape", "ruvio KiB", "cluster KiB", "one redis KiB", "per shard", "vs cluster"],
                              [[m["label"]] + [f"{m['added_kib'][k]:,.0f}" if m["added_kib"][k] else "-"
                                               for k in STARTERS]
                               + [bl.fmt_ratio(m["per_shard_vs_one_redis"]), bl.fmt_ratio(m["vs_cluster"])]
                               for m in mem_rows]))


def default_cpus(n: int) -> tuple[str, str]:
    """Servers on the upper CPUs and generators on the lower ones when there are 2N,
    else both share CPUs 0..N-1 (a functional run, not a measurement)."""
    cores = os.cpu_count() or 1
    if cores >= 2 * n:
        return f"{n}-{2 * n - 1}", f"0-{n - 1}"
    if n == 1:
        return "0", "1" if cores > 1 else "0"
    return f"0-{min(n, cores) - 1}", f"0-{min(n, cores) - 1}"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    bl.add_load_args(p, requests=1_000_000)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--server-cpus", help="CPUs for the N shards / cluster nodes (default: see default_cpus)")
    p.add_argument("--client-cpus", help="CPUs for the N generators")
    p.add_argument("--redis-cli", default="redis-cli")
    p.add_argument("--rows", help="regular expression selecting rows by label")
    p.add_argument("--memory", action="store_true", help="also compare the 12 data shapes")
    p.add_argument("--systems", default=",".join(STARTERS),
                   help="systems to run, of ruvio,cluster,single (leave one out while developing)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply the shapes' counts")
    args = p.parse_args()
    servers, clients = default_cpus(args.shards)
    args.server_cpus, args.client_cpus = args.server_cpus or servers, args.client_cpus or clients
    return args


def main() -> int:
    args = parse_args()
    if not args.redis:
        sys.exit("shard_compare needs --redis (the cluster and the single process are Redis)")
    server_cpus, client_cpus = cpu_list(args.server_cpus), cpu_list(args.client_cpus)
    rows = rcf.rows_for(args)
    systems = [name for name in args.systems.split(",") if name]
    if set(systems) - set(STARTERS):
        sys.exit(f"--systems must name some of {list(STARTERS)}")
    rounds = []
    for i, order in enumerate(bl.round_orders(systems, args.rounds)):
        print(f"round {i + 1}/{args.rounds}: {' -> '.join(order)}", flush=True)
        rounds.append({"order": order, "results": {name: run_system(name, rows, args, server_cpus, client_cpus)
                                                   for name in order}})
    result = summarize(rounds, rows, args.shards)
    mem, mem_rows = None, None
    if args.memory:
        mem = {name: memory_system(name, ms.SHAPES, args, server_cpus, client_cpus) for name in systems}
        mem_rows = memory_summary(mem, args.shards)
    print()
    print_report(result, mem_rows, args.shards)
    if not args.no_record:
        specs = [bl.ServerSpec("ruvio", "ruvio", [args.ruvio], args.ruvio, bl.binary_version(args.ruvio)),
                 bl.ServerSpec("redis", "redis", [args.redis], args.redis, bl.binary_version(args.redis))]
        record = bl.record_header("shard-compare", args, specs)
        record.update({"shards": args.shards, "rounds": rounds, "result": result, "memory": mem,
                       "memory_rows": mem_rows})
        print(f"\nrecord: {bl.write_record(record, args.out, f'shards-{args.shards}')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
