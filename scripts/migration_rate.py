#!/usr/bin/env python3
"""Client traffic while slots move (issue 35, "Moving slots live"): the rate per
second on the source and the target node while --keys keys move, in one run,
three ways: Ruvio nodes by CLUSTER MIGRATESLOTS (whole-slot migration, system
`ruvio-slots`), Ruvio nodes by `redis-cli --cluster reshard` (`ruvio`), and
redis-server nodes by the same reshard (`redis`).

Each system gets a cluster of two nodes, both pinned to --server-cpu: the source
serves slots 0-8191, the target 8192-16383. The source is filled with --keys keys
of --datasize bytes spread evenly over slots 0-4095 (a hash tag per slot), then
those 4,096 slots move to the target: by `redis-cli --cluster reshard` (MIGRATE
of --pipeline keys at a time, redis-cli's default 10), or by one CLUSTER
MIGRATESLOTS on the source, the move timed until GETSLOTMIGRATIONS says
`success` (polled every 10 ms) and the source has deleted its copies.
Meanwhile ruvio-bench (on --load-cpu, as redis-cli) sends SETs to each node in
windows of --window seconds every --window + --gap seconds (the gaps leave
redis-cli its CPU: two closed-loop generators beside it would starve it), each
node's keys in a slot that does not move (so no request is redirected: what is
measured is how much of its rate a node keeps while it migrates, not how a
client follows ASK or MOVED). Windows before the move give the rate without
migration; the record keeps every window's rate and the ratio of the slowest
and the median window wholly inside the move to the median before it, and says
whether every node kept at least half its rate (the issue's bar:
`keeps_half_rate`; null when no whole window fell inside the move, as a short
MIGRATESLOTS of few keys).

Afterwards every moved key must be on the target (CLUSTER COUNTKEYSINSLOT over
slots 0-4095 sums to --keys there and to 0 on the source): each was acknowledged
by the fill, none may be lost or left behind. The traffic's own keys never move.

--no-traffic times the move alone (no windows, no waits around it): the cost of
moving, MIGRATESLOTS against reshard (it was scripts/slot_migration.py).

  scripts/migration_rate.py --keys 1000000 --rounds 1 \\
    [--ruvio target/release/ruvio] [--redis redis-server] [--systems ruvio-slots,ruvio,redis]
  scripts/migration_rate.py --keys 20000 --before 2 --no-record   # a smoke run
  scripts/migration_rate.py --keys 1000000 --no-traffic --systems ruvio-slots,ruvio
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable

import benchlib as bl

MOVING = (0, 4095)
"""Slots that move from the source to the target (the source's first half)."""

SYSTEMS = ("ruvio-slots", "ruvio", "redis")
"""Every system, in the order of the first round (--systems picks some)."""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default=str(bl.REPO_ROOT / "target" / "release" / "ruvio"))
    p.add_argument("--redis", default="redis-server")
    p.add_argument("--redis-cli", default="redis-cli")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench())
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, of {', '.join(SYSTEMS)}")
    p.add_argument("--server-cpu", default="0", help="CPU list of both nodes")
    p.add_argument("--load-cpu", default="1", help="CPU list of the load and of redis-cli")
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("--pipeline", type=int, default=10, help="redis-cli's --cluster-pipeline")
    p.add_argument("--clients", type=int, default=25, help="connections per node")
    p.add_argument("--window", type=float, default=1.0, help="seconds per rate window")
    p.add_argument("--gap", type=float, default=1.0, help="seconds between two windows")
    p.add_argument("--before", type=int, default=5, help="windows before the move")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--timeout", type=float, default=3600, help="seconds a MIGRATESLOTS job may take")
    p.add_argument("--no-traffic", action="store_true", help="time the move alone, no client traffic")
    p.add_argument("--short", action="store_true", help="20,000 keys, 2 windows before: a smoke run")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args()
    if args.short:
        args.keys, args.before = 20_000, 2
    args.systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    unknown = [name for name in args.systems if name not in SYSTEMS]
    if unknown or not args.systems:
        p.error(f"--systems: unknown {unknown}, expected some of {', '.join(SYSTEMS)}")
    return args


@dataclass
class System:
    """One way of moving the slots: the nodes it runs on and how it moves."""

    name: str
    spec: bl.ServerSpec
    move: Callable[[argparse.Namespace, bl.ServerProcess, bl.ServerProcess], dict]


def specs(args: argparse.Namespace) -> dict[str, bl.ServerSpec]:
    ruvio = bl.custom_server(
        f"ruvio={args.ruvio} --port {{port}} --shards 1 --cpus {args.server_cpu} --cluster-enabled yes "
        f"--cluster-node-timeout 15000 --durability memory --save '' --dir {{dir}}")
    redis = bl.custom_server(
        f"redis={args.redis} --port {{port}} --cluster-enabled yes --cluster-node-timeout 15000 "
        f"--cluster-config-file {{dir}}/nodes.conf --save '' --appendonly no --dir {{dir}}")
    ruvio.kind, redis.kind = "ruvio", "redis"
    for s in (ruvio, redis):
        s.version = bl.binary_version(s.binary)
    return {"ruvio": ruvio, "redis": redis}


def systems(args: argparse.Namespace) -> dict[str, System]:
    """The systems --systems names, each on its own spec's nodes."""
    servers = specs(args)
    every = {
        "ruvio-slots": System("ruvio-slots", servers["ruvio"], migrateslots),
        "ruvio": System("ruvio", servers["ruvio"], reshard),
        "redis": System("redis", servers["redis"], reshard),
    }
    return {name: every[name] for name in args.systems}


def text(reply) -> str:
    return reply.decode() if isinstance(reply, (bytes, bytearray)) else str(reply)


def node_id(server: bl.ServerProcess) -> str:
    return text(server.client().call("CLUSTER", "MYID"))


def form_cluster(source: bl.ServerProcess, target: bl.ServerProcess) -> None:
    """Source 0-8191, target 8192-16383, one cluster, state ok on both."""
    for server, lo, hi in ((source, 0, 8191), (target, 8192, 16383)):
        reply = server.client().call("CLUSTER", "ADDSLOTSRANGE", lo, hi)
        if reply != "OK":
            raise RuntimeError(f"{server.spec.name} ADDSLOTSRANGE: {reply!r}")
    source.client().call("CLUSTER", "MEET", "127.0.0.1", target.port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        texts = [text(server.client().call("CLUSTER", "INFO")) for server in (source, target)]
        if all("cluster_state:ok" in t and "cluster_known_nodes:2" in t for t in texts):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the two nodes never formed a cluster: {texts}")


def slot_tags() -> dict[int, str]:
    """A hash tag for every slot of MOVING (the shortest decimal one)."""
    lo, hi = MOVING
    tags: dict[int, str] = {}
    n = 0
    while len(tags) < hi - lo + 1:
        slot = bl.key_slot(str(n).encode())
        if lo <= slot <= hi and slot not in tags:
            tags[slot] = str(n)
        n += 1
    return tags


def fill(args: argparse.Namespace, source: bl.ServerProcess, tags: dict[int, str]) -> None:
    """--keys keys on the source, key i in slot MOVING[0] + i % 4096."""
    value = b"v" * args.datasize
    slots = sorted(tags)
    with source.client() as c:
        for start in range(0, args.keys, 10_000):
            batch = [["SET", f"{{{tags[slots[i % len(slots)]]}}}:m:{i}", value]
                     for i in range(start, min(args.keys, start + 10_000))]
            bad = next((r for r in c.pipeline(batch) if r != "OK"), None)
            if bad is not None:
                raise RuntimeError(f"fill: {bad!r}")
    have = int(source.client().call("DBSIZE"))
    if have != args.keys:
        raise RuntimeError(f"{have} keys on the source after the fill, not {args.keys}")


class Traffic:
    """ruvio-bench SETs to one node in back-to-back windows until stopped."""

    def __init__(self, args: argparse.Namespace, server: bl.ServerProcess, tag: str):
        self.args, self.server, self.tag = args, server, tag
        self.windows: list[dict] = []
        self.stop = threading.Event()
        self.error: str | None = None
        self.thread = threading.Thread(target=self.run, daemon=True)

    def command(self) -> list[str]:
        return ["SET", f"{{{self.tag}}}:t:__rand_int__", "__data__"]

    def run(self) -> None:
        argv = [self.args.ruvio_bench, "-p", str(self.server.port), "-c", str(self.args.clients),
                "-P", "1", "-r", "100000", "-d", str(self.args.datasize),
                "--duration", str(self.args.window), "--json", "--", *self.command()]
        while not self.stop.is_set():
            began = time.monotonic()
            out = subprocess.run(["taskset", "-c", self.args.load_cpu, *argv], capture_output=True, text=True)
            if out.returncode != 0:
                self.error = out.stderr[-2000:]
                return
            test = json.loads(out.stdout)["tests"][0]
            self.windows.append({"at_s": began, "rps": test["rps"], "errors": test["errors"],
                                 "p99_ms": test["latency_ms"]["p99"], "max_ms": test["latency_ms"]["max"]})
            self.stop.wait(self.args.gap)

    def windows_between(self, start: float, end: float) -> list[dict]:
        return [w for w in self.windows if start <= w["at_s"] and w["at_s"] + self.args.window <= end + 0.25]


def reshard(args: argparse.Namespace, source: bl.ServerProcess, target: bl.ServerProcess) -> dict:
    """`redis-cli --cluster reshard` of MOVING, from its start to its exit."""
    lo, hi = MOVING
    argv = [args.redis_cli, "--cluster", "reshard", f"127.0.0.1:{source.port}",
            "--cluster-from", node_id(source), "--cluster-to", node_id(target),
            "--cluster-slots", str(hi - lo + 1), "--cluster-pipeline", str(args.pipeline), "--cluster-yes"]
    started = time.monotonic()
    out = subprocess.run(["taskset", "-c", args.load_cpu, *argv], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if out.returncode != 0 or "[ERR]" in out.stdout:
        raise RuntimeError(f"reshard failed:\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")
    return {"seconds": seconds}


def newest_job(server: bl.ServerProcess) -> dict:
    """The first entry of GETSLOTMIGRATIONS as a dict (RESP2's flat pairs)."""
    jobs = server.client().call("CLUSTER", "GETSLOTMIGRATIONS")
    if not jobs:
        return {}
    flat = jobs[0]
    return {text(flat[i]): text(flat[i + 1]) for i in range(0, len(flat), 2)}


def migrateslots(args: argparse.Namespace, source: bl.ServerProcess, target: bl.ServerProcess) -> dict:
    """One CLUSTER MIGRATESLOTS of MOVING, until the job's `success` on the
    source (`handed_over_s`) and the source's copies deleted (`seconds`)."""
    lo, hi = MOVING
    started = time.monotonic()
    reply = source.client().call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", lo, hi, "NODE", node_id(target))
    if text(reply) != "OK":
        raise RuntimeError(f"MIGRATESLOTS: {reply!r}")
    deadline = started + args.timeout
    while True:
        job = newest_job(source)
        if job.get("state") == "success":
            break
        if job.get("state") in ("failed", "cancelled") or time.monotonic() > deadline:
            raise RuntimeError(f"MIGRATESLOTS did not succeed: {job}")
        time.sleep(0.01)
    handed_over = time.monotonic() - started
    # The source deletes its copies slot by slot in ascending order: one
    # COUNTKEYSINSLOT of the last slot every 10 ms, then all 4,096 to be sure.
    # (Polling all 4,096 every 10 ms was some 400k commands a second on the
    # source: its clients' rate fell to ~0.5x while it deleted, the script's
    # own doing; records/migration-rate-2026-12-05-3.json and -06-2 ran so.)
    with source.client() as c:
        while True:
            if time.monotonic() > deadline:
                raise RuntimeError("the source never deleted its copies")
            if int(c.call("CLUSTER", "COUNTKEYSINSLOT", hi)) == 0 and keys_in_moving_slots(source) == 0:
                break
            time.sleep(0.01)
    return {"handed_over_s": handed_over, "seconds": time.monotonic() - started, "job": job}


def keys_in_moving_slots(server: bl.ServerProcess) -> int:
    lo, hi = MOVING
    with server.client() as c:
        return sum(int(r) for r in c.pipeline([["CLUSTER", "COUNTKEYSINSLOT", s] for s in range(lo, hi + 1)]))


def check(args: argparse.Namespace, source: bl.ServerProcess, target: bl.ServerProcess) -> dict:
    on_target, on_source = keys_in_moving_slots(target), keys_in_moving_slots(source)
    if (on_target, on_source) != (args.keys, 0):
        raise RuntimeError(f"moved keys: {on_target} on the target, {on_source} on the source "
                           f"(expected {args.keys} and 0)")
    return {"moved_on_target": on_target, "moved_left_on_source": on_source,
            "dbsize": {"source": int(source.client().call("DBSIZE")),
                       "target": int(target.client().call("DBSIZE"))}}


def summarise(before: list[dict], during: list[dict]) -> dict:
    base = bl.median([w["rps"] for w in before]) if before else float("nan")
    rates = [w["rps"] for w in during]
    return {
        "rps_before_median": base,
        "rps_during_min": min(rates) if rates else float("nan"),
        "rps_during_median": bl.median(rates) if rates else float("nan"),
        "min_ratio": bl.ratio(min(rates), base) if rates else float("nan"),
        "median_ratio": bl.ratio(bl.median(rates), base) if rates else float("nan"),
        "windows_during": len(rates),
        "errors_during": sum(w["errors"] for w in during),
    }


def keeps_half_rate(nodes: dict) -> bool | None:
    """The issue's bar: every node's slowest window inside the move at least half
    its median before (None when no whole window fell inside the move)."""
    summaries = [node["summary"] for node in nodes.values()]
    if any(s["windows_during"] == 0 for s in summaries):
        return None
    return all(s["min_ratio"] >= 0.5 for s in summaries)


def one_run(args: argparse.Namespace, system: System, tags: dict[int, str]) -> dict:
    source = bl.ServerProcess(system.spec, args.server_cpu, port=bl.free_port(bus=True)).start()
    target = bl.ServerProcess(system.spec, args.server_cpu, port=bl.free_port(bus=True)).start()
    try:
        form_cluster(source, target)
        fill(args, source, tags)
        traffic = [] if args.no_traffic else [
            Traffic(args, source, bl.tag_for_slots([(MOVING[1] + 1, 8191)])),
            Traffic(args, target, bl.tag_for_slots([(8192, 16383)]))]
        host0 = bl.host_snapshot()
        for t in traffic:
            t.thread.start()
        if traffic:
            time.sleep((args.window + args.gap) * args.before + 0.5)
        started = time.monotonic()
        out = system.move(args, source, target)
        ended = time.monotonic()
        if traffic:
            time.sleep((args.window + args.gap) * 2 + 0.5)
        for t in traffic:
            t.stop.set()
        for t in traffic:
            t.thread.join()
            if t.error:
                raise RuntimeError(f"ruvio-bench on {t.server.port}: {t.error}")
        out.update({"keys_per_s": args.keys / out["seconds"], "nodes": {}})
        for role, t in zip(("source", "target"), traffic):
            before = t.windows_between(0, started)
            during = t.windows_between(started, ended)
            out["nodes"][role] = {"summary": summarise(before, during), "windows": [
                dict(w, at_s=round(w["at_s"] - started, 3)) for w in t.windows]}
        out["keeps_half_rate"] = keeps_half_rate(out["nodes"]) if traffic else None
        out["check"] = check(args, source, target)
        out.update(bl.host_since(host0, servers=[source, target]))
        return out
    finally:
        target.stop()
        source.stop()


def describe(args: argparse.Namespace, run: dict) -> str:
    line = f"{args.keys} keys moved in {run['seconds']:.2f} s ({run['keys_per_s']:.0f} keys/s)"
    if "handed_over_s" in run:
        line += f", handed over at {run['handed_over_s']:.2f} s"
    for role in ("source", "target"):
        if role not in run["nodes"]:
            continue
        s = run["nodes"][role]["summary"]
        if s["windows_during"] == 0:
            line += f"; {role}: no whole window inside the move"
        else:
            line += (f"; {role} keeps {s['median_ratio']:.2f}x (slowest window {s['min_ratio']:.2f}x, "
                     f"{s['windows_during']} windows)")
    if run["nodes"]:
        line += f"; keeps half its rate: {run['keeps_half_rate']}"
    return line


def medians_of(args: argparse.Namespace, rounds: list[dict], names: list[str]) -> dict:
    medians = {}
    for name in names:
        runs = [r["systems"][name] for r in rounds]
        medians[name] = {"move_s": bl.median([x["seconds"] for x in runs])}
        if args.no_traffic:
            continue
        medians[name]["keeps_half_rate"] = [x["keeps_half_rate"] for x in runs]
        for role in ("source", "target"):
            for k in ("median_ratio", "min_ratio", "rps_before_median"):
                medians[name][f"{role}_{k}"] = bl.median([x["nodes"][role]["summary"][k] for x in runs])
    return medians


def main() -> None:
    args = parse_args()
    chosen = systems(args)
    tags = slot_tags()
    rounds = []
    for r, order in enumerate(bl.round_orders(list(chosen), args.rounds)):
        result = {"order": order, "systems": {}}
        for name in order:
            run = one_run(args, chosen[name], tags)
            result["systems"][name] = run
            print(f"round {r + 1} {name}: {describe(args, run)}", flush=True)
        rounds.append(result)
    medians = medians_of(args, rounds, list(chosen))
    for name, m in medians.items():
        line = f"{name:>11}: move {m['move_s']:.2f} s"
        if not args.no_traffic:
            line += (f"; source {m['source_median_ratio']:.2f}x (slowest {m['source_min_ratio']:.2f}x), "
                     f"target {m['target_median_ratio']:.2f}x (slowest {m['target_min_ratio']:.2f}x) "
                     f"of the rate before; keeps half: {m['keeps_half_rate']}")
        print(line)
    if {"ruvio-slots", "ruvio"} <= set(medians):
        speedup = bl.ratio(medians["ruvio"]["move_s"], medians["ruvio-slots"]["move_s"])
        print(f"MIGRATESLOTS moved the keys {speedup:.1f}x as fast as reshard between Ruvio nodes")
    servers = list({id(s.spec): s.spec for s in chosen.values()}.values())
    record = bl.record_header("migration-rate", args, servers)
    record.update({"rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "migration-rate"))


if __name__ == "__main__":
    main()
