#!/usr/bin/env python3
"""Short alternating bursts against servers that all stay up: an A/B for small
differences on a machine whose speed drifts.

On this kind of VM the same server measured twice a few seconds apart can differ
by a third (docs/durability.md); a fresh server per long run (the other scripts)
carries that drift into each ratio. Here every server starts once (all pinned to
the server CPU, idle but for the one under load), each is warmed, then each round
loads every server in turn for `--burst` seconds with ruvio-bench, the order
rotating, once per row (a built-in test of `-t`, or a `--command`); each round's
ratio against the first server cancels drift slower than one round. Every burst
records its rate, the server's CPU per request, the generator's CPU, the host's
steal and idle time and load average, and the sha256 each binary had when its server
started (benchlib.host_since); medians of the per-round rates and ratios go into records/.

Example (everysec against memory, and a binary before a change):
  scripts/burst_ab.py --rounds 14 \\
    --server 'memory=target/release/ruvio --port {port} --shards 1 --cpus 0' \\
    --server 'everysec=target/release/ruvio --port {port} --shards 1 --cpus 0 --durability everysec --dir {dir} --save ""'

With a MONITOR client attached to every server for the whole run (`--monitor`:
it reads and drops the lines, pinned to the generator's CPU), MONITOR's cost:
  scripts/burst_ab.py --monitor -t get,set \
    --server 'ruvio=target/release/ruvio --port {port} --shards 1 --cpus 0' \
    --server 'redis=redis-server --port {port} --save "" --appendonly no'

A user restricted by ACL against `default` (keys under app:, warmed there):
  scripts/burst_ab.py --warm-command 'SET app:__rand_int__ __data__' \
    --command 'SET=SET app:__rand_int__ __data__' --command 'GET=GET app:__rand_int__' ... \
    --server 'default=target/release/ruvio --port {port} --shards 1 --cpus 0' \
    --server 'restricted=target/release/ruvio --port {port} --shards 1 --cpus 0' \
    --after-start 'restricted=ACL SETUSER default resetkeys ~app:* nocommands +@read +@write -@dangerous +evalsha'

With a replica attached to some servers for the whole run (`--replica NAME=COMMAND`,
pinned to the generator's CPU), the cost of replication against Redis's:
  scripts/burst_ab.py -t set -c 50 -P 16 \
    --server 'ruvio=target/release/ruvio --port {port} --shards 1 --cpus 0' \
    --server 'ruvio+replica=target/release/ruvio --port {port} --shards 1 --cpus 0' \
    --server 'redis=redis-server --port {port} --save "" --appendonly no' \
    --server 'redis+replica=redis-server --port {port} --save "" --appendonly no' \
    --replica 'ruvio+replica=redis-server --port {port} --save "" --appendonly no' \
    --replica 'redis+replica=redis-server --port {port} --save "" --appendonly no'

One binary with a setting on and off (`--after-start NAME=COMMAND`: a command sent
to server NAME once it runs, e.g. CONFIG SET), the cost of latency tracking:
  scripts/burst_ab.py -t get,set \
    --server 'on=target/release/ruvio --port {port} --shards 1 --cpus 0' \
    --server 'off=target/release/ruvio --port {port} --shards 1 --cpus 0' \
    --after-start 'off=CONFIG SET latency-tracking no slowlog-log-slower-than -1'

Several rows, a script loaded first (EVALSHA of `SCRIPT_GET`):
  scripts/burst_ab.py -t get,set --command 'EVALSHA=EVALSHA {sha_get} 1 key:__rand_int__' ...

Over TLS (`--certs DIR`: a CA and a server certificate made there with openssl
unless present; `{tls_port}` in a server's command gets a second free port, and
`--bench-args` / `--server-bench-args NAME=ARGS` pass extra ruvio-bench flags to
every server's bursts or one server's, with `{port}`, `{tls_port}`, `{dir}`
and `{certs}` filled per server; a `-p` there replaces the plain port; write
`--bench-args=...` with `=` when the flags start with a dash):
  scripts/burst_ab.py -t get,set -c 50 -P 1 --certs /tmp/bench-certs \
    --bench-args='-p {tls_port} --tls --cacert {certs}/ca.crt' \
    --server 'ruvio=target/release/ruvio --port {port} --shards 1 --cpus 0 --tls-port {tls_port} --tls-cert-file {certs}/server.crt --tls-key-file {certs}/server.key --tls-auth-clients no' \
    --server 'redis=redis-server --port {port} --save "" --appendonly no --tls-port {tls_port} --tls-cert-file {certs}/server.crt --tls-key-file {certs}/server.key --tls-auth-clients no'

With client-side caching on every load connection (HELLO 3, CLIENT TRACKING ON):
  scripts/burst_ab.py -t get --bench-args=--tracking --server ... --server ...
SET to tracked keys with the invalidations delivered: the row `get_set` (ruvio-bench's
built-in "GET then SET": each request a GET of a random key then a SET of another,
so every SET writes a key some tracking connection read; a request is the pair,
rps counts pairs); the pushes each connection receives are read, counted (the
record's "invalidations") and never taken for replies. Warm first so GETs hit:
  scripts/burst_ab.py -t get_set -c 50 -P 16 -r 100000 --bench-args=--tracking \
    --server 'ruvio=target/release/ruvio --port {port} --shards 2 --cpus 0' \
    --server 'redis=redis-server --port {port} --save "" --appendonly no'
(the same pair as a template: --command 'GETSET=GET key:__rand_int__ ; SET key:__rand_int__ __data__')
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shlex
import subprocess
import sys
import time

import benchlib as bl

# A script every server loads before the rounds, so a `--command` row can run
# EVALSHA `{sha_get}`: one GET through Lua, the cheapest script there is.
SCRIPT_GET = "return redis.call('GET', KEYS[1])"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", action="append", required=True, metavar="NAME=COMMAND",
                   help="server to compare (two or more; the first is the baseline); COMMAND may use {port} and {dir}")
    p.add_argument("--server-cpu", default="0", help="CPU list every server is pinned to")
    p.add_argument("--client-cpu", default="1", help="CPU list the load generator is pinned to")
    p.add_argument("--ruvio-bench", default=bl.default_ruvio_bench(), help="path to ruvio-bench")
    p.add_argument("-t", "--test", default="", help="ruvio-bench built-in tests, comma separated (one row each)")
    p.add_argument("--command", action="append", default=[], metavar="NAME=TEMPLATE",
                   help="a row measuring a command template (ruvio-bench's __rand_int__, __data__; {sha_get})")
    p.add_argument("-c", "--clients", type=int, default=200)
    p.add_argument("-P", "--pipeline", type=int, default=16)
    p.add_argument("-d", "--datasize", type=int, default=64)
    p.add_argument("-r", "--keyspace", type=int, default=1_000_000)
    p.add_argument("--rounds", type=int, default=14)
    p.add_argument("--burst", type=float, default=1.5, help="seconds of load per server per row and round")
    p.add_argument("--warm", type=float, default=3.0,
                   help="seconds of SET load per server before the rounds (fills the keys GET rows read)")
    p.add_argument("--warm-command", metavar="TEMPLATE",
                   help="what warms each server (default: the built-in set test), e.g. when a restricted "
                        "user may not write set's key:* keys")
    p.add_argument("--after-start", action="append", default=[], metavar="NAME=COMMAND",
                   help="a command (words split on spaces) sent to server NAME once it runs")
    p.add_argument("--replica", action="append", default=[], metavar="NAME=COMMAND",
                   help="a replica of server NAME for the whole run (COMMAND with {port}, {dir}; pinned to "
                        "the generator's CPU), attached with REPLICAOF and online before the rounds")
    p.add_argument("--monitor", action="store_true",
                   help="attach a MONITOR client to every server for the whole run")
    p.add_argument("--bench-args", default="", metavar="ARGS",
                   help="extra ruvio-bench flags for every burst ({port}, {tls_port}, {dir}, {certs} filled "
                        "per server; a -p there replaces the plain port), e.g. '--tracking'")
    p.add_argument("--server-bench-args", action="append", default=[], metavar="NAME=ARGS",
                   help="extra ruvio-bench flags for server NAME's bursts, after --bench-args")
    p.add_argument("--certs", default="", metavar="DIR",
                   help="certificate directory for {certs} (ca.crt, server.crt/.key, client.crt/.key; "
                        "made with openssl when DIR has no ca.crt)")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"), help="directory for the JSON record")
    p.add_argument("--no-record", action="store_true", help="print only, write no record")
    args = p.parse_args()
    if len(args.server) < 2:
        p.error("give two or more --server")
    if not args.test and not args.command:
        args.test = "set"
    return args


def rows_of(args: argparse.Namespace) -> list[tuple[str, dict]]:
    """(row name, how ruvio-bench runs it) for every `-t` test and `--command`."""
    rows = [(t.strip().upper(), {"test": t.strip()}) for t in args.test.split(",") if t.strip()]
    sha_get = hashlib.sha1(SCRIPT_GET.encode()).hexdigest()
    for entry in args.command:
        name, _, template = entry.partition("=")
        if not template:
            raise SystemExit(f"--command {entry!r}: expected NAME=TEMPLATE")
        rows.append((name, {"command": template.format(sha_get=sha_get).split()}))
    return rows


# A MONITOR client that reads and drops what it is sent, until killed.
MONITOR_DRAIN = """
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"MONITOR\\r\\n")
while s.recv(1 << 20):
    pass
"""


def attach_monitor(port: int, cpus: str) -> subprocess.Popen:
    """A MONITOR client of the server on `port`, pinned to `cpus`."""
    return subprocess.Popen(["taskset", "-c", cpus, sys.executable, "-c", MONITOR_DRAIN, str(port)])


def attach_replica(primary: bl.ServerProcess, command: str, cpus: str) -> bl.ServerProcess:
    """A replica of `primary` started from `command`, pinned to `cpus`, online (the
    primary's INFO says so) before it returns."""
    spec = bl.custom_server(f"replica-of-{primary.spec.name}={command}")
    replica = bl.ServerProcess(spec, cpus).start()
    replica.client().call("REPLICAOF", "127.0.0.1", str(primary.port))
    deadline = time.time() + 60
    while b"state=online" not in primary.client().call("INFO", "replication"):
        if time.time() > deadline:
            replica.stop()
            raise RuntimeError(f"no replica of {primary.spec.name} online:\n{replica.log_tail()}")
        time.sleep(0.1)
    print(f"{primary.spec.name}: replica on port {replica.port} online", flush=True)
    return replica


def bench_args(args: argparse.Namespace, server: bl.ServerProcess) -> list[str]:
    """The extra ruvio-bench flags of `server`'s bursts: --bench-args, then its
    --server-bench-args, placeholders filled."""
    words = shlex.split(args.bench_args)
    for entry in args.server_bench_args:
        name, _, extra = entry.partition("=")
        if name == server.spec.name:
            words += shlex.split(extra)
    return [bl.fill(w, port=server.port, tls_port=server.tls_port, dir=server.workdir, certs=server.certs)
            for w in words]


def burst(args: argparse.Namespace, server: bl.ServerProcess, row: dict, seconds: float) -> dict:
    load = bl.Load(clients=args.clients, pipeline=args.pipeline, requests=10**12,
                   keyspace=args.keyspace, datasize=args.datasize)
    extra = bench_args(args, server) + ["--duration", str(seconds)]
    result, server_us = bl.measured(server, lambda: bl.ruvio_bench(
        server.port, load, command=row.get("command"), test=row.get("test"), cpus=args.client_cpu,
        binary=args.ruvio_bench, extra=extra))
    generator = result.extra.get("generator") or {}
    return {"rps": result.rps, "server_cpu_us_per_request": server_us,
            "client_cpu_s": result.client_cpu_s, "seconds": result.seconds,
            **bl.row_conditions(result, server),
            "tls": generator.get("tls", False), "tracking": generator.get("tracking", False),
            "invalidations": result.extra.get("invalidations", 0)}


def main() -> None:
    args = parse_args()
    specs = [bl.custom_server(entry) for entry in args.server]
    for spec in specs:
        spec.version = bl.binary_version(spec.binary)
    rows = rows_of(args)
    certs = bl.make_certificates(os.path.abspath(args.certs)) if args.certs else ""
    servers = [bl.ServerProcess(s, args.server_cpu, certs=certs) for s in specs]
    rounds = []
    monitors = []
    replicas = []
    try:
        for server in servers:
            server.start()
            server.client().call("SCRIPT", "LOAD", SCRIPT_GET)
            for entry in args.after_start:
                name, _, command = entry.partition("=")
                if name == server.spec.name:
                    print(f"{name}: {command} -> {server.client().call(*command.split())!r}", flush=True)
            if args.monitor:
                monitors.append(attach_monitor(server.port, args.client_cpu))
            for entry in args.replica:
                name, _, command = entry.partition("=")
                if name == server.spec.name:
                    replicas.append(attach_replica(server, command, args.client_cpu))
        warm = {"command": args.warm_command.split()} if args.warm_command else {"test": "set"}
        for server in servers:
            burst(args, server, warm, args.warm)
        for r, order in enumerate(bl.round_orders(range(len(servers)), args.rounds)):
            result = {"order": [specs[i].name for i in order], "rows": {}}
            for name, row in rows:
                result["rows"][name] = {specs[i].name: burst(args, servers[i], row, args.burst) for i in order}
                print(f"round {r + 1} {name}: " + "  ".join(
                    f"{n}={v['rps']:,.0f}" for n, v in result["rows"][name].items()), flush=True)
            rounds.append(result)
    finally:
        for monitor in monitors:
            monitor.kill()
        for replica in replicas:
            replica.stop()
        for server in servers:
            server.stop()
    base = specs[0].name
    medians = {}
    for name, _ in rows:
        medians[name] = {}
        for s in specs:
            runs = [r["rows"][name][s.name] for r in rounds]
            ratios = [r["rows"][name][s.name]["rps"] / r["rows"][name][base]["rps"] for r in rounds]
            medians[name][s.name] = {
                "rps": bl.median([x["rps"] for x in runs]), f"ratio_to_{base}": bl.median(ratios),
                "ratios": ratios,
                "server_cpu_us_per_request": bl.median([x["server_cpu_us_per_request"] for x in runs]),
                "client_cpu_s": bl.median([x["client_cpu_s"] for x in runs]),
                "steal_s_max": max(x["steal_s"] for x in runs),
                "idle_s_min": min(x["idle_s"] for x in runs)}
            print(f"{name:>10} {s.name:>12}: median {medians[name][s.name]['rps']:,.0f}/s, "
                  f"ratio to {base} {bl.median(ratios):.3f} (rounds {min(ratios):.2f}-{max(ratios):.2f})")
    record = bl.record_header("burst-ab", args, specs)
    record.update({"rows": [name for name, _ in rows], "rounds": rounds, "medians": medians})
    if not args.no_record:
        print("record:", bl.write_record(record, args.out, "burst-ab"))


if __name__ == "__main__":
    main()
