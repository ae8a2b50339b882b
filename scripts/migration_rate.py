#!/usr/bin/env python3
"""Client traffic while slots move (issue 35, "Moving slots live"): the rate per
second on the source and the target node across a `redis-cli --cluster reshard`
of --keys keys, Ruvio nodes against redis-server nodes in the same run.

Each system gets a cluster of two nodes, both pinned to --server-cpu: the source
serves slots 0-8191, the target 8192-16383. The source is filled with --keys keys
of --datasize bytes spread evenly over slots 0-4095 (a hash tag per slot), then
`redis-cli --cluster reshard` moves those 4,096 slots to the target (MIGRATE of
--pipeline keys at a time, redis-cli's default 10), while ruvio-bench (on
--load-cpu, as redis-cli) sends SETs to each node in windows of --window seconds
every --window + --gap seconds (the gaps leave redis-cli its CPU: two closed-loop
generators beside it would starve it), each node's keys in a slot that does not move (so no request is redirected: what
is measured is how much of its rate a node keeps while it migrates, not how a
client follows ASK). Windows before the reshard give the rate without
migration; the record keeps every window's rate and the ratio of the slowest
and the median window during the migration to the median before it (the issue
asks for at least 0.5).

Afterwards every moved key must be on the target (CLUSTER COUNTKEYSINSLOT over
slots 0-4095 sums to --keys there and to 0 on the source): each was acknowledged
by the fill, none may be lost or left behind. The traffic's own keys never move.

  scripts/migration_rate.py --keys 1000000 --rounds 1 \\
    [--ruvio target/release/ruvio] [--redis redis-server] [--short]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
import time

import benchlib as bl

MOVING = (0, 4095)
"""Slots the reshard moves from the source to the target (the source's first half)."""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default=str(bl.REPO_ROOT / "target" / "release" / "ruvio"))
    p.add_argument("--redis", default="redis-server")
    p.add_argument("--redis-cli", default="redis-cli")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench())
    p.add_argument("--server-cpu", default="0", help="CPU list of both nodes")
    p.add_argument("--load-cpu", default="1", help="CPU list of the load and of redis-cli")
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("--pipeline", type=int, default=10, help="redis-cli's --cluster-pipeline")
    p.add_argument("--clients", type=int, default=25, help="connections per node")
    p.add_argument("--window", type=float, default=1.0, help="seconds per rate window")
    p.add_argument("--gap", type=float, default=1.0, help="seconds between two windows")
    p.add_argument("--before", type=int, default=5, help="windows before the reshard")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--short", action="store_true", help="20,000 keys, 2 windows before: a smoke run")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    args = p.parse_args()
    if args.short:
        args.keys, args.before = 20_000, 2
    return args


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


def node_id(server: bl.ServerProcess) -> str:
    reply = server.client().call("CLUSTER", "MYID")
    return reply.decode() if isinstance(reply, (bytes, bytearray)) else str(reply)


def form_cluster(source: bl.ServerProcess, target: bl.ServerProcess) -> None:
    """Source 0-8191, target 8192-16383, one cluster, state ok on both."""
    for server, lo, hi in ((source, 0, 8191), (target, 8192, 16383)):
        reply = server.client().call("CLUSTER", "ADDSLOTSRANGE", lo, hi)
        if reply != "OK":
            raise RuntimeError(f"{server.spec.name} ADDSLOTSRANGE: {reply!r}")
    source.client().call("CLUSTER", "MEET", "127.0.0.1", target.port)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        infos = [server.client().call("CLUSTER", "INFO") for server in (source, target)]
        texts = [i.decode() if isinstance(i, (bytes, bytearray)) else str(i) for i in infos]
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


def reshard(args: argparse.Namespace, source: bl.ServerProcess, target: bl.ServerProcess) -> float:
    lo, hi = MOVING
    argv = [args.redis_cli, "--cluster", "reshard", f"127.0.0.1:{source.port}",
            "--cluster-from", node_id(source), "--cluster-to", node_id(target),
            "--cluster-slots", str(hi - lo + 1), "--cluster-pipeline", str(args.pipeline), "--cluster-yes"]
    started = time.monotonic()
    out = subprocess.run(["taskset", "-c", args.load_cpu, *argv], capture_output=True, text=True)
    seconds = time.monotonic() - started
    if out.returncode != 0 or "[ERR]" in out.stdout:
        raise RuntimeError(f"reshard failed:\n{out.stdout[-3000:]}\n{out.stderr[-2000:]}")
    return seconds


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


def one_run(args: argparse.Namespace, spec: bl.ServerSpec, tags: dict[int, str]) -> dict:
    source = bl.ServerProcess(spec, args.server_cpu, port=bl.free_port(bus=True)).start()
    target = bl.ServerProcess(spec, args.server_cpu, port=bl.free_port(bus=True)).start()
    try:
        form_cluster(source, target)
        fill(args, source, tags)
        traffic = [Traffic(args, source, bl.tag_for_slots([(MOVING[1] + 1, 8191)])),
                   Traffic(args, target, bl.tag_for_slots([(8192, 16383)]))]
        host0 = bl.host_snapshot()
        for t in traffic:
            t.thread.start()
        time.sleep((args.window + args.gap) * args.before + 0.5)
        started = time.monotonic()
        seconds = reshard(args, source, target)
        ended = time.monotonic()
        time.sleep((args.window + args.gap) * 2 + 0.5)
        for t in traffic:
            t.stop.set()
        for t in traffic:
            t.thread.join()
            if t.error:
                raise RuntimeError(f"ruvio-bench on {t.server.port}: {t.error}")
        out = {"reshard_s": seconds, "keys_per_s": args.keys / seconds, "nodes": {}}
        for role, t in (("source", traffic[0]), ("target", traffic[1])):
            before = t.windows_between(0, started)
            during = t.windows_between(started, ended)
            out["nodes"][role] = {"summary": summarise(before, during), "windows": [
                dict(w, at_s=round(w["at_s"] - started, 3)) for w in t.windows]}
        out["check"] = check(args, source, target)
        out.update(bl.host_since(host0, servers=[source, target]))
        return out
    finally:
        target.stop()
        source.stop()


def main() -> None:
    args = parse_args()
    servers = specs(args)
    tags = slot_tags()
    rounds = []
    for r, order in enumerate(bl.round_orders(list(servers), args.rounds)):
        result = {"order": order, "systems": {}}
        for name in order:
            run = one_run(args, servers[name], tags)
            result["systems"][name] = run
            s, t = run["nodes"]["source"]["summary"], run["nodes"]["target"]["summary"]
            print(f"round {r + 1} {name}: {args.keys} keys moved in {run['reshard_s']:.1f} s; "
                  f"source keeps {s['median_ratio']:.2f}x (slowest window {s['min_ratio']:.2f}x), "
                  f"target {t['median_ratio']:.2f}x ({t['min_ratio']:.2f}x)", flush=True)
        rounds.append(result)
    medians = {}
    for name in servers:
        runs = [r["systems"][name] for r in rounds]
        medians[name] = {"reshard_s": bl.median([x["reshard_s"] for x in runs])}
        for role in ("source", "target"):
            for k in ("median_ratio", "min_ratio", "rps_before_median"):
                medians[name][f"{role}_{k}"] = bl.median([x["nodes"][role]["summary"][k] for x in runs])
    for name, m in medians.items():
        print(f"{name:>6}: reshard {m['reshard_s']:.1f} s; source {m['source_median_ratio']:.2f}x "
              f"(slowest {m['source_min_ratio']:.2f}x), target {m['target_median_ratio']:.2f}x "
              f"(slowest {m['target_min_ratio']:.2f}x) of the rate before")
    record = bl.record_header("migration-rate", args, list(servers.values()))
    record.update({"rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "migration-rate"))


if __name__ == "__main__":
    main()
