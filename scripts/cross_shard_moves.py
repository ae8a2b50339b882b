#!/usr/bin/env python3
"""RENAME and LMOVE whose two keys live on different shards (issue 36 item 2: "RENAME
and LMOVE across shards >= 1.0x Redis's RENAME/LMOVE"): Ruvio in forward mode with 2
shards, the pair on two shards and on one, against one redis-server (and Valkey)
running the same commands.

Each connection owns a pair of keys, so no two connections touch the same key (what
is measured is the cost of crossing shards, not contention): `a` on shard 0 and `b`
on shard 1 for the spread row, both in one slot for the one-shard row. A write holds
`--batch` commands that move the value there and back (`RENAME a b`, `RENAME b a`,
... or `LMOVE a b LEFT RIGHT`, `LMOVE b a LEFT RIGHT`, ... over a one-element list),
so every command finds its source; the replies are known exactly and only counted
(transactions_bench.py's `drive_all`). Rates are commands per second summed over the
connections, median of the rounds; servers alternate within each round.

  scripts/cross_shard_moves.py --server-cpu 0-1 --client-cpu 1
Functional check:
  scripts/cross_shard_moves.py --seconds 0.3 --rounds 1 --no-record
"""

from __future__ import annotations

import argparse
import statistics
import sys

import benchlib as bl
from transactions_bench import SHARDS, drive_all

ELEMENT = "x" * 8
"""The LMOVE rows' list element (the RENAME rows' value too)."""

COMMANDS = ("RENAME", "LMOVE")
LAYOUTS = ("spread over 2 shards", "on one shard")


def key_on(shard: int, prefix: str) -> str:
    """The first key `prefix:<n>` whose slot shard `shard` of 2 owns."""
    n = 0
    while bl.key_slot(f"{prefix}:{n}".encode()) * SHARDS // 16384 != shard:
        n += 1
    return f"{prefix}:{n}"


def pair(connection: int, layout: str) -> tuple[str, str]:
    """A connection's two keys: on shards 0 and 1, or in one hash-tag slot."""
    if layout == "on one shard":
        return f"{{mv{connection}}}:a", f"{{mv{connection}}}:b"
    return key_on(0, f"mv{connection}:a"), key_on(1, f"mv{connection}:b")


def moves(command: str, a: str, b: str, batch: int) -> tuple[bytes, int]:
    """`batch` commands moving the value a -> b -> a ..., and their replies' length."""
    there = ["RENAME", a, b] if command == "RENAME" else ["LMOVE", a, b, "LEFT", "RIGHT"]
    back = ["RENAME", b, a] if command == "RENAME" else ["LMOVE", b, a, "LEFT", "RIGHT"]
    one = b"+OK\r\n" if command == "RENAME" else f"${len(ELEMENT)}\r\n{ELEMENT}\r\n".encode()
    request = (bl.RespClient.encode(there) + bl.RespClient.encode(back)) * (batch // 2)
    return request, len(one) * 2 * (batch // 2)


def measure(port: int, command: str, layout: str, args: argparse.Namespace) -> float:
    """Commands per second over `args.clients` connections, each on its own pair."""
    loads = []
    with bl.RespClient(port) as c:
        for i in range(args.clients):
            a, b = pair(i, layout)
            c.call("DEL", a, b)
            reply = c.call("SET", a, ELEMENT) if command == "RENAME" else c.call("RPUSH", a, ELEMENT)
            assert reply in ("OK", 1), reply
            loads.append(moves(command, a, b, args.batch))
    return drive_all(port, loads, args.batch // 2 * 2, args.seconds)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    p.add_argument("--seconds", type=float, default=5.0, help="length of each measurement")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-c", "--clients", type=int, default=8)
    p.add_argument("--batch", type=int, default=64, help="commands per write (even)")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    specs = bl.build_servers(args, ruvio_shards=SHARDS)

    def rows_of(spec, ruvio):
        for command in COMMANDS:
            for layout in LAYOUTS if ruvio else LAYOUTS[:1]:
                label = f"{spec.name}: {command}, keys {layout}" if ruvio else f"{spec.name}: {command}"
                yield label, lambda port, command=command, layout=layout: measure(port, command, layout, args)

    rows, conditions = bl.alternate_rows(args, specs, rows_of)
    table = [[label, bl.fmt_rate(statistics.median(rates))] for label, rates in rows.items()]
    print(bl.format_table(["row", "commands/s"], table))
    if not args.no_record:
        record = bl.record_header("cross-shard-moves", args, specs)
        record.update({"rates": rows, "conditions": conditions})
        print(f"\nrecord: {bl.write_record(record, args.out, 'cross-shard-moves')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
