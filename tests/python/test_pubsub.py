"""redis-py's `pubsub()` against forward mode with 1 and 2 shards: get_message,
psubscribe, listen, run_in_thread, and RESP3 push messages."""

import time

import pytest

from clients import check_run_in_thread, client, next_message

SHARD_COUNTS = [1, 2]


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_get_message_and_patterns(start_server, shards):
    server = start_server("forward", shards)
    r = client(server)
    p = r.pubsub()
    p.subscribe("news")
    p.psubscribe("n*")
    assert p.get_message(timeout=1)["type"] == "subscribe"
    assert p.get_message(timeout=1)["type"] == "psubscribe"
    assert r.publish("news", "hello") == 2
    assert next_message(p) == {"type": "message", "pattern": None, "channel": b"news", "data": b"hello"}
    assert next_message(p) == {"type": "pmessage", "pattern": b"n*", "channel": b"news", "data": b"hello"}
    assert r.pubsub_numsub("news") == [(b"news", 1)]
    assert r.pubsub_numpat() == 1
    assert r.pubsub_channels() == [b"news"]
    p.unsubscribe("news")
    p.punsubscribe("n*")
    deadline = time.time() + 5
    while r.publish("news", "gone") != 0:
        assert time.time() < deadline
        time.sleep(0.02)
    p.close()


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_listen_many_subscribers(start_server, shards):
    server = start_server("forward", shards)
    r = client(server)
    subscribers = [client(server).pubsub(ignore_subscribe_messages=True) for _ in range(8)]
    for p in subscribers:
        p.subscribe("fan")
        p.get_message(timeout=1)
    for i in range(20):
        assert r.publish("fan", str(i)) == 8
    for p in subscribers:
        stream = p.listen()
        got = [next(stream)["data"] for _ in range(20)]
        assert got == [str(i).encode() for i in range(20)]
        p.close()


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_run_in_thread(start_server, shards):
    server = start_server("forward", shards)
    r = client(server)
    check_run_in_thread(r, lambda: r.pubsub_numsub("worker") == [(b"worker", 1)])


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_resp3_pushes(start_server, shards):
    server = start_server("forward", shards)
    r = client(server, protocol=3)
    p = r.pubsub()
    p.subscribe("r3")
    assert p.get_message(timeout=1)["type"] == "subscribe"
    assert client(server).publish("r3", "pushed") == 1
    assert next_message(p)["data"] == b"pushed"
    p.close()
