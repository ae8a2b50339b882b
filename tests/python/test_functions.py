"""redis-py's function commands: `Redis` against forward mode with 2 shards (a
library loaded once is called on keys of both shards, RESP2 and RESP3), and
`RedisCluster` against per-shard mode, which sends FUNCTION LOAD / LIST / DELETE to
every primary, as with Redis Cluster."""

import pytest
import redis
from redis.cluster import RedisCluster

from support import key_on_shard

SHARDS = 2

LIBRARY = """#!lua name=counters
redis.register_function('bump', function(keys, args)
  return {keys[1], redis.call('incrby', keys[1], args[1])}
end)
redis.register_function{function_name='peek', flags={'no-writes'},
  callback=function(keys) return redis.call('get', keys[1]) end}
"""


def fields(entry):
    """A FUNCTION LIST entry as a dict (RESP3 maps arrive as dicts, RESP2 as flat lists)."""
    return entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2]))


@pytest.mark.parametrize("protocol", [2, 3])
def test_forward_mode_functions_run_where_the_keys_live(start_server, protocol):
    server = start_server("forward", SHARDS)
    r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=20,
                    protocol=protocol, decode_responses=True)
    assert r.function_load(LIBRARY) == "counters"
    keys = [key_on_shard(f"k{i}", i % SHARDS, SHARDS) for i in range(8)]
    for key in keys:
        assert r.fcall("bump", 1, key, 2) == [key, 2]
        assert r.fcall_ro("peek", 1, key) == "2"
    with pytest.raises(redis.ResponseError, match="write flag"):
        r.fcall_ro("bump", 1, keys[0], 1)
    [library] = [fields(lib) for lib in r.function_list()]
    assert library["library_name"] == "counters"
    assert sorted(fields(f)["name"] for f in library["functions"]) == ["bump", "peek"]
    r.function_delete("counters")
    for key in keys:
        with pytest.raises(redis.ResponseError, match="Function not found"):
            r.fcall("bump", 1, key, 1)


def test_cluster_client_loads_on_every_node(start_server):
    server = start_server("per-shard", SHARDS)
    rc = RedisCluster(host="127.0.0.1", port=server.port, socket_timeout=20,
                      decode_responses=True)
    rc.function_load(LIBRARY)
    for shard in range(SHARDS):
        key = key_on_shard("c", shard, SHARDS)
        assert rc.fcall("bump", 1, key, 5) == [key, 5]
        assert rc.fcall_ro("peek", 1, key) == "5"
    # Each node answers for itself: plain clients see the library on both.
    for port in server.ports:
        node = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
        assert [fields(lib)["library_name"] for lib in node.function_list()] == ["counters"]
    rc.function_flush()
    for port in server.ports:
        node = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
        assert node.function_list() == []
