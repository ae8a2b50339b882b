"""redis-py's own client-side cache (RESP3, `cache_config=`, which redis-py turns
on only for a server whose HELLO reports 7.4 or later) against Ruvio with 2
shards: a read is served from the local cache, and a write from another client
makes the next read go to the server and see the new value, for keys on either
shard; in forward mode through `Redis` and in per-shard mode through
`RedisCluster`."""

import time

import pytest
from redis.cache import CacheConfig

import support
from clients import client, cluster

SHARDS = 2


def get_calls(server):
    """GET calls the server counted (INFO commandstats, every shard's in forward mode)."""
    total = 0
    for port in ([server.port] if server.mode == "forward" else server.ports):
        info = support.command(port, "INFO", "commandstats").decode()
        for line in info.splitlines():
            if line.startswith("cmdstat_get:"):
                total += int(line.split("calls=")[1].split(",")[0])
    return total


def check_cache(server, cached, writer):
    keys = [support.key_on_shard("csc:", shard, SHARDS) for shard in range(SHARDS)]
    for key in keys:
        writer.set(key, "v1")
    for key in keys:
        assert cached.get(key) == b"v1"
    before = get_calls(server)
    for _ in range(3):
        for key in keys:
            assert cached.get(key) == b"v1"
    # Served from the local cache: the server counted no GET.
    assert get_calls(server) == before
    for key in keys:
        writer.set(key, "v2")
    # The invalidation travels from the key's shard to the reader's connection.
    time.sleep(0.2)
    for key in keys:
        assert cached.get(key) == b"v2"
    assert get_calls(server) == before + len(keys)
    # Cached again until the next write.
    for key in keys:
        assert cached.get(key) == b"v2"
    assert get_calls(server) == before + len(keys)


def test_redis_py_cache_forward(start_server):
    if support.target() != "ruvio":
        pytest.skip("the cache needs a server reporting 7.4 or later")
    server = start_server("forward", SHARDS)
    cached = client(server, protocol=3, cache_config=CacheConfig())
    assert cached.get_cache() is not None
    check_cache(server, cached, client(server))


def test_redis_py_cache_cluster(start_server):
    if support.target() != "ruvio":
        pytest.skip("the cache needs a server reporting 7.4 or later")
    server = start_server("per-shard", SHARDS)
    cached = cluster(server, protocol=3, cache_config=CacheConfig())
    check_cache(server, cached, cluster(server))
