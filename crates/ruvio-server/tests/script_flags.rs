//! Redis 7's script flags (`#!lua flags=...`) where they act, against real
//! redis-servers: `no-cluster` and `allow-cross-slot-keys` in per-shard mode
//! against a Redis Cluster of the same shape (each shard a node owning the same
//! slots), `allow-oom` and a shebang without it under `maxmemory`, against a
//! standalone redis-server; `allow-stale` is accepted here (where it acts, on a
//! stale replica: tests/replica_of_redis.rs). Raw replies compared, RESP2 and
//! RESP3.

mod common;

use common::*;

/// Two keys of shard/node 0 in different slots, and one of node 1.
fn keys() -> (String, String, String) {
    let a = key_on_shard("a", 0, 2);
    let mut b = key_on_shard("b", 0, 2);
    let mut n = 0;
    while key_slot(b.as_bytes()) == key_slot(a.as_bytes()) {
        n += 1;
        b = key_on_shard(&format!("b{n}"), 0, 2);
    }
    (a, b, key_on_shard("c", 1, 2))
}

#[test]
fn cluster_flags_answer_as_redis_cluster() {
    if require_redis_server("cluster_flags_answer_as_redis_cluster").is_none() {
        return;
    }
    let redis = Server::redis_cluster(2);
    let ruvio = Server::per_shard(2);
    let (a, b, c) = keys();
    let scripts: Vec<(String, Vec<String>)> = vec![
        ("#!lua flags=no-cluster\nreturn 1".into(), vec![]),
        ("#!lua flags=no-cluster,no-writes\nreturn 1".into(), vec![a.clone()]),
        ("#!lua\nreturn redis.call('get', KEYS[1])".into(), vec![a.clone()]),
        // Undeclared keys of this node in another slot: refused without the flag.
        (format!("#!lua\nredis.call('set', '{a}', 1) return redis.call('set', '{b}', 2)"), vec![]),
        (format!("#!lua flags=allow-cross-slot-keys\nredis.call('set', '{a}', 1) return redis.call('set', '{b}', 2)"), vec![]),
        (format!("#!lua flags=allow-cross-slot-keys\nreturn redis.call('get', '{b}')"), vec![a.clone()]),
        (format!("#!lua\nreturn redis.call('get', '{b}')"), vec![a.clone()]),
        // A key of the other node: refused with or without the flag.
        (format!("#!lua flags=allow-cross-slot-keys\nreturn redis.call('get', '{c}')"), vec![a.clone()]),
        // Legacy scripts (no shebang) keep Redis 7.0's lenient cross-slot access.
        (format!("redis.call('set', '{a}', 1) return redis.call('set', '{b}', 2)"), vec![]),
        ("#!lua flags=allow-stale\nreturn 1".into(), vec![]),
    ];
    for resp3 in [false, true] {
        let mut reference = RawConn::connect(redis.shard_port(0));
        let mut target = RawConn::connect(ruvio.shard_port(0));
        if resp3 {
            reference.cmd(&["HELLO", "3"]);
            target.cmd(&["HELLO", "3"]);
        }
        for (script, keys) in &scripts {
            let n = keys.len().to_string();
            let mut eval = vec!["EVAL", script.as_str(), n.as_str()];
            eval.extend(keys.iter().map(String::as_str));
            let (expected, got) = (reference.cmd(&eval), target.cmd(&eval));
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&expected),
                "{script:?} {keys:?} (resp3 {resp3})"
            );
        }
    }
}

/// Past `maxmemory` (noeviction): a script with a shebang is refused up front
/// unless `allow-oom` or `no-writes`; with `allow-oom` its writes go on; a script
/// without a shebang runs and its first write that may grow memory gets OOM
/// (after a write, no more: it cannot stop half way); functions as shebang
/// scripts. Against a standalone redis-server under the same limit.
#[test]
fn allow_oom_answers_as_redis() {
    if require_redis_server("allow_oom_answers_as_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(1);
    let library = "#!lua name=oomlib\n\
        redis.register_function('plain', function(k) return redis.call('set', k[1], 'v') end)\n\
        redis.register_function{function_name='oom', callback=function(k) return redis.call('set', k[1], 'v') end, flags={'allow-oom'}}\n\
        redis.register_function{function_name='ro', callback=function(k) return redis.call('get', k[1]) end, flags={'no-writes'}}";
    let script: &[&[&str]] = &[
        &["FUNCTION", "LOAD", library],
        &["SET", "k", "before"],
        &["CONFIG", "SET", "maxmemory", "1"],
        &["SET", "k", "refused"],
        &[
            "EVAL",
            "#!lua\nreturn redis.call('set', KEYS[1], 'v')",
            "1",
            "k",
        ],
        &["EVAL", "#!lua\nreturn 1", "0"],
        &[
            "EVAL",
            "#!lua flags=allow-oom\nreturn redis.call('set', KEYS[1], 'oom')",
            "1",
            "k",
        ],
        &[
            "EVAL",
            "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])",
            "1",
            "k",
        ],
        &["EVAL", "#!lua flags=allow-stale,no-writes\nreturn 1", "0"],
        &[
            "EVAL",
            "return redis.call('set', KEYS[1], 'legacy')",
            "1",
            "k",
        ],
        &["EVAL", "return redis.call('get', KEYS[1])", "1", "k"],
        &[
            "EVAL",
            "redis.call('del', 'other') return redis.call('set', KEYS[1], 'after-write')",
            "1",
            "k",
        ],
        &["GET", "k"],
        &["FCALL", "plain", "1", "k"],
        &["FCALL", "oom", "1", "k"],
        &["FCALL_RO", "ro", "1", "k"],
        &["CONFIG", "SET", "maxmemory", "0"],
        &[
            "EVAL",
            "#!lua\nreturn redis.call('set', KEYS[1], 'v')",
            "1",
            "k",
        ],
        &["FUNCTION", "DELETE", "oomlib"],
    ];
    for resp3 in [false, true] {
        let mut reference = redis.raw();
        let mut target = ruvio.raw();
        if resp3 {
            reference.cmd(&["HELLO", "3"]);
            target.cmd(&["HELLO", "3"]);
        }
        for args in script {
            let (expected, got) = (reference.cmd(args), target.cmd(args));
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&expected),
                "{args:?} (resp3 {resp3})"
            );
        }
    }
}
