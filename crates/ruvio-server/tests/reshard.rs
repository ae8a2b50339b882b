//! Changing the shard count between runs (docs/durability.md): a data directory
//! written by 2 shards starts with 3, then with 1, and every key of every type is
//! where its slot's new owner serves it, with its expiry; the old layout's
//! directories are gone; a staging directory a crash left unfinished is dropped.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Longer than everysec's one-second sync, with room for a loaded machine.
const AFTER_SYNC: Duration = Duration::from_millis(1600);

fn data_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ruvio-reshard-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn start(shards: usize, dir: &Path) -> Server {
    let dir = dir.to_str().unwrap();
    Server::ruvio_with(
        PortMode::Forward,
        shards,
        &["--dir", dir, "--durability", "everysec", "--save", ""],
    )
}

/// Keys of every type, in two databases, some with an expiry; half of them
/// before a SAVE (so they come from a snapshot), half after (from the log).
fn write_every_type(c: &mut RawConn, round: &str) {
    let ok = |reply: Vec<u8>| assert!(!reply.starts_with(b"-"), "{}", show(&reply));
    for i in 0..40 {
        let k = |kind: &str| format!("{round}:{kind}:{i}");
        ok(c.cmd(&["SET", &k("str"), &format!("v{i}")]));
        ok(c.cmd(&["SET", &k("int"), &i.to_string()]));
        ok(c.cmd(&["RPUSH", &k("list"), "a", "b", &i.to_string()]));
        ok(c.cmd(&["HSET", &k("hash"), "f", &i.to_string(), "g", "x"]));
        ok(c.cmd(&["SADD", &k("set"), "m1", "m2", &i.to_string()]));
        ok(c.cmd(&["ZADD", &k("zset"), "1.5", "a", &i.to_string(), "b"]));
        ok(c.cmd(&["PFADD", &k("hll"), "x", "y", "z"]));
        ok(c.cmd(&["SET", &k("ttl"), "t", "EX", "5000"]));
        ok(c.cmd(&["SET", &k("gone"), "t", "PX", "1"]));
        if i == 20 {
            ok(c.cmd(&["SAVE"]));
        }
    }
    ok(c.cmd(&["SELECT", "3"]));
    ok(c.cmd(&["SET", &format!("{round}:db3"), "three"]));
    ok(c.cmd(&["SELECT", "0"]));
}

fn check_every_type(c: &mut RawConn, round: &str) {
    for i in 0..40 {
        let k = |kind: &str| format!("{round}:{kind}:{i}");
        let v = format!("v{i}");
        let n = i.to_string();
        assert_eq!(c.cmd(&["GET", &k("str")]), encode_bulk(&v), "{}", k("str"));
        assert_eq!(c.cmd(&["GET", &k("int")]), encode_bulk(&n));
        assert_eq!(
            c.cmd(&["LRANGE", &k("list"), "0", "-1"]),
            encode_array(&["a", "b", &n])
        );
        assert_eq!(c.cmd(&["HGET", &k("hash"), "f"]), encode_bulk(&n));
        assert_eq!(c.cmd(&["SCARD", &k("set")]), b":3\r\n".to_vec());
        assert_eq!(c.cmd(&["ZSCORE", &k("zset"), "a"]), encode_bulk("1.5"));
        assert_eq!(c.cmd(&["PFCOUNT", &k("hll")]), b":3\r\n".to_vec());
        let ttl = c.cmd(&["TTL", &k("ttl")]);
        let ttl: i64 = String::from_utf8_lossy(&ttl[1..ttl.len() - 2])
            .parse()
            .unwrap();
        assert!((4000..=5000).contains(&ttl), "ttl {ttl}");
        assert_eq!(c.cmd(&["EXISTS", &k("gone")]), b":0\r\n".to_vec());
    }
    assert_eq!(c.cmd(&["SELECT", "3"]), b"+OK\r\n".to_vec());
    assert_eq!(
        c.cmd(&["GET", &format!("{round}:db3")]),
        encode_bulk("three")
    );
    assert_eq!(c.cmd(&["SELECT", "0"]), b"+OK\r\n".to_vec());
}

fn encode_bulk(v: &str) -> Vec<u8> {
    format!("${}\r\n{v}\r\n", v.len()).into_bytes()
}

fn encode_array(items: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", items.len()).into_bytes();
    for item in items {
        out.extend(encode_bulk(item));
    }
    out
}

fn shard_dirs(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Keys per database (INFO keyspace's `keys=`), summed.
fn dbsize_all(c: &mut RawConn) -> (usize, usize) {
    let db0 = c.cmd(&["DBSIZE"]);
    c.cmd(&["SELECT", "3"]);
    let db3 = c.cmd(&["DBSIZE"]);
    c.cmd(&["SELECT", "0"]);
    let n = |r: Vec<u8>| String::from_utf8_lossy(&r[1..r.len() - 2]).parse().unwrap();
    (n(db0), n(db3))
}

#[test]
fn two_shards_then_three_then_one_keep_every_key() {
    let dir = data_dir("2-3-1");
    let server = start(2, &dir);
    write_every_type(&mut server.raw(), "first");
    std::thread::sleep(AFTER_SYNC);
    drop(server);

    let server = start(3, &dir);
    let mut c = server.raw();
    check_every_type(&mut c, "first");
    // 8 kinds of 40 keys stay (the `gone` ones expired).
    assert_eq!(dbsize_all(&mut c), (320, 1));
    assert_eq!(shard_dirs(&dir), ["shard-0", "shard-1", "shard-2"]);
    // The new layout logs on: writes of this run come back too.
    write_every_type(&mut c, "second");
    std::thread::sleep(AFTER_SYNC);
    drop(server);

    // A staging directory a crash left before its mark is dropped.
    std::fs::create_dir_all(dir.join("reshard-7/shard-0")).unwrap();
    let server = start(1, &dir);
    let mut c = server.raw();
    check_every_type(&mut c, "first");
    check_every_type(&mut c, "second");
    assert_eq!(dbsize_all(&mut c), (640, 2));
    assert_eq!(shard_dirs(&dir), ["shard-0"]);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
