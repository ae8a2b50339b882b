"""redis-py helpers shared by the end-to-end tests: how a test connects (`client`,
`cluster`), waits for a pub/sub message, and the two scenarios the plain client
(forward mode) and `RedisCluster` (per-shard mode) both go through: a
`run_in_thread` subscriber and the WATCH retry loop under concurrent increments.
The servers themselves are support.py's."""

import threading
import time

import redis
from redis.cluster import RedisCluster

# Long enough for a debug build under load.
SOCKET_TIMEOUT_S = 20


def client(server, **kwargs):
    """A plain redis-py client of `server`'s first port."""
    return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=SOCKET_TIMEOUT_S, **kwargs)


def cluster(server, **kwargs):
    """A redis-py cluster client that discovers `server`'s nodes from its first port."""
    return RedisCluster(host="127.0.0.1", port=server.port, socket_timeout=SOCKET_TIMEOUT_S, **kwargs)


def next_message(p, timeout=5.0):
    """The next message (not a confirmation) within `timeout` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no message arrived")


def check_run_in_thread(r, subscribed):
    """A `run_in_thread` subscriber of channel "worker" on client `r` gets ten
    published jobs in order; `subscribed()` tells when the server counts it."""
    received = []
    done = threading.Event()

    def handler(message):
        received.append(message["data"])
        if len(received) == 10:
            done.set()

    p = r.pubsub()
    p.subscribe(**{"worker": handler})
    thread = p.run_in_thread(sleep_time=0.01, daemon=True)
    deadline = time.time() + 5
    while not subscribed():
        assert time.time() < deadline
        time.sleep(0.01)
    for i in range(10):
        r.publish("worker", f"job{i}")
    assert done.wait(5)
    assert received == [f"job{i}".encode() for i in range(10)]
    thread.stop()
    thread.join(5)


def check_watch_retry_loop(connect, counter, other, threads, per_thread):
    """`threads` threads, each on its own client from `connect()`, increment
    `counter` `per_thread` times with the WATCH retry loop of `transaction`
    (and `other` in the same transaction): no increment is lost."""

    def work():
        r = connect()

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
    r = connect()
    assert int(r.get(counter)) == threads * per_thread
    assert int(r.get(other)) == threads * per_thread
