//! The `redis` crate's plain (non-cluster) client against forward mode with 1, 2 and 4
//! shards: a client that knows nothing of shards must see one Redis.
//!
//! Multi-key commands that are not split by forward mode (RENAME, COPY, MSETNX, LCS) use
//! keys sharing a `{hash tag}`, so they stay on one shard.

mod common;

use common::*;
use redis::{Connection, FromRedisValue, Value};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Runs a command given as words and converts the reply; panics on an error reply.
fn q<T: FromRedisValue>(con: &mut Connection, args: &[&str]) -> T {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query(con).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a command that must fail and returns the whole error line ("CODE detail").
fn err(con: &mut Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    match cmd.query::<Value>(con) {
        Ok(v) => panic!("{args:?}: expected an error, got {v:?}"),
        Err(e) => format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or("")),
    }
}

/// `count` keys named `prefix0..` that, with 2 shards, land on both.
fn spread_keys(prefix: &str, count: usize) -> Vec<String> {
    let keys: Vec<String> = (0..count).map(|i| format!("{prefix}{i}")).collect();
    let shards: BTreeSet<usize> = keys.iter().map(|k| shard_of_key(k, 2)).collect();
    assert_eq!(shards.len(), 2, "test keys must cover both shards");
    keys
}

fn strings(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    assert_eq!(q::<String>(&mut con, &["SET", "foo", "bar"]), "OK");
    assert_eq!(
        q::<Option<String>>(&mut con, &["GET", "foo"]),
        Some("bar".into())
    );
    assert_eq!(q::<Option<String>>(&mut con, &["GET", "missing"]), None);
    assert_eq!(
        q::<Value>(&mut con, &["SET", "foo", "baz", "NX"]),
        Value::Nil
    );
    assert_eq!(
        q::<Value>(&mut con, &["SET", "foo", "baz", "XX"]),
        Value::Okay
    );
    assert_eq!(q::<Value>(&mut con, &["SET", "new", "v", "XX"]), Value::Nil);
    assert_eq!(
        q::<Option<String>>(&mut con, &["SET", "foo", "v2", "GET"]),
        Some("baz".into())
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["SET", "fresh", "v", "GET"]),
        None
    );
    assert_eq!(q::<i64>(&mut con, &["APPEND", "foo", "xy"]), 4);
    assert_eq!(q::<i64>(&mut con, &["APPEND", "app", "xy"]), 2);
    assert_eq!(q::<i64>(&mut con, &["STRLEN", "foo"]), 4);
    assert_eq!(q::<i64>(&mut con, &["STRLEN", "missing"]), 0);

    assert_eq!(q::<String>(&mut con, &["SET", "n", "10"]), "OK");
    assert_eq!(q::<i64>(&mut con, &["INCR", "n"]), 11);
    assert_eq!(q::<i64>(&mut con, &["DECR", "n"]), 10);
    assert_eq!(q::<i64>(&mut con, &["INCRBY", "n", "5"]), 15);
    assert_eq!(q::<i64>(&mut con, &["DECRBY", "n", "20"]), -5);
    assert_eq!(q::<String>(&mut con, &["INCRBYFLOAT", "n", "1.5"]), "-3.5");
    assert_eq!(q::<i64>(&mut con, &["INCR", "counter"]), 1);
    assert_eq!(
        err(&mut con, &["INCR", "foo"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut con, &["INCRBYFLOAT", "foo", "1"]),
        "ERR value is not a valid float"
    );
    assert_eq!(
        q::<String>(&mut con, &["SET", "max", "9223372036854775807"]),
        "OK"
    );
    assert_eq!(
        err(&mut con, &["INCR", "max"]),
        "ERR increment or decrement would overflow"
    );

    assert_eq!(q::<String>(&mut con, &["GETRANGE", "foo", "0", "1"]), "v2");
    assert_eq!(
        q::<String>(&mut con, &["GETRANGE", "foo", "-2", "-1"]),
        "xy"
    );
    assert_eq!(q::<String>(&mut con, &["SUBSTR", "foo", "1", "2"]), "2x");
    assert_eq!(q::<i64>(&mut con, &["SETRANGE", "foo", "6", "!"]), 7);
    assert_eq!(
        q::<Vec<u8>>(&mut con, &["GET", "foo"]),
        b"v2xy\0\0!".to_vec()
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETSET", "foo", "new"]),
        Some("v2xy\0\0!".into())
    );
    assert_eq!(
        q::<Option<String>>(&mut con, &["GETDEL", "foo"]),
        Some("new".into())
    );
    assert_eq!(q::<Option<String>>(&mut con, &["GET", "foo"]), None);
    assert_eq!(q::<Option<String>>(&mut con, &["GETDEL", "foo"]), None);

    assert_eq!(q::<i64>(&mut con, &["SETNX", "once", "1"]), 1);
    assert_eq!(q::<i64>(&mut con, &["SETNX", "once", "2"]), 0);
    assert_eq!(q::<String>(&mut con, &["SETEX", "ex", "100", "v"]), "OK");
    let ttl: i64 = q(&mut con, &["TTL", "ex"]);
    assert!((1..=100).contains(&ttl), "TTL {ttl}");
    assert_eq!(
        q::<String>(&mut con, &["PSETEX", "pex", "100000", "v"]),
        "OK"
    );
    let pttl: i64 = q(&mut con, &["PTTL", "pex"]);
    assert!((1..=100_000).contains(&pttl), "PTTL {pttl}");
    assert_eq!(q::<String>(&mut con, &["GETEX", "ex", "PERSIST"]), "v");
    assert_eq!(q::<i64>(&mut con, &["TTL", "ex"]), -1);
    assert_eq!(q::<String>(&mut con, &["GETEX", "ex", "EX", "50"]), "v");
    let ttl: i64 = q(&mut con, &["TTL", "ex"]);
    assert!((1..=50).contains(&ttl), "TTL {ttl}");
    assert_eq!(q::<String>(&mut con, &["SET", "ex", "w", "KEEPTTL"]), "OK");
    assert!(q::<i64>(&mut con, &["TTL", "ex"]) > 0);
    assert_eq!(
        err(&mut con, &["SET", "k", "v", "EX", "0"]),
        "ERR invalid expire time in 'set' command"
    );
    assert_eq!(
        err(&mut con, &["SET", "k", "v", "NX", "XX"]),
        "ERR syntax error"
    );

    assert_eq!(q::<i64>(&mut con, &["MSETNX", "{t}a", "1", "{t}b", "2"]), 1);
    assert_eq!(q::<i64>(&mut con, &["MSETNX", "{t}b", "3", "{t}c", "4"]), 0);
    assert_eq!(q::<Option<String>>(&mut con, &["GET", "{t}c"]), None);
    q::<Value>(&mut con, &["MSET", "{t}x", "ohmytext", "{t}y", "mynewtext"]);
    assert_eq!(q::<String>(&mut con, &["LCS", "{t}x", "{t}y"]), "mytext");
    assert_eq!(q::<i64>(&mut con, &["LCS", "{t}x", "{t}y", "LEN"]), 6);

    assert_eq!(
        q::<String>(&mut con, &["OBJECT", "ENCODING", "n"]),
        "embstr"
    );
    assert_eq!(
        q::<String>(&mut con, &["OBJECT", "ENCODING", "counter"]),
        "int"
    );
    // APPEND to a missing key stores the argument as is; appending to it makes it raw.
    assert_eq!(
        q::<String>(&mut con, &["OBJECT", "ENCODING", "app"]),
        "embstr"
    );
    assert_eq!(q::<i64>(&mut con, &["APPEND", "app", "z"]), 3);
    assert_eq!(q::<String>(&mut con, &["OBJECT", "ENCODING", "app"]), "raw");
}

#[test]
fn strings_1_shard() {
    strings(1);
}

#[test]
fn strings_2_shards() {
    strings(2);
}

#[test]
fn strings_4_shards() {
    strings(4);
}

fn keyspace(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    let keys = spread_keys("key", 20);
    for k in &keys {
        assert_eq!(q::<String>(&mut con, &["SET", k, k]), "OK");
    }
    assert_eq!(
        q::<i64>(&mut con, &["EXISTS", "key0", "key1", "missing", "key0"]),
        3
    );
    assert_eq!(q::<String>(&mut con, &["TYPE", "key0"]), "string");
    assert_eq!(q::<String>(&mut con, &["TYPE", "missing"]), "none");
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 20);

    // Whole-keyspace commands see every shard.
    let mut listed: Vec<String> = q(&mut con, &["KEYS", "*"]);
    listed.sort();
    let mut expected = keys.clone();
    expected.sort();
    assert_eq!(listed, expected);
    let mut ones: Vec<String> = q(&mut con, &["KEYS", "key1*"]);
    ones.sort();
    assert_eq!(
        ones,
        [
            "key1", "key10", "key11", "key12", "key13", "key14", "key15", "key16", "key17",
            "key18", "key19"
        ]
    );
    let mut scanned = BTreeSet::new();
    let mut cursor = "0".to_string();
    for _ in 0..1000 {
        let (next, batch): (String, Vec<String>) = q(&mut con, &["SCAN", &cursor, "COUNT", "3"]);
        scanned.extend(batch);
        cursor = next;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(cursor, "0", "SCAN must finish");
    assert_eq!(scanned, keys.iter().cloned().collect::<BTreeSet<_>>());
    let random: String = q(&mut con, &["RANDOMKEY"]);
    assert!(keys.contains(&random));

    // Same-slot moves and copies.
    q::<Value>(&mut con, &["SET", "{t}a", "1"]);
    assert_eq!(q::<String>(&mut con, &["RENAME", "{t}a", "{t}b"]), "OK");
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "{t}a"]), 0);
    assert_eq!(
        err(&mut con, &["RENAME", "{t}a", "{t}b"]),
        "ERR no such key"
    );
    q::<Value>(&mut con, &["SET", "{t}c", "3"]);
    assert_eq!(q::<i64>(&mut con, &["RENAMENX", "{t}b", "{t}c"]), 0);
    assert_eq!(q::<i64>(&mut con, &["COPY", "{t}b", "{t}d"]), 1);
    assert_eq!(q::<i64>(&mut con, &["COPY", "{t}b", "{t}c"]), 0);
    assert_eq!(q::<i64>(&mut con, &["COPY", "{t}b", "{t}c", "REPLACE"]), 1);
    assert_eq!(
        q::<Option<String>>(&mut con, &["GET", "{t}c"]),
        Some("1".into())
    );

    assert_eq!(q::<i64>(&mut con, &["DEL", "key0", "key1", "missing"]), 2);
    assert_eq!(q::<i64>(&mut con, &["UNLINK", "key2", "key3", "key2"]), 2);
    assert_eq!(q::<i64>(&mut con, &["TOUCH", "key4", "key5", "missing"]), 2);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 16 + 3);
    assert_eq!(q::<String>(&mut con, &["FLUSHDB"]), "OK");
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 0);
    assert_eq!(
        q::<Vec<String>>(&mut con, &["KEYS", "*"]),
        Vec::<String>::new()
    );
}

#[test]
fn keyspace_1_shard() {
    keyspace(1);
}

#[test]
fn keyspace_2_shards() {
    keyspace(2);
}

#[test]
fn keyspace_4_shards() {
    keyspace(4);
}

fn expiry(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    assert_eq!(q::<i64>(&mut con, &["TTL", "missing"]), -2);
    q::<Value>(&mut con, &["SET", "k", "v"]);
    assert_eq!(q::<i64>(&mut con, &["TTL", "k"]), -1);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "100"]), 1);
    assert!((99..=100).contains(&q::<i64>(&mut con, &["TTL", "k"])));
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "200", "NX"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "200", "XX"]), 1);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "150", "GT"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "k", "150", "LT"]), 1);
    assert_eq!(q::<i64>(&mut con, &["PEXPIRE", "k", "300000", "GT"]), 1);
    assert!(q::<i64>(&mut con, &["PTTL", "k"]) > 150_000);
    let at: i64 = q(&mut con, &["EXPIRETIME", "k"]);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(
        (now + 290..=now + 301).contains(&at),
        "EXPIRETIME {at} now {now}"
    );
    assert_eq!(q::<i64>(&mut con, &["PERSIST", "k"]), 1);
    assert_eq!(q::<i64>(&mut con, &["PERSIST", "k"]), 0);
    assert_eq!(q::<i64>(&mut con, &["EXPIRETIME", "k"]), -1);
    assert_eq!(q::<i64>(&mut con, &["EXPIRE", "missing", "10"]), 0);
    assert_eq!(
        err(&mut con, &["EXPIRE", "k", "10", "NX", "XX"]),
        "ERR NX and XX, GT or LT options at the same time are not compatible"
    );
    // An expiry time in the past deletes the key.
    assert_eq!(q::<i64>(&mut con, &["EXPIREAT", "k", "1"]), 1);
    assert_eq!(q::<i64>(&mut con, &["EXISTS", "k"]), 0);

    // Lazy expiry on access, on both shards.
    let keys = spread_keys("short", 10);
    for k in &keys {
        q::<Value>(&mut con, &["SET", k, "v", "PX", "150"]);
    }
    assert!(q::<i64>(&mut con, &["PTTL", "short0"]) <= 150);
    std::thread::sleep(Duration::from_millis(400));
    for k in &keys {
        assert_eq!(
            q::<Option<String>>(&mut con, &["GET", k]),
            None,
            "{k} expired"
        );
        assert_eq!(q::<i64>(&mut con, &["TTL", k]), -2);
    }

    // Active expiry removes keys nobody touches.
    let keys = spread_keys("active", 20);
    for k in &keys {
        q::<Value>(&mut con, &["SET", k, "v", "PX", "100"]);
    }
    q::<Value>(&mut con, &["SET", "stays", "v"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let size: i64 = q(&mut con, &["DBSIZE"]);
        if size == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "active expiry left DBSIZE at {size}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn expiry_1_shard() {
    expiry(1);
}

#[test]
fn expiry_2_shards() {
    expiry(2);
}

#[test]
fn expiry_4_shards() {
    expiry(4);
}

fn multi_key_across_shards(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    let keys = spread_keys("mk", 40);
    let mut mset = vec!["MSET"];
    for k in &keys {
        mset.push(k);
        mset.push(k);
    }
    assert_eq!(q::<String>(&mut con, &mset), "OK");
    // MGET with misses interleaved keeps the request order.
    let mut mget = vec!["MGET"];
    let mut expected = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        mget.push(k);
        expected.push(Some(k.clone()));
        if i % 7 == 0 {
            mget.push("nope");
            expected.push(None);
        }
    }
    assert_eq!(q::<Vec<Option<String>>>(&mut con, &mget), expected);
    let mut exists = vec!["EXISTS"];
    exists.extend(keys.iter().map(String::as_str));
    exists.extend(["mk0", "mk1", "nope"]);
    assert_eq!(q::<i64>(&mut con, &exists), 42);
    let mut touch = vec!["TOUCH"];
    touch.extend(keys.iter().map(String::as_str).take(10));
    touch.push("nope");
    assert_eq!(q::<i64>(&mut con, &touch), 10);
    let mut del = vec!["DEL"];
    del.extend(keys.iter().map(String::as_str).take(20));
    del.extend(["nope", "mk0"]);
    assert_eq!(q::<i64>(&mut con, &del), 20);
    let mut unlink = vec!["UNLINK"];
    unlink.extend(keys.iter().map(String::as_str));
    assert_eq!(q::<i64>(&mut con, &unlink), 20);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 0);
    // MSET overwrites on every shard, last value of a repeated key wins.
    let mut mset = vec!["MSET"];
    for k in &keys {
        mset.push(k);
        mset.push("one");
    }
    mset.extend(["mk0", "two", "mk1", "two"]);
    q::<Value>(&mut con, &mset);
    let values: Vec<Option<String>> = q(&mut con, &["MGET", "mk0", "mk1", "mk2", "mk3"]);
    assert_eq!(
        values,
        [
            Some("two".into()),
            Some("two".into()),
            Some("one".into()),
            Some("one".into())
        ]
    );
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 40);
    assert_eq!(
        err(&mut con, &["MGET"]),
        "ERR wrong number of arguments for 'mget' command"
    );
    assert_eq!(
        err(&mut con, &["MSET", "a", "1", "b"]),
        "ERR wrong number of arguments for 'mset' command"
    );
}

#[test]
fn multi_key_across_shards_1_shard() {
    multi_key_across_shards(1);
}

#[test]
fn multi_key_across_shards_2_shards() {
    multi_key_across_shards(2);
}

#[test]
fn multi_key_across_shards_4_shards() {
    multi_key_across_shards(4);
}

fn select_databases(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    let keys = spread_keys("db", 6);
    for k in &keys {
        q::<Value>(&mut con, &["SET", k, "zero"]);
    }
    assert_eq!(q::<String>(&mut con, &["SELECT", "1"]), "OK");
    for k in &keys {
        assert_eq!(q::<Option<String>>(&mut con, &["GET", k]), None);
        q::<Value>(&mut con, &["SET", k, "one"]);
    }
    let values: Vec<String> = q(&mut con, &["MGET", &keys[0], &keys[1], &keys[2]]);
    assert_eq!(values, ["one", "one", "one"]);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 6);
    assert_eq!(q::<i64>(&mut con, &["MOVE", &keys[0], "2"]), 1);
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 5);
    assert_eq!(q::<String>(&mut con, &["SELECT", "0"]), "OK");
    for k in &keys {
        assert_eq!(
            q::<Option<String>>(&mut con, &["GET", k]),
            Some("zero".into())
        );
    }
    assert_eq!(
        q::<i64>(&mut con, &["MOVE", &keys[1], "1"]),
        0,
        "the target db already has it"
    );
    assert_eq!(
        err(&mut con, &["SELECT", "16"]),
        "ERR DB index is out of range"
    );

    // A client opened on database 2 sees only what MOVE put there.
    let client = redis::Client::open(format!("redis://127.0.0.1:{}/2", server.port())).unwrap();
    let mut con2 = client.get_connection_with_timeout(IO_TIMEOUT).unwrap();
    assert_eq!(
        q::<Option<String>>(&mut con2, &["GET", &keys[0]]),
        Some("one".into())
    );
    assert_eq!(q::<i64>(&mut con2, &["DBSIZE"]), 1);
    assert_eq!(q::<String>(&mut con2, &["FLUSHDB"]), "OK");
    // FLUSHDB of db 2 left db 0 alone.
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 6);
    assert_eq!(q::<String>(&mut con, &["SWAPDB", "0", "1"]), "OK");
    assert_eq!(
        q::<Option<String>>(&mut con, &["GET", &keys[1]]),
        Some("one".into())
    );
    assert_eq!(q::<String>(&mut con, &["FLUSHALL"]), "OK");
    assert_eq!(q::<i64>(&mut con, &["DBSIZE"]), 0);
}

#[test]
fn select_databases_1_shard() {
    select_databases(1);
}

#[test]
fn select_databases_2_shards() {
    select_databases(2);
}

#[test]
fn select_databases_4_shards() {
    select_databases(4);
}

fn pipelines(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    let keys = spread_keys("p", 50);
    let mut pipe = redis::pipe();
    for (i, k) in keys.iter().enumerate() {
        pipe.cmd("SET").arg(k).arg(i);
        pipe.cmd("INCR").arg(k);
        pipe.cmd("GET").arg(k);
        pipe.cmd("GET").arg(format!("{k}-missing"));
    }
    let replies: Vec<Value> = pipe.query(&mut con).expect("pipeline");
    assert_eq!(replies.len(), keys.len() * 4);
    for (i, chunk) in replies.chunks(4).enumerate() {
        let expected = [
            Value::Okay,
            Value::Int(i as i64 + 1),
            Value::BulkString((i + 1).to_string().into_bytes()),
            Value::Nil,
        ];
        assert_eq!(chunk, expected, "pipeline replies of {}", keys[i]);
    }
    // The same through a typed pipeline with ignored replies.
    let (a, b): (i64, Vec<Option<i64>>) = redis::pipe()
        .cmd("DEL")
        .arg(&keys[0])
        .ignore()
        .cmd("INCRBY")
        .arg(&keys[0])
        .arg(7)
        .cmd("SET")
        .arg(&keys[1])
        .arg(3)
        .ignore()
        .cmd("MGET")
        .arg(&keys[0])
        .arg(&keys[1])
        .arg("none")
        .query(&mut con)
        .expect("typed pipeline");
    assert_eq!((a, b), (7, vec![Some(7), Some(3), None]));
}

#[test]
fn pipelines_1_shard() {
    pipelines(1);
}

#[test]
fn pipelines_2_shards() {
    pipelines(2);
}

#[test]
fn pipelines_4_shards() {
    pipelines(4);
}

/// Keys on one shard are reachable from connections that the kernel gives to any shard.
#[test]
fn many_connections_see_one_keyspace() {
    let server = Server::forward(2);
    let mut writers: Vec<Connection> = (0..8).map(|_| server.client()).collect();
    for (i, con) in writers.iter_mut().enumerate() {
        q::<Value>(con, &["SET", &format!("conn{i}"), &i.to_string()]);
    }
    for con in writers.iter_mut() {
        let values: Vec<i64> = q(
            con,
            &[
                "MGET", "conn0", "conn1", "conn2", "conn3", "conn4", "conn5", "conn6", "conn7",
            ],
        );
        assert_eq!(values, (0..8).collect::<Vec<i64>>());
    }
}

/// CONFIG SET on one shard reaches every shard: connections land on both shards
/// (SO_REUSEPORT), and each must soon read the new value back.
#[test]
fn config_set_reaches_every_shard() {
    let server = common::Server::ruvio(common::PortMode::Forward, 2);
    let mut first = server.client();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("hz")
        .arg("42")
        .query(&mut first)
        .unwrap();
    for _ in 0..16 {
        let mut conn = server.client();
        let mut seen = String::new();
        for _ in 0..200 {
            let pair: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg("hz")
                .query(&mut conn)
                .unwrap();
            seen = pair[1].clone();
            if seen == "42" {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(seen, "42", "a shard never applied the broadcast CONFIG SET");
    }
}

/// A small database comes back whole from one `SCAN 0`, as from one Redis (many
/// applications call SCAN once), whatever the shard count.
fn small_scan_in_one_call(shards: usize) {
    let server = Server::forward(shards);
    let mut con = server.client();
    let keys = spread_keys("small", 3);
    for k in &keys {
        let _: () = redis::cmd("SET").arg(k).arg("v").query(&mut con).unwrap();
    }
    let (cursor, mut got): (u64, Vec<String>) = redis::cmd("SCAN").arg(0).query(&mut con).unwrap();
    got.sort();
    assert_eq!((cursor, got), (0, keys.clone()));
    let (cursor, got): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("small1")
        .query(&mut con)
        .unwrap();
    assert_eq!((cursor, got), (0, vec!["small1".to_string()]));
}

#[test]
fn small_scan_in_one_call_one_shard() {
    small_scan_in_one_call(1);
}

#[test]
fn small_scan_in_one_call_two_shards() {
    small_scan_in_one_call(2);
}
