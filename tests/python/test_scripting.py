"""redis-py's `register_script` against forward mode with 2 shards, RESP2 and RESP3:
the first call falls back from EVALSHA (NOSCRIPT) to EVAL, later calls hit the cache,
after SCRIPT FLUSH it loads again; keys on both shards."""

import pytest
import redis

INCR_BY = """
local v = redis.call('incrby', KEYS[1], ARGV[1])
return {KEYS[1], v}
"""


@pytest.mark.parametrize("protocol", [2, 3])
def test_register_script_runs_where_the_keys_live(start_server, protocol):
    server = start_server("forward", 2)
    r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=20,
                    protocol=protocol, decode_responses=True)
    incr_by = r.register_script(INCR_BY)
    keys = [f"k{i}" for i in range(8)]
    for key in keys:
        assert incr_by(keys=[key], args=[2]) == [key, 2]
    assert r.script_exists(incr_by.sha) == [True]
    r.script_flush()
    assert r.script_exists(incr_by.sha) == [False]
    for key in keys:
        assert incr_by(keys=[key], args=[3]) == [key, 5]
    assert [r.get(k) for k in keys] == ["5"] * len(keys)
