#!/usr/bin/env python3
"""A Ruvio cluster across three hosts, the long version of
crates/ruvio-server/tests/cluster_hosts.rs (issue 35, "Tests across hosts").

Three network namespaces on one bridge (the root namespace on it too), each a
host running one `ruvio --shards 2 --cluster-enabled yes` process bound to
its own address: two nodes per host. `redis-cli --cluster create ...
--cluster-replicas 1` builds three masters, each with its replica on another
host. redis-py's RedisCluster writes `w:<n>` from a thread the whole run,
retrying what fails. Each round:

1. `redis-cli --cluster reshard` moves half of the next host's master's slots
   to the victim host's master (while the writer writes);
2. `WAIT 1 1000` on every master: the writes acknowledged so far are
   "confirmed" (Ruvio's WAIT waits for the shard's whole offset);
3. `kill -9` of the victim host's process (its master and a replica of
   another master); the clock runs until the victim master's replica, on
   another host, is a master with its slots (failover time);
4. the host's process restarts with its nodes.conf: its nodes rejoin as
   replicas (the old master follows its replica, now master), then a manual
   `CLUSTER FAILOVER` on it hands the master back, so every round starts from
   the same layout.

At the end every acknowledged write is read back: confirmed writes lost must
be 0 (the script fails otherwise); writes acknowledged after the last WAIT
and lost with the killed master are counted (asynchronous replication, as
Redis's). Failover times are recorded per round.

Needs root (`ip netns`). Not a quiet-machine benchmark: the failover times
are from a shared machine, the record says so in its settings.

  sudo python3 scripts/cluster_hosts.py --rounds 3 [--ruvio target/debug/ruvio]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import benchlib as bl

HOST_COUNT = 3
# Ports inside every namespace: each host has its own port space.
PORT = 7000


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ruvio", default=str(bl.REPO_ROOT / "target" / "release" / "ruvio"))
    p.add_argument("--redis-cli", default="redis-cli")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--node-timeout-ms", type=int, default=1000)
    p.add_argument("--failover-max-s", type=float, default=15.0,
                   help="a failover slower than this fails the run")
    p.add_argument("--machine", default="shared",
                   help="recorded as is: this run's failover times are not from a quiet machine")
    p.add_argument("--out", default=str(bl.REPO_ROOT / "records"))
    p.add_argument("--no-record", action="store_true")
    return p.parse_args()


def run(*cmd: str) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


class Network:
    """Three namespaces on a bridge; `close` removes them all (also on failure)."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.bridge = f"rvbr{pid}"
        self.subnet = f"10.214.{pid % 250}"
        self.namespaces: list[str] = []
        self.veths: list[str] = []
        run("ip", "link", "add", self.bridge, "type", "bridge")
        run("ip", "addr", "add", f"{self.subnet}.254/24", "dev", self.bridge)
        run("ip", "link", "set", self.bridge, "up")
        for i in range(HOST_COUNT):
            ns, outside = f"rvh{pid}-{i}", f"rvv{pid}-{i}"
            run("ip", "netns", "add", ns)
            self.namespaces.append(ns)
            run("ip", "link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", ns)
            self.veths.append(outside)
            run("ip", "link", "set", outside, "master", self.bridge)
            run("ip", "link", "set", outside, "up")
            run("ip", "-n", ns, "addr", "add", f"{self.host(i)}/24", "dev", "eth0")
            run("ip", "-n", ns, "link", "set", "eth0", "up")
            run("ip", "-n", ns, "link", "set", "lo", "up")

    def host(self, i: int) -> str:
        return f"{self.subnet}.{i + 1}"

    def close(self) -> None:
        for ns in self.namespaces:
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
            for pid in pids.split():
                subprocess.run(["kill", "-9", pid])
            subprocess.run(["ip", "netns", "del", ns])
        # By name: a namespace may outlive its name while the kernel holds it.
        for veth in self.veths:
            subprocess.run(["ip", "link", "del", veth], capture_output=True)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True)


class Host:
    """One host's ruvio process (two nodes), restartable with its nodes.conf."""

    def __init__(self, args: argparse.Namespace, network: Network, i: int, workdir: Path) -> None:
        self.args, self.ns, self.address = args, network.namespaces[i], network.host(i)
        self.dir = workdir / f"host{i}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.spec = bl.ServerSpec(f"ruvio-host{i}", "ruvio", self.argv(), args.ruvio)
        self.proc: subprocess.Popen | None = None

    def argv(self) -> list[str]:
        return [self.args.ruvio, "--bind", self.address, "--port", str(PORT), "--shards", "2",
                "--durability", "memory", "--dir", str(self.dir), "--cluster-enabled", "yes",
                "--cluster-node-timeout", str(self.args.node_timeout_ms), "--protected-mode", "no"]

    def start(self) -> None:
        bl.note_start(self.spec)
        log = open(self.dir / "ruvio.log", "ab")
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, *self.argv()],
                                     stdout=subprocess.DEVNULL, stderr=log)
        for port in (PORT, PORT + 1):
            deadline = time.monotonic() + 30
            while True:
                try:
                    if bl.RespClient(port, self.address, timeout_s=2).call("PING") in ("PONG", b"PONG"):
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f"{self.address}:{port} does not answer")
                time.sleep(0.1)

    def kill(self) -> None:
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def call(address: str, port: int, *args: str):
    reply = bl.RespClient(port, address, timeout_s=10).call(*args)
    return reply.decode() if isinstance(reply, (bytes, bytearray)) else reply


def wait_all(master: dict) -> int:
    """WAIT 1 for every write the master took: WAIT counts the connection's
    own writes (Redis's c->woff), so a key of the master's slots is set and
    deleted on the same connection first; its offset is past every write."""
    owned = set()
    for node in nodes(master["host"], master["port"]):
        if node["id"] == master["id"]:
            for r in node["slots"]:
                lo, _, hi = r.partition("-")
                owned.update(range(int(lo), int(hi or lo) + 1))
    marker = next(k for k in (f"wait-marker:{i}".encode() for i in range(1 << 20))
                  if bl.key_slot(k) in owned)
    conn = bl.RespClient(master["port"], master["host"], timeout_s=10)
    conn.call("SET", marker, "1")
    conn.call("DEL", marker)
    return conn.call("WAIT", "1", "1000")


def nodes(address: str, port: int = PORT) -> list[dict]:
    out = []
    for line in call(address, port, "CLUSTER", "NODES").splitlines():
        w = line.split(" ")
        host, p = w[1].split("@")[0].rsplit(":", 1)
        out.append({"id": w[0], "host": host, "port": int(p), "flags": w[2], "master": w[3],
                    "slots": [s for s in w[8:] if not s.startswith("[")]})
    return out


def wait(what: str, check, timeout_s: float = 60.0) -> float:
    t0 = time.monotonic()
    while True:
        try:
            if check():
                return time.monotonic() - t0
        except (OSError, ValueError, IndexError):
            pass
        if time.monotonic() - t0 > timeout_s:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.05)


def failover_back(address: str, port: int) -> str:
    """CLUSTER FAILOVER on a rejoined replica, again while it answers
    redis-server's "Master is down or failed": its bus link to the master may
    come up after the replication link (a loaded machine showed it)."""
    deadline = time.monotonic() + 30
    while True:
        reply = str(call(address, port, "CLUSTER", "FAILOVER"))
        if "Master is down" not in reply or time.monotonic() > deadline:
            return reply
        time.sleep(0.1)


def cluster_ok(address: str) -> bool:
    return all("cluster_state:ok" in call(address, p, "CLUSTER", "INFO") for p in (PORT, PORT + 1))


def settled(network: Network) -> bool:
    """Every host sees three masters with slots and three replicas, none failing."""
    for i in range(HOST_COUNT):
        view = nodes(network.host(i))
        masters = [n for n in view if "master" in n["flags"] and n["slots"]]
        replicas = [n for n in view if "slave" in n["flags"]]
        if len(masters) != 3 or len(replicas) != 3 or any("fail" in n["flags"] for n in view):
            return False
    return True


def cli(args: argparse.Namespace, *words: str) -> str:
    out = subprocess.run([args.redis_cli, *words], capture_output=True, text=True)
    if out.returncode != 0 or "[ERR]" in out.stdout:
        raise SystemExit(f"redis-cli {' '.join(words)}: {out.stdout}{out.stderr}")
    return out.stdout


def whole(args: argparse.Namespace, address: str) -> bool:
    """`redis-cli --cluster check` finds every slot covered and the nodes
    agreeing (a wait's test: right after a reshard or a failover the nodes may
    disagree for a moment, which `cli` would take for a failure)."""
    out = subprocess.run([args.redis_cli, "--cluster", "check", address],
                         capture_output=True, text=True)
    return out.returncode == 0 and "[ERR]" not in out.stdout and \
        "[OK] All 16384 slots covered." in out.stdout


def slot_count(ranges: list[str]) -> int:
    return sum(int(r.split("-")[1]) - int(r.split("-")[0]) + 1 if "-" in r else 1 for r in ranges)


class Writer(threading.Thread):
    """RedisCluster writing `w:<n>` until stopped, retrying failed writes; `acked`
    is how many were acknowledged (keys `w:0` .. `w:<acked - 1>`)."""

    def __init__(self, address: str) -> None:
        super().__init__(daemon=True)
        from redis.cluster import RedisCluster
        self.rc = RedisCluster(host=address, port=PORT)
        self.acked, self.failures, self.stop = 0, 0, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.rc.set(f"w:{self.acked}", f"v{self.acked}")
                self.acked += 1
            except Exception:
                self.failures += 1
                time.sleep(0.05)
                try:
                    self.rc.nodes_manager.initialize()
                except Exception:
                    pass


def one_round(args, network: Network, hosts: list[Host], writer: Writer, victim: int) -> dict:
    live = network.host((victim + 1) % HOST_COUNT)
    wait("three masters and three replicas", lambda: settled(network))
    view = nodes(live)
    masters = [n for n in view if "master" in n["flags"]]
    master_on = {n["host"]: n for n in masters}
    killed = master_on[network.host(victim)]
    giver = master_on[live]
    half = slot_count(giver["slots"]) // 2
    t0 = time.monotonic()
    cli(args, "--cluster", "reshard", f"{live}:{giver['port']}", "--cluster-from", giver["id"],
        "--cluster-to", killed["id"], "--cluster-slots", str(half), "--cluster-yes")
    reshard_s = time.monotonic() - t0
    wait("the cluster whole after the reshard",
         lambda: whole(args, f"{live}:{PORT}"))
    for m in masters:
        if wait_all(m) != 1:
            raise SystemExit(f"WAIT 1 on {m}: no replica acknowledged")
    confirmed = writer.acked
    killed_slots = nodes(live, giver["port"])
    killed_slots = next(n["slots"] for n in killed_slots if n["id"] == killed["id"])
    replica = next(n for n in view if n["master"] == killed["id"])

    hosts[victim].kill()
    failover_s = wait("the killed master's replica promoted", lambda: any(
        n["id"] == replica["id"] and "master" in n["flags"] and n["slots"] == killed_slots
        for n in nodes(live)), timeout_s=args.failover_max_s)
    ok_s = wait("the cluster ok without the host", lambda: cluster_ok(live))

    t_restart = time.monotonic()
    hosts[victim].start()
    wait("the old master a replica of its replica", lambda: any(
        n["id"] == killed["id"] and "slave" in n["flags"] and n["master"] == replica["id"]
        and "fail" not in n["flags"] for n in nodes(live)))
    rejoin_s = time.monotonic() - t_restart
    wait("its link up", lambda: "master_link_status:up" in call(
        network.host(victim), killed["port"], "INFO", "replication"))
    reply = failover_back(network.host(victim), killed["port"])
    if reply != "OK":
        raise SystemExit(f"CLUSTER FAILOVER: {reply}")
    wait("the old master master again", lambda: any(
        n["id"] == killed["id"] and "master" in n["flags"] for n in nodes(live)))
    wait("the cluster ok", lambda: all(cluster_ok(network.host(i)) for i in range(HOST_COUNT)))
    return {"victim_host": victim, "resharded_slots": half, "reshard_s": reshard_s,
            "failover_s": failover_s, "cluster_ok_after_kill_s": ok_s, "rejoin_s": rejoin_s,
            "confirmed_writes": confirmed, "acked_at_kill": writer.acked}


def main() -> None:
    args = parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: ip netns add")
    workdir = Path(bl.REPO_ROOT / "target" / f"cluster-hosts-{os.getpid()}")
    network = Network()
    hosts: list[Host] = []
    try:
        hosts = [Host(args, network, i, workdir) for i in range(HOST_COUNT)]
        for h in hosts:
            h.start()
        addresses = [f"{h.address}:{p}" for h in hosts for p in (PORT, PORT + 1)]
        cli(args, "--cluster", "create", *addresses, "--cluster-replicas", "1", "--cluster-yes")
        first = network.host(0)
        wait("the cluster whole", lambda: whole(args, f"{first}:{PORT}") and all(
            cluster_ok(network.host(i)) for i in range(HOST_COUNT)))
        wait("three replicas", lambda: sum("slave" in n["flags"] for n in nodes(first)) == 3)
        writer = Writer(network.host(HOST_COUNT - 1))
        writer.start()
        time.sleep(1)
        host0 = bl.host_snapshot()
        rounds = []
        for r in range(args.rounds):
            result = one_round(args, network, hosts, writer, r % HOST_COUNT)
            rounds.append(result)
            print(f"round {r + 1}: host {result['victim_host']} killed, failover "
                  f"{result['failover_s']:.2f} s, rejoin {result['rejoin_s']:.2f} s, "
                  f"{result['acked_at_kill']} writes acknowledged", flush=True)
        time.sleep(1)
        writer.stop.set()
        writer.join()
        from redis.cluster import RedisCluster
        rc = RedisCluster(host=first, port=PORT)
        lost = [i for i in range(writer.acked) if rc.get(f"w:{i}") != f"v{i}".encode()]
        # Each round's WAIT covered every write acknowledged before it.
        last_confirmed = max(r["confirmed_writes"] for r in rounds)
        lost_confirmed = [i for i in lost if i < last_confirmed]
        summary = {"acked_writes": writer.acked, "lost_acked_writes": len(lost),
                   "lost_confirmed_writes": len(lost_confirmed), "write_failures": writer.failures,
                   "failover_s_median": bl.median([r["failover_s"] for r in rounds]),
                   "failover_s_max": max(r["failover_s"] for r in rounds)}
        summary.update(bl.host_since(host0))
        print(f"{writer.acked} writes acknowledged, {len(lost)} lost "
              f"({len(lost_confirmed)} of them confirmed by WAIT), failover median "
              f"{summary['failover_s_median']:.2f} s")
        specs = [h.spec for h in hosts]
        for s in specs:
            s.version = bl.binary_version(s.binary)
        record = bl.record_header("cluster-hosts", args, specs)
        record.update({"rounds": rounds, "summary": summary})
        if not args.no_record:
            print("record:", bl.write_record(record, args.out, "cluster-hosts"))
        if lost_confirmed:
            raise SystemExit(f"confirmed writes lost: {lost_confirmed[:10]}")
    finally:
        for h in hosts:
            h.kill()
        network.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
