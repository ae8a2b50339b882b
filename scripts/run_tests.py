#!/usr/bin/env python3
"""Runs every Rust test of the workspace, several test binaries at once.

`cargo test --workspace` runs its ~130 test binaries one after another, each
with as many test threads as CPUs. Most of the integration tests spend their
time waiting (a server starting, a failover's timeouts, a quiet period watched
for a reply that must not come); one after another they took 29 of the test
command's 53 minutes on a 2-CPU machine (1,740 s, build included). This builds the same binaries
(`cargo test --workspace --no-run`), then runs them from a pool of `--jobs`
workers, the longest first, each binary with its own default test threads and
in its package's directory as cargo runs it, and then the doc tests
(`cargo test --workspace --doc`). Other long checks that can run beside the
binaries (`--also NAME=COMMAND`, a shell command run from the repository root:
the memcheck run, the Python client tests) join the pool ahead of them.
Binaries named by `--alone PREFIX` run after the pool, one at a time
(scripts/test.sh: the cluster tests, some of which failed beside the pool under
a full CPU, for reasons not all found yet: docs/cluster.md "Next, in order" item 6).

Each worker hands its binaries a range of ports of its own
(`RUVIO_TEST_PORTS=first-end`, read by the tests' `common::free_ports`), so two
binaries running at once never pick the same port.

A binary's output is printed when it ends, in one piece: its summary when it
passed, all of it when it failed. Any failure makes the exit status 1, after
every binary ran, with the failed ones listed at the end.

    scripts/run_tests.py [--jobs N] [--also NAME=COMMAND ...] [--alone PREFIX ...]
                         [-- cargo test options]
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

# The pooled binaries that ran longest in this script's output of 2026-12-07
# (27-77 s each on a 2-CPU machine, 3 at once): started first so the pool does
# not end on one of them alone. The rest follow in build order.
LONGEST_FIRST = [
    "ruvio-server/chained_shard_links",
    "ruvio-server/replica_shard_links",
    "ruvio-server/bench_transport",
    "ruvio-server/blocked_wake",
    "ruvio-server/differential_tracking",
    "ruvio-server/replicas_of_ruvio",
    "ruvio-server/debug_command",
]

# The ports the tests may use (crates/ruvio-server/tests/common/mod.rs), split
# among the workers. Redis Cluster's bus ports are these plus 10000.
PORTS_FIRST = 10_000
PORTS_END = 20_000


def build(cargo_args):
    """Builds the test binaries; returns (name, argv, directory) of each."""
    cmd = ["cargo", "test", "--workspace", "--no-run", "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd + cargo_args, stdout=subprocess.PIPE, check=False)
    if proc.returncode != 0:
        sys.exit(f"run_tests: {' '.join(cmd)} failed")
    binaries = []
    for line in proc.stdout.decode().splitlines():
        message = json.loads(line)
        if message.get("reason") != "compiler-artifact" or not message.get("executable"):
            continue
        if not message["profile"]["test"]:
            continue
        package = os.path.basename(os.path.dirname(message["manifest_path"]))
        target = message["target"]
        kind = "unittests" if target["kind"] != ["test"] else target["name"]
        binaries.append((f"{package}/{kind}", [message["executable"]], os.path.dirname(message["manifest_path"])))
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    binaries.sort(key=lambda b: rank.get(b[0], len(rank)))
    return binaries


def run_pool(binaries, jobs):
    """Runs `binaries` (name, argv, directory) on `jobs` workers; returns the
    names that failed."""
    work = queue.Queue()
    for binary in binaries:
        work.put(binary)
    failed = []
    lock = threading.Lock()
    span = (PORTS_END - PORTS_FIRST) // jobs
    started = time.monotonic()

    def worker(index):
        env = dict(os.environ)
        first = PORTS_FIRST + index * span
        env["RUVIO_TEST_PORTS"] = f"{first}-{first + span}"
        while True:
            try:
                name, argv, directory = work.get_nowait()
            except queue.Empty:
                return
            began = time.monotonic()
            proc = subprocess.run(
                argv,
                cwd=directory,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=False,
            )
            took = time.monotonic() - began
            output = proc.stdout.decode(errors="replace")
            with lock:
                at = time.monotonic() - started
                if proc.returncode == 0:
                    lines = output.splitlines()
                    summary = [l for l in lines if l.startswith("test result:")] or [l for l in lines if l.strip()][-1:]
                    print(f"[{at:6.0f}s] ok   {took:6.1f}s {name}: {' '.join(summary)}", flush=True)
                else:
                    failed.append(name)
                    print(f"[{at:6.0f}s] FAIL {took:6.1f}s {name} (exit {proc.returncode}):", flush=True)
                    print(output, flush=True)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(jobs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("RUVIO_TEST_JOBS", "3")),
                        help="test binaries run at once (default 3, or RUVIO_TEST_JOBS)")
    parser.add_argument("--also", action="append", default=[], metavar="NAME=COMMAND",
                        help="a shell command run in the pool too, from the repository root")
    parser.add_argument("--alone", action="append", default=[], metavar="PREFIX",
                        help="binaries whose name starts so run after the pool, one at a time")
    parser.add_argument("--skip-doc", action="store_true", help="do not run the doc tests")
    parser.add_argument("cargo_args", nargs="*", help="extra options for cargo test (after --)")
    args = parser.parse_args()
    jobs = max(1, args.jobs)

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    also = []
    for item in args.also:
        name, _, command = item.partition("=")
        if not command:
            parser.error(f"--also {item!r}: not NAME=COMMAND")
        also.append((name, ["bash", "-c", command], root))
    binaries = build(args.cargo_args)
    alone = [b for b in binaries if b[0].startswith(tuple(args.alone))]
    pooled = [b for b in binaries if b not in alone]
    print(f"run_tests: {len(pooled)} test binaries and {len(also)} more, {jobs} at once, "
          f"then {len(alone)} alone", flush=True)
    started = time.monotonic()
    failed = run_pool(also + pooled, jobs)
    failed += run_pool(alone, 1)
    print(f"run_tests: the binaries took {time.monotonic() - started:.0f} s", flush=True)
    if not args.skip_doc:
        doc = subprocess.run(["cargo", "test", "--workspace", "--doc"] + args.cargo_args, check=False)
        if doc.returncode != 0:
            failed.append("doc tests")
    if failed:
        print("run_tests: FAILED: " + ", ".join(failed), flush=True)
        sys.exit(1)
    print("run_tests: every test passed", flush=True)


if __name__ == "__main__":
    main()
