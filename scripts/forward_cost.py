#!/usr/bin/env python3
"""The forwarding tax in instructions (issue 36 item 3, docs/runtime.md "The
forwarding tax"): what a command costs when its key is on the client's own shard
(local) and when it is on the other one (forwarded), in process, in one thread.

Runs the example `crates/ruvio-server/examples/forward_cost.rs` (two shards of
the real server in the in-process harness, no sockets, no thread switch) under
valgrind's callgrind, counting only the example's `measured_pipelines`
(`--toggle-collect`). Each row runs twice, with REPS and 2 * REPS pipelines, and
takes the difference: whatever is paid once (first allocations, table growth,
the toggle itself) cancels, and what is left, divided by REPS * PIPELINE, is
the instructions one command costs in steady state, its share of the per-pipeline
costs (one message per pipeline, one settle) included. Instruction counts do not
depend on the machine's load; rounds must agree within 1 % (the shards' hash
seeds are random, so they may differ by a few instructions).

  cargo build --release -p ruvio-server --example forward_cost
  scripts/forward_cost.py --label before --out records/forward-cost-2026-12-04.json
  (change the forwarded path, rebuild)
  scripts/forward_cost.py --label after --out records/forward-cost-2026-12-04.json

A record holds one run per label (a label run again replaces its run), each with
its commit and the sha256 of the binary it measured, and the ratio forwarded /
local per command and pipeline.
"""

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(ROOT, "target", "release", "examples", "forward_cost")
COMMANDS = ["get", "set", "mget"]
PLACES = ["local", "forwarded"]
PIPELINES = [1, 16]
# Pipelines per run, per pipeline length: enough commands that the difference
# is thousands of commands, few enough that callgrind (some 50x slower) takes
# seconds a run.
REPS = {1: 400, 16: 50}
# Rounds of one row must agree within this (relative).
AGREEMENT_MAX = 0.01


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_state() -> dict:
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True, check=True).stdout.strip() != ""
    return {"commit": commit, "dirty": dirty}


def counted(binary: str, command: str, place: str, pipeline: int, reps: int, keep: str | None) -> int:
    """Instructions callgrind counts in `measured_pipelines` for one run."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        argv = ["nice", "-n", "10", "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                "--toggle-collect=*measured_pipelines*", binary, command, place, str(pipeline), str(reps)]
        run = subprocess.run(argv, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"{' '.join(argv)} failed:\n{run.stdout}\n{run.stderr}")
        text = open(out).read()
        m = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if not m:
            sys.exit(f"no instruction count in {out}")
        if keep:
            with open(keep, "w") as f:
                f.write(text)
        return int(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--binary", default=DEFAULT_BINARY)
    p.add_argument("--label", required=True, help="this run's name in the record (before, after-...)")
    p.add_argument("--out", required=True, help="the record (JSON), created or updated")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--commands", default=",".join(COMMANDS))
    p.add_argument("--pipelines", default=",".join(map(str, PIPELINES)))
    p.add_argument("--keep", metavar="DIR",
                   help="keep each row's callgrind file of the longer run (for callgrind_annotate)")
    args = p.parse_args()
    # Read before anything runs: a rebuild during the run would go unnoticed otherwise.
    binary_sha = sha256(args.binary)
    git = git_state()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    rows = []
    for command in args.commands.split(","):
        for pipeline in map(int, args.pipelines.split(",")):
            for place in PLACES:
                reps = REPS[pipeline]
                rounds = []
                for r in range(args.rounds):
                    keep = None
                    if args.keep and r == 0:
                        os.makedirs(args.keep, exist_ok=True)
                        keep = os.path.join(args.keep, f"{command}-{place}-p{pipeline}.callgrind")
                    short = counted(args.binary, command, place, pipeline, reps, None)
                    long = counted(args.binary, command, place, pipeline, 2 * reps, keep)
                    rounds.append((long - short) / (reps * pipeline))
                spread = (max(rounds) - min(rounds)) / min(rounds)
                row = {"command": command, "pipeline": pipeline, "place": place, "reps": [reps, 2 * reps],
                       "instructions_per_command_rounds": [round(x, 1) for x in rounds],
                       "instructions_per_command": round(sorted(rounds)[len(rounds) // 2], 1),
                       "rounds_spread": round(spread, 5), "rounds_agree": spread <= AGREEMENT_MAX}
                rows.append(row)
                print(f"{command:4} p{pipeline:<2} {place:9} {row['instructions_per_command']:10.1f} "
                      f"instructions a command (rounds {row['instructions_per_command_rounds']})", flush=True)
    ratios = []
    for command in args.commands.split(","):
        for pipeline in map(int, args.pipelines.split(",")):
            by = {r["place"]: r["instructions_per_command"] for r in rows
                  if r["command"] == command and r["pipeline"] == pipeline}
            ratios.append({"command": command, "pipeline": pipeline,
                           "forwarded_over_local": round(by["forwarded"] / by["local"], 3),
                           "extra_instructions": round(by["forwarded"] - by["local"], 1)})
            print(f"{command:4} p{pipeline:<2} forwarded / local {ratios[-1]['forwarded_over_local']:.3f} "
                  f"(+{ratios[-1]['extra_instructions']:.0f})")
    run = {"label": args.label, "started_at": started, "git": git, "binary": os.path.relpath(args.binary, ROOT),
           "sha256": binary_sha, "sha256_read": "at start", "rows": rows, "ratios": ratios,
           "all_rounds_agree": all(r["rounds_agree"] for r in rows)}
    if sha256(args.binary) != binary_sha:
        sys.exit("the binary changed during the run")
    record = {"kind": "forward-cost",
              "method": "callgrind --toggle-collect=*measured_pipelines* of "
                        "crates/ruvio-server/examples/forward_cost.rs (2 shards, forward mode, one thread); "
                        "instructions of 2*REPS pipelines minus REPS pipelines, per command",
              "machine": {"os": platform.system(), "arch": platform.machine(), "kernel": platform.release()},
              "runs": []}
    if os.path.exists(args.out):
        record = json.load(open(args.out))
    record["runs"] = [r for r in record["runs"] if r["label"] != args.label] + [run]
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")
    print(f"wrote {args.out} (run {args.label})")


if __name__ == "__main__":
    main()
