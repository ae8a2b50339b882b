"""Helpers of the end-to-end tests with real clients (redis-py, redis-cli).

`start(mode, shards)` starts the `ruvio` binary on fresh free ports and waits until
every port answers PING; `Server.stop()` kills it (the `start_server` fixture of
conftest.py does that at the end of every test).

The binary is $RUVIO_BIN, else target/release/ruvio, else target/debug/ruvio of this
repository. With RUVIO_TEST_TARGET=redis the same tests run against a real redis-server
(forward mode: one standalone server; per-shard mode: a Redis Cluster of N masters with
the same slot ranges), which is how their expectations were checked.
"""

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SLOT_COUNT = 16384
STARTUP_TIMEOUT_S = 30
# Below the Linux ephemeral range, with room for Redis Cluster bus ports at +10000.
PORT_FIRST = 20000
PORT_END = 30000
REDIS_BUS_OFFSET = 10000

_next_port = None


def ruvio_bin():
    explicit = os.environ.get("RUVIO_BIN")
    if explicit:
        return Path(explicit)
    for profile in ("release", "debug"):
        candidate = REPO / "target" / profile / "ruvio"
        if candidate.is_file():
            return candidate
    pytest.fail("no ruvio binary: set RUVIO_BIN or run cargo build --release -p ruvio-server")


def target():
    value = os.environ.get("RUVIO_TEST_TARGET", "ruvio") or "ruvio"
    assert value in ("ruvio", "redis"), f"RUVIO_TEST_TARGET must be ruvio or redis, not {value!r}"
    return value


def _port_free(port):
    for host in ("127.0.0.1", "0.0.0.0"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def _port_range():
    """`RUVIO_TEST_PORTS=first-end` when scripts/run_tests.py runs these tests beside
    the Rust test binaries (each of its workers has a range of its own, bus ports
    10000 above it), else PORT_FIRST..PORT_END."""
    given = os.environ.get("RUVIO_TEST_PORTS", "")
    first, _, end = given.partition("-")
    if first.isdigit() and end.isdigit() and int(first) + 200 <= int(end) <= 30000:
        return int(first), int(end)
    return PORT_FIRST, PORT_END


def free_ports(count, with_bus=False):
    """`count` consecutive free ports never handed out before in this session.

    A glommio listener can outlive its process for a moment, so ports only move forward.
    """
    global _next_port
    first, end = _port_range()
    if _next_port is None:
        _next_port = first + random.Random(os.getpid() ^ time.time_ns()).randrange((end - first) // 2)
    port = _next_port
    for _ in range(end - first):
        if port + count >= end:
            port = first
        ports = range(port, port + count)
        if all(_port_free(p) and (not with_bus or _port_free(p + REDIS_BUS_OFFSET)) for p in ports):
            _next_port = port + count
            return list(ports)
        port += 1
    raise RuntimeError("no free ports")


def ping(port, timeout=1.0):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(b"*1\r\n$4\r\nPING\r\n")
            data = b""
            while len(data) < 7:
                chunk = s.recv(7 - len(data))
                if not chunk:
                    return False
                data += chunk
            return data == b"+PONG\r\n"
    except OSError:
        return False


def _frame_end(buf, at=0):
    """End of the complete RESP2/RESP3 frame starting at `at`, or None if incomplete."""
    if at >= len(buf):
        return None
    eol = buf.find(b"\r\n", at + 1)
    if eol < 0:
        return None
    kind, header, after = buf[at : at + 1], buf[at + 1 : eol], eol + 2
    if kind in b"+-:_,#(":
        return after
    if kind in b"$=!":
        length = int(header)
        if length < 0:
            return after
        end = after + length + 2
        return end if len(buf) >= end else None
    if kind in b"*~>%|":
        count = int(header)
        if count < 0:
            return after
        for _ in range(count * (2 if kind in b"%|" else 1)):
            after = _frame_end(buf, after)
            if after is None:
                return None
        return _frame_end(buf, after) if kind == b"|" else after
    raise AssertionError(f"bad RESP type in {buf!r}")


def command(port, *args):
    """One command over a fresh socket; returns the raw bytes of its reply."""
    request = b"*%d\r\n" % len(args)
    for arg in args:
        arg = arg if isinstance(arg, bytes) else str(arg).encode()
        request += b"$%d\r\n%s\r\n" % (len(arg), arg)
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(request)
        data = b""
        while True:
            end = _frame_end(data)
            if end is not None:
                assert end == len(data), f"more than one reply: {data!r}"
                return data
            chunk = s.recv(65536)
            if not chunk:
                raise AssertionError(f"connection closed mid-reply: {data!r}")
            data += chunk


def crc16(data):
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
            crc &= 0xFFFF
    return crc


def key_slot(key):
    key = key.encode() if isinstance(key, str) else key
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) % SLOT_COUNT


def slot_range(shard, shards):
    """Slots [lo, hi) of shard i of n: [i*16384/n, (i+1)*16384/n)."""
    return shard * SLOT_COUNT // shards, (shard + 1) * SLOT_COUNT // shards


def shard_of_key(key, shards):
    slot = key_slot(key)
    for i in range(shards):
        lo, hi = slot_range(i, shards)
        if lo <= slot < hi:
            return i
    raise AssertionError("slot out of range")


def key_on_shard(prefix, shard, shards):
    for i in range(100000):
        key = f"{prefix}{i}"
        if shard_of_key(key, shards) == shard:
            return key
    raise AssertionError("no key found")


class Server:
    """Running server processes; `ports` has one port (forward) or one per shard."""

    def __init__(self, mode, shards, ports, kind):
        self.mode = mode
        self.shards = shards
        self.ports = ports
        self.kind = kind
        self.procs = []
        self.logs = []
        self.dir = tempfile.mkdtemp(prefix="ruvio-pytest-")

    @property
    def port(self):
        return self.ports[0]

    def spawn(self, argv, name):
        log_path = os.path.join(self.dir, name + ".log")
        log = open(log_path, "wb")
        self.logs.append(log_path)
        self.procs.append(
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        )
        log.close()

    def log_text(self):
        out = []
        for path in self.logs:
            with open(path, "rb") as f:
                out.append(f"--- {path} ---\n" + f.read()[-4000:].decode(errors="replace"))
        return "\n".join(out)

    def wait_ready(self):
        deadline = time.time() + STARTUP_TIMEOUT_S
        for port in self.ports:
            while not ping(port):
                for proc in self.procs:
                    if proc.poll() is not None:
                        raise RuntimeError(f"server exited ({proc.returncode})\n{self.log_text()}")
                if time.time() > deadline:
                    raise RuntimeError(f"no PONG on {port}\n{self.log_text()}")
                time.sleep(0.02)

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def _start_ruvio(mode, shards):
    ports = free_ports(1 if mode == "forward" else shards)
    server = Server(mode, shards, ports, "ruvio")
    server.spawn(
        [
            str(ruvio_bin()),
            "--bind", "127.0.0.1",
            "--port", str(ports[0]),
            "--shards", str(shards),
            "--port-mode", mode,
            "--durability", "memory",
        ],
        "ruvio",
    )
    server.wait_ready()
    return server


def _redis_argv(port, directory):
    return [
        shutil.which("redis-server") or "redis-server",
        "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--dir", directory,
    ]


def _start_redis(mode, shards):
    if mode == "forward":
        ports = free_ports(1)
        server = Server(mode, shards, ports, "redis")
        server.spawn(_redis_argv(ports[0], server.dir), "redis")
        server.wait_ready()
        return server
    ports = free_ports(shards, with_bus=True)
    server = Server(mode, shards, ports, "redis")
    for port in ports:
        server.spawn(
            _redis_argv(port, server.dir)
            + ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"],
            f"redis-{port}",
        )
    server.wait_ready()
    for i, port in enumerate(ports):
        lo, hi = slot_range(i, shards)
        assert command(port, "CLUSTER", "ADDSLOTSRANGE", lo, hi - 1) == b"+OK\r\n"
    for port in ports[1:]:
        assert command(ports[0], "CLUSTER", "MEET", "127.0.0.1", port) == b"+OK\r\n"
    deadline = time.time() + STARTUP_TIMEOUT_S
    for port in ports:
        while True:
            info = command(port, "CLUSTER", "INFO")
            slots = command(port, "CLUSTER", "SLOTS")
            if (
                b"cluster_state:ok" in info
                and b"cluster_known_nodes:%d" % shards in info
                and slots.startswith(b"*%d\r\n" % shards)
            ):
                break
            if time.time() > deadline:
                raise RuntimeError(f"Redis Cluster not ok on {port}: {info!r}")
            time.sleep(0.1)
    return server


def start(mode, shards):
    """Starts the test target (ruvio, or redis with RUVIO_TEST_TARGET=redis)."""
    assert mode in ("forward", "per-shard")
    return _start_ruvio(mode, shards) if target() == "ruvio" else _start_redis(mode, shards)
