#!/usr/bin/env python3
"""Hit rate of a cache under maxmemory: Ruvio against Redis 7 (and Valkey) with the
same limit, policy and key sequence.

A cache-aside client reads keys drawn from a Zipf distribution (a few keys are hot,
most are cold) over a key space several times larger than the limit holds; each miss
stores the key (1 KiB value). After a warm-up of the same length, the share of reads
that hit is the hit rate: how well the eviction policy keeps the hot keys. Every
server gets the identical sequence (seeded); rounds alternate the servers.

Examples:
  scripts/eviction_hit_rate.py                              # allkeys-lru, 32 MB
  scripts/eviction_hit_rate.py --policy allkeys-lfu --no-record
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import random

import benchlib as bl

BATCH = 1000
"""Reads per pipelined batch (the misses are stored right after their batch)."""


def zipf_sequence(keys: int, length: int, exponent: float, seed: int) -> list[int]:
    """`length` key ranks in [0, keys) drawn from a Zipf law with `exponent`, then
    mapped through a fixed shuffle so hot keys are spread over the shards."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) ** exponent for rank in range(keys)]
    cumulative = list(itertools.accumulate(weights))
    total = cumulative[-1]
    shuffle = list(range(keys))
    rng.shuffle(shuffle)
    return [shuffle[bisect.bisect_left(cumulative, rng.random() * total)] for _ in range(length)]


def run_cache(port: int, sequence: list[int], value: bytes, measure_from: int) -> dict:
    """Drive the cache-aside workload; count hits from index `measure_from` on."""
    hits = reads = 0
    with bl.RespClient(port) as client:
        for start in range(0, len(sequence), BATCH):
            batch = sequence[start:start + BATCH]
            replies = client.pipeline([["GET", f"key:{k:012d}"] for k in batch], batch=BATCH)
            misses = [k for k, r in zip(batch, replies) if r is None]
            if start >= measure_from:
                reads += len(batch)
                hits += len(batch) - len(misses)
            if misses:
                client.pipeline([["SET", f"key:{k:012d}", value] for k in misses], batch=BATCH)
        info = client.call("INFO", "stats").decode()
        evicted = next((int(l.split(":")[1]) for l in info.splitlines()
                        if l.startswith("evicted_keys:")), None)
    return {"hits": hits, "reads": reads, "hit_rate": hits / max(reads, 1), "evicted_keys": evicted}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    p.add_argument("--policy", default="allkeys-lru")
    p.add_argument("--maxmemory-mb", type=int, default=32)
    p.add_argument("--keys", type=int, default=200_000, help="key space (1 KiB values)")
    p.add_argument("--reads", type=int, default=400_000, help="measured reads (as many again to warm up)")
    p.add_argument("--exponent", type=float, default=1.0, help="Zipf exponent")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--shards", type=int, default=1, help="Ruvio shards")
    args = p.parse_args()

    specs = bl.build_servers(args, ruvio_shards=args.shards)
    limit = ["--maxmemory", f"{args.maxmemory_mb}mb", "--maxmemory-policy", args.policy]
    sequence = zipf_sequence(args.keys, 2 * args.reads, args.exponent, args.seed)
    value = b"v" * 1024
    results: dict[str, list[dict]] = {s.name: [] for s in specs}
    for r, order in enumerate(bl.round_orders([s.name for s in specs], args.rounds)):
        print(f"round {r + 1}/{args.rounds}: {' -> '.join(order)}", flush=True)
        for name in order:
            spec = next(s for s in specs if s.name == name)
            server = bl.ServerProcess(spec, args.server_cpu, extra=limit)
            server.start()
            try:
                host0 = bl.host_snapshot()
                outcome = run_cache(server.port, sequence, value, measure_from=args.reads)
                outcome["rss_kib"] = server.rss_kib()
                outcome.update(bl.host_since(host0, servers=[server]))
            finally:
                server.stop()
            results[name].append(outcome)
            print(f"  {name}: hit rate {outcome['hit_rate']:.4f}, evicted {outcome['evicted_keys']}", flush=True)
    summary = {name: bl.median([o["hit_rate"] for o in runs]) for name, runs in results.items()}
    for name, rate in summary.items():
        print(f"{name}: median hit rate {rate:.4f}")
    if not args.no_record:
        record = bl.record_header("eviction-hit-rate", args, specs)
        record["result"] = {"rounds": results, "median_hit_rate": summary}
        print("record:", bl.write_record(record, args.out, "eviction"))


if __name__ == "__main__":
    main()
