//! Where functions live (docs/scripting.md, Functions): in forward mode a library
//! loaded through any connection is on every shard before FUNCTION LOAD answers, so
//! FCALL runs wherever its keys route, and DELETE / FLUSH / RESTORE reach every
//! shard the same way; in per-shard mode each node is its own server, as in Redis
//! Cluster. With a log the libraries survive a restart. FUNCTION DUMP payloads move
//! both ways between Redis and Ruvio, and a Redis dump.rdb brings its libraries
//! (`--import-rdb`) and DEBUG EXPORT-RDB writes them for Redis.
//! FUNCTION KILL stops a function running past `busy-reply-threshold`.

mod common;

use common::*;
use std::time::Duration;

const LIB: &str = "#!lua name=counter\nredis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)";
const LIB_V2: &str = "#!lua name=counter\nredis.register_function('bump', function(keys, args) return redis.call('incrby', keys[1], args[1] * 10) end)";

/// FCALL bump on `key` by 1.
fn bump(c: &mut RawConn, key: &str) -> Vec<u8> {
    c.cmd(&["fcall", "bump", "1", key, "1"])
}

fn bulk(text: &str) -> Vec<u8> {
    format!("${}\r\n{text}\r\n", text.len()).into_bytes()
}

#[test]
fn forward_mode_functions_reach_every_shard() {
    let server = Server::forward(2);
    let here = key_on_shard("a", 0, 2);
    let there = key_on_shard("b", 1, 2);
    // Several connections: they land on different shards.
    let mut conns: Vec<RawConn> = (0..4).map(|_| server.raw()).collect();
    assert_eq!(conns[0].cmd(&["function", "load", LIB]), bulk("counter"));
    for c in conns.iter_mut() {
        for key in [&here, &there] {
            let reply = bump(c, key);
            assert!(reply.starts_with(b":"), "{}", show(&reply));
        }
    }
    assert_eq!(conns[1].cmd(&["get", &here]), b"$1\r\n4\r\n");
    // REPLACE reaches every shard too.
    assert_eq!(
        conns[2].cmd(&["function", "load", "replace", LIB_V2]),
        bulk("counter")
    );
    for c in conns.iter_mut() {
        assert_eq!(bump(c, &there).len(), bump(c, &here).len());
    }
    assert_eq!(conns[0].cmd(&["get", &here]), b"$2\r\n44\r\n");
    // DUMP through one connection, FLUSH through another, RESTORE through a third.
    let payload = conns[3].cmd(&["function", "dump"]);
    let payload =
        &payload[payload.iter().position(|&b| b == b'\n').unwrap() + 1..payload.len() - 2];
    assert_eq!(conns[1].cmd(&["function", "flush"]), b"+OK\r\n");
    for c in conns.iter_mut() {
        for key in [&here, &there] {
            assert_eq!(bump(c, key), b"-ERR Function not found\r\n");
        }
    }
    let mut restore = encode(&[&b"function"[..], b"restore", payload]);
    conns[2].send(&restore);
    assert_eq!(conns[2].read_reply(), b"+OK\r\n");
    for c in conns.iter_mut() {
        assert!(bump(c, &there).starts_with(b":"));
    }
    assert_eq!(conns[0].cmd(&["function", "delete", "counter"]), b"+OK\r\n");
    for c in conns.iter_mut() {
        assert_eq!(bump(c, &there), b"-ERR Function not found\r\n");
    }
    // A failed change changes nothing anywhere.
    restore = encode(&[&b"function"[..], b"restore", payload, b"bogus"]);
    conns[3].send(&restore);
    assert!(conns[3]
        .read_reply()
        .starts_with(b"-ERR Wrong restore policy"));
    assert_eq!(conns[3].cmd(&["function", "list"]), b"*0\r\n");
}

#[test]
fn per_shard_mode_nodes_keep_their_own_libraries() {
    let server = Server::per_shard(2);
    let mut node0 = RawConn::connect(server.shard_port(0));
    let mut node1 = RawConn::connect(server.shard_port(1));
    let here = key_on_shard("a", 0, 2);
    let there = key_on_shard("b", 1, 2);
    assert_eq!(node0.cmd(&["function", "load", LIB]), bulk("counter"));
    assert_eq!(bump(&mut node0, &here), b":1\r\n");
    // Node 1 is another server: it has no library until a client loads it there,
    // as a cluster client does on every node.
    assert_eq!(bump(&mut node1, &there), b"-ERR Function not found\r\n");
    assert_eq!(node1.cmd(&["function", "load", LIB]), bulk("counter"));
    assert_eq!(bump(&mut node1, &there), b":1\r\n");
    let moved = bump(&mut node0, &there);
    assert!(moved.starts_with(b"-MOVED "), "{}", show(&moved));
}

#[test]
fn libraries_survive_a_restart_with_the_log() {
    let dir = std::env::temp_dir().join(format!("ruvio-functions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args = ["--dir", dir.to_str().unwrap(), "--durability", "everysec"];
    let here = key_on_shard("a", 0, 2);
    let there = key_on_shard("b", 1, 2);
    {
        let server = Server::ruvio_with(PortMode::Forward, 2, &args);
        let mut c = server.raw();
        assert_eq!(c.cmd(&["function", "load", LIB]), bulk("counter"));
        let other = "#!lua name=gone\nredis.register_function('g', function() return 1 end)";
        assert_eq!(c.cmd(&["function", "load", other]), bulk("gone"));
        assert_eq!(c.cmd(&["function", "delete", "gone"]), b"+OK\r\n");
        // SAVE drops the log a snapshot covers: the libraries are kept apart from it.
        assert_eq!(c.cmd(&["save"]), b"+OK\r\n");
        // A function's writes are logged (as the writes it made).
        assert_eq!(bump(&mut c, &here), b":1\r\n");
        std::thread::sleep(Duration::from_millis(1600));
    }
    std::thread::sleep(Duration::from_millis(100));
    let server = Server::ruvio_with(PortMode::Forward, 2, &args);
    let mut c = server.raw();
    assert_eq!(bump(&mut c, &here), b":2\r\n");
    assert_eq!(bump(&mut c, &there), b":1\r\n");
    assert_eq!(c.cmd(&["fcall", "g", "0"]), b"-ERR Function not found\r\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dump_payloads_move_between_redis_and_ruvio() {
    if require_redis_server("dump_payloads_move_between_redis_and_ruvio").is_none() {
        return;
    }
    let redis = Server::redis();
    let ruvio = Server::forward(2);
    let mut r = redis.raw();
    let mut t = ruvio.raw();
    assert_eq!(r.cmd(&["function", "load", LIB]), bulk("counter"));
    let from_redis = r.cmd(&["function", "dump"]);
    let payload =
        &from_redis[from_redis.iter().position(|&b| b == b'\n').unwrap() + 1..from_redis.len() - 2];
    t.send(&encode(&[&b"function"[..], b"restore", payload]));
    assert_eq!(t.read_reply(), b"+OK\r\n");
    assert_eq!(bump(&mut t, "k"), b":1\r\n");
    // One library: Ruvio's payload is Redis's, byte for byte, and Redis takes it.
    assert_eq!(t.cmd(&["function", "dump"]), from_redis);
    r.send(&encode(&[
        &b"function"[..],
        b"restore",
        payload,
        b"replace",
    ]));
    assert_eq!(r.read_reply(), b"+OK\r\n");
    // APPEND refuses a library already there, REPLACE and FLUSH take it.
    t.send(&encode(&[&b"function"[..], b"restore", payload, b"append"]));
    assert_eq!(t.read_reply(), b"-ERR Library counter already exists\r\n");
    for policy in [&b"REPLACE"[..], b"flush"] {
        t.send(&encode(&[&b"function"[..], b"restore", payload, policy]));
        assert_eq!(t.read_reply(), b"+OK\r\n");
    }
    // A payload naming a function another library has: nothing is restored.
    let clash = "#!lua name=clash\nredis.register_function('BUMP', function() return 0 end)";
    assert_eq!(r.cmd(&["function", "flush"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["function", "load", clash]), bulk("clash"));
    let dumped = r.cmd(&["function", "dump"]);
    let clash_payload =
        &dumped[dumped.iter().position(|&b| b == b'\n').unwrap() + 1..dumped.len() - 2];
    for target in [&mut r, &mut t] {
        target.cmd(&["function", "flush"]);
        target.cmd(&["function", "load", LIB]);
        target.send(&encode(&[
            &b"function"[..],
            b"restore",
            clash_payload,
            b"replace",
        ]));
        assert_eq!(
            target.read_reply(),
            b"-ERR Function BUMP already exists\r\n"
        );
    }
}

#[test]
fn a_redis_dump_file_brings_its_libraries() {
    if require_redis_server("a_redis_dump_file_brings_its_libraries").is_none() {
        return;
    }
    let redis = Server::redis();
    let mut r = redis.raw();
    assert_eq!(r.cmd(&["function", "load", LIB]), bulk("counter"));
    assert_eq!(r.cmd(&["set", "k", "41"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["save"]), b"+OK\r\n");
    let config = |r: &mut RawConn, name: &str| {
        let reply = r.cmd(&["config", "get", name]);
        let text = String::from_utf8_lossy(&reply).into_owned();
        text.split("\r\n").nth(4).unwrap().to_owned()
    };
    let path = format!("{}/{}", config(&mut r, "dir"), config(&mut r, "dbfilename"));
    for mode in [PortMode::Forward, PortMode::PerShard] {
        let ruvio = Server::ruvio_with(mode, 2, &["--import-rdb", &path]);
        let mut c = RawConn::connect(ruvio.shard_port(shard_of_key("k", 2)));
        assert_eq!(bump(&mut c, "k"), b":42\r\n");
        let mut other = RawConn::connect(ruvio.shard_port(1 - shard_of_key("k", 2)));
        let there = key_on_shard("b", 1 - shard_of_key("k", 2), 2);
        assert_eq!(bump(&mut other, &there), b":1\r\n");
    }
}

/// With a log, the file's libraries load on the shards' loading threads: they must
/// reach every shard's set and its saved file, so FCALL works after the start and
/// after a restart without `--import-rdb`; a later start given the file again
/// keeps the saved set (a library loaded since stays).
#[test]
fn a_redis_dump_file_brings_its_libraries_into_the_log() {
    if require_redis_server("a_redis_dump_file_brings_its_libraries_into_the_log").is_none() {
        return;
    }
    let redis = Server::redis();
    let mut r = redis.raw();
    assert_eq!(r.cmd(&["function", "load", LIB]), bulk("counter"));
    assert_eq!(r.cmd(&["save"]), b"+OK\r\n");
    let reply = r.cmd(&["config", "get", "dir"]);
    let rdb_dir = String::from_utf8_lossy(&reply)
        .split("\r\n")
        .nth(4)
        .unwrap()
        .to_owned();
    let path = format!("{rdb_dir}/dump.rdb");
    let dir = std::env::temp_dir().join(format!("ruvio-functions-import-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let logged = ["--dir", dir.to_str().unwrap(), "--durability", "everysec"];
    let importing = [&logged[..], &["--import-rdb", &path]].concat();
    let keys = [key_on_shard("a", 0, 2), key_on_shard("b", 1, 2)];
    let other = "#!lua name=other\nredis.register_function('other', function() return 7 end)";
    {
        let server = Server::ruvio_with(PortMode::Forward, 2, &importing);
        let mut c = server.raw();
        for key in &keys {
            assert_eq!(bump(&mut c, key), b":1\r\n");
        }
    }
    {
        let server = Server::ruvio_with(PortMode::Forward, 2, &logged);
        let mut c = server.raw();
        for key in &keys {
            assert_eq!(bump(&mut c, &format!("{key}-2")), b":1\r\n");
        }
        assert_eq!(c.cmd(&["function", "load", other]), bulk("other"));
    }
    let server = Server::ruvio_with(PortMode::Forward, 2, &importing);
    let mut c = server.raw();
    for key in &keys {
        assert_eq!(bump(&mut c, &format!("{key}-3")), b":1\r\n");
    }
    assert_eq!(c.cmd(&["fcall", "other", "0"]), b":7\r\n");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exported_file_brings_the_libraries_to_redis() {
    if require_redis_server("an_exported_file_brings_the_libraries_to_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    let mut r = redis.raw();
    let reply = r.cmd(&["config", "get", "dir"]);
    let dir = String::from_utf8_lossy(&reply)
        .split("\r\n")
        .nth(4)
        .unwrap()
        .to_owned();
    let reply = r.cmd(&["config", "get", "dbfilename"]);
    let file = String::from_utf8_lossy(&reply)
        .split("\r\n")
        .nth(4)
        .unwrap()
        .to_owned();
    let path = format!("{dir}/{file}");
    let ruvio = Server::forward(2);
    let mut c = ruvio.raw();
    assert_eq!(c.cmd(&["function", "load", LIB]), bulk("counter"));
    assert_eq!(bump(&mut c, "k"), b":1\r\n");
    assert_eq!(c.cmd(&["debug", "export-rdb", &path]), b"+OK\r\n");
    assert_eq!(r.cmd(&["debug", "reload", "nosave"]), b"+OK\r\n");
    assert_eq!(bump(&mut r, "k"), b":2\r\n");
}

#[test]
fn function_kill_stops_a_busy_function() {
    let server = Server::forward(2);
    let mut other = conn_on_shard(&server, 1);
    assert_eq!(
        other.cmd(&["function", "kill"]),
        b"-NOTBUSY No scripts in execution right now.\r\n"
    );
    let spin =
        "#!lua name=spin\nredis.register_function('spin', function()\n  while true do end\nend)";
    assert_eq!(other.cmd(&["function", "load", spin]), bulk("spin"));
    assert_eq!(
        other.cmd(&["config", "set", "busy-reply-threshold", "100"]),
        b"+OK\r\n"
    );
    let mut runner = conn_on_shard(&server, 0);
    runner.send(&encode(&["fcall", "spin", "0"]));
    std::thread::sleep(Duration::from_millis(400));
    let busy = b"-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n";
    let key = key_on_shard("busy", 0, 2);
    assert_eq!(other.cmd(&["get", &key]), busy);
    assert_eq!(other.cmd(&["script", "kill"]), busy);
    assert_eq!(other.cmd(&["function", "kill"]), b"+OK\r\n");
    assert_eq!(
        runner.read_reply(),
        b"-ERR Script killed by user with SCRIPT KILL... script: spin, on @user_function:3.\r\n"
    );
    assert_eq!(runner.cmd(&["ping"]), b"+PONG\r\n");
}
