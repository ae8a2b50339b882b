"""redis-py transactions against forward mode with 2 shards: `pipeline(transaction=True)`
over keys of both shards, and the WATCH retry loop of `Redis.transaction` under
concurrent increments from several threads (no increment lost)."""

import redis

from clients import check_watch_retry_loop, client
from support import key_on_shard


def test_pipeline_transaction_across_shards(start_server):
    r = client(start_server("forward", 2))
    a, b = key_on_shard("pyt-a", 0, 2), key_on_shard("pyt-b", 1, 2)
    pipe = r.pipeline(transaction=True)
    pipe.set(a, 1).incrby(b, 5).get(a).mget(a, b).lpush(a, "x")
    results = pipe.execute(raise_on_error=False)
    assert results[:4] == [True, 5, b"1", [b"1", b"5"]]
    assert isinstance(results[4], redis.ResponseError)
    assert "WRONGTYPE" in str(results[4])
    # A refused command aborts the whole transaction.
    pipe = r.pipeline(transaction=True)
    pipe.set(a, 2).execute_command("NOSUCHCMD")
    try:
        pipe.execute()
        raise AssertionError("the queueing error expected")
    except redis.ResponseError as e:
        # redis-py reports the refused command of an aborted EXEC.
        assert "Command # 2 (NOSUCHCMD) of pipeline caused error: unknown command" in str(e)
    assert r.get(a) == b"1"


def test_watch_retry_loop_under_concurrent_increments(start_server):
    server = start_server("forward", 2)
    counter = key_on_shard("pyt-counter", 1, 2)
    other = key_on_shard("pyt-other", 0, 2)
    check_watch_retry_loop(lambda: client(server), counter, other, threads=4, per_thread=100)
