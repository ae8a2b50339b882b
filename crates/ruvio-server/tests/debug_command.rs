//! DEBUG as Redis 7.0 answers it: SET-ACTIVE-EXPIRE (expired keys stay until read
//! while it is 0, go in the background again with 1), and the errors of a DEBUG
//! whose subcommand Redis' table does not list (an unknown one, a wrong argument
//! count: `addReplySubcommandSyntaxError`). Differential against redis-server, and
//! Ruvio with 1 and 2 shards in forward mode (keys of both shards).

mod common;

use common::*;
use std::time::{Duration, Instant};

/// Keys with a short TTL, spread over the shards.
const KEYS: usize = 20;

/// DBSIZE once it equals `want`, or what it is after 3 s.
fn dbsize_until(conn: &mut RawConn, want: &[u8]) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let size = conn.cmd(&["dbsize"]);
        if size == want || Instant::now() > deadline {
            return size;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The transcript of the scenario on the server at `port`.
fn run(port: u16) -> Vec<String> {
    let mut conn = RawConn::connect(port);
    let mut transcript = Vec::new();
    let mut say =
        |args: &[&str], reply: Vec<u8>| transcript.push(format!("{args:?}: {}", show(&reply)));
    for args in [
        &["debug", "set-active-expire"][..],
        &["debug", "set-active-expire", "0", "1"],
        &["debug", "nosuch"],
        &["debug", "nosuch", "arg"],
        &["debug", "sleep"],
        &["flushall"],
        &["debug", "set-active-expire", "0"],
    ] {
        let reply = conn.cmd(args);
        say(args, reply);
    }
    for i in 0..KEYS {
        let key = format!("k{i}");
        let reply = conn.cmd(&["set", &key, "v", "px", "100"]);
        say(&["set", "k..", "v", "px", "100"], reply);
    }
    // Past their TTL, unread: still counted (no background expiry).
    std::thread::sleep(Duration::from_millis(500));
    let size = conn.cmd(&["dbsize"]);
    say(&["dbsize"], size);
    // A read expires the one it reads.
    let read = conn.cmd(&["get", "k0"]);
    say(&["get", "k0"], read);
    let size = conn.cmd(&["dbsize"]);
    say(&["dbsize"], size);
    // `atoi`: a number with trailing bytes turns it on.
    let on = conn.cmd(&["debug", "set-active-expire", "1x"]);
    say(&["debug", "set-active-expire", "1x"], on);
    let size = dbsize_until(&mut conn, b":0\r\n");
    say(&["dbsize (background expiry on)"], size);
    transcript
}

#[test]
fn debug_set_active_expire_and_errors_as_redis() {
    let Some(_) = require_redis_server("debug_command") else {
        return;
    };
    let redis = Server::redis();
    let expected = run(redis.port());
    assert!(
        expected
            .iter()
            .any(|l| l.starts_with("[\"dbsize\"]: \":20")),
        "Redis kept the expired keys: {expected:#?}"
    );
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        assert_eq!(run(ruvio.port()), expected, "{shards} shard(s)");
    }
}
