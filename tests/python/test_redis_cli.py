"""redis-cli: `-c` against per-shard mode (following MOVED), plain against forward mode
(1, 2 and 4 shards)."""

import shutil
import subprocess

import pytest

from support import command, key_on_shard, key_slot, shard_of_key

pytestmark = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli is not installed")


def cli(port, *args, cluster=False, stdin=None):
    argv = ["redis-cli", "-h", "127.0.0.1", "-p", str(port)]
    if cluster:
        argv.append("-c")
    argv.extend(str(a) for a in args)
    done = subprocess.run(argv, input=stdin, capture_output=True, timeout=60, check=True)
    return done.stdout.decode()


def test_cluster_mode_follows_redirects(start_server):
    server = start_server("per-shard", 2)
    for entry in (0, 1):
        for shard in (0, 1):
            key = key_on_shard(f"cli{entry}-", shard, 2)
            assert cli(server.ports[entry], "SET", key, f"v{shard}", cluster=True) == "OK\n"
            assert cli(server.ports[entry], "GET", key, cluster=True) == f"v{shard}\n"
            # The key really lives on its owner's port.
            assert command(server.ports[shard], "GET", key) == b"$2\r\nv%d\r\n" % shard
    # Without -c the redirect is printed, not followed.
    key = key_on_shard("nocli", 1, 2)
    out = cli(server.ports[0], "GET", key)
    assert out.strip() == f"MOVED {key_slot(key)} 127.0.0.1:{server.ports[1]}"


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_plain_against_forward_mode(start_server, shards):
    server = start_server("forward", shards)
    port = server.port
    assert cli(port, "PING") == "PONG\n"
    k0, k1 = key_on_shard("fw", 0, 2), key_on_shard("fw", 1, 2)
    assert cli(port, "SET", k0, "a") == "OK\n"
    assert cli(port, "SET", k1, "b") == "OK\n"
    assert cli(port, "MGET", k0, k1, "nope") == "a\nb\n\n"
    assert cli(port, "MSET", k0, "1", k1, "2") == "OK\n"
    assert cli(port, "INCR", k1) == "3\n"
    assert cli(port, "EXISTS", k0, k1) == "2\n"
    assert cli(port, "DEL", k0, k1, "nope") == "2\n"
    assert cli(port, "GET", k0) == "\n"
    assert "ERR unknown command 'NOPE'" in cli(port, "NOPE")
    assert cli(port, "-n", "1", "SET", k0, "db1") == "OK\n"
    assert cli(port, "-n", "1", "GET", k0) == "db1\n"
    assert cli(port, "GET", k0) == "\n"


@pytest.mark.parametrize("shards", [1, 2, 4])
def test_pipe_mass_insert(start_server, shards):
    server = start_server("forward", shards)
    count = 2000
    payload = "".join(f"SET pipe:{i} {i}\r\n" for i in range(count)).encode()
    out = cli(server.port, "--pipe", stdin=payload)
    assert "errors: 0, replies: %d" % count in out, out
    assert cli(server.port, "DBSIZE") == f"{count}\n"
    assert {shard_of_key(f"pipe:{i}", shards) for i in range(count)} == set(range(shards))
    scanned = cli(server.port, "--scan", "--pattern", "pipe:1*").split()
    assert sorted(scanned) == sorted(f"pipe:{i}" for i in range(count) if str(i).startswith("1"))
