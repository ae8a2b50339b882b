#!/usr/bin/env python3
"""Sentinel failover rounds over Ruvio (issue 31's long loop; the test suite runs 2).

Each round starts a Ruvio primary and two Ruvio replicas (forward mode, 2 shards),
three Debian redis-sentinel processes (quorum 2), writes keys each acknowledged by
`WAIT 1 1000`, kills the primary with SIGKILL, and checks that the sentinels
promote a replica, re-point the other, that redis-py's Sentinel client goes on
writing, and that no acknowledged write is lost (tests/python/sentinel_failover.py).

  scripts/sentinel_failover.py --rounds 10 [--ruvio target/release/ruvio] [--out records]
"""

import argparse
import hashlib
import json
import subprocess
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "scripts"))

import benchlib as bl  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--writes", type=int, default=200, help="acknowledged writes before each kill")
    p.add_argument("--ruvio", default=str(REPO / "target" / "release" / "ruvio"))
    p.add_argument("--out", default=str(REPO / "records"), help="directory for the JSON record ('' for none)")
    args = p.parse_args()
    os.environ["RUVIO_BIN"] = str(Path(args.ruvio).resolve())
    from sentinel_failover import failover_round

    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    rounds = []
    for r in range(args.rounds):
        # The binary's hash as this round's servers start, and the host over the round.
        sha256 = hashlib.sha256(Path(args.ruvio).read_bytes()).hexdigest()
        host0 = bl.host_snapshot()
        outcome = failover_round(writes=args.writes)
        outcome.update(bl.host_since(host0))
        outcome["binaries"] = {"ruvio": sha256}
        rounds.append(outcome)
        print(f"round {r + 1}: {outcome}", flush=True)
    print(f"{len(rounds)} rounds, no acknowledged write lost")
    if args.out:
        out = Path(args.out) / f"sentinel-failover-{time.strftime('%Y-%m-%d-%H%M%S')}.json"
        out.write_text(json.dumps({"commit": commit, "ruvio": args.ruvio, "ruvio_sha256": rounds[0]["binaries"]["ruvio"] if rounds else None,
                                   "rounds": rounds}, indent=1) + "\n")
        print("record:", out)


if __name__ == "__main__":
    main()
