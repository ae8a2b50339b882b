"""FILLGET with redis-py: the README's `cached()` example, run as written, in RESP2
and RESP3 against forward mode with 2 shards: ten threads per key miss it at once
and compute() runs once per key."""

import re
import threading
import time
from pathlib import Path

import pytest
import redis

README = Path(__file__).resolve().parents[2] / "README.md"
THREADS_PER_KEY = 10


def readme_example():
    """The Python block of the README's FILLGET section."""
    text = README.read_text()
    section = text[text.index("## FILLGET"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def example_with_client(client):
    """The example's `cached`, its module-level `r` replaced by `client`."""
    namespace = {}
    exec(readme_example(), namespace)
    namespace["r"] = client
    return namespace["cached"]


@pytest.mark.parametrize("protocol", [2, 3])
def test_readme_example_computes_once(start_server, protocol):
    server = start_server("forward", 2)

    def connect():
        return redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=20,
                           protocol=protocol)

    calls = []

    def compute():
        calls.append(1)
        time.sleep(0.3)
        return b"expensive"

    results = []
    threads = []
    for key in ["page:1", "page:2"]:
        for _ in range(THREADS_PER_KEY):
            cached = example_with_client(connect())
            threads.append(threading.Thread(
                target=lambda cached=cached, key=key: results.append(cached(key, compute))))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [b"expensive"] * (2 * THREADS_PER_KEY)
    assert len(calls) == 2, "one compute per key"
    r = connect()
    assert r.get("page:1") == b"expensive"
    assert 0 < r.ttl("page:2") <= 60
    lease = r.execute_command("FILLGET", "page:9")
    if protocol == 2:
        assert lease[0] == b"token" and lease[2] == b"lease" and lease[3] == 10000
    else:
        assert set(lease) == {b"token", b"lease"}
    assert r.execute_command("FILLGET", "page:9", "WAIT", 0) is None
