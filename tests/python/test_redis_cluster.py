"""redis-py's `RedisCluster` against per-shard mode with 2 shards."""

import pytest
import redis

from clients import cluster
from support import command, key_on_shard, key_slot, shard_of_key, slot_range

SHARDS = 2


def test_topology(start_server):
    server = start_server("per-shard", SHARDS)
    rc = cluster(server)
    nodes = rc.get_nodes()
    assert sorted(n.port for n in nodes) == server.ports
    assert all(n.server_type == "primary" for n in nodes)
    for i, port in enumerate(server.ports):
        lo, hi = slot_range(i, SHARDS)
        assert rc.get_node_from_key(key_on_shard("t", i, SHARDS)).port == port
        assert rc.nodes_manager.get_node_from_slot(lo).port == port
        assert rc.nodes_manager.get_node_from_slot(hi - 1).port == port
    assert rc.cluster_keyslot("foo") == 12182
    assert rc.cluster_info()["cluster_state"] == "ok"


def test_keys_on_both_shards(start_server):
    server = start_server("per-shard", SHARDS)
    rc = cluster(server, decode_responses=True)
    keys = [f"key:{i}" for i in range(200)]
    for i, k in enumerate(keys):
        assert rc.set(k, i) is True
    for i, k in enumerate(keys):
        assert rc.get(k) == str(i)
    assert rc.incr(keys[0]) == 1
    for shard, port in enumerate(server.ports):
        expected = sum(1 for k in keys if shard_of_key(k, SHARDS) == shard)
        assert expected > 50
        assert command(port, "DBSIZE") == b":%d\r\n" % expected
    # Keys of different slots: the client splits the read.
    assert rc.mget_nonatomic(keys[:20] + ["nope"]) == ["1"] + [str(i) for i in range(1, 20)] + [None]
    # Hash tags keep multi-key commands on one node.
    assert rc.mset({"{user}a": "1", "{user}b": "2"}) is True
    assert rc.mget("{user}a", "{user}b") == ["1", "2"]
    assert rc.delete("{user}a", "{user}b") == 2
    # The cluster pipeline groups commands by node.
    pipe = rc.pipeline()
    for k in keys[:50]:
        pipe.get(k)
    assert pipe.execute() == ["1"] + [str(i) for i in range(1, 50)]


def test_moved_and_crossslot_on_the_wire(start_server):
    server = start_server("per-shard", SHARDS)
    foo_owner = shard_of_key("foo", SHARDS)
    other = 1 - foo_owner
    reply = command(server.ports[other], "GET", "foo")
    assert reply == b"-MOVED %d 127.0.0.1:%d\r\n" % (key_slot("foo"), server.ports[foo_owner])
    reply = command(server.ports[0], "MGET", "foo", "bar")
    assert reply == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    # A plain client connected to one shard sees the error as a ResponseError.
    plain = redis.Redis(host="127.0.0.1", port=server.ports[other], socket_timeout=20)
    with pytest.raises(redis.exceptions.MovedError) as moved:
        plain.get("foo")
    assert str(moved.value) == "%d 127.0.0.1:%d" % (key_slot("foo"), server.ports[foo_owner])
