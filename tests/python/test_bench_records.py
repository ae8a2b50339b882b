"""What every benchmark record keeps per row (issue 36, item 5).

A record must show whether its rounds ran on a quiet machine and on the binaries it
names: per row the load generator's CPU, the host's steal and idle time over the row
(/proc/stat), the load average, and the sha256 of each server binary read when the
server started (a rebuild during a run must not go unnoticed). These fields come
from one helper, scripts/benchlib.py's `host_since`; here the smallest run of
scripts/burst_ab.py (one round, bursts of 0.2 s, one row) writes a record to a
temporary directory and the record is checked, and benchlib is checked to name the
hash a binary had at its start, not at the end.

Needs the release ruvio and ruvio-bench (scripts/test.sh builds both); $RUVIO_BIN
names ruvio, and ruvio-bench is looked for beside it.
"""

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import support

SCRIPTS = support.REPO / "scripts"
sys.path.insert(0, str(SCRIPTS))

import benchlib  # noqa: E402

# One round of 0.2 s bursts takes about a second; starting two servers and
# warming them a few more. Far above that means the script hung.
BURST_AB_TIMEOUT_S = 120


def ruvio_bench_bin() -> Path:
    """ruvio-bench beside the ruvio under test (target/release/ in scripts/test.sh)."""
    candidate = support.ruvio_bin().parent / "ruvio-bench"
    if not candidate.is_file():
        pytest.fail(f"no ruvio-bench at {candidate}: cargo build --release -p ruvio-bench")
    return candidate


def sha256_file(path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def cpus() -> tuple[str, str]:
    """A server CPU and a generator CPU this process may use (the same one if only one)."""
    allowed = sorted(os.sched_getaffinity(0))
    return str(allowed[0]), str(allowed[-1])


def check_row(where: str, row: dict, names: dict) -> None:
    """One row's host fields: present, plausible, and the hashes of `names`' binaries."""
    for field in benchlib.HOST_FIELDS:
        assert field in row, f"{where}: no {field!r} in {sorted(row)}"
    assert row["generator_cpu_s"] > 0, f"{where}: generator CPU {row['generator_cpu_s']}"
    for field in ("steal_s", "idle_s"):
        value = row[field]
        assert isinstance(value, float) and math.isfinite(value) and value >= 0, f"{where}: {field} {value!r}"
    # Idle time is summed over every CPU, so it cannot exceed CPUs x the row's length.
    assert row["idle_s"] <= os.cpu_count() * row["wall_s"] + 0.1, f"{where}: idle {row['idle_s']} s"
    load = row["loadavg"]
    assert isinstance(load, list) and len(load) == 3 and all(x >= 0 for x in load), f"{where}: loadavg {load!r}"
    assert row["binaries"] == names, f"{where}: binaries {row['binaries']!r}, expected {names!r}"


def test_burst_ab_record_keeps_host_conditions_per_burst(tmp_path):
    ruvio = support.ruvio_bin().resolve()
    server_cpu, client_cpu = cpus()
    command = f"{ruvio} --port {{port}} --shards 1 --cpus {server_cpu}"
    out = tmp_path / "records"
    run = subprocess.run(
        [sys.executable, str(SCRIPTS / "burst_ab.py"), "--rounds", "1", "--burst", "0.2", "--warm", "0.2",
         "-t", "get", "-c", "4", "-P", "1", "-r", "1000", "--ruvio-bench", str(ruvio_bench_bin()),
         "--server-cpu", server_cpu, "--client-cpu", client_cpu,
         "--server", f"a={command}", "--server", f"b={command}", "--out", str(out)],
        capture_output=True, text=True, timeout=BURST_AB_TIMEOUT_S)
    assert run.returncode == 0, f"burst_ab.py exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    records = list(out.glob("burst-ab-*.json"))
    assert len(records) == 1, f"records written: {records}"
    record = json.loads(records[0].read_text())

    digest = sha256_file(ruvio)
    for server in record["servers"]:
        assert server["sha256"] == digest, server
        assert server["sha256_read"] == "at start", server
    assert record["binary_changed"] == []
    assert record["binary_starts"] == 2
    assert record["rows"] == ["GET"]
    (round_,) = record["rounds"]
    bursts = round_["rows"]["GET"]
    assert sorted(bursts) == ["a", "b"]
    for name, burst in bursts.items():
        assert burst["rps"] > 0, burst
        check_row(f"GET on {name}", burst, {name: digest})
    for name, median in record["medians"]["GET"].items():
        assert median["steal_s_max"] >= 0 and median["idle_s_min"] >= 0, median


def test_record_names_the_hash_read_when_the_server_started(tmp_path, monkeypatch):
    """A binary rebuilt after its server started: the record keeps the hash it ran
    with and names the server whose binary changed between two starts."""
    binary = tmp_path / "server-bin"
    binary.write_bytes(b"the build that ran")
    started = hashlib.sha256(b"the build that ran").hexdigest()
    monkeypatch.setattr(benchlib, "_STARTS", [])
    spec = benchlib.ServerSpec("s", "custom", [str(binary)], str(binary))
    assert benchlib.note_start(spec) == started
    binary.write_bytes(b"a rebuild during the run")
    header = benchlib.record_header("test", _Args(), [spec])
    assert header["servers"][0]["sha256"] == started
    assert header["servers"][0]["sha256_read"] == "at start"
    assert header["binary_changed"] == []
    benchlib.note_start(spec)
    header = benchlib.record_header("test", _Args(), [spec])
    assert header["servers"][0]["sha256"] == started
    assert header["binary_changed"] == ["s"]


def test_host_since_counts_the_generator_and_the_host():
    """The row fields from /proc: CPU this process burns shows as generator CPU, the
    clock as wall time, and steal and idle never go backwards."""
    before = benchlib.host_snapshot()
    deadline = benchlib.time.process_time() + 0.2
    while benchlib.time.process_time() < deadline:
        pass
    row = benchlib.host_since(before)
    assert row["generator_cpu_s"] >= 0.15, row
    assert row["wall_s"] >= 0.15, row
    assert row["steal_s"] >= 0 and row["idle_s"] >= 0, row
    assert len(row["loadavg"]) == 3, row


class _Args:
    """An argparse namespace stand-in: record_header reads vars() of it."""

    def __init__(self):
        self.rounds = 1


def test_every_record_writing_script_uses_the_shared_helper():
    """Every script that writes a record into records/ takes its rows' host fields
    from benchlib (host_since or row_conditions), not a copy of its own."""
    # benchlib writes the records; build_site_data reads them (and writes site-data/).
    not_benchmarks = {"benchlib.py", "build_site_data.py"}
    writers = [p for p in SCRIPTS.glob("*.py") if p.name not in not_benchmarks
               and ("write_record" in p.read_text() or "records" in p.read_text() and "write_text" in p.read_text())]
    assert len(writers) >= 15, writers
    missing = [p.name for p in writers
               if not any(f in p.read_text() for f in ("host_since", "row_conditions", "run_rounds", "alternate_rows"))]
    assert not missing, f"scripts writing records without benchlib's host fields: {missing}"
    copies = [p.name for p in writers if "/proc/stat" in p.read_text()]
    assert not copies, f"scripts reading /proc/stat themselves: {copies}"
