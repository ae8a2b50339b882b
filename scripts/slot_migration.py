#!/usr/bin/env python3
"""Whole-slot migration against key-by-key resharding (issue 35, "Moving slots
live"): the time to move --keys keys between the same two Ruvio nodes by
CLUSTER MIGRATESLOTS (Valkey 9's atomic slot migration: the source streams the
slots and hands them over in one step) and by `redis-cli --cluster reshard`
(SETSLOT, MIGRATE of --pipeline keys at a time, SETSLOT NODE per slot).

Each way gets a fresh cluster of two Ruvio nodes (one shard each, both pinned
to --server-cpu): the source serves slots 0-8191, the target 8192-16383. The
source is filled with --keys keys of --datasize bytes spread evenly over slots
0-4095 (a hash tag per slot, as scripts/migration_rate.py), then those 4,096
slots move to the target. MIGRATESLOTS is timed from the command to
GETSLOTMIGRATIONS saying `success` (polled every 10 ms) and until the source
has deleted its copies; reshard from the start of redis-cli to its exit.
Afterwards every moved key must be on the target and none on the source.

No traffic runs: this is the cost of moving, not the clients' rate while
slots move (scripts/migration_rate.py measures that for reshard).

  scripts/slot_migration.py --keys 1000000 [--ruvio target/release/ruvio]
  scripts/slot_migration.py --keys 20000 --no-record   # a smoke run
"""

from __future__ import annotations

import argparse
import time

import benchlib as bl
import migration_rate as mr


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default=str(bl.REPO_ROOT / "target" / "release" / "ruvio"))
    p.add_argument("--redis-cli", default="redis-cli")
    p.add_argument("--server-cpu", default="0", help="CPU list of both nodes")
    p.add_argument("--load-cpu", default="1", help="CPU list of redis-cli")
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("--pipeline", type=int, default=10, help="redis-cli's --cluster-pipeline")
    p.add_argument("--timeout", type=float, default=3600, help="seconds a migration may take")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    return p.parse_args()


def spec(args: argparse.Namespace) -> bl.ServerSpec:
    ruvio = bl.custom_server(
        f"ruvio={args.ruvio} --port {{port}} --shards 1 --cpus {args.server_cpu} --cluster-enabled yes "
        f"--cluster-node-timeout 15000 --durability memory --save '' --dir {{dir}}")
    ruvio.kind = "ruvio"
    ruvio.version = bl.binary_version(ruvio.binary)
    return ruvio


def text(reply) -> str:
    return reply.decode() if isinstance(reply, (bytes, bytearray)) else str(reply)


def newest_job(server: bl.ServerProcess) -> dict:
    """The first entry of GETSLOTMIGRATIONS as a dict (RESP2's flat pairs)."""
    jobs = server.client().call("CLUSTER", "GETSLOTMIGRATIONS")
    if not jobs:
        return {}
    flat = jobs[0]
    return {text(flat[i]): text(flat[i + 1]) for i in range(0, len(flat), 2)}


def migrateslots(args: argparse.Namespace, source: bl.ServerProcess, target: bl.ServerProcess) -> dict:
    lo, hi = mr.MOVING
    started = time.monotonic()
    reply = source.client().call("CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", lo, hi, "NODE", mr.node_id(target))
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
    while mr.keys_in_moving_slots(source) != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("the source never deleted its copies")
        time.sleep(0.01)
    return {"handed_over_s": handed_over, "seconds": time.monotonic() - started, "job": job}


def one_way(args: argparse.Namespace, ruvio: bl.ServerSpec, tags: dict[int, str], way: str) -> dict:
    source = bl.ServerProcess(ruvio, args.server_cpu, port=bl.free_port(bus=True)).start()
    target = bl.ServerProcess(ruvio, args.server_cpu, port=bl.free_port(bus=True)).start()
    try:
        mr.form_cluster(source, target)
        mr.fill(args, source, tags)
        host0 = bl.host_snapshot()
        if way == "migrateslots":
            out = migrateslots(args, source, target)
        else:
            out = {"seconds": mr.reshard(args, source, target)}
        out["keys_per_s"] = args.keys / out["seconds"]
        out["check"] = mr.check(args, source, target)
        # The servers' and the generator's CPU and the host's steal time.
        out.update(bl.host_since(host0, servers=[source, target]))
        return out
    finally:
        target.stop()
        source.stop()


def main() -> None:
    args = parse_args()
    ruvio = spec(args)
    tags = mr.slot_tags()
    ways = {}
    for way in ("migrateslots", "reshard"):
        ways[way] = one_way(args, ruvio, tags, way)
        print(f"{way}: {args.keys} keys moved in {ways[way]['seconds']:.2f} s "
              f"({ways[way]['keys_per_s']:.0f} keys/s)", flush=True)
    speedup = bl.ratio(ways["reshard"]["seconds"], ways["migrateslots"]["seconds"])
    print(f"MIGRATESLOTS {speedup:.1f}x as fast as reshard")
    record = bl.record_header("slot-migration", args, [ruvio])
    record.update({"ways": ways, "reshard_over_migrateslots": speedup, "machine_note": "shared"})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "slot-migration"))


if __name__ == "__main__":
    main()
