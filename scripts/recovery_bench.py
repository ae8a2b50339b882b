#!/usr/bin/env python3
"""Recovery time: how long a server takes to come back with N keys (10,000,000 by
default) after a clean stop, issue 8's recovery row (docs/durability.md).

Servers (each round starts every one fresh, in a rotating order, one at a time):

- `ruvio-1-log`, `ruvio-2-log`: Ruvio with 1 and 2 shards (forward mode),
  `--durability everysec`, no save rules: the restart replays each shard's log
  (the shards load in parallel).
- `ruvio-1-snapshot`, `ruvio-2-snapshot`: the same, with SAVE before the stop: the
  restart loads each shard's snapshot (the log after it is empty).
- `redis-rdb`: Redis 7 with SAVE before the stop: the restart loads dump.rdb.
- `redis-aof`: Redis 7 with `appendonly yes`, `appendfsync everysec` and no
  automatic rewrite (`auto-aof-rewrite-percentage 0`, so the file stays the
  commands as written, not an RDB preamble): the restart replays the AOF.

Per server and round: start in an empty directory, write N keys (`SET key:<i>`
with -d bytes, pipelined, one key per command, so both logs hold N records),
check DBSIZE, SAVE where the row says so, stop with SIGTERM (Ruvio syncs its
log, Redis its AOF), then start again on the same directory and time from the
process start to the first PING answered PONG (not -LOADING) and DBSIZE = N.
The record also holds the first accepted connection, how many -LOADING replies
came, and the data directory's size.

Examples:
  scripts/recovery_bench.py
  scripts/recovery_bench.py --quick                  # 100k keys, 1 round, no record
  scripts/recovery_bench.py --keys 1000000 --only 'ruvio-2|redis'
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

import benchlib as bl

RUVIO_DURABLE = ["--durability", "everysec", "--dir", "{dir}", "--save", ""]
REDIS_AOF = ["--appendonly", "yes", "--appendfsync", "everysec", "--auto-aof-rewrite-percentage", "0"]

SEED_BATCH = 10_000
"""Keys per pipelined batch while writing (their replies are read together)."""

POLL_S = 0.002
"""Pause between two PINGs (or connection attempts) while a server starts."""

QUICK_KEYS = 100_000


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default=str(bl.REPO_ROOT / "target" / "release" / "ruvio"),
                   help="path to the ruvio binary (default target/release/ruvio)")
    p.add_argument("--redis", default="redis-server", help="redis-server binary ('' to leave Redis out)")
    p.add_argument("--no-ruvio", action="store_true", help="leave Ruvio out")
    p.add_argument("--keys", type=int, default=10_000_000, help="keys written before the restart")
    p.add_argument("-d", "--datasize", type=int, default=64, help="bytes per value")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="", help="regex: run only the servers whose name matches")
    p.add_argument("--server-cpu", default="0", help="CPU of Redis and of 1-shard Ruvio")
    p.add_argument("--ruvio2-cpus", default="0,1", help="CPUs of 2-shard Ruvio (one per shard)")
    p.add_argument("--client-cpu", default="1", help="CPU this script pins itself to while writing")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="seconds a restart (or a SAVE, or a stop) may take before the row fails")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"), help="directory for the JSON record")
    p.add_argument("--no-record", action="store_true", help="print only, write no record")
    p.add_argument("--quick", action="store_true",
                   help=f"functional check: {QUICK_KEYS:,} keys, 1 round, no record")
    args = p.parse_args()
    if args.quick:
        args.keys, args.rounds, args.no_record = QUICK_KEYS, 1, True
    return args


def build_rows(args: argparse.Namespace) -> list[tuple[bl.ServerSpec, str, bool]]:
    """(spec, CPUs, SAVE before the stop) for every server the flags select."""
    rows: list[tuple[bl.ServerSpec, str, bool]] = []
    if not args.no_ruvio:
        if not os.access(args.ruvio, os.X_OK):
            sys.exit(f"ruvio binary not found at {args.ruvio} (build it, or pass --no-ruvio)")
        for shards, cpus in ((1, args.server_cpu), (2, args.ruvio2_cpus)):
            argv = bl.ruvio_argv(args.ruvio, shards, cpus) + RUVIO_DURABLE
            for variant, save in (("log", False), ("snapshot", True)):
                rows.append((bl.ServerSpec(f"ruvio-{shards}-{variant}", "ruvio", argv, args.ruvio), cpus, save))
    if args.redis:
        base = bl.redis_like_argv(args.redis)
        rows.append((bl.ServerSpec("redis-rdb", "redis", base, args.redis), args.server_cpu, True))
        rows.append((bl.ServerSpec("redis-aof", "redis", base + REDIS_AOF, args.redis), args.server_cpu, False))
    if args.only:
        rows = [r for r in rows if re.search(args.only, r[0].name)]
    if not rows:
        sys.exit("no servers to run")
    for spec, _, _ in rows:
        spec.version = bl.binary_version(spec.binary)
    return rows


def write_keys(port: int, keys: int, datasize: int) -> None:
    """SET key:<i> for i < keys, pipelined in batches; every reply must be +OK."""
    value = b"v" * datasize
    with socket.create_connection(("127.0.0.1", port), timeout=600) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for start in range(0, keys, SEED_BATCH):
            n = min(SEED_BATCH, keys - start)
            sock.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$16\r\nkey:%012d\r\n$%d\r\n%s\r\n"
                                  % (i, datasize, value) for i in range(start, start + n)))
            expected = b"+OK\r\n" * n
            got = bytearray()
            while len(got) < len(expected):
                chunk = sock.recv(len(expected) - len(got))
                if not chunk:
                    raise RuntimeError(f"the server closed the connection after {start} keys")
                got += chunk
            if got != expected:
                raise RuntimeError(f"writing keys {start}..{start + n} failed: {bytes(got[:200])!r}")


def call(port: int, *command: str, timeout_s: float):
    with bl.RespClient(port, timeout_s=timeout_s) as c:
        return c.call(*command)


def dir_bytes(path: str) -> int:
    """Bytes of the data files under `path` (the server's log file left out)."""
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files if f != "server.log")
    return total


def stop(server: bl.ServerProcess, timeout_s: float) -> float:
    """SIGTERM and wait (as long as a clean stop takes); returns the seconds it took."""
    started = time.monotonic()
    if server.proc is None or server.proc.poll() is not None:
        raise RuntimeError(f"{server.spec.name} exited before the stop:\n{server.log_tail()}")
    server.proc.send_signal(signal.SIGTERM)
    server.proc.wait(timeout=timeout_s)
    took = time.monotonic() - started
    deadline = time.monotonic() + bl.PORT_FREE_TIMEOUT_S
    while not bl.port_is_free(server.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    return took


def restart_timed(server: bl.ServerProcess, keys: int, timeout_s: float) -> dict:
    """Start `server` again on its directory; time the first accepted connection,
    the first PONG (not -LOADING) and a DBSIZE of `keys`."""
    argv = ["taskset", "-c", server.cpus] + server.spec.command(server.port, server.workdir)
    log = open(server.log_path, "ab")
    server.sha256 = bl.note_start(server.spec)
    started = time.monotonic()
    server.proc = subprocess.Popen(argv, cwd=server.workdir, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, preexec_fn=bl._raise_memlock)
    log.close()
    conn: bl.RespClient | None = None
    connected_s = None
    loading_replies = 0
    try:
        while True:
            if time.monotonic() - started > timeout_s:
                raise RuntimeError(f"not ready after {timeout_s:.0f} s")
            if server.proc.poll() is not None:
                raise RuntimeError(f"exited while starting:\n{server.log_tail()}")
            if conn is None:
                try:
                    conn = bl.RespClient(server.port, timeout_s=timeout_s)
                    connected_s = time.monotonic() - started
                except OSError:
                    time.sleep(POLL_S)
                    continue
            reply = conn.call("PING")
            if reply == "PONG":
                break
            if isinstance(reply, bl.RespError) and reply.startswith("LOADING"):
                loading_replies += 1
                time.sleep(POLL_S)
                continue
            raise RuntimeError(f"PING answered {reply!r}")
        pong_s = time.monotonic() - started
        dbsize = conn.call("DBSIZE")
        ready_s = time.monotonic() - started
    finally:
        if conn is not None:
            conn.close()
    if dbsize != keys:
        raise RuntimeError(f"DBSIZE {dbsize!r} after the restart, {keys} written")
    return {"ready_s": ready_s, "pong_s": pong_s, "connected_s": connected_s,
            "loading_replies": loading_replies}


def run_one(spec: bl.ServerSpec, cpus: str, save: bool, args: argparse.Namespace) -> dict:
    """Write, (save,) stop, restart timed; the directory is removed afterwards."""
    server = bl.ServerProcess(spec, cpus)
    try:
        server.start()
        host0 = bl.host_snapshot()
        t = time.monotonic()
        write_keys(server.port, args.keys, args.datasize)
        write_s = time.monotonic() - t
        written = call(server.port, "DBSIZE", timeout_s=args.timeout)
        if written != args.keys:
            raise RuntimeError(f"DBSIZE {written!r} after writing {args.keys} keys")
        save_s = None
        if save:
            t = time.monotonic()
            reply = call(server.port, "SAVE", timeout_s=args.timeout)
            if reply != "OK":
                raise RuntimeError(f"SAVE answered {reply!r}")
            save_s = time.monotonic() - t
        stop_s = stop(server, args.timeout)
        data_bytes = dir_bytes(server.workdir)
        timed = restart_timed(server, args.keys, args.timeout)
        stop(server, args.timeout)
        # The writer is this script; the servers it stopped itself are its children.
        return {"status": "ok", **timed, "write_s": write_s, "save_s": save_s, "stop_s": stop_s,
                "data_bytes": data_bytes, **bl.host_since(host0, servers=[server], own_cpu_only=True)}
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print(f"  {spec.name}: FAILED: {e}", file=sys.stderr, flush=True)
        return {"status": "failed", "detail": str(e)[:500]}
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
        shutil.rmtree(server.workdir, ignore_errors=True)


def cpu_set(spec: str) -> set[int]:
    """A CPU list such as '1' or '0,2-3' as a set."""
    out: set[int] = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def main() -> int:
    args = parse_args()
    rows = build_rows(args)
    # The writing client stays off the servers' CPUs (the servers pin themselves).
    os.sched_setaffinity(0, cpu_set(args.client_cpu))
    by_name = {spec.name: (spec, cpus, save) for spec, cpus, save in rows}
    rounds = []
    for i, order in enumerate(bl.round_orders(list(by_name), args.rounds)):
        print(f"round {i + 1}/{args.rounds}: {' -> '.join(order)}", flush=True)
        results = {}
        for name in order:
            results[name] = run_one(*by_name[name], args)
            r = results[name]
            if r["status"] == "ok":
                print(f"  {name}: ready in {r['ready_s']:.3f} s ({r['data_bytes'] / 1e6:.0f} MB on disk)",
                      flush=True)
        rounds.append({"order": order, "results": results})
    table = []
    for name in by_name:
        ok = [r["results"][name] for r in rounds if r["results"][name]["status"] == "ok"]
        if not ok:
            table.append([name, "failed", "", "", ""])
            continue
        ready = [r["ready_s"] for r in ok]
        table.append([name, bl.fmt_num(bl.median(ready), 3), bl.fmt_num(min(ready), 3),
                      bl.fmt_num(max(ready), 3), f"{bl.median([r['data_bytes'] for r in ok]) / 1e6:.0f}"])
    print()
    print(f"{args.keys:,} keys of {args.datasize} bytes")
    print(bl.format_table(["server", "ready s (median)", "min", "max", "MB on disk"], table))
    if not args.no_record:
        record = bl.record_header("recovery", args, [spec for spec, _, _ in rows])
        record.update({"rounds": rounds, "table": table})
        print(f"\nrecord: {bl.write_record(record, args.out, 'recovery')}")
    failed = any(r["results"][n]["status"] != "ok" for r in rounds for n in r["results"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
