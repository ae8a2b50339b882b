"""redis-py's `register_script` against forward mode with 2 shards, RESP2 and RESP3:
the first call falls back from EVALSHA (NOSCRIPT) to EVAL, later calls hit the cache,
after SCRIPT FLUSH it loads again; keys on both shards; a script naming keys it does
not declare, on both shards, from several threads."""

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


TRANSFER = """
local from = tonumber(redis.call('get', ARGV[1]) or '0')
if from < tonumber(ARGV[3]) then return redis.error_reply('short of funds') end
redis.call('decrby', ARGV[1], ARGV[3])
redis.call('incrby', ARGV[2], ARGV[3])
return {redis.call('get', ARGV[1]), redis.call('get', ARGV[2])}
"""


@pytest.mark.parametrize("protocol", [2, 3])
def test_register_script_on_keys_it_does_not_declare(start_server, protocol):
    """A script naming keys only in ARGV (one Redis allows it): in forward mode the
    keys live on both shards and the script borrows them (docs/scripting.md);
    threads moving units between accounts never lose one."""
    import threading

    server = start_server("forward", 2)
    r = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=20,
                    protocol=protocol, decode_responses=True)
    accounts = [f"acct:{i}" for i in range(6)]
    r.mset({a: 100 for a in accounts})
    transfer = r.register_script(TRANSFER)
    assert transfer(args=[accounts[0], accounts[1], 10]) == ["90", "110"]
    with pytest.raises(redis.ResponseError, match="short of funds"):
        transfer(args=[accounts[0], accounts[1], 1000])

    def mover(n):
        c = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=20,
                        protocol=protocol, decode_responses=True)
        script = c.register_script(TRANSFER)
        for i in range(100):
            a, b = accounts[(i + n) % 6], accounts[(i * 5 + n + 1) % 6]
            if a != b:
                try:
                    script(args=[a, b, 1])
                except redis.ResponseError as e:
                    assert "short of funds" in str(e)

    threads = [threading.Thread(target=mover, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(int(v) for v in r.mget(accounts)) == 600
