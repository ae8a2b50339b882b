//! The Lua API's server-facing functions against a real redis-server 7.0:
//! `redis.log` (its argument checks and errors, and its lines in the server log
//! at Redis's levels), `redis.set_repl` and `redis.replicate_commands` as Redis 7,
//! `redis.REDIS_VERSION` / `REDIS_VERSION_NUM` (the version Ruvio reports
//! everywhere, docs/compatibility.md), raw replies compared under RESP2 and RESP3,
//! 1 and 2 shards.

mod common;

use common::*;
use std::time::Duration;

/// Scripts whose replies must be equal byte for byte.
const SCRIPTS: &[&str] = &[
    "return redis.set_repl(redis.REPL_ALL)",
    "return redis.set_repl(redis.REPL_NONE)",
    "return redis.set_repl(redis.REPL_AOF)",
    "return redis.set_repl(redis.REPL_REPLICA)",
    "return redis.set_repl(redis.REPL_SLAVE)",
    "return redis.set_repl(5)",
    "return redis.set_repl(-1)",
    "return redis.set_repl(2.5)",
    "return redis.set_repl('x')",
    "return redis.set_repl()",
    "return redis.set_repl(1, 2)",
    "redis.set_repl(4)",
    "local ok, e = pcall(redis.set_repl, 9) return {type(e), e}",
    "return redis.replicate_commands()",
    "return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL}",
    "return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}",
    "return redis.log(redis.LOG_WARNING, 'hello', 3, {}, 'world')",
    "return redis.log(redis.LOG_DEBUG, 'not shown')",
    "return redis.log('2', 'numeric text level')",
    "return redis.log(9, 'x')",
    "return redis.log(-1, 'x')",
    "return redis.log('x', 'y')",
    "return redis.log({}, 'y')",
    "return redis.log(1)",
    "return redis.log()",
    "redis.log(1)",
    "local ok, e = pcall(redis.log, 1) return {type(e), e}",
    "local ok, e = pcall(redis.log, 7, 'x') return e",
    "return type(redis.REDIS_VERSION)",
    "return type(redis.REDIS_VERSION_NUM)",
];

#[test]
fn lua_api_answers_as_redis() {
    if require_redis_server("lua_api_answers_as_redis").is_none() {
        return;
    }
    let redis = Server::redis();
    for shards in [1, 2] {
        let ruvio = Server::forward(shards);
        for resp3 in [false, true] {
            let mut reference = redis.raw();
            let mut target = ruvio.raw();
            if resp3 {
                reference.cmd(&["HELLO", "3"]);
                target.cmd(&["HELLO", "3"]);
            }
            for script in SCRIPTS {
                let eval = ["EVAL", script, "0"];
                let (expected, got) = (reference.cmd(&eval), target.cmd(&eval));
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&expected),
                    "{script} (shards {shards}, resp3 {resp3})"
                );
            }
        }
    }
}

/// `redis.REDIS_VERSION` is the version HELLO and INFO report, and
/// `REDIS_VERSION_NUM` is it as `0x00MMmmpp`.
#[test]
fn lua_sees_the_reported_version() {
    let ruvio = Server::forward(2);
    let mut c = ruvio.raw();
    let version = c.cmd(&["EVAL", "return redis.REDIS_VERSION", "0"]);
    let version = String::from_utf8(version).unwrap();
    let version = version.split("\r\n").nth(1).unwrap().to_string();
    let info = String::from_utf8(c.cmd(&["INFO", "server"])).unwrap();
    assert!(
        info.contains(&format!("\r\nredis_version:{version}\r\n")),
        "{info}"
    );
    let hello = String::from_utf8_lossy(&c.cmd(&["HELLO", "2"])).into_owned();
    assert!(
        hello.contains(&format!(
            "$7\r\nversion\r\n${}\r\n{version}\r\n",
            version.len()
        )),
        "{hello}"
    );
    let parts: Vec<u32> = version.split('.').map(|p| p.parse().unwrap()).collect();
    let num = (parts[0] << 16) | (parts[1] << 8) | parts[2];
    assert_eq!(
        c.cmd(&["EVAL", "return redis.REDIS_VERSION_NUM", "0"]),
        format!(":{num}\r\n").into_bytes()
    );
}

/// `redis.log` writes to the server log (`logfile`) in Redis's line format, only
/// at or above `loglevel`; CONFIG SET loglevel changes it on every shard; the
/// rest of the process's messages go to the same file.
#[test]
fn redis_log_writes_the_server_log() {
    let dir = std::env::temp_dir().join(format!("ruvio-lualog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("server.log");
    let _ = std::fs::remove_file(&log);
    let ruvio = Server::ruvio_with(
        PortMode::Forward,
        2,
        &["--logfile", log.to_str().unwrap(), "--loglevel", "verbose"],
    );
    let mut c = ruvio.raw();
    let eval = |c: &mut RawConn, script: &str| c.cmd(&["EVAL", script, "0"]);
    assert_eq!(
        eval(&mut c, "redis.log(redis.LOG_WARNING, 'w1', 42)"),
        b"$-1\r\n"
    );
    assert_eq!(
        eval(&mut c, "redis.log(redis.LOG_VERBOSE, 'v1')"),
        b"$-1\r\n"
    );
    assert_eq!(eval(&mut c, "redis.log(redis.LOG_DEBUG, 'd1')"), b"$-1\r\n");
    assert_eq!(c.cmd(&["CONFIG", "SET", "loglevel", "warning"]), b"+OK\r\n");
    // Every shard's scripts follow the new level (a second connection may land
    // on the other shard).
    for _ in 0..4 {
        let mut other = ruvio.raw();
        assert_eq!(
            eval(&mut other, "redis.log(redis.LOG_NOTICE, 'n1')"),
            b"$-1\r\n"
        );
    }
    assert_eq!(
        eval(&mut c, "redis.log(redis.LOG_WARNING, 'w2')"),
        b"$-1\r\n"
    );
    std::thread::sleep(Duration::from_millis(50));
    let text = std::fs::read_to_string(&log).unwrap();
    // The whole process's messages go to the file, the start banner included.
    assert!(text.contains("shard(s), forward mode"), "{text}");
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains("ruvio")).collect();
    let messages: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split_once(":M ").map(|(_, rest)| &rest[25..]))
        .collect();
    assert_eq!(messages, ["# w1 42", "- v1", "# w2"], "{text}");
    // `pid:M dd Mon yyyy hh:mm:ss.mmm <mark> message`, as Redis writes it.
    let first = lines[0];
    let (pid, rest) = first.split_once(":M ").unwrap();
    assert_eq!(pid, ruvio.pid().to_string());
    assert_eq!(&rest[2..3], " ");
    assert_eq!(&rest[17..18], ":");
    assert_eq!(&rest[20..21], ".");
    drop(ruvio);
    let _ = std::fs::remove_dir_all(&dir);
}
