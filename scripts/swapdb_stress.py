#!/usr/bin/env python3
"""SWAPDB beside cross-shard scripts and transactions (forward mode): nothing lost.

Two keys on different shards hold 1,000 units each in databases 0 and 1. For
`--seconds`, concurrently: a client loops SWAPDB 0 1; a client runs scripts that
move a unit between the two keys (undeclared keys of two shards: the script lock,
in batches); a client runs transactions DECR / EVAL INCRBY / SWAPDB twice (keys
borrowed after a swap under a name the queue holds in the other database); one
reader per database reads both keys in a transaction. Every reader must see 2,000
units, and at the end the four keys must hold 4,000: a SWAPDB that met keys out
on loan (a batch's, or ones on their way home) lost about half of them in seconds
before 2026-12-02 (docs/cross-shard.md). Loopback only; the bounded version runs
in the test suite (tests/transactions.rs, `swapdb_beside_scripts_and_transactions`).

    scripts/swapdb_stress.py --ruvio target/release/ruvio --shards 4 --seconds 20
    scripts/swapdb_stress.py --durability always
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import redis

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

MOVE = "redis.call('INCRBY', ARGV[1], -1) return redis.call('INCRBY', ARGV[2], 1)"
INCRBY = "return redis.call('INCRBY', ARGV[1], ARGV[2])"
UNITS = 1000


def run(port: int, seconds: float, a: str, b: str) -> list[str]:
    """Run the clients against `port`; the failures seen."""
    def client() -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=30)

    setup = client()
    for db in (1, 0):
        setup.execute_command("SELECT", db)
        setup.mset({a: UNITS, b: UNITS})
    stop = time.time() + seconds
    failures: list[str] = []

    def loop(name, body):
        def go():
            r = client()
            try:
                while time.time() < stop and not failures:
                    body(r)
            except Exception as e:  # noqa: BLE001 - any error is a finding
                failures.append(f"{name}: {e!r}")
        return threading.Thread(target=go)

    def swapper(r):
        r.swapdb(0, 1)

    def scripter(r):
        r.eval(MOVE, 0, a, b)

    def transactions(r):
        p = r.pipeline(transaction=True)
        for _ in range(2):
            p.decr(a)
            p.eval(INCRBY, 0, b, 1)
            p.swapdb(0, 1)
        p.execute()

    def reader(db):
        def read(r):
            p = r.pipeline(transaction=True)
            p.execute_command("SELECT", db)
            p.get(a)
            p.get(b)
            _, x, y = p.execute()
            if int(x) + int(y) != 2 * UNITS:
                failures.append(f"reader of db {db} saw {x!r} + {y!r}")
        return read

    threads = [loop("swapper", swapper), loop("scripter", scripter),
               loop("scripter", scripter), loop("transactions", transactions),
               loop("reader 0", reader(0)), loop("reader 1", reader(1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = 0
    for db in (0, 1):
        setup.execute_command("SELECT", db)
        total += sum(int(v or 0) for v in setup.mget(a, b))
    if total != 4 * UNITS:
        failures.append(f"{total} units at the end, not {4 * UNITS}")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ruvio", default="target/release/ruvio")
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--durability", default="memory", choices=["memory", "everysec", "always"])
    args = parser.parse_args()
    port = bl.free_port()
    data = tempfile.mkdtemp(prefix="ruvio-swapdb-stress-")
    argv = [args.ruvio, "--port", str(port), "--shards", str(args.shards),
            "--durability", args.durability, "--dir", data]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        bl.wait_for_ping(port, 30, alive=lambda: proc.poll() is None)
        # A key of the first shard and one of the last: shard i owns slots
        # i * 16384 / n up to (i + 1) * 16384 / n - 1 (topology.rs).
        n = args.shards
        a = "{" + bl.tag_for_slots([(0, 16384 // n - 1)]) + "}a"
        b = "{" + bl.tag_for_slots([((n - 1) * 16384 // n, 16383)]) + "}b"
        failures = run(port, args.seconds, a, b)
    finally:
        proc.terminate()
        proc.wait()
        shutil.rmtree(data, ignore_errors=True)
    for failure in failures[:10]:
        print(failure)
    print(f"{args.shards} shards, {args.durability}, {args.seconds:g} s:",
          "FAILED" if failures else "every unit kept, no half swap seen")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
