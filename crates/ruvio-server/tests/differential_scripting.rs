//! Differential corpus of Lua scripts: every line goes to a real `redis-server` 7.0
//! and to Ruvio (forward mode, 1 and 2 shards), in RESP2 and in RESP3; the replies
//! must be identical byte for byte. The corpus covers the conversions both ways
//! (integers, bulk and nil, status and error tables, doubles, nested arrays stopping
//! at the first nil, numbers truncated, booleans, RESP3 maps, sets, doubles and big
//! numbers after `redis.setresp(3)`), the sandbox (globals protection, missing
//! libraries, `math.random`'s fixed sequence), the libraries (`cjson`, `bit`),
//! `redis.call` / `redis.pcall` errors, the error texts of compile and runtime
//! errors, EVAL's argument checks, EVALSHA / NOSCRIPT, SCRIPT LOAD / EXISTS /
//! FLUSH, EVAL_RO's write refusal and `#!lua` shebangs (flags, their errors).
//!
//! Keys are all in one hash tag, so with 2 shards every script runs on the shard
//! that owns them (routed by its declared keys) and touches undeclared keys of the
//! same slot.

mod common;

use common::*;

/// The corpus: one command per line, words split on `|`.
const CORPUS: &[&str] = &[
    "set|{k}s|hello",
    "rpush|{k}l|a|b|c",
    "hset|{k}h|f|v",
    "eval|return 1|0",
    "eval|return 3.99|0",
    "eval|return -3.99|0",
    "eval|return 'str'|0",
    "eval|return true|0",
    "eval|return false|0",
    "eval|return nil|0",
    "eval|return {1,2,nil,3}|0",
    "eval|return {1,{2,'x',{}},true,false,'y'}|0",
    "eval|return {ok='FINE'}|0",
    "eval|return {err='MY bad'}|0",
    "eval|return redis.error_reply('XX bad')|0",
    "eval|return redis.status_reply('OK2')|0",
    "eval|return redis.sha1hex('')|0",
    "eval|return redis.sha1hex('abc')|0",
    "eval|return {KEYS[1], KEYS[2], ARGV[1], ARGV[2]}|2|{k}a|{k}b|x|y",
    "eval|return #ARGV|0|a|b|c",
    "eval|return redis.call('get', KEYS[1])|1|{k}s",
    "eval|return redis.call('get', KEYS[1])|1|{k}missing",
    "eval|return redis.call('lrange', KEYS[1], 0, -1)|1|{k}l",
    "eval|return redis.call('hgetall', KEYS[1])|1|{k}h",
    "eval|return redis.call('incr', '{k}n')|1|{k}n",
    "eval|return redis.call('incrby', KEYS[1], 2.0)|1|{k}n",
    // Numbers passed to redis.call are printed as Redis 7.0 prints them (%.17g).
    "eval|local r = {} for _, v in ipairs({1e20, 1/3, -0.0, 0.1, 1e-7, 2^63, 2^53+1, 1e16, 1e17, -1.5e300, 0/0, 1/0, -1/0, 7}) do redis.call('set', KEYS[1], v) r[#r+1] = redis.call('get', KEYS[1]) end return r|1|{k}num",
    "eval|return redis.call('set', KEYS[1], 'v')|1|{k}x",
    "eval|return type(redis.call('set', KEYS[1], 'v'))|1|{k}x",
    "eval|return redis.call('set', KEYS[1], 'v').ok|1|{k}x",
    "eval|local r = redis.call('lpush', KEYS[1], 'x'); return r|1|{k}s",
    "eval|return redis.pcall('lpush', KEYS[1], 'x')|1|{k}s",
    "eval|return redis.pcall('lpush', KEYS[1], 'x')['err']|1|{k}s",
    "eval|local r = redis.call('nosuch'); return r|0",
    "eval|local r = redis.call(); return r|0",
    "eval|local r = redis.call('get'); return r|0",
    "eval|local r = redis.call('get', {}); return r|0",
    "eval|local r = redis.call('eval', 'return 1', 0); return r|0",
    "eval|return redis.call('lpush', KEYS[1], 'x')|1|{k}s",
    "eval|return redis.call('nosuch')|0",
    "eval|return redis.call()|0",
    "eval|return redis.call('get')|0",
    "eval|return redis.call('get', {})|0",
    "eval|\n\nreturn redis.call('nosuch')|0",
    "eval_ro|return redis.call('set', KEYS[1], '1')|1|{k}a",
    "eval|return {pcall(redis.call, 'nosuch')}|0",
    "eval|#!lua\nerror('x')|0",
    "eval|#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], '1')|1|{k}a",
    "eval|#!lua flags=no-writes,allow-oom\nreturn 1|0",
    "eval|#!lua flags=bad\nreturn 1|0",
    "eval|#!python\nreturn 1|0",
    "eval|#!lua name=x\nreturn 1|0",
    "eval|#!lua|0",
    "eval_ro|#!lua\nreturn 1|0",
    "eval_ro|#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])|1|{k}s",
    "script|load|#!lua flags=bad\nreturn 1",
    "eval|return x|0",
    "eval|x = 1|0",
    "eval|_G.x = 1|0",
    "eval|math.random = nil|0",
    // Ways around the read-only globals; each is followed by a script that would
    // see the change had it lasted.
    "eval|getmetatable('').__index.upper = function() return 'pwned' end; return 1|0",
    "eval|return string.upper('a')|0",
    "eval|local t = getmetatable(''); t.__index = nil; return 2|0",
    "eval|return getmetatable('').__index == string|0",
    "eval|return ('abc'):upper()|0",
    "eval|rawset(string, 'upper', 1); return 1|0",
    "eval|rawset(_G, 'yy', 1); return 1|0",
    "eval|return type(string.upper)|0",
    "eval|local t = setmetatable(string, {}); return t|0",
    "eval|return setmetatable(string, {})|0",
    "eval|return rawset(string, 'upper', 1)|0",
    "eval|return rawset()|0",
    "eval|return rawset({}, 1)|0",
    "eval|return setmetatable({}, 5)|0",
    "eval|local t = setmetatable({}, {__metatable = 1}); return setmetatable(t, {})|0",
    "eval|local t = setmetatable({}, {__index = function() return 7 end}); return t.x|0",
    "eval|return rawset(KEYS, 1, 'x')[1]|0",
    "eval|local t = {}; rawset(t, 'a', 1); return t.a|0",
    "eval|loadstring('string.upper = nil; xx = 5')(); return 1|0",
    "eval|return loadstring('return xx')()|0",
    "eval|return type(loadstring('return os')())|0",
    "eval|return loadstring('return redis.call(\'get\', \'{k}s\')')()|0",
    "eval|local f, e = loadstring(string.dump(function() return 1 end)); return {tostring(f), e}|0",
    "eval|return type(yy)|0",
    "eval|return os|0",
    "eval|return loadfile|0",
    "eval|return print|0",
    "eval|return 'a' .. |0",
    "eval|error('boom')|0",
    "eval|error({err='MY boom'})|0",
    "eval|\n\nerror('line three')|0",
    "eval|local t = nil\nreturn t.x|0",
    "eval|return cjson.encode({1, 2, 'a/b', {x=1}})|0",
    "eval|return cjson.encode({})|0",
    "eval|return cjson.encode(3.5)|0",
    "eval|return cjson.decode('[1,2,\"x\",{\"a\":[true]}]')[4].a[1]|0",
    "eval|return cjson.decode('{\"n\": 12}').n|0",
    "eval|return {bit.band(12, 10), bit.bor(12, 10), bit.bxor(12, 10), bit.bnot(0), bit.lshift(1, 4), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.tohex(255), bit.tohex(-1, -4)}|0",
    "eval|return 1|x",
    "eval|return 1|3|a",
    "eval|return 1|-1",
    "evalsha|0123456789012345678901234567890123456789|0",
    "evalsha|abc|0",
    "script|load|return 'loaded'",
    "evalsha|b534286061d4b9e4026607613b95c06c06015ae8|0",
    "script|exists|b534286061d4b9e4026607613b95c06c06015ae8|0123456789012345678901234567890123456789",
    "script|load|return (",
    "eval_ro|local r = redis.call('set', KEYS[1], '1'); return r|1|{k}a",
    "eval_ro|return redis.call('get', KEYS[1])|1|{k}s",
    "evalsha_ro|b534286061d4b9e4026607613b95c06c06015ae8|0",
    "eval|redis.setresp(3); return redis.call('hgetall', KEYS[1])|1|{k}h",
    "eval|redis.setresp(3); return redis.call('hgetall', KEYS[1])['map']['f']|1|{k}h",
    "eval|redis.setresp(3); return {double=3.5}|0",
    "eval|redis.setresp(3); return {map={a=1}}|0",
    "eval|redis.setresp(3); return {set={a=true}}|0",
    "eval|redis.setresp(3); return {big_number='123456789012345678901234567890'}|0",
    "eval|redis.setresp(3); return true|0",
    "eval|redis.setresp(3); return false|0",
    "eval|redis.setresp(3); return redis.call('get', KEYS[1])|1|{k}missing",
    "eval|redis.setresp(); return 1|0",
    "eval|return redis.replicate_commands()|0",
    "eval|redis.log(redis.LOG_WARNING, 'hi'); return 1|0",
    "eval|redis.log(1); return 1|0",
    "eval|return pcall(function() error({err='X'}) end)|0",
    "eval|return string.format('%d %s', 5, 'x')|0",
    "eval|return table.concat({'a','b'}, '-')|0",
    "script|flush",
    "evalsha|b534286061d4b9e4026607613b95c06c06015ae8|0",
    "script|flush|async",
    "script|flush|bad",
    "get|{k}x",
    "llen|{k}s",
];

#[test]
fn scripts_answer_as_redis() {
    if require_redis_server("scripts_answer_as_redis").is_none() {
        return;
    }
    for shards in [1, 2] {
        for resp3 in [false, true] {
            let (redis, ruvio) = (Server::redis(), Server::forward(shards));
            let label = format!("{shards} shard(s), {}", protocol_name(resp3));
            run_corpus(CORPUS, (&redis, &ruvio), resp3, &label);
        }
    }
}
