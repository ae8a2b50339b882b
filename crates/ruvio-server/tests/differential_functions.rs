//! Differential corpus of Redis 7 functions: every line goes to a real
//! `redis-server` 7.0 and to Ruvio (forward mode, 1 and 2 shards), in RESP2 and in
//! RESP3; the replies must be identical byte for byte. It covers every FUNCTION
//! subcommand (LOAD [REPLACE], LIST with LIBRARYNAME and WITHCODE, STATS, DUMP,
//! RESTORE with each policy, DELETE, FLUSH, KILL, HELP) and their argument errors,
//! the library metadata line and `redis.register_function`'s errors, what a library
//! sees while it loads, FCALL / FCALL_RO's argument checks, the no-writes flag, the
//! conversions of a function's result and the error texts of a failing function;
//! then FUNCTION RESTORE of crafted payloads (wrong type, truncated, duplicate
//! library, function clash, bad code, empty) under each policy.
//!
//! Libraries listed hold one function each: Redis lists a library's functions in
//! its hash table's order, which changes from run to run. Keys are in one hash tag.
//! Where Redis 7.0 and 7.2 differ, Ruvio answers as 7.2 and the corpus leaves the
//! case out: an invalid function name (7.0 reuses the library-name text).

mod common;

use common::*;

/// A library of one writing function.
const LIB1: &str = "#!lua name=lib1\nredis.register_function('f1', function(keys, args) return redis.call('set', keys[1], args[1]) end)";

/// A library of one read-only function with a description.
const LIB2: &str = "#!lua name=lib2\nredis.register_function{function_name='rd', callback=function(keys, args) return redis.call('get', keys[1]) end, flags={'no-writes', 'ALLOW-STALE'}, description='reads a key'}";

/// Functions exercising conversions and errors (never listed).
const LIB3: &str = "#!lua name=lib3
local function boom(keys, args)
  error('boom')
end
redis.register_function('boom', boom)
redis.register_function('callerr', function(keys, args) return redis.call('incr', keys[1]) end)
redis.register_function('tailerr', function(keys, args)
  return redis.call('nosuchcmd') end)
redis.register_function('gl', function(keys, args) return KEYS end)
redis.register_function('echo', function(keys, args) return {keys, args, #keys, #args} end)
redis.register_function{function_name='nw', callback=function(keys, args) return redis.call('set', keys[1], 1) end, flags={'no-writes'}}
redis.register_function('setg', function() x = 1 end)
redis.register_function('errt', function() return redis.error_reply('MY err') end)
redis.register_function('status', function() return redis.status_reply('FINE') end)
redis.register_function('types', function() return {1, 2.5, 'x', true, false, {ok='S'}, {'n', {}}} end)
redis.register_function('resp3', function(keys) redis.setresp(3); return redis.call('hgetall', keys[1]) end)
redis.register_function('regat', function() redis.register_function('zz', function() end) end)
redis.register_function('pc', function(keys) return redis.pcall('incr', keys[1]) end)
redis.register_function('up', function(keys, args) return string.upper(args[1]) .. cjson.encode({1}) end)";

/// The corpus: one command per line, words split on `|`.
fn corpus() -> Vec<String> {
    let lines = [
        "set|{k}s|hello",
        "hset|{k}h|f|v",
        "function|list",
        "function|stats",
        "function|dump",
        "fcall|f1|1|{k}a|v",
        "function|load|LIB1",
        "function|load|LIB1",
        "function|load|replace|LIB1",
        "function|load|REPLACE|replace|LIB1",
        "function|load|foo|LIB1",
        "function|load",
        "function|load|replace",
        "function|list",
        "function|list|withcode",
        "function|list|WITHCODE|libraryname|LIB*",
        "function|list|libraryname|nomatch",
        "function|list|libraryname",
        "function|list|foo",
        "function|list|withcode|withcode",
        "function|list|libraryname|a|libraryname|b",
        "function|stats",
        "function|dump",
        "fcall|f1|1|{k}a|v1",
        "get|{k}a",
        "FCALL|F1|1|{k}a|v2",
        "get|{k}a",
        "fcall_ro|f1|1|{k}a|v3",
        "fcall|nosuch|0",
        "fcall|nosuch|abc",
        "fcall|f1|abc",
        "fcall|f1|-1",
        "fcall|f1|3|a",
        "fcall|f1",
        "function|load|LIB2",
        "function|list|libraryname|lib2",
        "function|list|libraryname|lIb2|withcode",
        "fcall_ro|rd|1|{k}a",
        "fcall|rd|1|{k}a",
        "function|delete|lib1",
        "function|delete|lib1",
        "function|delete",
        "function|delete|lib2|x",
        "function|list",
        "function|dump",
        "function|load|LIB3",
        "function|stats",
        "fcall|boom|0",
        "fcall|callerr|1|{k}s",
        "fcall|tailerr|0",
        "fcall|gl|0",
        "fcall|echo|2|{k}a|{k}b|c|d",
        "fcall|nw|1|{k}n",
        "fcall_ro|nw|1|{k}n",
        "fcall|setg|0",
        "fcall|errt|0",
        "fcall|status|0",
        "fcall|types|0",
        "fcall|resp3|1|{k}h",
        "fcall|regat|0",
        "fcall|pc|1|{k}s",
        "fcall|up|0|abc",
        "function|flush",
        "function|list",
        "function|stats",
        "fcall|boom|0",
        // The metadata line and the load-time environment.
        "function|load|return 1",
        "function|load|#!lua name=a",
        "function|load|#!lua\nreturn 1",
        "function|load|#!luax name=a\nreturn 1",
        "function|load|#!LUA name=a b=c\nreturn 1",
        "function|load|#!lua name=a name=b\nreturn 1",
        "function|load|#!lua name=a-b\nreturn 1",
        "function|load|#!lua name=\nreturn 1",
        "function|load|#!lua name=a\nreturn 1",
        "function|load|#!lua name=a\nreturn 1 +",
        "function|load|#!lua name=a\nredis.call('ping')",
        "function|load|#!lua name=a\nredis.setresp(3)",
        "function|load|#!lua name=a\nmath.random()",
        "function|load|#!lua name=a\nerror('x')",
        "function|load|#!lua name=a\nlocal t = nil\nt.x = 1",
        "function|load|#!lua name=a\nfoo = 1",
        "function|load|#!lua name=a\nredis.x = 1",
        "function|load|#!lua name=a\nredis.log(1)",
        "function|load|#!lua name=a\nlocal x = KEYS",
        "function|load|#!lua name=a\nredis.register_function()",
        "function|load|#!lua name=a\nredis.register_function('x')",
        "function|load|#!lua name=a\nredis.register_function('x', function() end, 3)",
        "function|load|#!lua name=a\nredis.register_function({}, function() end)",
        "function|load|#!lua name=a\nredis.register_function('x', 2)",
        "function|load|#!lua name=a\nredis.register_function('x', function() end)\nredis.register_function('x', function() end)",
        "function|load|#!lua name=a\nredis.register_function{function_name='x', callback=function() end, flags={'bad'}}",
        "function|load|#!lua name=a\nredis.register_function{function_name='x', callback=function() end, flags={1}}",
        "function|load|#!lua name=a\nredis.register_function{function_name='x', callback=function() end, flags='no-writes'}",
        "function|load|#!lua name=a\nredis.register_function{function_name='x', callback=function() end, foo=1}",
        "function|load|#!lua name=a\nredis.register_function{[true]=1}",
        "function|load|#!lua name=a\nredis.register_function{callback=function() end}",
        "function|load|#!lua name=a\nredis.register_function{function_name='x'}",
        "function|load|#!lua name=a\nredis.register_function{function_name={}, callback=function() end}",
        "function|load|#!lua name=a\nredis.register_function{function_name='x', callback=1}",
        "function|load|#!lua name=a\nredis.register_function{function_name='x', callback=function() end, description={}}",
        "function|load|#!lua name=a\nredis.register_function(1)",
        "function|load|#!lua name=num\nredis.register_function{function_name=7, callback=function() return 7 end, description=5}",
        "function|list|libraryname|num",
        "fcall|7|0",
        "function|load|#!lua name=Num\nredis.register_function('x7', function() return 1 end)\nredis.register_function('X7', function() return 2 end)",
        "function|load|#!lua name=other\nredis.register_function('7', function() end)",
        "function|load|#!lua name=caught\nlocal reg = redis.register_function\nredis.register_function('late', function() reg('zz', function() end) end)",
        "fcall|late|0",
        // FLUSH, KILL, STATS, HELP and unknown subcommands.
        "function|flush|async",
        "function|flush|SYNC",
        "function|flush|foo",
        "function|flush|sync|sync",
        "function|stats|extra",
        "function|kill",
        "function|kill|x",
        "function|help",
        "function|help|x",
        "function|nosuch",
        "function",
        // RESTORE's checks (payloads proper are in tests/functions.rs).
        "function|restore|abc",
        "function|restore",
        "function|restore|abc|bogus",
        "function|restore|abc|flush|x",
        "function|restore|",
        "function|dump",
    ];
    lines
        .iter()
        .map(|l| {
            l.replace("LIB1", LIB1)
                .replace("LIB2", LIB2)
                .replace("LIB3", LIB3)
        })
        .collect()
}

#[test]
fn functions_answer_as_redis() {
    if require_redis_server("functions_answer_as_redis").is_none() {
        return;
    }
    for shards in [1, 2] {
        for resp3 in [false, true] {
            let (redis, ruvio) = (Server::redis(), Server::forward(shards));
            let label = format!("{shards} shard(s), {}", protocol_name(resp3));
            run_corpus(&corpus(), (&redis, &ruvio), resp3, &label);
        }
    }
}

/// An `RDB_OPCODE_FUNCTION2` record of `code` (under 64 bytes).
fn record(code: &str) -> Vec<u8> {
    let mut out = vec![0xf5, code.len() as u8];
    out.extend_from_slice(code.as_bytes());
    out
}

/// FUNCTION RESTORE of crafted payloads (each sealed with a good checksum), under
/// each policy: what Redis answers and what it leaves loaded.
#[test]
fn restore_payloads_answer_as_redis() {
    if require_redis_server("restore_payloads_answer_as_redis").is_none() {
        return;
    }
    let x = "#!lua name=x\nredis.register_function('a', function() end)";
    let y = "#!lua name=y\nredis.register_function('a', function() end)";
    let z = "#!lua name=z\nredis.register_function('b', function() end)";
    let seal = |body: Vec<u8>| ruvio_engine::rdb::seal(body, 10);
    let payloads = [
        seal(vec![0x00, 0x01, b'a']),
        seal(vec![0xf5, 0x20, b'a', b'b', b'c']),
        seal([record(x), record(x)].concat()),
        seal([record(x), record(y)].concat()),
        seal(record("return 1")),
        seal(record(x)),
        seal([record(y), record(z)].concat()),
        seal(Vec::new()),
    ];
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    let (mut reference, mut target) = (redis.raw(), ruvio.raw());
    for policy in [None, Some("APPEND"), Some("replace"), Some("FLUSH")] {
        for payload in &payloads {
            let mut command = vec![&b"function"[..], b"restore", payload];
            command.extend(policy.map(str::as_bytes));
            let want = reference.cmd(&command);
            let got = target.cmd(&command);
            assert_eq!(show(&got), show(&want), "{policy:?} {}", show(payload));
            let list = ["function", "list", "libraryname", "x"];
            assert_eq!(show(&target.cmd(&list)), show(&reference.cmd(&list)));
            let stats = ["function", "stats"];
            assert_eq!(show(&target.cmd(&stats)), show(&reference.cmd(&stats)));
        }
    }
}
