"""redis-py transactions against forward mode with 2 shards: `pipeline(transaction=True)`
over keys of both shards, and the WATCH retry loop of `Redis.transaction` under
concurrent increments from several threads (no increment lost)."""

import threading

import redis

from support import key_on_shard


def client(server):
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=20)


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
    threads, per_thread = 4, 100

    def work():
        r = client(server)

        def incr(pipe):
            n = int(pipe.get(counter) or 0)
            pipe.multi()
            pipe.set(counter, n + 1)
            pipe.incr(other)

        for _ in range(per_thread):
            r.transaction(incr, counter)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    r = client(server)
    assert int(r.get(counter)) == threads * per_thread
    assert int(r.get(other)) == threads * per_thread
