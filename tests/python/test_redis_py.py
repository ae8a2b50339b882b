"""redis-py's plain `Redis` client against forward mode with 1, 2 and 4 shards."""

import time

import pytest
import redis

from clients import client
from support import key_on_shard, shard_of_key

SHARD_COUNTS = [1, 2, 4]


def spread_keys(prefix, count):
    keys = [f"{prefix}{i}" for i in range(count)]
    assert {shard_of_key(k, 2) for k in keys} == {0, 1}
    return keys


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_strings(start_server, shards):
    r = client(start_server("forward", shards))
    assert r.ping() is True
    assert r.set("foo", "bar") is True
    assert r.get("foo") == b"bar"
    assert r.get("missing") is None
    assert r.set("foo", "baz", nx=True) is None
    assert r.set("foo", "baz", xx=True) is True
    assert r.set("foo", "qux", get=True) == b"baz"
    assert r.append("foo", "!") == 4
    assert r.strlen("foo") == 4
    assert r.getrange("foo", 0, 1) == b"qu"
    assert r.setrange("foo", 1, "UU") == 4
    assert r.get("foo") == b"qUU!"
    assert r.incr("n") == 1
    assert r.incrby("n", 10) == 11
    assert r.decr("n") == 10
    assert r.decrby("n", 3) == 7
    assert r.incrbyfloat("n", 0.5) == 7.5
    assert r.getset("n", "1") == b"7.5"
    assert r.getdel("n") == b"1"
    assert r.exists("n") == 0
    assert r.setnx("once", 1) is True
    assert r.setnx("once", 2) is False
    assert r.execute_command("SETEX", "ex", 100, "v") is True
    assert 0 < r.ttl("ex") <= 100
    assert r.getex("ex", persist=True) == b"v"
    assert r.ttl("ex") == -1
    assert r.lcs("{t}a", "{t}b") == b""
    r.mset({"{t}a": "ohmytext", "{t}b": "mynewtext"})
    assert r.lcs("{t}a", "{t}b") == b"mytext"
    assert r.msetnx({"{t}a": "x", "{t}c": "y"}) is False
    assert r.object("encoding", "once") == b"int"
    with pytest.raises(redis.ResponseError, match="value is not an integer or out of range"):
        r.incr("foo")
    with pytest.raises(redis.ResponseError, match="wrong number of arguments for 'get' command"):
        r.execute_command("GET")
    with pytest.raises(redis.ResponseError, match="unknown command 'NOPE'"):
        r.execute_command("NOPE", "x")


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_multi_key_and_keyspace(start_server, shards):
    r = client(start_server("forward", shards), decode_responses=True)
    keys = spread_keys("k", 30)
    assert r.mset({k: k.upper() for k in keys}) is True
    assert r.mget(keys + ["nope"]) == [k.upper() for k in keys] + [None]
    assert r.exists(*keys, "nope", keys[0]) == 31
    assert r.touch(*keys[:5]) == 5
    assert r.dbsize() == 30
    assert sorted(r.keys("*")) == sorted(keys)
    assert sorted(r.scan_iter(match="k1*", count=5)) == sorted(k for k in keys if k.startswith("k1"))
    assert r.type(keys[0]) == "string"
    assert r.type("nope") == "none"
    assert r.randomkey() in keys
    assert r.delete(*keys[:10], "nope") == 10
    assert r.unlink(*keys[10:20]) == 10
    assert r.dbsize() == 10
    r.set("{t}src", "v")
    assert r.rename("{t}src", "{t}dst") is True
    assert r.copy("{t}dst", "{t}copy") is True
    assert r.renamenx("{t}copy", "{t}dst") is False
    assert r.flushdb() is True
    assert r.dbsize() == 0


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_expiry(start_server, shards):
    r = client(start_server("forward", shards))
    keys = spread_keys("e", 10)
    for k in keys:
        r.set(k, "v", px=150)
    r.set("stay", "v")
    assert r.expire("stay", 100, nx=True) is True
    assert r.expire("stay", 200, nx=True) is False
    assert r.expire("stay", 50, lt=True) is True
    assert 0 < r.ttl("stay") <= 50
    assert r.persist("stay") is True
    assert r.ttl("stay") == -1
    assert r.ttl("nope") == -2
    time.sleep(0.4)
    assert r.mget(keys) == [None] * len(keys)
    assert r.exists(*keys) == 0
    assert r.dbsize() == 1


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_pipeline_and_select(start_server, shards):
    server = start_server("forward", shards)
    r = client(server)
    keys = spread_keys("p", 40)
    pipe = r.pipeline(transaction=False)
    for i, k in enumerate(keys):
        pipe.set(k, i)
        pipe.incr(k)
        pipe.get(k)
    results = pipe.execute()
    assert results == [x for i in range(len(keys)) for x in (True, i + 1, str(i + 1).encode())]
    db1 = client(server, db=1)
    assert db1.get(keys[0]) is None
    db1.set(keys[0], "one")
    assert db1.dbsize() == 1
    assert r.get(keys[0]) == b"1"
    assert r.move(keys[1], 1) is True
    assert db1.get(keys[1]) == b"2"
    assert r.dbsize() == len(keys) - 1


@pytest.mark.parametrize("shards", SHARD_COUNTS)
def test_resp3(start_server, shards):
    r = client(start_server("forward", shards), protocol=3, decode_responses=True)
    assert r.ping() is True
    k0, k1 = key_on_shard("r", 0, 2), key_on_shard("r", 1, 2)
    assert r.set(k0, "a") is True
    assert r.mget(k0, k1) == ["a", None]
    assert r.get(k1) is None
    assert r.config_get("appendonly") == {"appendonly": "no"}
    hello = r.execute_command("HELLO", "3")
    assert hello["proto"] == 3
    assert hello["role"] == "master"
