#!/usr/bin/env python3
"""Hostile clients, long version: the attacks of crates/ruvio-server/tests/hostile.rs
with bigger counts and longer trickles, against Ruvio (forward mode, 2 shards) and
redis-server 7 in the same run.

For every attack and server: a fresh server, a well-behaved client in its own
process GETting keys (of both shards) with a check of every value, and the
server's resident memory sampled from /proc every 10 ms. Recorded per attack:
p50/p99/max of the GET client, GETs answered and wrong, idle and peak RSS, how
long the attack took, and whether the server survived (process alive, PING and a
GET answered on fresh connections afterwards). The record goes to
records/hostile-clients-<date>.json, stamped with the start time, the commit and
the sha256 of each binary.

Every attack is bounded in count and in time (ATTACK_TIMEOUT_S); the full run
takes a few minutes per server. Loopback only. See docs/hostile-clients.md.

Examples:
  scripts/hostile_clients.py                                   # full size, the lead runs it
  scripts/hostile_clients.py --quick --no-record               # smoke check, seconds
  scripts/hostile_clients.py --quick --ruvio target/debug/ruvio --only scan-cursor
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import socket
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Callable

import benchlib as bl

ATTACK_TIMEOUT_S = 120.0
"""Longest one attack may run: past it the attack is stopped and marked timed out."""

GOOD_TIMEOUT_S = 20.0
"""A GET of the good client unanswered this long counts as the server hung."""

RSS_SAMPLE_S = 0.01
"""How often the server's resident memory is read."""

GOOD_VALUE_BYTES = 512
"""Value of each good-client key: big enough that a torn reply shows."""

SHARDS = 2
"""Ruvio's shard count in forward mode (the issue's setting)."""

SLOTS = 16384


@dataclass
class Sizes:
    """Counts of one run: --quick (smoke) or full."""

    slowloris_args: int
    slowloris_idle: int
    slowloris_seconds: float
    giant_conns: int
    giant_sent_bytes: int
    empty_clients: int
    pipeline_commands: int
    churn_connections: int
    never_reading_clients: int
    never_reading_gets: int
    random_conns: int
    scan_rounds: int


QUICK = Sizes(2_000, 100, 1.0, 100, 4096, 2, 100_000, 2_000, 2, 100, 16, 100)
FULL = Sizes(50_000, 2_000, 20.0, 1_000, 65536, 16, 1_000_000, 20_000, 8, 500, 256, 2_000)


def shard_of_key(key: bytes, shards: int = SHARDS) -> int:
    return bl.key_slot(key) * shards // SLOTS


def key_on_shard(prefix: str, shard: int) -> str:
    """First `prefix<n>` whose slot belongs to `shard` (Ruvio's contiguous ranges)."""
    n = 0
    while shard_of_key(f"{prefix}{n}".encode()) != shard:
        n += 1
    return f"{prefix}{n}"


def good_keys() -> list[str]:
    return [key_on_shard(f"good:{i}:", s) for s in range(SHARDS) for i in range(4)]


def good_value(key: str) -> bytes:
    raw = key.encode() * (GOOD_VALUE_BYTES // len(key) + 1)
    return raw[:GOOD_VALUE_BYTES]


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def reset_on_close(s: socket.socket) -> None:
    """SO_LINGER 0: close sends RST, so 20,000 closes leave no TIME_WAIT here."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def drain(s: socket.socket, seconds: float) -> None:
    """Read until the peer closes or `seconds` pass."""
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass


# --------------------------------------------------------------------------
# The well-behaved client (its own process: the attacks' threads hold the GIL)
# --------------------------------------------------------------------------


def good_client(port: int, stop, out) -> None:
    lat: list[float] = []
    wrong = 0
    error = ""
    keys = good_keys()
    try:
        c = bl.RespClient(port, timeout_s=GOOD_TIMEOUT_S)
        i = 0
        while True:
            stopping = stop.is_set()
            key = keys[i % len(keys)]
            t = time.perf_counter()
            reply = c.call("GET", key)
            lat.append(time.perf_counter() - t)
            wrong += reply != good_value(key)
            i += 1
            if stopping:
                break
            time.sleep(0.001)
    except Exception as e:  # the record says what went wrong; the run goes on
        error = f"{type(e).__name__}: {e}"
    out.send((lat, wrong, error))


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * (len(sorted_values) - 1)))]


# --------------------------------------------------------------------------
# Attacks: each takes the port, the sizes and a deadline; returns notes
# --------------------------------------------------------------------------


def slowloris(port: int, z: Sizes, deadline: float) -> dict:
    idle = []
    for i in range(z.slowloris_idle):
        s = connect(port)
        req = bl.RespClient.encode(["SET", f"idle:{i}", "0123456789"])
        s.sendall(req[:-7])
        idle.append(s)
    req = bl.RespClient.encode(["RPUSH", "slow"] + [f"e{i}" for i in range(z.slowloris_args)])
    chunks = [req[i : i + 8] for i in range(0, len(req), 8)]
    # Sleep at least 1 ms at a time, spread so the trickle lasts about slowloris_seconds.
    every = max(1, int(0.001 * len(chunks) / z.slowloris_seconds))
    pause = z.slowloris_seconds * every / len(chunks)
    c = bl.RespClient(port)
    for n, piece in enumerate(chunks):
        c.sock.sendall(piece)
        if n % every == 0:
            time.sleep(pause)
        if time.monotonic() > deadline:
            raise TimeoutError("trickle past the deadline")
    reply = c.read_reply()
    for s in idle:
        s.close()
    return {"trickled_bytes": len(req), "writes": len(chunks), "reply": reply}


def giant_bulks(port: int, z: Sizes, deadline: float) -> dict:
    held = []
    for _ in range(z.giant_conns):
        s = connect(port)
        s.sendall(b"*3\r\n$3\r\nSET\r\n$5\r\ngiant\r\n$536870000\r\n" + b"x" * z.giant_sent_bytes)
        held.append(s)
    time.sleep(1.0)
    for s in held:
        s.close()
    return {"connections": len(held), "declared": 536870000, "sent_each": z.giant_sent_bytes}


def empty_multibulks(port: int, z: Sizes, deadline: float) -> dict:
    c = bl.RespClient(port)
    c.sock.sendall(b"*100000\r\n" + b"$0\r\n\r\n" * 100_000)
    first = c.read_reply()
    replies = []

    def push(t: int) -> None:
        key = f"empties:{t}".encode()
        cc = bl.RespClient(port)
        cc.sock.sendall(b"*100000\r\n$5\r\nRPUSH\r\n$%d\r\n%s\r\n" % (len(key), key) + b"$0\r\n\r\n" * 99_998)
        replies.append(cc.read_reply())
        cc.close()

    threads = [threading.Thread(target=push, args=(t,)) for t in range(z.empty_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return {"all_empty_reply": str(first)[:60], "rpush_replies_ok": sum(r == 99_998 for r in replies),
            "rpush_clients": z.empty_clients}


def pipeline(port: int, z: Sizes, deadline: float) -> dict:
    keys = [key_on_shard("counter:", s) for s in range(SHARDS)]
    reqs = [bl.RespClient.encode(["INCR", k]) for k in keys]
    batch = (reqs[0] + reqs[1]) * 20_000
    s = connect(port, timeout=ATTACK_TIMEOUT_S)
    sent = 0
    while sent < z.pipeline_commands:
        n = min(40_000, z.pipeline_commands - sent)
        s.sendall(batch if n == 40_000 else (reqs[0] + reqs[1]) * (n // 2))
        sent += n
    checker = bl.RespClient(port)
    want = z.pipeline_commands // 2
    while any(int(checker.call("GET", k) or 0) != want for k in keys):
        if time.monotonic() > deadline:
            raise TimeoutError("the pipelined INCRs did not all run")
        time.sleep(0.05)
    s.close()
    return {"commands": sent}


def churn(port: int, z: Sizes, deadline: float) -> dict:
    counts = {"quit": 0, "reset": 0, "reset_mid_command": 0, "errors": 0}
    lock = threading.Lock()

    def worker(t: int) -> None:
        for i in range(t, z.churn_connections, 8):
            if time.monotonic() > deadline:
                return
            kind = ("quit", "reset", "reset_mid_command")[i % 3]
            try:
                s = connect(port)
                if kind == "quit":
                    s.sendall(b"QUIT\r\n")
                    drain(s, 10.0)
                else:
                    reset_on_close(s)
                    if kind == "reset_mid_command":
                        s.sendall(b"*3\r\n$3\r\nSET\r\n$1\r\nk")
                s.close()
            except OSError:
                kind = "errors"
            with lock:
                counts[kind] += 1

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return counts


def never_reading(port: int, z: Sizes, deadline: float) -> dict:
    keys = [key_on_shard("big:", s) for s in range(SHARDS)]
    c = bl.RespClient(port)
    for k in keys:
        c.call("SET", k, b"v" * (1 << 20))
    clients = []
    for n in range(z.never_reading_clients):
        req = b"".join(bl.RespClient.encode(["GET", keys[(n + i * (n // 2)) % 2]])
                       for i in range(z.never_reading_gets))
        s = connect(port, timeout=2.0)
        try:
            s.sendall(req)
        except OSError:
            pass  # pushed back: the server stopped reading it
        clients.append(s)
    answered = c.call("GET", keys[0]) == b"v" * (1 << 20)
    time.sleep(2.0)
    for s in clients:
        s.close()
    return {"clients": len(clients), "gets_each": z.never_reading_gets, "reply_bytes": 1 << 20,
            "other_client_answered": answered}


def random_bytes(port: int, z: Sizes, deadline: float) -> dict:
    prefixes = [b"", b"*3\r\n", b"*2\r\n$3\r\nGET\r\n$", b"SET x "]
    closed_by_server = 0
    for seed in range(z.random_conns):
        if time.monotonic() > deadline:
            break
        data = prefixes[seed % len(prefixes)] + random.Random(seed).randbytes(65536)
        s = connect(port, timeout=5.0)
        try:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            closed_by_server += 1
        drain(s, 5.0)
        s.close()
    return {"connections": z.random_conns, "closed_before_all_sent": closed_by_server}


def scan_cursor(port: int, z: Sizes, deadline: float) -> dict:
    c = bl.RespClient(port)
    first = None
    for _ in range(z.scan_rounds):
        cursor = b"18446744073709551615"
        for _ in range(100):
            reply = c.call("SCAN", cursor, "COUNT", 1000)
            first = first or str(reply)[:80]
            cursor = reply[0]
            if cursor == b"0":
                break
        if time.monotonic() > deadline:
            raise TimeoutError("SCAN rounds past the deadline")
    return {"rounds": z.scan_rounds, "first_reply": first,
            "above_u64": str(c.call("SCAN", "18446744073709551616"))}


HUGE = "9223372036854775807"
HUGE_COMMANDS = [
    ["SCAN", "0", "COUNT", HUGE], ["SSCAN", "s", "0", "COUNT", HUGE], ["HSCAN", "h", "0", "COUNT", HUGE],
    ["ZSCAN", "z", "0", "COUNT", HUGE], ["LRANGE", "l", "-" + HUGE, HUGE], ["LPOS", "l", "a", "COUNT", HUGE],
    ["SRANDMEMBER", "s", "-" + HUGE], ["HRANDFIELD", "h", "-" + HUGE], ["ZRANDMEMBER", "z", "-" + HUGE],
    ["ZRANGEBYSCORE", "z", "-inf", "+inf", "LIMIT", "0", HUGE], ["SINTERCARD", "1", "s", "LIMIT", HUGE],
    ["GETRANGE", "str", "-" + HUGE, HUGE], ["BITCOUNT", "str", "-" + HUGE, HUGE],
]
"""Counts and ranges at the ends of the 64-bit range. A server that sizes a reply by
one of them (Redis 7 does for the negative RANDMEMBER/RANDFIELD counts) does not
answer within HUGE_REPLY_TIMEOUT_S; the attack stops there (such a server grows by
GBs a minute until it is killed) and the row says which command it was."""

HUGE_REPLY_TIMEOUT_S = 2.0


def huge_counts(port: int, z: Sizes, deadline: float) -> dict:
    c = bl.RespClient(port, timeout_s=HUGE_REPLY_TIMEOUT_S)
    for setup in (["RPUSH", "l", "a", "b", "c"], ["SADD", "s", "a", "b", "c"],
                  ["ZADD", "z", 1, "a", 2, "b"], ["HSET", "h", "a", 1], ["SET", "str", "hello"]):
        c.call(*setup)
    replies = {}
    for cmd in HUGE_COMMANDS:
        try:
            replies[" ".join(cmd)] = str(c.call(*cmd))[:60]
        except OSError as e:
            replies[" ".join(cmd)] = f"no reply: {e}"
            break
        if time.monotonic() > deadline:
            break
    return {"replies": replies}


ATTACKS: dict[str, Callable[[int, Sizes, float], dict]] = {
    "slowloris": slowloris,
    "giant-bulks": giant_bulks,
    "empty-multibulks": empty_multibulks,
    "pipeline": pipeline,
    "churn": churn,
    "never-reading": never_reading,
    "random-bytes": random_bytes,
    "scan-cursor": scan_cursor,
    "huge-counts": huge_counts,
}


# --------------------------------------------------------------------------
# One attack against one fresh server
# --------------------------------------------------------------------------


def survived(server: bl.ServerProcess) -> bool:
    """Alive, and PING and a GET of each shard's key answered on fresh connections."""
    if server.proc is None or server.proc.poll() is not None:
        return False
    try:
        for key in good_keys()[::4]:
            with bl.RespClient(server.port, timeout_s=10.0) as c:
                if c.call("PING") != "PONG" or c.call("GET", key) != good_value(key):
                    return False
        return True
    except OSError:
        return False


def run_attack(spec: bl.ServerSpec, name: str, z: Sizes, cpus: str) -> dict:
    with bl.ServerProcess(spec, cpus) as server:
        with server.client() as c:
            for key in good_keys():
                c.call("SET", key, good_value(key))
        idle_kib = server.rss_kib()
        peak = [idle_kib]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                try:
                    peak[0] = max(peak[0], server.rss_kib())
                except (OSError, RuntimeError):
                    return
                time.sleep(RSS_SAMPLE_S)

        sampler = threading.Thread(target=sample)
        sampler.start()
        stop = mp.Event()
        ours, theirs = mp.Pipe(duplex=False)
        good = mp.Process(target=good_client, args=(server.port, stop, theirs))
        good.start()
        host0 = bl.host_snapshot()
        started = time.monotonic()
        notes, error = {}, ""
        try:
            notes = ATTACKS[name](server.port, z, started + ATTACK_TIMEOUT_S)
        except Exception as e:
            error = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        took = time.monotonic() - started
        stop.set()
        lat, wrong, good_error = ours.recv() if ours.poll(GOOD_TIMEOUT_S + 5) else ([], 0, "no answer")
        good.join(5)
        sampling.set()
        sampler.join()
        alive = survived(server)
        state = "alive" if alive else "NOT ANSWERING" if server.proc.poll() is None else "DEAD"
        lat.sort()
        row = {
            "attack": name, "server": spec.name, "seconds": round(took, 3), "survived": alive,
            "state": state,
            "good_gets": len(lat), "good_wrong": wrong, "good_error": good_error,
            "p50_ms": percentile(lat, 0.5) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3,
            "max_ms": percentile(lat, 1.0) * 1e3,
            "idle_rss_kib": idle_kib, "peak_rss_kib": peak[0], "error": error, "notes": notes,
            **bl.host_since(host0, servers=[server]),
        }
        print(f"{spec.name:>6} {name:<17} {took:7.2f}s  p50 {row['p50_ms']:7.2f} ms  "
              f"p99 {row['p99_ms']:8.2f} ms  max {row['max_ms']:8.2f} ms  "
              f"peak RSS {peak[0] / 1024:7.1f} MiB  {state}"
              f"{'  wrong GETs: %d' % wrong if wrong else ''}{'  ' + error if error else ''}"
              f"{'  good client: ' + good_error if good_error else ''}", flush=True)
        return row


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    bl.add_server_args(p)
    # Ruvio and redis-server 7 only, the server on both CPUs (Ruvio has 2 shards).
    p.set_defaults(valkey="", server_cpu="0-1")
    p.add_argument("--quick", action="store_true", help="small counts: a smoke check in seconds")
    p.add_argument("--only", action="append", choices=sorted(ATTACKS), help="run only these attacks")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    specs = bl.build_servers(args, ruvio_shards=SHARDS)
    for s in specs:
        if s.kind == "ruvio":
            s.argv += ["--durability", "memory"]
    sizes = QUICK if args.quick else FULL
    rows = []
    for name in args.only or list(ATTACKS):
        for spec in specs:
            try:
                rows.append(run_attack(spec, name, sizes, args.server_cpu))
            except Exception as e:
                print(f"{spec.name} {name}: could not run: {e}", file=sys.stderr)
                rows.append({"attack": name, "server": spec.name, "survived": None,
                             "error": f"{type(e).__name__}: {e}"[:300]})
    if not args.no_record:
        record = bl.record_header("hostile-clients", args, specs)
        record.update({"sizes": sizes.__dict__, "attack_timeout_s": ATTACK_TIMEOUT_S, "rows": rows})
        print(f"\nrecord: {bl.write_record(record, args.out, 'hostile-clients')}")
    return 0 if all(r.get("survived") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
