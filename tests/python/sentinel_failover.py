"""One Sentinel failover round over Ruvio servers, for the test suite (2 rounds,
test_sentinel.py) and for scripts/sentinel_failover.py (as many as asked).

A round: a Ruvio primary (forward mode, 2 shards) with two Ruvio replicas, three
Debian `redis-sentinel` processes (quorum 2) monitoring it; a redis-py `Sentinel`
client writes keys, each acknowledged by `WAIT 1 1000`; the primary is killed with
SIGKILL; the sentinels promote a replica and re-point the other; the client finds
the new primary through the sentinels and goes on writing; every write WAIT
acknowledged before the kill is on the new primary, and the other replica follows
it with the same data.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time

import redis
from redis.sentinel import Sentinel

import support

MASTER = "ruvio"
ROUND_TIMEOUT_S = 60


def _wait(what, check, timeout=ROUND_TIMEOUT_S):
    deadline = time.time() + timeout
    while True:
        try:
            if check():
                return
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            pass
        if time.time() > deadline:
            raise AssertionError(f"timed out: {what}")
        time.sleep(0.1)


def _info(port, section="replication"):
    return redis.Redis(port=port, socket_timeout=2).info(section)


def _start_sentinels(primary_port, directory, count=3):
    ports = support.free_ports(count)
    procs = []
    for port in ports:
        conf = os.path.join(directory, f"sentinel-{port}.conf")
        with open(conf, "w") as f:
            f.write(
                f"port {port}\nbind 127.0.0.1\ndir {directory}\n"
                f"sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n"
                f"sentinel down-after-milliseconds {MASTER} 1000\n"
                f"sentinel failover-timeout {MASTER} 10000\n"
                f"sentinel parallel-syncs {MASTER} 1\n"
            )
        log = open(os.path.join(directory, f"sentinel-{port}.log"), "wb")
        binary = shutil.which("redis-sentinel") or "redis-sentinel"
        procs.append(subprocess.Popen([binary, conf], stdout=log, stderr=subprocess.STDOUT))
        log.close()
    for port in ports:
        _wait(f"sentinel {port} up", lambda p=port: support.ping(p))
    return ports, procs


def failover_round(writes=200):
    """Run one round; returns a dict of what happened (ports, counts, seconds)."""
    primary = support.start("forward", 2)
    replicas = [support.start("forward", 2) for _ in range(2)]
    directory = tempfile.mkdtemp(prefix="ruvio-sentinel-")
    sentinel_procs = []
    try:
        for r in replicas:
            assert redis.Redis(port=r.port).execute_command(
                "REPLICAOF", "127.0.0.1", primary.port) in (b"OK", "OK", True)
        _wait("two replicas online", lambda: sum(
            1 for k, v in _info(primary.port).items()
            if k.startswith("slave") and isinstance(v, dict) and v.get("state") == "online") == 2)
        sentinel_ports, sentinel_procs = _start_sentinels(primary.port, directory)
        for port in sentinel_ports:
            s = redis.Redis(port=port, socket_timeout=2, decode_responses=True)
            _wait("the sentinels see both replicas and each other", lambda s=s: (
                len(s.execute_command("SENTINEL", "REPLICAS", MASTER)) == 2
                and len(s.execute_command("SENTINEL", "SENTINELS", MASTER)) == 2))
        sentinel = Sentinel([("127.0.0.1", p) for p in sentinel_ports], socket_timeout=1)
        master = sentinel.master_for(MASTER, socket_timeout=1, retry_on_timeout=False)
        acknowledged = {}
        for i in range(writes):
            key, value = f"key:{i}", f"value-{i}"
            master.set(key, value)
            if master.execute_command("WAIT", 1, 1000) >= 1:
                acknowledged[key] = value
        assert len(acknowledged) == writes, f"only {len(acknowledged)} of {writes} acknowledged"

        killed_at = time.time()
        os.kill(primary.procs[0].pid, signal.SIGKILL)
        primary.procs[0].wait()
        replica_ports = {r.port for r in replicas}
        _wait("a replica promoted", lambda: sentinel.discover_master(MASTER)[1] in replica_ports)
        new_port = sentinel.discover_master(MASTER)[1]
        # The client finds the new primary and goes on writing.
        after = 0
        deadline = time.time() + ROUND_TIMEOUT_S
        while after < 50:
            try:
                master.set(f"after:{after}", "x")
                after += 1
            except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError):
                assert time.time() < deadline, "no writes after the failover"
                time.sleep(0.1)
        failover_s = time.time() - killed_at
        promoted = redis.Redis(port=new_port, decode_responses=True)
        assert _info(new_port)["role"] == "master"
        lost = [k for k, v in acknowledged.items() if promoted.get(k) != v]
        assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {lost[:5]}"
        # The other replica follows the new primary and has the same data.
        (other,) = replica_ports - {new_port}
        _wait("the other replica re-pointed", lambda: (
            _info(other).get("master_port") == new_port
            and _info(other).get("master_link_status") == "up"))
        # WAIT counts the connection's own writes (Redis's c->woff): one of
        # its own first, whose offset is past every write before it.
        promoted.set("wait-marker", 1)
        promoted.delete("wait-marker")
        assert promoted.execute_command("WAIT", 1, 5000) == 1
        follower = redis.Redis(port=other, decode_responses=True)
        for key, value in acknowledged.items():
            assert follower.get(key) == value, key
        for i in range(after):
            assert follower.get(f"after:{i}") == "x"
        return {"old": primary.port, "new": new_port, "acknowledged": len(acknowledged),
                "after": after, "failover_s": round(failover_s, 2)}
    finally:
        for proc in sentinel_procs:
            proc.kill()
            proc.wait()
        for server in [primary] + replicas:
            server.stop()
        shutil.rmtree(directory, ignore_errors=True)
