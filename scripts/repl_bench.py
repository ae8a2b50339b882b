#!/usr/bin/env python3
"""Replication's speed records (issue 31): full sync time and replication lag,
Ruvio -> Ruvio, Ruvio -> redis-server and redis-server -> redis-server, in one run.

Full sync: a primary (pinned to --server-cpu) is filled with --keys keys of
--datasize bytes (ruvio-bench's preload); a fresh replica (pinned to
--replica-cpu) runs REPLICAOF and the clock runs until its INFO says
master_link_status:up with the primary's key count. Redis's primary syncs
diskless (repl-diskless-sync yes, delay 0), as Ruvio's always does. Pairs
alternate within each round; medians per pair.

Lag: with the replica attached, a writer SETs `lag:<n>` to its send time at
--lag-rate per second on the primary while a reader polls the replica for each
key; the lag of a write is the time from the primary's reply to the moment the
replica first shows it (a polling reader adds up to one poll interval). p50/p99
per pair.

  scripts/repl_bench.py --keys 10000000 --rounds 3 \\
    [--ruvio target/release/ruvio --ruvio-shards 2] [--redis redis-server]
"""

from __future__ import annotations

import argparse
import time

import benchlib as bl


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default=str(bl.REPO_ROOT / "target" / "release" / "ruvio"))
    p.add_argument("--ruvio-shards", type=int, default=2)
    p.add_argument("--redis", default="redis-server")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench())
    p.add_argument("--server-cpu", default="0", help="CPU list of the primary")
    p.add_argument("--replica-cpu", default="1", help="CPU list of the replica (and the load)")
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--lag-seconds", type=float, default=5.0)
    p.add_argument("--lag-rate", type=float, default=2000.0, help="writes per second while measuring lag")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    return p.parse_args()


def ruvio_spec(args: argparse.Namespace, name: str) -> bl.ServerSpec:
    return bl.custom_server(f"{name}={args.ruvio} --port {{port}} --shards {args.ruvio_shards} "
                            f"--durability memory --save ''")


def redis_spec(args: argparse.Namespace, name: str) -> bl.ServerSpec:
    return bl.custom_server(f"{name}={args.redis} --port {{port}} --save '' --appendonly no "
                            f"--repl-diskless-sync yes --repl-diskless-sync-delay 0")


def info(server: bl.ServerProcess, section: str) -> dict[str, str]:
    text = server.client().call("INFO", section)
    text = text.decode() if isinstance(text, (bytes, bytearray)) else str(text)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def keys_of(server: bl.ServerProcess) -> int:
    return int(server.client().call("DBSIZE"))


def fill(args: argparse.Namespace, primary: bl.ServerProcess) -> None:
    load = bl.Load(clients=50, pipeline=64, requests=1, keyspace=args.keys, datasize=args.datasize)
    bl.ruvio_bench(primary.port, load, test="get", cpus=args.replica_cpu, binary=args.ruvio_bench,
                   extra=["--preload", "--sequential"])
    have = keys_of(primary)
    if have != args.keys:
        raise RuntimeError(f"{primary.spec.name}: {have} keys after the preload, not {args.keys}")


def full_sync(args: argparse.Namespace, primary: bl.ServerProcess, replica: bl.ServerProcess) -> dict:
    started = time.monotonic()
    replica.client().call("REPLICAOF", "127.0.0.1", str(primary.port))
    while True:
        time.sleep(0.01)
        i = info(replica, "replication")
        if i.get("master_link_status") == "up" and i.get("master_sync_in_progress", "0") == "0":
            if keys_of(replica) == args.keys:
                break
        if time.monotonic() - started > 600:
            raise RuntimeError(f"{replica.spec.name} never synced\n{replica.log_tail()}")
    seconds = time.monotonic() - started
    return {"seconds": seconds, "primary_rss_kib": primary.rss_kib(), "replica_rss_kib": replica.rss_kib()}


def lag(args: argparse.Namespace, primary: bl.ServerProcess, replica: bl.ServerProcess) -> dict:
    writer, reader = primary.client(), replica.client()
    lags = []
    interval = 1.0 / args.lag_rate
    deadline = time.monotonic() + args.lag_seconds
    n = 0
    while time.monotonic() < deadline:
        key = f"lag:{n}"
        writer.call("SET", key, "x")
        written = time.monotonic()
        while reader.call("EXISTS", key) != 1:
            if time.monotonic() - written > 5:
                raise RuntimeError(f"{key} never reached the replica")
        lags.append((time.monotonic() - written) * 1e6)
        n += 1
        pause = interval - (time.monotonic() - written)
        if pause > 0:
            time.sleep(pause)
    lags.sort()
    pick = lambda q: lags[min(len(lags) - 1, int(q * len(lags)))]
    return {"writes": n, "p50_us": pick(0.5), "p99_us": pick(0.99), "max_us": lags[-1]}


def main() -> None:
    args = parse_args()
    pairs = [
        ("ruvio->ruvio", ruvio_spec(args, "ruvio-primary"), ruvio_spec(args, "ruvio-replica")),
        ("ruvio->redis", ruvio_spec(args, "ruvio-primary"), redis_spec(args, "redis-replica")),
        ("redis->redis", redis_spec(args, "redis-primary"), redis_spec(args, "redis-replica")),
    ]
    specs = [pairs[0][1], pairs[2][1]]
    for spec in specs + [pairs[0][2], pairs[2][2]]:
        spec.version = bl.binary_version(spec.binary)
    rounds = []
    for r, order in enumerate(bl.round_orders(range(len(pairs)), args.rounds)):
        result = {"order": [pairs[i][0] for i in order], "pairs": {}}
        for i in order:
            name, pspec, rspec = pairs[i]
            primary = bl.ServerProcess(pspec, args.server_cpu).start()
            replica = bl.ServerProcess(rspec, args.replica_cpu).start()
            try:
                fill(args, primary)
                host0 = bl.host_snapshot()
                sync = full_sync(args, primary, replica)
                sync["lag"] = lag(args, primary, replica)
                sync.update(bl.host_since(host0, servers=[primary, replica]))
                result["pairs"][name] = sync
                print(f"round {r + 1} {name}: full sync {sync['seconds']:.2f} s, lag p99 "
                      f"{sync['lag']['p99_us']:.0f} us", flush=True)
            finally:
                replica.stop()
                primary.stop()
        rounds.append(result)
    medians = {}
    for name, _, _ in pairs:
        runs = [r["pairs"][name] for r in rounds]
        medians[name] = {
            "full_sync_s": bl.median([x["seconds"] for x in runs]),
            "lag_p50_us": bl.median([x["lag"]["p50_us"] for x in runs]),
            "lag_p99_us": bl.median([x["lag"]["p99_us"] for x in runs]),
            "steal_s_max": max(x["steal_s"] for x in runs),
        }
        print(f"{name:>14}: full sync median {medians[name]['full_sync_s']:.2f} s, "
              f"lag p99 median {medians[name]['lag_p99_us']:.0f} us")
    # The header after the run: it names the sha256 each binary had when it started.
    record = bl.record_header("repl-bench", args, specs)
    record.update({"rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "repl-bench"))


if __name__ == "__main__":
    main()
