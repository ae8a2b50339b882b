#!/usr/bin/env python3
"""The 60-command comparison: Ruvio against reference servers, one row per command.

The rows and their labels are those of the seed table (GET, SET, LPOS (100
elements, hit in the middle), ... FILLGET (value present)). For each row the
script seeds the data its label describes, sends the measured command once and
checks the reply (a wrong or error reply aborts that row loudly for that
server), then measures it with redis-benchmark or ruvio-bench. A command a
server does not know is reported as missing, never silently skipped.

Every server starts fresh each round, pinned to the server CPU, persistence off;
the generator is pinned to the other CPU; server order rotates between rounds.
The table shows median requests per second, the ratio to the baseline server,
and server CPU microseconds per request (whole process, from /proc), which
still separates the servers on rows where the generator is the bottleneck.

Examples:
  scripts/redis_compare_features.py                       # Ruvio vs Redis 7 vs Valkey, 3 rounds
  scripts/redis_compare_features.py --generator ruvio-bench --rounds 5
  scripts/redis_compare_features.py --no-ruvio --rows 'GET|SET' -n 20000 --rounds 1 --no-record
"""

from __future__ import annotations

import argparse
import hashlib
import math
import random
import re
import sys
import time
from dataclasses import dataclass, field
from typing import Callable

import benchlib as bl

GEO_CENTER = (13.361389, 38.115556)
"""Centre of the seeded geo points (Palermo, as in Redis' GEO docs)."""

GEO_POINTS = 10_000
"""Points seeded for GEOSEARCH."""

GEO_SPAN_DEG = 4.0
"""Side of the square the points cover: a 50 km radius then holds about 500 of them,
so the search sorts hundreds of candidates to return 10."""

MISSING_MARKERS = ("unknown command", "unknown subcommand")
"""Error texts meaning the server lacks the command, as Redis words them."""


@dataclass
class Row:
    """One command row: what to seed, what to send, what the reply must be.

    `bench` uses redis-benchmark's `__rand_int__` for keys in the common key
    space and `__data__` for the value bytes (replaced here by `-d` bytes, since
    redis-benchmark only substitutes `__rand_int__` in custom commands).
    `expect` is a value compared for equality or a predicate on the reply.
    `scale` shrinks the request count for rows that are slow by nature.
    `reference` replaces `bench` on servers other than Ruvio when the command is
    Ruvio's own and the reference servers answer it with another command.
    """

    label: str
    bench: str
    expect: object
    setup: list[list] = field(default_factory=list)
    scale: float = 1.0
    reference: str | None = None


def is_int(r) -> bool:
    """integer"""
    return isinstance(r, int) and not isinstance(r, bool)


def is_bulk(r) -> bool:
    """bulk string"""
    return isinstance(r, bytes)


def bulk_len(n: int) -> Callable:
    """A check for a bulk string of exactly n bytes."""
    def check(r) -> bool:
        return isinstance(r, bytes) and len(r) == n
    check.__doc__ = f"bulk string of {n} bytes"
    return check


def array_of(n: int) -> Callable:
    """A check for an array of n elements."""
    def check(r) -> bool:
        return isinstance(r, list) and len(r) == n
    check.__doc__ = f"array of {n}"
    return check


def int_between(lo: int, hi: int) -> Callable:
    """A check for an integer in lo..hi."""
    def check(r) -> bool:
        return is_int(r) and lo <= r <= hi
    check.__doc__ = f"integer in {lo}..{hi}"
    return check


def is_float_text(r) -> bool:
    """float as a bulk string"""
    try:
        return isinstance(r, bytes) and math.isfinite(float(r))
    except ValueError:
        return False


def future_unix_time(r) -> bool:
    """unix time in the future"""
    return is_int(r) and r > time.time()


def list_seed(key: str, n: int) -> list[list]:
    """DEL then RPUSH e0..e{n-1}: a list whose middle element is e{n/2}."""
    return [["DEL", key], ["RPUSH", key] + [f"e{i}" for i in range(n)]]


def hash_seed(key: str, n: int) -> list[list]:
    """DEL then HSET f0..f{n-1} with 8-byte values."""
    args: list = ["HSET", key]
    for i in range(n):
        args += [f"f{i}", f"value-{i:02d}"]
    return [["DEL", key], args]


def zset_seed(key: str, n: int) -> list[list]:
    """DEL then ZADD members m0..m{n-1} with score i, 1,000 pairs per command."""
    cmds: list[list] = [["DEL", key]]
    for start in range(0, n, 1000):
        args: list = ["ZADD", key]
        for i in range(start, min(n, start + 1000)):
            args += [str(i), f"m{i}"]
        cmds.append(args)
    return cmds


def set_seed(key: str, first: int, n: int) -> list[list]:
    """DEL then SADD members m{first}..m{first+n-1}, 1,000 per command."""
    cmds: list[list] = [["DEL", key]]
    for start in range(first, first + n, 1000):
        cmds.append(["SADD", key] + [f"m{i}" for i in range(start, min(first + n, start + 1000))])
    return cmds


def random_int_list_seed(key: str, n: int) -> list[list]:
    """DEL then RPUSH n random integers in +-1,000,000, seeded with n so that every
    server sorts the same list."""
    rng = random.Random(n)
    return [["DEL", key], ["RPUSH", key] + [str(rng.randint(-1_000_000, 1_000_000)) for _ in range(n)]]


def geo_seed(key: str) -> list[list]:
    """GEO_POINTS points on a grid GEO_SPAN_DEG wide around GEO_CENTER."""
    lon0, lat0 = GEO_CENTER
    side = int(GEO_POINTS ** 0.5)
    cmds: list[list] = [["DEL", key]]
    batch: list = ["GEOADD", key]
    for i in range(GEO_POINTS):
        lon = lon0 + GEO_SPAN_DEG * ((i % side) / side - 0.5)
        lat = lat0 + GEO_SPAN_DEG * ((i // side) / side - 0.5)
        batch += [f"{lon:.6f}", f"{lat:.6f}", f"p{i}"]
        if len(batch) >= 2 + 3 * 500:
            cmds.append(batch)
            batch = ["GEOADD", key]
    if len(batch) > 2:
        cmds.append(batch)
    return cmds


BITMAP_1K = "U" * 1024
"""1 KiB bitmap of 0x55 bytes: 4,096 set bits, so BITCOUNT has an exact answer."""

ROWS: list[Row] = [
    Row("GET", "GET key:__rand_int__", is_bulk),
    Row("SET", "SET key:__rand_int__ __data__", "OK"),
    Row("LPOS (100 elements, hit in the middle)", "LPOS lpos:list e50", 50, list_seed("lpos:list", 100)),
    Row("LSET (100 elements)", "LSET lset:list 50 __data__", "OK", list_seed("lset:list", 100)),
    Row("LINSERT (pivot missing, scans 100)", "LINSERT linsert:list BEFORE missing x", -1,
        list_seed("linsert:list", 100)),
    Row("LREM (value missing, scans 100)", "LREM lrem:list 0 missing", 0, list_seed("lrem:list", 100)),
    Row("LMOVE (rotate a 100-element list)", "LMOVE lmove:list lmove:list LEFT RIGHT", is_bulk,
        list_seed("lmove:list", 100)),
    Row("BITFIELD INCRBY u8 (always writes)", "BITFIELD bf:incr INCRBY u8 0 1", array_of(1),
        [["DEL", "bf:incr"]]),
    Row("BITFIELD GET u8", "BITFIELD bf:get GET u8 0", [65], [["SET", "bf:get", "A"]]),
    Row("SETBIT (1 KiB bitmap, same bit)", "SETBIT sb:bitmap 100 1", int_between(0, 1),
        [["SET", "sb:bitmap", BITMAP_1K]]),
    Row("GETBIT (1 KiB bitmap)", "GETBIT gb:bitmap 100", 0, [["SET", "gb:bitmap", BITMAP_1K]]),
    Row("BITCOUNT (1 KiB bitmap)", "BITCOUNT bc:bitmap", 4096, [["SET", "bc:bitmap", BITMAP_1K]]),
    Row("PFADD", "PFADD hll:add element:__rand_int__", int_between(0, 1), [["DEL", "hll:add"]]),
    Row("PFCOUNT", "PFCOUNT hll:count", int_between(95, 105),
        [["DEL", "hll:count"], ["PFADD", "hll:count"] + [f"e{i}" for i in range(100)]]),
    Row("COPY … REPLACE (64 B string)", "COPY copy:src copy:dst REPLACE", 1,
        [["SET", "copy:src", "v" * 64]]),
    Row("DUMP (64 B string)", "DUMP dump:key", is_bulk, [["SET", "dump:key", "v" * 64]]),
    Row("EXPIRETIME", "EXPIRETIME et:key", future_unix_time, [["SET", "et:key", "v", "EX", "1000000"]]),
    Row("TOUCH", "TOUCH key:__rand_int__", 1),
    Row("OBJECT ENCODING", "OBJECT ENCODING key:__rand_int__", lambda r: isinstance(r, (bytes, str)) and r),
    Row("MEMORY USAGE", "MEMORY USAGE key:__rand_int__", int_between(1, 1 << 20)),
    Row("GETRANGE", "GETRANGE key:__rand_int__ 0 9", bulk_len(10)),
    Row("SETRANGE", "SETRANGE key:__rand_int__ 0 abc", is_int),
    Row("SETEX", "SETEX setex:__rand_int__ 100 __data__", "OK"),
    Row("MSET (3 keys)", "MSET key:__rand_int__ __data__ key:__rand_int__ __data__ key:__rand_int__ __data__",
        "OK"),
    Row("MGET (3 keys)", "MGET key:__rand_int__ key:__rand_int__ key:__rand_int__",
        lambda r: isinstance(r, list) and len(r) == 3 and all(is_bulk(x) for x in r)),
    Row("DEL (missing key)", "DEL missing:__rand_int__", 0),
    Row("EXISTS", "EXISTS key:__rand_int__", 1),
    Row("TYPE", "TYPE key:__rand_int__", "string"),
    Row("TTL", "TTL key:__rand_int__", -1),
    Row("PTTL", "PTTL key:__rand_int__", -1),
    Row("PERSIST (key without TTL)", "PERSIST key:__rand_int__", 0),
    Row("EXPIRE (key with TTL)", "EXPIRE ttl:key 1000000", 1, [["SET", "ttl:key", "v", "EX", "1000000"]]),
    Row("APPEND (1 byte)", "APPEND append:__rand_int__ x", is_int),
    Row("INCRBYFLOAT", "INCRBYFLOAT float:__rand_int__ 1.5", is_float_text),
    Row("HSET (existing field)", "HSET hash:small f __data__", 0,
        [["DEL", "hash:small"], ["HSET", "hash:small", "f", "v", "g", "v"]]),
    Row("HGET", "HGET hash:small f", is_bulk, [["HSET", "hash:small", "f", "v", "g", "v"]]),
    Row("HMGET (2 fields)", "HMGET hash:small f g", array_of(2), [["HSET", "hash:small", "f", "v", "g", "v"]]),
    Row("HSTRLEN", "HSTRLEN hash:small g", 1, [["HSET", "hash:small", "g", "v"]]),
    Row("LPUSH", "LPUSH lpush:list __data__", is_int, [["DEL", "lpush:list"]]),
    Row("LLEN", "LLEN llen:list", 100, list_seed("llen:list", 100)),
    Row("LRANGE 0 2", "LRANGE lrange:list 0 2", [b"e0", b"e1", b"e2"], list_seed("lrange:list", 100)),
    Row("SADD (existing member)", "SADD set:key m", 0, [["DEL", "set:key"], ["SADD", "set:key", "m", "a", "b", "c"]]),
    Row("SISMEMBER", "SISMEMBER set:key m", 1, [["SADD", "set:key", "m", "a", "b", "c"]]),
    Row("SRANDMEMBER", "SRANDMEMBER set:key", lambda r: r in (b"m", b"a", b"b", b"c"),
        [["SADD", "set:key", "m", "a", "b", "c"]]),
    Row("ZADD (existing member, same score)", "ZADD zset:key 1 m", 0,
        [["DEL", "zset:key"], ["ZADD", "zset:key", "1", "m", "2", "n"]]),
    Row("ZINCRBY", "ZINCRBY zset:incr 1 m", is_float_text, [["DEL", "zset:incr"]]),
    Row("ZSCORE", "ZSCORE zset:key m", b"1", [["ZADD", "zset:key", "1", "m", "2", "n"]]),
    Row("RENAME (same key)", "RENAME ren:key ren:key", "OK", [["SET", "ren:key", "v"]]),
    Row("PUBLISH (no subscribers)", "PUBLISH bench:channel hello", 0),
    Row("HGET (10-field hash)", "HGET hash:ten f5", b"value-05", hash_seed("hash:ten", 10)),
    Row("HSET (10-field hash, existing field)", "HSET hash:ten10 f5 __data__", 0, hash_seed("hash:ten10", 10)),
    Row("HDEL (10-field hash, missing field)", "HDEL hash:ten f99", 0, hash_seed("hash:ten", 10)),
    Row("HGETALL (10-field hash)", "HGETALL hash:ten", lambda r: isinstance(r, (list, dict)) and len(r) in (10, 20),
        hash_seed("hash:ten", 10), scale=0.5),
    Row("LINDEX (20-item list)", "LINDEX list:20 10", b"e10", list_seed("list:20", 20)),
    Row("LRANGE 0 9 (20-item list)", "LRANGE list:20 0 9", array_of(10), list_seed("list:20", 20), scale=0.5),
    Row("LSET (20-item list)", "LSET list:20set 10 __data__", "OK", list_seed("list:20set", 20)),
    Row("GEOADD", "GEOADD geo:add 13.361389 38.115556 member:__rand_int__", int_between(0, 1), [["DEL", "geo:add"]]),
    Row("GEOSEARCH (radius 50 km, COUNT 10)", "GEOSEARCH geo:search FROMLONLAT 13.361389 38.115556 "
        "BYRADIUS 50 km COUNT 10", array_of(10), geo_seed("geo:search"), scale=0.02),
    Row("GETEX (set a 100 s deadline)", "GETEX key:__rand_int__ EX 100", is_bulk),
    # Ruvio's cache read: with the value present it answers like GET, which is
    # what the reference servers run for this row.
    Row("FILLGET (value present)", "FILLGET key:__rand_int__", is_bulk, reference="GET key:__rand_int__"),
]

EVAL_SET_ZADD = "redis.call('SET',KEYS[1],ARGV[1]);return(redis.call('ZADD',KEYS[1]..':z',1,ARGV[1]))"
EVALSHA_GET = "return(redis.call('GET',KEYS[1]))"


def sha1_hex(body: str) -> str:
    """The SHA1 EVALSHA names a script by."""
    return hashlib.sha1(body.encode()).hexdigest()


EXTRA_ROWS: list[Row] = [
    # Not in the seed's table: the engine-contracts issue's long-double rows, one key
    # growing from 10000000.5 (past the small-decimal cases), and the hash variant.
    Row("INCRBYFLOAT (growing value)", "INCRBYFLOAT float:grow 1.5", is_float_text,
        [["SET", "float:grow", "10000000.5"]]),
    Row("HINCRBYFLOAT (growing value)", "HINCRBYFLOAT hash:float f 1.5", is_float_text,
        [["DEL", "hash:float"], ["HSET", "hash:float", "f", "10000000.5"]]),
    # The sets-and-sorted-sets issue's extra rows.
    Row("ZRANGEBYSCORE (100 of 10,000 members)", "ZRANGEBYSCORE zset:10k 5000 5099",
        array_of(100), zset_seed("zset:10k", 10_000), scale=0.2),
    Row("ZADD (new members into a 1M-member set)", "ZADD zset:1m __rand_int__ n:__rand_int__",
        is_int, zset_seed("zset:1m", 1_000_000)),
    Row("SINTER (two 10,000-member sets)", "SINTER {s}:a {s}:b", array_of(5_000),
        set_seed("{s}:a", 0, 10_000) + set_seed("{s}:b", 5_000, 10_000), scale=0.01),
    # The SORT issue's row: a numeric sort of a 1,000-element list (read-only, so
    # every request sorts the same list again).
    Row("SORT (1,000 numbers)", "SORT sort:1k", array_of(1_000),
        random_int_list_seed("sort:1k", 1_000), scale=0.05),
    # The streams helper's rows: BullMQ's event append (a capped stream) and a
    # reader's page of 10 from a 1,000-entry stream.
    Row("XADD (MAXLEN ~ 1000, * ID)", "XADD stream:cap MAXLEN ~ 1000 * event completed jobId __rand_int__",
        is_bulk, [["DEL", "stream:cap"]]),
    Row("XRANGE (10 of 1,000 entries)", "XRANGE stream:1k 500 + COUNT 10", array_of(10),
        [["DEL", "stream:1k"]] + [["XADD", "stream:1k", f"{i + 1}-0", "f", f"v{i}"] for i in range(1_000)],
        scale=0.5),
    # Lua: a script's fixed cost (EVAL's body lookup, KEYS/ARGV, the run) and two
    # redis.call round trips; EVALSHA reads one key. Bodies carry no spaces (the
    # templates split on them).
    Row("EVAL (SET and ZADD of its key)", f"EVAL {EVAL_SET_ZADD} 1 key:__rand_int__ __data__", is_int),
    Row("EVALSHA (GET of its key)", f"EVALSHA {sha1_hex(EVALSHA_GET)} 1 key:__rand_int__", is_bulk,
        [["SCRIPT", "LOAD", EVALSHA_GET]]),
]
"""Rows beyond the seed's 60, run with --extra-rows."""


def describe(expect) -> str:
    """How an expectation prints in an error message."""
    if callable(expect):
        return expect.__doc__ or getattr(expect, "__name__", "predicate")
    return repr(expect)


def reply_ok(reply, expect) -> bool:
    """True when the reply meets the row's expectation."""
    if isinstance(reply, bl.RespError):
        return False
    if callable(expect):
        return bool(expect(reply))
    if isinstance(expect, str) and isinstance(reply, bytes):
        return reply.decode(errors="replace") == expect
    return reply == expect


def rows_for(args: argparse.Namespace) -> list[Row]:
    """The rows selected by --rows (and --extra-rows)."""
    pattern = re.compile(args.rows) if args.rows else None
    rows = []
    for row in ROWS + (EXTRA_ROWS if args.extra_rows else []):
        if pattern and not pattern.search(row.label):
            continue
        rows.append(row)
    if not rows:
        sys.exit(f"--rows {args.rows!r} matches no row")
    return rows


def bench_args(row: Row, spec: bl.ServerSpec, datasize: int) -> list[str]:
    """The command a server runs for this row, with __data__ filled in."""
    text = row.reference if (row.reference and spec.kind != "ruvio") else row.bench
    return [("x" * datasize) if w == "__data__" else w for w in text.split()]


def hot(cmd: list[str]) -> list[str]:
    """The same command on one key instead of a random one (--hot-key)."""
    return [w.replace("__rand_int__", "000000000042") for w in cmd]


def one_shot(args: list[str]) -> list[str]:
    """The measured command with key placeholders fixed, for the reply check."""
    return [w.replace("__rand_int__", "000000000042") for w in args]


def prepare_row(port: int, row: Row, cmd: list[str], tag: str = "") -> tuple[str, object]:
    """Seed the row and check its reply once: ('ok'|'missing'|'failed', detail).

    With a tag, every key of the setup and of `cmd` (already tagged by the
    caller) lives on the shard that owns the tag.
    """
    setup = [bl.tagged(cmd_args, tag) for cmd_args in row.setup]
    with bl.RespClient(port) as c:
        for reply, sent in zip(c.pipeline(setup), setup):
            if isinstance(reply, bl.RespError):
                status = "missing" if any(m in reply.lower() for m in MISSING_MARKERS) else "failed"
                return status, f"setup {sent[0]} answered {reply}"
        reply = c.call(*one_shot(cmd))
    if isinstance(reply, bl.RespError) and any(m in reply.lower() for m in MISSING_MARKERS):
        return "missing", str(reply)
    if not reply_ok(reply, row.expect):
        return "failed", f"{' '.join(one_shot(cmd))[:80]} answered {reply!r:.120}, expected {describe(row.expect)}"
    return "ok", reply if not isinstance(reply, bytes) else reply[:64].decode(errors="replace")


def run_server(server: bl.ServerProcess, rows: list[Row], args: argparse.Namespace) -> dict:
    """Every row against one fresh server: status, check reply, rps, CPU per request."""
    bl.seed_strings(server.port, args.keyspace, args.datasize)
    out = {}
    for row in rows:
        cmd = bench_args(row, server.spec, args.datasize)
        if args.hot_key:
            cmd = hot(cmd)
        status, detail = prepare_row(server.port, row, cmd)
        entry: dict = {"status": status, "detail": detail if status != "ok" else None,
                       "command": " ".join(w if len(w) < 40 else f"<{len(w)} bytes>" for w in cmd)}
        if status == "ok":
            load = bl.Load(args.clients, args.pipeline, max(1, int(args.requests * row.scale)),
                           args.keyspace, args.datasize)
            result, cpu_us = bl.measured(server, lambda: bl.run_load(
                args.generator, server.port, load, command=cmd, cpus=args.client_cpu,
                binary=bl.generator_binary(args)))
            entry.update({"rps": result.rps, "cpu_us_per_req": cpu_us, "p50_ms": result.p50_ms,
                          "p99_ms": result.p99_ms, "requests": result.requests,
                          **bl.row_conditions(result, server)})
            print(f"  {server.spec.name:8} {row.label[:44]:44} {bl.fmt_rate(result.rps):>8} "
                  f"{bl.fmt_num(cpu_us)} us/req", flush=True)
        else:
            print(f"  {server.spec.name:8} {row.label[:44]:44} {status.upper()}: {detail}", flush=True)
        out[row.label] = entry
    return out


def summarize(rounds: list[dict], rows: list[Row], names: list[str], baseline: str) -> dict:
    """Medians, ratios to the baseline with whiskers, geometric means and counts."""
    table = []
    for row in rows:
        per = {}
        for n in names:
            entries = [r["results"][n][row.label] for r in rounds]
            statuses = {e["status"] for e in entries}
            ok = [e for e in entries if e["status"] == "ok"]
            status = "ok" if statuses == {"ok"} else ("missing" if "missing" in statuses else "failed")
            per[n] = {"status": status,
                      "rps_rounds": [e["rps"] for e in ok],
                      "cpu_rounds": [e["cpu_us_per_req"] for e in ok],
                      "median_rps": bl.median([e["rps"] for e in ok]) if status == "ok" else None,
                      "median_cpu_us": bl.median([e["cpu_us_per_req"] for e in ok]) if status == "ok" else None,
                      "detail": next((e["detail"] for e in entries if e["detail"]), None)}
        for n in names:
            if n != baseline and per[n]["status"] == "ok" and per.get(baseline, {}).get("status") == "ok":
                per[n]["ratio"] = bl.ratio(per[n]["median_rps"], per[baseline]["median_rps"])
                per[n]["whisker"] = bl.pairing_whiskers(per[n]["rps_rounds"], per[baseline]["rps_rounds"])
        table.append({"label": row.label, "servers": per})
    summary = {}
    for n in names:
        if n == baseline:
            continue
        ratios = [t["servers"][n]["ratio"] for t in table if "ratio" in t["servers"][n]]
        summary[n] = {"geomean": bl.geomean(ratios), "rows_measured": len(ratios),
                      "rows_at_or_above_0_97": sum(r >= 0.97 for r in ratios),
                      "rows_missing": sum(t["servers"][n]["status"] == "missing" for t in table),
                      "rows_failed": sum(t["servers"][n]["status"] == "failed" for t in table)}
    return {"rows": table, "summary": summary, "baseline": baseline}


def print_report(result: dict, names: list[str]) -> None:
    """The table: median rps per server, ratio to the baseline, CPU per request."""
    baseline = result["baseline"]
    others = [n for n in names if n != baseline]
    headers = ["command"] + [f"{n} k/s" for n in names] + [f"{n}/{baseline}" for n in others]
    headers += [f"{n} us/req" for n in names]

    def cell(s: dict, key: str, fmt) -> str:
        return fmt(s[key]) if s["status"] == "ok" else s["status"]

    rows = []
    for t in result["rows"]:
        s = t["servers"]
        cells = [t["label"]] + [cell(s[n], "median_rps", bl.fmt_rate) for n in names]
        cells += [bl.fmt_ratio(s[n].get("ratio", float("nan"))) for n in others]
        cells += [cell(s[n], "median_cpu_us", bl.fmt_num) for n in names]
        rows.append(cells)
    print(bl.format_table(headers, rows))
    for n, s in result["summary"].items():
        print(f"\n{n} vs {baseline}: geometric mean {bl.fmt_ratio(s['geomean'])} over {s['rows_measured']} rows; "
              f"{s['rows_at_or_above_0_97']} at 0.97x or better; {s['rows_missing']} missing; "
              f"{s['rows_failed']} failed checks")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    bl.add_load_args(p, requests=1_000_000)
    bl.add_baseline_arg(p)
    p.add_argument("--rows", help="regular expression selecting rows by label")
    p.add_argument("--list", action="store_true", help="print the rows and exit")
    p.add_argument("--hot-key", action="store_true",
                   help="every request of a row on one key (all in cache): the fixed "
                        "per-request cost shows")
    p.add_argument("--extra-rows", action="store_true",
                   help="also run the rows beyond the seed's table (growing INCRBYFLOAT/HINCRBYFLOAT, big sorted sets and sets)")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    if args.list:
        for row in ROWS + EXTRA_ROWS:
            print(f"{row.label:48} {row.bench}")
        return 0
    rows = rows_for(args)
    specs = bl.build_servers(args)
    names = [s.name for s in specs]
    bl.require_baseline(args, names)
    rounds = bl.run_rounds(specs, args.rounds, args.server_cpu, lambda srv: run_server(srv, rows, args))
    result = summarize(rounds, rows, names, args.baseline)
    print()
    print_report(result, names)
    failed = any(t["servers"][n]["status"] == "failed" for t in result["rows"] for n in names)
    if not args.no_record:
        record = bl.record_header("redis-compare-features", args, specs)
        record.update({"rows": [r.__dict__ | {"expect": describe(r.expect), "setup": len(r.setup)} for r in rows],
                       "rounds": rounds, "result": result})
        print(f"\nrecord: {bl.write_record(record, args.out, 'features')}")
    if failed:
        print("\nSOME ROWS FAILED THEIR REPLY CHECK: see FAILED lines above", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
