#!/usr/bin/env python3
"""EXEC of 10 SETs: Ruvio (forward mode, 2 shards) with the ten keys on one shard
and spread over both, against one redis-server.

Each connection sends batches of whole transactions (MULTI, 10 SETs, EXEC) in one
write and reads until every reply byte of the batch has come (the replies are
known exactly, so nothing is parsed: the Python client stays cheap). Rates are
transactions per second, summed over the connections, median of the rounds.

With `--generator ruvio-bench` (the default) the load is ruvio-bench's
`--transaction 10`: each request is MULTI, ten SETs of keys drawn from `-r` keys
(default ten: `{a}:k0`..`{a}:k9` in one slot, or `tx:0`..`tx:9` over both shards)
and EXEC,
`--batch` transactions in flight per connection; `--generator python` is the
original client (whole batches written at once, replies counted by length), whose
one thread per connection can be what limits the rate.

The keys-on-one-shard row runs on the keys' own shard where it can (forward mode
has one port, so the connection lands on any shard; the row names where the keys
live). The spread row makes EXEC borrow every key from both shards
(docs/transactions.md): its cost against the one-shard row is the price of
cross-shard atomicity.

  scripts/transactions_bench.py --server-cpu 0-1 --client-cpu 1
Functional check:
  scripts/transactions_bench.py --transactions 2000 --rounds 1 --no-record
  scripts/transactions_bench.py --generator python --seconds 0.2 --rounds 1 --no-record
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import threading
import time

import benchlib as bl

SETS_PER_TX = 10
"""SETs in each transaction."""

SHARDS = 2
"""Ruvio's shard count for the spread row."""


def tx_keys(layout: str) -> list[str]:
    """Ten keys: all in hash tag {a} (one shard), or spread over both shards."""
    if layout == "on one shard":
        return [f"{{a}}:k{i}" for i in range(SETS_PER_TX)]
    keys, i = [], 0
    want = [s % SHARDS for s in range(SETS_PER_TX)]
    for shard in want:
        while bl.key_slot(f"tx:{i}".encode()) * SHARDS // 16384 != shard:
            i += 1
        keys.append(f"tx:{i}")
        i += 1
    return keys


def batch_bytes(keys: list[str], value: str, transactions: int) -> tuple[bytes, int]:
    """The request of `transactions` transactions and the length of their replies."""
    one = [["MULTI"]] + [["SET", k, value] for k in keys] + [["EXEC"]]
    request = b"".join(bl.RespClient.encode(c) for c in one) * transactions
    reply = b"+OK\r\n" + b"+QUEUED\r\n" * len(keys) + f"*{len(keys)}\r\n".encode() + b"+OK\r\n" * len(keys)
    return request, len(reply) * transactions


def drive(port: int, request: bytes, reply_len: int, transactions: int, until: float, done: list) -> None:
    """One connection: send batches until `until`, count the transactions answered."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    count = 0
    while time.monotonic() < until:
        sock.sendall(request)
        have = 0
        while have < reply_len:
            chunk = sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("server closed the connection")
            have += len(chunk)
        count += transactions
    sock.close()
    done.append(count)


def measure_with_ruvio_bench(port: int, layout: str, args: argparse.Namespace) -> float:
    """Transactions per second from ruvio-bench --transaction (see the module doc)."""
    key = "{a}:k__rand_int__" if layout == "on one shard" else "tx:__rand_int__"
    load = bl.Load(clients=args.clients, pipeline=args.batch, requests=args.transactions,
                   keyspace=args.keyspace, datasize=args.datasize)
    result = bl.ruvio_bench(port, load, command=["SET", key, "__data__"], cpus=args.client_cpu,
                            binary=args.ruvio_bench, extra=["--transaction", str(SETS_PER_TX)])
    return result.rps


def measure(port: int, layout: str, args: argparse.Namespace) -> float:
    """Transactions per second over `args.clients` connections."""
    if args.generator == "ruvio-bench":
        return measure_with_ruvio_bench(port, layout, args)
    request, reply_len = batch_bytes(tx_keys(layout), "x" * args.datasize, args.batch)
    with bl.RespClient(port) as c:
        reply = c.call("MULTI")
        assert reply == "OK", reply
        for k in tx_keys(layout):
            c.call("SET", k, "x")
        reply = c.call("EXEC")
        assert isinstance(reply, list) and len(reply) == SETS_PER_TX, f"EXEC answered {reply!r}"
    return drive_all(port, [(request, reply_len)] * args.clients, args.batch, args.seconds)


def drive_all(port: int, loads: list[tuple[bytes, int]], per_write: int, seconds: float) -> float:
    """One connection per (request, reply length) in `loads`, each sending its request
    for `seconds`; the units (`per_write` per request) answered per second, summed."""
    done: list[int] = []
    until = time.monotonic() + seconds
    started = time.monotonic()
    threads = [threading.Thread(target=drive, args=(port, request, reply_len, per_write, until, done))
               for request, reply_len in loads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.monotonic() - started)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    p.add_argument("--seconds", type=float, default=5.0, help="length of each measurement")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("-c", "--clients", type=int, default=4)
    p.add_argument("--batch", type=int, default=16, help="transactions per write")
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("--generator", choices=["ruvio-bench", "python"], default="ruvio-bench")
    p.add_argument("--ruvio-bench", default=None, help="path to ruvio-bench")
    p.add_argument("--transactions", type=int, default=300_000,
                   help="transactions per measurement (ruvio-bench)")
    p.add_argument("-r", "--keyspace", type=int, default=SETS_PER_TX,
                   help="keys the SETs draw from (ruvio-bench; the default, ten, makes every "
                        "transaction contend for the same keys)")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    specs = bl.build_servers(args, ruvio_shards=SHARDS)

    def rows_of(spec, ruvio):
        for layout in ["on one shard", "spread over 2 shards"] if ruvio else ["on one shard"]:
            label = f"{spec.name}: EXEC of 10 SETs, keys {layout}" if ruvio else f"{spec.name}: EXEC of 10 SETs"
            yield label, lambda port, layout=layout: measure(port, layout, args)

    rows, conditions = bl.alternate_rows(args, specs, rows_of)
    table = [[label, bl.fmt_rate(statistics.median(rates))] for label, rates in rows.items()]
    print(bl.format_table(["row", "transactions/s"], table))
    if not args.no_record:
        record = bl.record_header("transactions", args, specs)
        record.update({"rates": rows, "conditions": conditions})
        print(f"\nrecord: {bl.write_record(record, args.out, 'transactions')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
