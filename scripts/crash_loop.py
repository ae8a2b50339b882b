#!/usr/bin/env python3
"""Crash loop for Ruvio's write-ahead log: kill -9 under write load, restart, check.

`always` (default 20 rounds per port mode): four writer threads per round write
strings with an expiry, list pushes and hash fields, pipelined, and remember every
write the server acknowledged; at a random moment the server gets SIGKILL; a new
server on the same data directory must hold every acknowledged write of every
round so far. `everysec` (--everysec): one writer notes when each write was
acknowledged; after the SIGKILL the oldest lost write must be younger than about
one second (the fsync period plus scheduling slack). A SIGKILL leaves the page
cache intact, so this bounds what the process held back, not a power cut.

Loopback only, bounded in rounds and time. Writes records/crash-loop-<date>.json
(start time, commit, sha256 of the binary, per round: writes acknowledged, lost).

    scripts/crash_loop.py --ruvio target/release/ruvio            # 20 rounds x 2 modes
    scripts/crash_loop.py --rounds 3 --everysec                   # quick, with everysec
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

WRITERS = 4
KILL_AFTER_S = (0.2, 1.2)
EVERYSEC_LOSS_MAX_S = 1.5
START_ATTEMPTS = 5


def start(binary: str, port: int, shards: int, mode: str, durability: str, data: str, log) -> subprocess.Popen:
    """Start Ruvio on `data`; a listener of the killed server may hold the port for a
    moment, so a start that exits at once is retried."""
    argv = [binary, "--port", str(port), "--shards", str(shards), "--port-mode", mode,
            "--durability", durability, "--dir", data]
    ports = [port] if mode == "forward" else [port + i for i in range(shards)]
    for attempt in range(START_ATTEMPTS):
        # The binary's sha256 as it starts, for the record (benchlib.note_start).
        digest = bl.note_start(bl.ServerSpec("ruvio", "ruvio", [binary], binary=binary))
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
        proc.sha256 = digest
        try:
            for p in ports:
                bl.wait_for_ping(p, 30, alive=lambda: proc.poll() is None)
            return proc
        except RuntimeError:
            proc.kill()
            proc.wait()
            if attempt + 1 == START_ATTEMPTS:
                log.flush()
                with open(log.name, "rb") as f:
                    sys.stderr.write(f.read()[-3000:].decode(errors="replace"))
                raise
            time.sleep(0.5)
    raise AssertionError("unreachable")


def owner_port(key: str, port: int, shards: int, mode: str) -> int:
    if mode == "forward":
        return port
    slot = bl.key_slot(key.encode())
    return port + slot * shards // 16384


def writer(port: int, shards: int, mode: str, round_no: int, w: int, stop: threading.Event, acked: list):
    """Pipelined writes of one thread; every acknowledged key goes to `acked`."""
    tag = f"{{r{round_no}w{w}}}"
    conn = bl.RespClient(owner_port(tag, port, shards, mode), timeout_s=5)
    i = 0
    try:
        while not stop.is_set():
            key = f"{tag}k{i}"
            replies = conn.pipeline([
                ["SET", key, str(i), "EX", "100000"],
                ["RPUSH", f"{tag}list", key],
                ["HSET", f"{tag}hash", key, str(i)],
            ])
            if replies[0] != "OK":
                break
            acked.append(key)
            i += 1
    except (OSError, ConnectionError, EOFError):
        pass
    finally:
        conn.close()


def check(port: int, shards: int, mode: str, acked: dict[tuple[int, int], list[str]]) -> int:
    """Acknowledged writes missing after the restart."""
    lost = 0
    for (round_no, w), keys in acked.items():
        tag = f"{{r{round_no}w{w}}}"
        with bl.RespClient(owner_port(tag, port, shards, mode)) as c:
            in_list = {k.decode() for k in c.call("LRANGE", f"{tag}list", 0, -1) or []}
            fields = {k.decode() for k in c.call("HKEYS", f"{tag}hash") or []}
            for i, key in enumerate(keys):
                ok = c.call("GET", key) == str(i).encode() and key in in_list and key in fields
                lost += 0 if ok else 1
    return lost


def always_loop(args, mode: str) -> list[dict]:
    data = tempfile.mkdtemp(prefix=f"crash-{mode}-")
    log = open(os.path.join(data, "server.log"), "ab")
    port = bl.free_port(block=args.shards)
    acked: dict[tuple[int, int], list[str]] = {}
    rounds = []
    try:
        for r in range(args.rounds):
            host0 = bl.host_snapshot()
            proc = start(args.ruvio, port, args.shards, mode, "always", os.path.join(data, "d"), log)
            binaries = {"ruvio": proc.sha256}
            stop = threading.Event()
            threads = []
            for w in range(WRITERS):
                acked[(r, w)] = []
                t = threading.Thread(target=writer, args=(port, args.shards, mode, r, w, stop, acked[(r, w)]))
                t.start()
                threads.append(t)
            time.sleep(random.uniform(*KILL_AFTER_S))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            stop.set()
            for t in threads:
                t.join()
            proc = start(args.ruvio, port, args.shards, mode, "always", os.path.join(data, "d"), log)
            lost = check(port, args.shards, mode, acked)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            written = sum(len(acked[(r, w)]) for w in range(WRITERS))
            total = sum(len(v) for v in acked.values())
            print(f"always {mode} round {r + 1}/{args.rounds}: {written} acknowledged this round, "
                  f"{total} in all, {lost} lost", flush=True)
            # The writers are this script's threads; the servers it killed are its children.
            rounds.append({"mode": mode, "round": r + 1, "acknowledged": written,
                           "acknowledged_total": total, "lost": lost,
                           **bl.host_since(host0, own_cpu_only=True), "binaries": binaries})
            if lost:
                break
    finally:
        log.close()
        shutil.rmtree(data, ignore_errors=True)
    return rounds


def everysec_loss(args) -> dict:
    data = tempfile.mkdtemp(prefix="crash-everysec-")
    log = open(os.path.join(data, "server.log"), "ab")
    port = bl.free_port()
    try:
        host0 = bl.host_snapshot()
        proc = start(args.ruvio, port, 1, "forward", "everysec", os.path.join(data, "d"), log)
        binaries = {"ruvio": proc.sha256}
        times = []
        with bl.RespClient(port) as c:
            deadline = time.monotonic() + 3.0
            i = 0
            while time.monotonic() < deadline:
                c.call("SET", f"k{i}", "v")
                times.append(time.monotonic())
                i += 1
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc = start(args.ruvio, port, 1, "forward", "everysec", os.path.join(data, "d"), log)
        with bl.RespClient(port) as c:
            present = [c.call("EXISTS", f"k{i}") == 1 for i in range(len(times))]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        lost = [t for t, ok in zip(times, present) if not ok]
        window = killed_at - min(lost) if lost else 0.0
        print(f"everysec: {len(times)} acknowledged, {len(lost)} lost, "
              f"oldest lost write {window:.3f} s before the kill", flush=True)
        return {"acknowledged": len(times), "lost": len(lost), "loss_window_s": window,
                "loss_window_max_s": EVERYSEC_LOSS_MAX_S,
                **bl.host_since(host0, own_cpu_only=True), "binaries": binaries}
    finally:
        log.close()
        shutil.rmtree(data, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default="target/release/ruvio")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--everysec", action="store_true", help="also measure everysec's loss window")
    p.add_argument("--out", default="records")
    args = p.parse_args()
    spec = bl.ServerSpec("ruvio", "ruvio", [args.ruvio], binary=args.ruvio)
    always = always_loop(args, "forward") + always_loop(args, "per-shard")
    # The header after the run: it names the sha256 the binary had at its first start.
    record = bl.record_header("crash-loop", args, [spec])
    record["always"] = always
    failed = any(r["lost"] for r in record["always"])
    if args.everysec:
        record["everysec"] = everysec_loss(args)
        failed |= record["everysec"]["loss_window_s"] > EVERYSEC_LOSS_MAX_S
    path = bl.write_record(record, args.out, "crash-loop")
    print(f"{'FAILED' if failed else 'ok'}: record {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
