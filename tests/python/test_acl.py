"""redis-py as a restricted ACL user, forward mode with 2 shards: the user made
with redis-py's own ACL helpers, a client connecting with username/password,
its allowed and refused commands (keys on both shards, channels, a refused
command in a pipeline and in a transaction), Pub/Sub on an allowed channel,
ACL LOG seen through redis-py's parser, and DELUSER closing the connection."""

import pytest
import redis

from clients import client, next_message
from support import key_on_shard


def test_redis_py_as_a_restricted_user(start_server):
    server = start_server("forward", 2)
    admin = client(server)
    assert admin.acl_setuser(
        "app",
        enabled=True,
        passwords=["+apppw"],
        keys=["app:*"],
        channels=["news.*"],
        commands=["+@read", "+@write", "-@dangerous", "+publish", "+subscribe", "+ping", "+acl|whoami", "+@transaction"],
    )
    info = admin.acl_getuser("app")
    assert info["enabled"] and info["keys"] == ["~app:*"] and info["channels"] == ["&news.*"]
    assert "app" in admin.acl_users()

    app = client(server, username="app", password="apppw")
    assert app.acl_whoami() == "app"
    a, b = key_on_shard("app:a", 0, 2), key_on_shard("app:b", 1, 2)
    assert app.set(a, 1) and app.set(b, 2)
    assert app.mget(a, b) == [b"1", b"2"]
    with pytest.raises(redis.exceptions.NoPermissionError, match="keys used as arguments"):
        app.get("other")
    with pytest.raises(redis.exceptions.NoPermissionError, match="'flushall' command"):
        app.flushall()
    with pytest.raises(redis.exceptions.NoPermissionError, match="channels used as arguments"):
        app.publish("private", "x")

    pipe = app.pipeline(transaction=False)
    pipe.get(a).get("other").get(b)
    results = pipe.execute(raise_on_error=False)
    assert results[0] == b"1" and results[2] == b"2"
    assert isinstance(results[1], redis.exceptions.NoPermissionError)

    tx = app.pipeline(transaction=True)
    tx.incr(a).keys("*")
    with pytest.raises(redis.exceptions.ResponseError):
        tx.execute()
    assert app.get(a) == b"1"

    listener = client(server, username="app", password="apppw").pubsub()
    listener.subscribe("news.today")
    assert listener.get_message(timeout=5.0)["type"] == "subscribe"
    assert app.publish("news.today", "hello") == 1
    assert next_message(listener)["data"] == b"hello"

    entries = admin.acl_log()
    reasons = {(e["reason"], e["object"]) for e in entries}
    assert ("key", "other") in reasons and ("command", "flushall") in reasons
    assert ("channel", "private") in reasons and ("command", "keys") in reasons
    assert all(e["username"] == "app" for e in entries)

    with pytest.raises(redis.exceptions.AuthenticationError):
        client(server, username="app", password="wrong").ping()

    conn = app.connection_pool.get_connection("PING")
    assert admin.acl_deluser("app") == 1
    # The deleted user's connection is closed by the server.
    with pytest.raises(redis.exceptions.ConnectionError):
        conn.send_command("PING")
        conn.read_response()
    # And the user can no longer log in.
    with pytest.raises(redis.exceptions.AuthenticationError):
        client(server, username="app", password="apppw").ping()
