"""redis-py's `RedisCluster` against per-shard mode with 2 shards, for what its plain
client does in test_pubsub.py, test_transactions.py and test_scripting.py: `pubsub()`
(subscribe, psubscribe, get_message, run_in_thread, and sharded ssubscribe), a
transaction pipeline and the WATCH retry loop of `RedisCluster.transaction` over
hash-tagged keys (concurrent increments, none lost), and `register_script` with
hash-tagged keys on both shards."""

import time

import pytest
from redis.cluster import RedisCluster

from clients import check_run_in_thread, check_watch_retry_loop, cluster, next_message
from support import shard_of_key

SHARDS = 2
# Hash tags of both shards: {t0} and {t2} hash to shard 1 and 0 of 2 (checked below).
TAGS = ["{t0}", "{t2}"]


def test_tags_cover_both_shards():
    assert sorted(shard_of_key(tag, SHARDS) for tag in TAGS) == [0, 1]


def test_pubsub_on_a_cluster(start_server):
    server = start_server("per-shard", SHARDS)
    rc = cluster(server)
    p = rc.pubsub()
    p.subscribe("news")
    p.psubscribe("n*")
    assert p.get_message(timeout=1)["type"] == "subscribe"
    assert p.get_message(timeout=1)["type"] == "psubscribe"
    # PUBLISH sent to any node reaches the subscriber, wherever it is connected.
    for node in rc.get_primaries():
        rc.publish("news", f"via {node.port}", target_nodes=node)
        assert next_message(p)["data"] == f"via {node.port}".encode()
        m = next_message(p)
        assert (m["type"], m["pattern"], m["data"]) == ("pmessage", b"n*", f"via {node.port}".encode())
    p.close()


def test_sharded_pubsub_on_a_cluster(start_server):
    server = start_server("per-shard", SHARDS)
    rc = cluster(server)
    p = rc.pubsub()
    channels = [f"{tag}orders" for tag in TAGS]
    for channel in channels:
        p.ssubscribe(channel)
    for channel in channels:
        assert p.get_sharded_message(timeout=1)["type"] == "ssubscribe"
    for channel in channels:
        # SPUBLISH goes to the channel's slot owner and counts its subscribers.
        assert rc.spublish(channel, "shipped") == 1
        m = None
        deadline = time.time() + 5
        while m is None and time.time() < deadline:
            m = p.get_sharded_message(ignore_subscribe_messages=True, timeout=0.1)
        assert m is not None and (m["type"], m["channel"], m["data"]) == ("smessage", channel.encode(), b"shipped")
    p.close()


def test_run_in_thread_on_a_cluster(start_server):
    server = start_server("per-shard", SHARDS)
    rc = cluster(server)
    def subscribed():
        return sum(n for _, n in rc.pubsub_numsub("worker", target_nodes=RedisCluster.ALL_NODES)) > 0

    check_run_in_thread(rc, subscribed)


@pytest.mark.parametrize("tag", TAGS)
def test_transaction_pipeline_on_a_cluster(start_server, tag):
    rc = cluster(start_server("per-shard", SHARDS))
    a, b = f"{tag}a", f"{tag}b"
    pipe = rc.pipeline(transaction=True)
    pipe.set(a, 1).incrby(b, 5).get(a).rpush(b, "x").lpush(a, "y")
    results = pipe.execute(raise_on_error=False)
    # With raise_on_error=False the cluster pipeline hands back raw replies.
    assert results[:3] == [b"OK", 5, b"1"]
    assert all("WRONGTYPE" in str(e) for e in results[3:]), results


@pytest.mark.parametrize("tag", TAGS)
def test_watch_retry_loop_on_a_cluster(start_server, tag):
    server = start_server("per-shard", SHARDS)
    counter, other = f"{tag}counter", f"{tag}other"
    check_watch_retry_loop(lambda: cluster(server), counter, other, threads=4, per_thread=50)


MOVE = """
local n = redis.call('decrby', KEYS[1], ARGV[1])
return {n, redis.call('incrby', KEYS[2], ARGV[1])}
"""


def test_register_script_on_a_cluster(start_server):
    rc = cluster(start_server("per-shard", SHARDS))
    move = rc.register_script(MOVE)
    for tag in TAGS:
        assert move(keys=[f"{tag}from", f"{tag}to"], args=[3]) == [-3, 3]
    rc.script_flush()
    for tag in TAGS:
        assert move(keys=[f"{tag}from", f"{tag}to"], args=[4]) == [-7, 7]
