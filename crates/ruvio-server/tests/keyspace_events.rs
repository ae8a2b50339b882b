//! Keyspace notifications: `notify-keyspace-events` in Redis' canonical form, and a
//! differential run: a subscriber to `__key*__:*` on redis-server and on Ruvio
//! (2 shards, forward mode) receives the same messages, in the same order, for the
//! same commands (expired from lazy and active expiry, evicted under maxmemory).

mod common;

use common::*;
use std::time::Duration;

#[test]
fn config_canonical_form() {
    let server = Server::forward(2);
    let mut c = server.raw();
    let get = |c: &mut RawConn| c.cmd(&["CONFIG", "GET", "notify-keyspace-events"]);
    assert_eq!(get(&mut c), encode(&["notify-keyspace-events", ""]));
    for (value, canonical) in [
        ("KEA", "AKE"),
        ("AKEn", "AKE"),
        ("$lshzxetdgmn", "Am"),
        ("Kg$", "g$K"),
        ("Exn", "xnE"),
        ("", ""),
    ] {
        assert_eq!(
            c.cmd(&["CONFIG", "SET", "notify-keyspace-events", value]),
            b"+OK\r\n"
        );
        assert_eq!(
            get(&mut c),
            encode(&["notify-keyspace-events", canonical]),
            "{value}"
        );
    }
    assert_eq!(
        c.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Kq"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n"
    );
}

/// Commands whose events are compared; multi-key ones keep their keys in one slot.
const COMMANDS: &[&[&str]] = &[
    &["SET", "s1", "v"],
    &["SET", "s2", "v", "EX", "100"],
    &["APPEND", "s1", "x"],
    &["SETRANGE", "s1", "1", "yy"],
    &["INCR", "n1"],
    &["INCRBY", "n1", "5"],
    &["DECR", "n1"],
    &["INCRBYFLOAT", "n2", "1.5"],
    &["GETSET", "s1", "w"],
    &["GETDEL", "s2"],
    &["GETEX", "s1", "EX", "50"],
    &["PERSIST", "s1"],
    &["EXPIRE", "s1", "100"],
    &["PEXPIRE", "s1", "100000"],
    &["EXPIRE", "s1", "-1"],
    &["MSET", "{t}a", "1", "{t}b", "2"],
    &["RENAME", "{t}a", "{t}c"],
    &["DEL", "{t}b", "{t}c", "nothing"],
    &["SETNX", "s3", "v"],
    &["SETEX", "s4", "100", "v"],
    &["LPUSH", "l1", "a", "b", "c"],
    &["RPUSH", "l1", "d"],
    &["LPOP", "l1"],
    &["RPOP", "l1", "2"],
    &["LSET", "l1", "0", "z"],
    &["LINSERT", "l1", "BEFORE", "z", "y"],
    &["LREM", "l1", "1", "y"],
    &["LTRIM", "l1", "0", "0"],
    &["RPOP", "l1"],
    &["RPUSH", "{q}a", "1", "2"],
    &["LMOVE", "{q}a", "{q}b", "LEFT", "RIGHT"],
    &["HSET", "h1", "f", "1", "g", "2"],
    &["HINCRBY", "h1", "f", "3"],
    &["HINCRBYFLOAT", "h1", "f", "0.5"],
    &["HDEL", "h1", "f"],
    &["HDEL", "h1", "g"],
    &["SADD", "st", "a", "b", "c"],
    &["SREM", "st", "a"],
    &["SPOP", "st"],
    &["SADD", "{u}x", "1", "2"],
    &["SADD", "{u}y", "2", "3"],
    &["SINTERSTORE", "{u}z", "{u}x", "{u}y"],
    &["SMOVE", "{u}x", "{u}y", "1"],
    &["ZADD", "z1", "1", "a", "2", "b"],
    &["ZINCRBY", "z1", "5", "a"],
    &["ZREM", "z1", "a"],
    &["ZPOPMIN", "z1"],
    &["ZADD", "{v}a", "1", "x"],
    &["ZUNIONSTORE", "{v}b", "1", "{v}a"],
    &["COPY", "{v}b", "{v}c"],
    &["MOVE", "s3", "1"],
    &["GET", "missing"],
    &["MGET", "{w}a", "{w}b"],
    &["HGET", "nohash", "f"],
    &["LRANGE", "nolist", "0", "-1"],
    &["EXISTS", "nokey"],
    &["TYPE", "nokey"],
    &["RENAME", "{v}c", "{v}b"],
    &["SET", "short", "v", "PX", "1"],
];

/// Send every command (reading its reply), let `short` expire and read it (lazy
/// expiry), then collect the subscriber's messages up to a sentinel.
fn events_of(server: &Server) -> Vec<Vec<u8>> {
    let mut admin = server.raw();
    assert_eq!(
        admin.cmd(&["CONFIG", "SET", "notify-keyspace-events", "KEAnm"]),
        b"+OK\r\n"
    );
    let mut sub = server.raw();
    sub.send(&encode(&["PSUBSCRIBE", "__key*__:*"]));
    sub.read_reply();
    sub.send(&encode(&["SUBSCRIBE", "sentinel"]));
    sub.read_reply();
    for command in COMMANDS {
        admin.cmd(command);
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(admin.cmd(&["GET", "short"]), b"$-1\r\n");
    // Active expiry: a key nobody reads again.
    admin.cmd(&["SET", "gone", "v", "PX", "1"]);
    std::thread::sleep(Duration::from_millis(500));
    admin.cmd(&["PUBLISH", "sentinel", "end"]);
    let mut messages = Vec::new();
    loop {
        let m = sub.read_reply();
        if m == encode(&["message", "sentinel", "end"]) {
            return messages;
        }
        messages.push(m);
    }
}

#[test]
fn differential_keyspace_events() {
    if require_redis_server("differential_keyspace_events").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    let expected = events_of(&redis);
    let got = events_of(&ruvio);
    let show_all = |ms: &[Vec<u8>]| ms.iter().map(|m| show(m)).collect::<Vec<_>>().join("\n");
    assert_eq!(show_all(&got), show_all(&expected));
}

/// Evicted keys are announced under maxmemory (allkeys-random), on 1 shard.
#[test]
fn evicted_keys_announced() {
    let server = Server::ruvio(PortMode::Forward, 1);
    let mut admin = server.raw();
    admin.cmd(&["CONFIG", "SET", "notify-keyspace-events", "Ee"]);
    let mut sub = server.raw();
    sub.send(&encode(&["SUBSCRIBE", "__keyevent@0__:evicted"]));
    sub.read_reply();
    admin.cmd(&["CONFIG", "SET", "maxmemory-policy", "allkeys-random"]);
    let value = "v".repeat(1000);
    for i in 0..2000 {
        admin.cmd(&["SET", &format!("key{i}"), &value]);
    }
    admin.cmd(&["CONFIG", "SET", "maxmemory", "1mb"]);
    admin.cmd(&["SET", "trigger", "v"]);
    let m = sub.read_reply();
    assert!(
        m.starts_with(b"*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:evicted\r\n"),
        "{}",
        show(&m)
    );
}
