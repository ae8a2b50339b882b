#!/usr/bin/env python3
"""Memory per data shape: resident memory a server adds to hold the same data.

For each of the seed's 12 shapes and each server: start a fresh server, read its
idle resident set (VmRSS from /proc), load the shape, read it again, and report
the difference in KiB and the ratio to the baseline server. Resident memory is
what the machine pays, whatever the allocator or the server's own accounting
says. Keys look like `key:000000012345`.

Examples:
  scripts/memory_shapes.py                      # Ruvio vs Redis 7 vs Valkey
  scripts/memory_shapes.py --no-ruvio --scale 0.05 --no-record   # quick functional check
  scripts/memory_shapes.py --values tiny,unique16   # both value modes in one run
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import benchlib as bl

SETTLE_S = 0.5
"""Pause before each RSS reading so lazy frees and background threads settle."""

BATCH = 1000
"""Commands per pipelined batch while loading."""


@dataclass
class Shape:
    """One data shape: its label, how many keys it makes, and its commands."""

    label: str
    count: int
    commands: Callable[[int, str], Iterator[list]]
    keys: Callable[[int], int] = lambda n: n
    setup: tuple = ()
    """Commands sent before loading (a CONFIG SET the shape needs)."""

    def scaled(self, scale: float) -> int:
        return max(1, int(self.count * scale))


def key(prefix: str, i: int, tag: str = "") -> str:
    """`prefix:000000012345`, with an optional `{tag}` so a shard owns the key."""
    return f"{{{tag}}}{prefix}:{i:012d}" if tag else f"{prefix}:{i:012d}"


def per_key(build: Callable[[str, int], list], prefix: str) -> Callable[[int, str], Iterator[list]]:
    """Commands for n keys named `prefix:...`, one command per key."""
    def gen(n: int, tag: str) -> Iterator[list]:
        for i in range(n):
            yield build(key(prefix, i, tag), i)
    return gen


def geo_points(n: int, tag: str) -> Iterator[list]:
    """n points in one key, 500 per GEOADD, spread over a few degrees."""
    name = key("geo", 0, tag)
    args: list = ["GEOADD", name]
    for i in range(n):
        args += [f"{(i % 1000) * 0.01 - 5:.5f}", f"{(i // 1000) * 0.01 + 30:.5f}", f"p{i}"]
        if len(args) >= 2 + 3 * 500:
            yield args
            args = ["GEOADD", name]
    if len(args) > 2:
        yield args


def one_big_key(command: str, prefix: str, scored: bool) -> Callable[[int, str], Iterator[list]]:
    """n members `m<i>` in one key, 1000 per command (ZADD with score i)."""
    def gen(n: int, tag: str) -> Iterator[list]:
        name = key(prefix, 0, tag)
        for start in range(0, n, 1000):
            args: list = [command, name]
            for i in range(start, min(n, start + 1000)):
                args += [str(i), f"m{i}"] if scored else [f"m{i}"]
            yield args
    return gen


def job_list(n: int, tag: str) -> Iterator[list]:
    """n queue-like elements in one list, 1000 per RPUSH: repetitive text, as
    job ids and payload names are (what `list-compress-depth` is for)."""
    name = key("jobs", 0, tag)
    for start in range(0, n, 1000):
        yield ["RPUSH", name] + [f"job:{i % 5000:08d}:queue-default:payload-{i % 97}"
                                  for i in range(start, min(n, start + 1000))]


def compress_depth(depth: int) -> tuple:
    return (["CONFIG", "SET", "list-compress-depth", str(depth)],)


def stream_entries(n: int, tag: str) -> Iterator[list]:
    """n small entries in one stream (field `f`, the entry's number as value),
    ten per millisecond: the shape docs/streams.md quotes."""
    name = key("stream", 0, tag)
    for i in range(n):
        yield ["XADD", name, f"{1_700_000_000_000 + i // 10}-{i % 10}", "f", str(i)]


VALUE_16 = "v" * 16
VALUE_128 = "v" * 128

VALUE_MODES = ("tiny", "unique16")
"""`tiny`: the seed's values, the same short members in every key (`m1 m2 m3 m4`,
`element-00` ...), which flatter small encodings. `unique16`: member j of key i is
`v{i:07d}.{j:03d}.` padded with `x` to 16 bytes (issue 36 item 4), so no two keys
share a member and every member is a realistic 16 bytes."""


def unique(i: int, j: int, size: int = 16) -> str:
    """Member j of key i in `unique16` mode: `v0000012.003.xxx` (16 bytes)."""
    return f"v{i:07d}.{j:03d}.".ljust(size, "x")


def seed_shapes(values: str) -> list[Shape]:
    """The seed's 12 shapes with `values` (VALUE_MODES). Labels of `tiny` are the
    seed's own, so its records compare with older ones; `unique16` labels end in
    `, unique16`. HyperLogLogs, bitmaps, counters and geo points are the same in
    both modes (their elements are already distinct, or they hold no members)."""
    u = values == "unique16"
    sfx = ", unique16" if u else ""

    def list20(k: str, i: int) -> list:
        return ["RPUSH", k] + [unique(i, j) if u else f"element-{j:02d}" for j in range(20)]

    def hash3(k: str, i: int) -> list:
        if not u:
            return ["HSET", k, "f1", "value-1", "f2", "value-2", "f3", "value-3"]
        return ["HSET", k] + [unique(i, j) for j in range(6)]

    def set4(k: str, i: int) -> list:
        return ["SADD", k] + [unique(i, j) if u else f"m{j + 1}" for j in range(4)]

    def zset3(k: str, i: int) -> list:
        members = [unique(i, j) for j in range(3)] if u else ["a", "b", "c"]
        return ["ZADD", k] + [x for j, m in enumerate(members) for x in (str(j + 1), m)]

    def v16(i: int) -> str:
        return unique(i, 0) if u else VALUE_16

    def v128(i: int) -> str:
        return unique(i, 0, 128) if u else VALUE_128

    return [
        Shape("20,000 lists of 20 elements" + sfx, 20_000, per_key(list20, "list")),
        Shape("5,000 HyperLogLogs of 100 elements" + sfx, 5_000,
              per_key(lambda k, i: ["PFADD", k] + [f"{i}-{j}" for j in range(100)], "hll")),
        Shape("20,000 bitmaps of 128 B (SETBIT)" + sfx, 20_000,
              per_key(lambda k, i: ["SETBIT", k, "1023", "1"], "bitmap")),
        Shape("100,000 BITFIELD counters (u16)" + sfx, 100_000,
              per_key(lambda k, i: ["BITFIELD", k, "INCRBY", "u16", "0", "1"], "counter")),
        Shape("100,000 geo points in one key" + sfx, 100_000, geo_points, keys=lambda n: 1),
        Shape("100,000 strings of 16 B" + sfx, 100_000, per_key(lambda k, i: ["SET", k, v16(i)], "key")),
        Shape("100,000 strings of 128 B" + sfx, 100_000, per_key(lambda k, i: ["SET", k, v128(i)], "key")),
        Shape("100,000 strings of 16 B with TTL" + sfx, 100_000,
              per_key(lambda k, i: ["SET", k, v16(i), "EX", "1000000"], "key")),
        Shape("100,000 one-element lists" + sfx, 100_000, per_key(lambda k, i: ["RPUSH", k, v16(i)], "list")),
        Shape("50,000 small hashes (3 fields)" + sfx, 50_000, per_key(hash3, "hash")),
        Shape("50,000 small sets (4 members)" + sfx, 50_000, per_key(set4, "set")),
        Shape("50,000 small sorted sets (3 members)" + sfx, 50_000, per_key(zset3, "zset")),
    ]


SHAPES: list[Shape] = seed_shapes("tiny")
"""The seed's 12 shapes with `tiny` values (what the script measured before `--values`)."""

EXTRA_SHAPES: list[Shape] = [
    Shape("one set of 1,000,000 members", 1_000_000, one_big_key("SADD", "bigset", False), keys=lambda n: 1),
    Shape("one sorted set of 1,000,000 members", 1_000_000, one_big_key("ZADD", "bigzset", True),
          keys=lambda n: 1),
    Shape("one stream of 1,000,000 entries", 1_000_000, stream_entries, keys=lambda n: 1),
    Shape("one list of 1,000,000 jobs, compress depth 0", 1_000_000, job_list, keys=lambda n: 1,
          setup=compress_depth(0)),
    Shape("one list of 1,000,000 jobs, compress depth 1", 1_000_000, job_list, keys=lambda n: 1,
          setup=compress_depth(1)),
    Shape("one list of 1,000,000 jobs, compress depth 2", 1_000_000, job_list, keys=lambda n: 1,
          setup=compress_depth(2)),
]
"""Big-collection shapes outside the seed's 12 (`--extra-shapes`)."""


def load_shape(port: int, shape: Shape, n: int, tag: str = "") -> str | None:
    """Send the shape's commands; return None, or the first error reply's text."""
    with bl.RespClient(port) as c:
        batch: list = []
        for cmd in shape.commands(n, tag):
            batch.append(cmd)
            if len(batch) == BATCH:
                err = first_error(c.pipeline(batch))
                if err:
                    return err
                batch = []
        return first_error(c.pipeline(batch)) if batch else None


def first_error(replies: list) -> str | None:
    """Text of the first error reply in a batch: loading stops there."""
    return next((str(r) for r in replies if isinstance(r, bl.RespError)), None)


def measure_shape(spec: bl.ServerSpec, shape: Shape, n: int, cpus: str) -> dict:
    """Fresh server: idle RSS, load, loaded RSS, key count check, and the host's
    conditions over it (benchlib.host_since)."""
    with bl.ServerProcess(spec, cpus) as server:
        host0 = bl.host_snapshot()
        out = measure_on(server, shape, n)
        out.update(bl.host_since(host0, servers=[server]))
    return out


def measure_on(server: bl.ServerProcess, shape: Shape, n: int) -> dict:
    """Idle RSS, load, loaded RSS and key count check on a fresh running server."""
    if shape.setup:
        with server.client() as c:
            for cmd in shape.setup:
                c.call(*cmd)
    time.sleep(SETTLE_S)
    idle = server.rss_kib()
    err = load_shape(server.port, shape, n)
    if err:
        status = "missing" if "unknown command" in err.lower() else "failed"
        return {"status": status, "detail": err, "idle_kib": idle}
    with server.client() as c:
        dbsize = c.call("DBSIZE")
    want = shape.keys(n)
    if dbsize != want:
        return {"status": "failed", "detail": f"DBSIZE {dbsize!r}, expected {want}", "idle_kib": idle}
    time.sleep(SETTLE_S)
    loaded = server.rss_kib()
    return {"status": "ok", "idle_kib": idle, "loaded_kib": loaded, "added_kib": loaded - idle}


def summarize(rounds: list[dict], names: list[str], baseline: str) -> dict:
    """Median added KiB per shape and server, ratio to the baseline, totals."""
    rows = []
    for label in rounds[0]["results"][names[0]]:
        per = {}
        for n in names:
            entries = [r["results"][n][label] for r in rounds]
            ok = [e["added_kib"] for e in entries if e["status"] == "ok"]
            per[n] = {"status": "ok" if len(ok) == len(entries) else entries[-1]["status"],
                      "added_kib_rounds": ok, "added_kib": bl.median(ok) if ok else None,
                      "idle_kib": bl.median([e["idle_kib"] for e in entries]),
                      "detail": next((e.get("detail") for e in entries if e.get("detail")), None)}
        for n in names:
            if n != baseline and per[n]["added_kib"] and per.get(baseline, {}).get("added_kib"):
                per[n]["ratio"] = bl.ratio(per[n]["added_kib"], per[baseline]["added_kib"])
        rows.append({"label": label, "servers": per})
    totals = {n: sum(r["servers"][n]["added_kib"] or 0 for r in rows) for n in names}
    summary = {n: summarize_server(rows, n, baseline) for n in names if n != baseline}
    return {"rows": rows, "totals_kib": totals, "summary": summary, "baseline": baseline}


def summarize_server(rows: list[dict], name: str, baseline: str) -> dict:
    """Ratios over the shapes both servers loaded: a missing shape must not make a
    server look smaller."""
    both = [r["servers"] for r in rows if "ratio" in r["servers"][name]]
    ours, theirs = sum(s[name]["added_kib"] for s in both), sum(s[baseline]["added_kib"] for s in both)
    return {"geomean_ratio": bl.geomean(s[name]["ratio"] for s in both),
            "total_ratio": bl.ratio(ours, theirs), "shapes_compared": len(both),
            "shapes_below_baseline": sum(s[name]["ratio"] < 1 for s in both),
            "shapes_missing": sum(r["servers"][name]["status"] == "missing" for r in rows)}


def print_report(result: dict, names: list[str]) -> None:
    baseline = result["baseline"]
    others = [n for n in names if n != baseline]
    headers = ["data shape"] + [f"{n} KiB" for n in names] + [f"{n}/{baseline}" for n in others]
    rows = []
    for r in result["rows"]:
        s = r["servers"]
        cells = [r["label"]] + [f"{s[n]['added_kib']:,.0f}" if s[n]["status"] == "ok" else s[n]["status"]
                                for n in names]
        cells += [bl.fmt_ratio(s[n].get("ratio", float("nan"))) for n in others]
        rows.append(cells)
    print(bl.format_table(headers, rows))
    idle = {n: result["rows"][0]["servers"][n]["idle_kib"] for n in names}
    print("\nidle RSS KiB: " + ", ".join(f"{n} {v:,.0f}" for n, v in idle.items()))
    for n, s in result["summary"].items():
        print(f"{n} vs {baseline} over {s['shapes_compared']} shapes: total {bl.fmt_ratio(s['total_ratio'])}, "
              f"geometric mean {bl.fmt_ratio(s['geomean_ratio'])}, {s['shapes_below_baseline']} below; "
              f"{s['shapes_missing']} missing")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    p.add_argument("--rounds", type=int, default=1, help="memory is steady; more rounds show the spread")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every shape's count (functional runs)")
    bl.add_baseline_arg(p)
    p.add_argument("--shapes", help="substring selecting shapes by label")
    p.add_argument("--values", default="tiny",
                   help="comma-separated value modes of the seed's shapes: tiny (the seed's, the "
                        "default), unique16 (member j of key i is `v{i:07d}.{j:03d}.` padded with "
                        "`x` to 16 bytes), or both: `tiny,unique16`")
    p.add_argument("--extra-shapes", action="store_true",
                   help="also one set, sorted set, stream and list (compress depth 0, 1, 2) "
                        "of 1,000,000 elements")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    specs = bl.build_servers(args)
    names = [s.name for s in specs]
    bl.require_baseline(args, names)
    modes = [m.strip() for m in args.values.split(",") if m.strip()]
    bad = [m for m in modes if m not in VALUE_MODES]
    if bad or not modes:
        sys.exit(f"--values: unknown mode {', '.join(bad) or '(none)'}; choose from {', '.join(VALUE_MODES)}")
    pool = [s for m in modes for s in seed_shapes(m)] + (EXTRA_SHAPES if args.extra_shapes else [])
    shapes = [s for s in pool if not args.shapes or args.shapes in s.label]
    rounds = []
    for i, order in enumerate(bl.round_orders(names, args.rounds)):
        print(f"round {i + 1}/{args.rounds}", flush=True)
        results = {n: {} for n in order}
        for shape in shapes:
            for n in order:
                spec = next(s for s in specs if s.name == n)
                results[n][shape.label] = measure_shape(spec, shape, shape.scaled(args.scale), args.server_cpu)
                e = results[n][shape.label]
                print(f"  {n:8} {shape.label:40} {e.get('added_kib', e['status'])}", flush=True)
        rounds.append({"order": order, "results": results})
    result = summarize(rounds, names, args.baseline)
    print()
    print_report(result, names)
    if not args.no_record:
        record = bl.record_header("memory-shapes", args, specs)
        record.update({"value_modes": modes,
                       "shapes": [{"label": s.label, "count": s.scaled(args.scale)} for s in shapes],
                       "rounds": rounds, "result": result})
        print(f"\nrecord: {bl.write_record(record, args.out, 'memory')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
