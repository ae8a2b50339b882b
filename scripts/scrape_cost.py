#!/usr/bin/env python3
"""What a Prometheus scrape costs the requests: GET's throughput and p99 at 50
clients (no pipelining) with `/metrics` scraped every 100 ms, against the same
server not scraped, in alternating bursts of one run.

One Ruvio starts with `--metrics-port`, pinned to the server CPU; each round runs
two bursts of ruvio-bench (pinned to the client CPU), one while a scraper
(pinned to the client CPU as well, so the server CPU does only the server's
work) fetches `/metrics` every `--every` seconds, one without, the order
alternating. Medians of rate, p50 and p99 and of the per-round ratios go into
records/, with the scrapes' count and their own latency.

Example:
  scripts/scrape_cost.py --rounds 10
  scripts/scrape_cost.py --rounds 1 --burst 1 --no-record     # functional check
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import benchlib as bl

# Fetch /metrics every `every` seconds until killed; print the count and the
# slowest fetch in ms when stopped (SIGTERM).
SCRAPER = """
import signal, sys, time, urllib.request
url, every = sys.argv[1], float(sys.argv[2])
count, slowest = 0, 0.0
def stop(*_):
    print(count, slowest * 1000, flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    start = time.monotonic()
    urllib.request.urlopen(url).read()
    took = time.monotonic() - start
    count, slowest = count + 1, max(slowest, took)
    time.sleep(max(0.0, every - took))
"""


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default=str(bl.REPO_ROOT / "target" / "release" / "ruvio"))
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--server-cpu", default="0")
    p.add_argument("--client-cpu", default="1")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench())
    p.add_argument("-c", "--clients", type=int, default=50)
    p.add_argument("-P", "--pipeline", type=int, default=1)
    p.add_argument("-r", "--keyspace", type=int, default=100_000)
    p.add_argument("--every", type=float, default=0.1, help="seconds between scrapes")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--burst", type=float, default=3.0, help="seconds of load per burst")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    return p.parse_args()


def burst(args: argparse.Namespace, server: bl.ServerProcess, metrics_port: int, scraped: bool) -> dict:
    load = bl.Load(clients=args.clients, pipeline=args.pipeline, requests=10**12,
                   keyspace=args.keyspace, datasize=64)
    scraper = None
    if scraped:
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        scraper = subprocess.Popen(["taskset", "-c", args.client_cpu, sys.executable, "-c", SCRAPER,
                                    url, str(args.every)], stdout=subprocess.PIPE, text=True)
    try:
        result, server_us = bl.measured(server, lambda: bl.ruvio_bench(
            server.port, load, test="get", cpus=args.client_cpu, binary=args.ruvio_bench,
            extra=["--duration", str(args.burst)]))
    finally:
        scrapes, slowest_ms = 0, 0.0
        if scraper is not None:
            scraper.terminate()
            out, _ = scraper.communicate(timeout=10)
            if out.split():
                scrapes, slowest_ms = int(out.split()[0]), float(out.split()[1])
    return {"rps": result.rps, "p50_ms": result.p50_ms, "p99_ms": result.p99_ms, "max_ms": result.max_ms,
            "server_cpu_us_per_request": server_us, "client_cpu_s": result.client_cpu_s,
            **bl.row_conditions(result, server), "scrapes": scrapes, "slowest_scrape_ms": slowest_ms}


def main() -> None:
    args = parse_args()
    metrics_port = bl.free_port()
    argv = bl.ruvio_argv(args.ruvio, shards=args.shards, cpus=args.server_cpu) + [
        "--metrics-port", str(metrics_port)]
    spec = bl.ServerSpec(name="ruvio", kind="ruvio", argv=argv, binary=args.ruvio)
    spec.version = bl.binary_version(spec.binary)
    server = bl.ServerProcess(spec, args.server_cpu)
    rounds = []
    try:
        server.start()
        bl.seed_strings(server.port, args.keyspace, 64)
        for r in range(args.rounds):
            order = [False, True] if r % 2 == 0 else [True, False]
            result = {("scraped" if s else "quiet"): burst(args, server, metrics_port, s) for s in order}
            rounds.append(result)
            q, s = result["quiet"], result["scraped"]
            print(f"round {r + 1}: quiet {q['rps']:,.0f}/s p99 {q['p99_ms']:.3f} ms | "
                  f"scraped {s['rps']:,.0f}/s p99 {s['p99_ms']:.3f} ms ({s['scrapes']} scrapes)", flush=True)
    finally:
        server.stop()
    medians = {}
    for mode in ("quiet", "scraped"):
        runs = [r[mode] for r in rounds]
        medians[mode] = {k: bl.median([x[k] for x in runs])
                         for k in ("rps", "p50_ms", "p99_ms", "server_cpu_us_per_request", "client_cpu_s")}
        medians[mode]["steal_s_max"] = max(x["steal_s"] for x in runs)
    medians["scraped"]["scrapes_per_burst"] = bl.median([r["scraped"]["scrapes"] for r in rounds])
    medians["scraped"]["slowest_scrape_ms"] = max(r["scraped"]["slowest_scrape_ms"] for r in rounds)
    medians["ratios"] = {
        "rps_scraped_to_quiet": bl.median([r["scraped"]["rps"] / r["quiet"]["rps"] for r in rounds]),
        "p99_scraped_to_quiet": bl.median([r["scraped"]["p99_ms"] / r["quiet"]["p99_ms"] for r in rounds]),
    }
    print("medians:", medians)
    # The header after the run: it names the sha256 each binary had when it started.
    record = bl.record_header("scrape-cost", args, [spec])
    record.update({"rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "scrape-cost"))


if __name__ == "__main__":
    main()
