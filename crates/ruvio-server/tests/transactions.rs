//! MULTI / EXEC / DISCARD / WATCH / UNWATCH with exact reply bytes, RESP2 and
//! RESP3, 1, 2 and 4 shards, both port modes: queueing, per-command runtime errors,
//! EXECABORT after a refused command, the misuse errors, WATCH touched by another
//! client (on any shard), by expiry and by FLUSHALL, blocking commands that do not
//! block inside EXEC, CLIENT LIST's `flags=x multi=N`, INFO commandstats, and the
//! cluster rules (MOVED / CROSSSLOT abort the transaction) in per-shard mode.
//! Then atomicity under concurrency: a transaction writing two keys on different
//! shards is never seen half-applied, and a WATCH retry loop loses no increment.
//!
//! `RUVIO_TEST_TARGET=redis` runs the same cases against redis-server (a Redis
//! Cluster for per-shard mode).
//!
//! Over 1,000 lines on purpose: the cases are functions run in sequence on one
//! server per mode and shard count (`forward_two_shards` ...); split over files,
//! each file would start those servers again.

mod common;

use common::*;
use std::thread;
use std::time::Duration;

/// A connection to the shard that owns `key` (any port in forward mode).
fn conn_for(server: &Server, key: &str) -> RawConn {
    match server.mode {
        PortMode::Forward => server.raw(),
        PortMode::PerShard => RawConn::connect(server.shard_port(shard_of_key(key, server.shards))),
    }
}

fn ok(c: &mut RawConn, args: &[&str]) {
    c.roundtrip(&encode(args), b"+OK\r\n");
}

/// INCRBY ARGV[1] ARGV[2], the key undeclared.
const INCRBY_SCRIPT: &str = "return redis.call('INCRBY', ARGV[1], ARGV[2])";

fn queued(c: &mut RawConn, args: &[&str]) {
    c.roundtrip(&encode(args), b"+QUEUED\r\n");
}

fn queues_and_runs_with_per_command_errors(server: &Server) {
    let key = key_on_shard("tx-basic", server.shards - 1, server.shards);
    let mut c = conn_for(server, &key);
    ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", &key, "v"]);
    queued(&mut c, &["INCR", &key]);
    queued(&mut c, &["GET", &key]);
    c.roundtrip(
        &encode(&["EXEC"]),
        b"*3\r\n+OK\r\n-ERR value is not an integer or out of range\r\n$1\r\nv\r\n",
    );
    ok(&mut c, &["MULTI"]);
    c.roundtrip(&encode(&["EXEC"]), b"*0\r\n");
    ok(&mut c, &["MULTI"]);
    queued(&mut c, &["DEL", &key]);
    ok(&mut c, &["DISCARD"]);
    c.roundtrip(&encode(&["GET", &key]), b"$1\r\nv\r\n");
    c.roundtrip(&encode(&["DEL", &key]), b":1\r\n");
}

fn misuse_errors(server: &Server) {
    let key = key_on_shard("tx-misuse", 0, server.shards);
    let mut c = conn_for(server, &key);
    c.roundtrip(&encode(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
    c.roundtrip(&encode(&["DISCARD"]), b"-ERR DISCARD without MULTI\r\n");
    ok(&mut c, &["MULTI"]);
    c.roundtrip(
        &encode(&["MULTI"]),
        b"-ERR MULTI calls can not be nested\r\n",
    );
    c.roundtrip(
        &encode(&["WATCH", &key]),
        b"-ERR WATCH inside MULTI is not allowed\r\n",
    );
    queued(&mut c, &["SET", &key, "1"]);
    // Neither error is a refusal: the transaction still runs.
    c.roundtrip(&encode(&["EXEC"]), b"*1\r\n+OK\r\n");
    c.roundtrip(&encode(&["DEL", &key]), b":1\r\n");
}

fn refused_command_aborts_exec(server: &Server) {
    let key = key_on_shard("tx-abort", 0, server.shards);
    let mut c = conn_for(server, &key);
    ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", &key, "1"]);
    c.roundtrip(
        &encode(&["SET", &key]),
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    c.roundtrip(
        &encode(&["NOSUCHCMD", "x"]),
        b"-ERR unknown command 'NOSUCHCMD', with args beginning with: 'x' \r\n",
    );
    c.roundtrip(
        &encode(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    c.roundtrip(&encode(&["EXISTS", &key]), b":0\r\n");
    // A no-multi command is refused too.
    ok(&mut c, &["MULTI"]);
    c.roundtrip(
        &encode(&["SHUTDOWN"]),
        b"-ERR Command not allowed inside a transaction\r\n",
    );
    c.roundtrip(
        &encode(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    // EXEC itself refused discards the transaction.
    ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", &key, "1"]);
    c.roundtrip(
        &encode(&["EXEC", "x"]),
        b"-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n",
    );
    c.roundtrip(&encode(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
    c.roundtrip(&encode(&["EXISTS", &key]), b":0\r\n");
}

/// WATCH on a key of every shard: a write from another client aborts EXEC
/// (null array, `_` in RESP3); an untouched or unwatched key lets it run.
fn watch_touched_by_another_client(server: &Server) {
    for shard in 0..server.shards {
        let key = key_on_shard("tx-watch", shard, server.shards);
        let mut a = conn_for(server, &key);
        let mut b = conn_for(server, &key);
        ok(&mut a, &["WATCH", &key]);
        ok(&mut b, &["SET", &key, "other"]);
        ok(&mut a, &["MULTI"]);
        queued(&mut a, &["SET", &key, "mine"]);
        a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
        b.roundtrip(&encode(&["GET", &key]), b"$5\r\nother\r\n");

        // RESP3: the null is `_`.
        a.cmd(&["HELLO", "3"]);
        ok(&mut a, &["WATCH", &key]);
        b.roundtrip(&encode(&["DEL", &key]), b":1\r\n");
        ok(&mut a, &["MULTI"]);
        queued(&mut a, &["SET", &key, "mine"]);
        a.roundtrip(&encode(&["EXEC"]), b"_\r\n");
        a.cmd(&["HELLO", "2"]);

        // Untouched: it runs; touched after UNWATCH: it runs too.
        ok(&mut a, &["WATCH", &key]);
        ok(&mut a, &["MULTI"]);
        queued(&mut a, &["SET", &key, "mine"]);
        a.roundtrip(&encode(&["EXEC"]), b"*1\r\n+OK\r\n");
        ok(&mut a, &["WATCH", &key]);
        ok(&mut a, &["UNWATCH"]);
        ok(&mut b, &["SET", &key, "other"]);
        ok(&mut a, &["MULTI"]);
        queued(&mut a, &["GET", &key]);
        a.roundtrip(&encode(&["EXEC"]), b"*1\r\n$5\r\nother\r\n");
        // EXEC forgets the watches: a later write does not abort the next one.
        ok(&mut a, &["WATCH", &key]);
        ok(&mut a, &["MULTI"]);
        a.roundtrip(&encode(&["EXEC"]), b"*0\r\n");
        ok(&mut b, &["SET", &key, "again"]);
        ok(&mut a, &["MULTI"]);
        a.roundtrip(&encode(&["EXEC"]), b"*0\r\n");
        // A failed transaction (EXECABORT) forgets them as well, as does DISCARD.
        ok(&mut a, &["WATCH", &key]);
        ok(&mut a, &["MULTI"]);
        a.cmd(&["NOSUCHCMD"]);
        a.cmd(&["EXEC"]);
        ok(&mut b, &["SET", &key, "again"]);
        ok(&mut a, &["MULTI"]);
        a.roundtrip(&encode(&["EXEC"]), b"*0\r\n");
        b.roundtrip(&encode(&["DEL", &key]), b":1\r\n");
    }
}

/// Watching a key of another shard in forward mode: every write reaches it.
fn watch_across_shards(server: &Server) {
    // Two keys at least (redis-server is one shard to the harness).
    let n = server.shards.max(2);
    let keys: Vec<String> = (0..n).map(|s| key_on_shard("tx-xwatch", s, n)).collect();
    let mut a = server.raw();
    let mut b = server.raw();
    for touched in &keys {
        let mut watch = vec!["WATCH"];
        watch.extend(keys.iter().map(String::as_str));
        ok(&mut a, &watch);
        ok(&mut b, &["SET", touched, "5"]);
        ok(&mut a, &["MULTI"]);
        for k in &keys {
            queued(&mut a, &["INCR", k]);
        }
        a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
        // With commands that need the connection or every shard in the queue.
        ok(&mut a, &watch);
        ok(&mut b, &["SET", touched, "5"]);
        ok(&mut a, &["MULTI"]);
        queued(&mut a, &["PING"]);
        queued(&mut a, &["DBSIZE"]);
        a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
        // A touched watch runs none of the queue, server commands included.
        ok(&mut a, &watch);
        ok(&mut b, &["SET", touched, "5"]);
        ok(&mut a, &["MULTI"]);
        for k in &keys {
            queued(&mut a, &["INCR", k]);
        }
        queued(&mut a, &["CLIENT", "SETNAME", "aborted"]);
        a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
        a.roundtrip(&encode(&["CLIENT", "GETNAME"]), b"$-1\r\n");
    }
    // Untouched, the transaction over every shard runs.
    let mut watch = vec!["WATCH"];
    watch.extend(keys.iter().map(String::as_str));
    ok(&mut a, &watch);
    ok(&mut a, &["MULTI"]);
    for k in &keys {
        queued(&mut a, &["INCR", k]);
    }
    let expected = format!("*{}\r\n{}", keys.len(), ":6\r\n".repeat(keys.len()));
    a.roundtrip(&encode(&["EXEC"]), expected.as_bytes());
    // A RENAME from another client onto a watched key of another shard.
    let (src, dst) = (&keys[0], &keys[keys.len() - 1]);
    ok(&mut a, &["WATCH", dst]);
    ok(&mut b, &["RENAME", src, dst]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["GET", dst]);
    a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
    let mut del = vec!["DEL"];
    del.extend(keys.iter().map(String::as_str));
    b.cmd(&del);
}

/// Redis 7: a watched key that expires aborts EXEC; one already expired when
/// watched does not.
fn watch_and_expiry(server: &Server) {
    let key = key_on_shard("tx-expire", server.shards - 1, server.shards);
    let mut a = conn_for(server, &key);
    ok(&mut a, &["SET", &key, "v", "PX", "100"]);
    ok(&mut a, &["WATCH", &key]);
    thread::sleep(Duration::from_millis(200));
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["GET", &key]);
    a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
    ok(&mut a, &["WATCH", &key]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["GET", &key]);
    a.roundtrip(&encode(&["EXEC"]), b"*1\r\n$-1\r\n");
    // The same with a connection command in the queue (forward mode runs it in turn).
    ok(&mut a, &["SET", &key, "v", "PX", "100"]);
    ok(&mut a, &["WATCH", &key]);
    thread::sleep(Duration::from_millis(200));
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["PING"]);
    a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
}

/// FLUSHALL touches the watched keys that exist, not the missing ones.
fn watch_and_flushall(server: &Server) {
    let key = key_on_shard("tx-flush", server.shards - 1, server.shards);
    let missing = key_on_shard("tx-flush-missing", 0, server.shards);
    let mut a = conn_for(server, &key);
    let mut b = conn_for(server, &key);
    ok(&mut a, &["SET", &key, "v"]);
    ok(&mut a, &["WATCH", &key]);
    ok(&mut b, &["FLUSHALL"]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["GET", &key]);
    a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
    let mut m = conn_for(server, &missing);
    ok(&mut m, &["WATCH", &missing]);
    ok(&mut b, &["FLUSHALL"]);
    ok(&mut m, &["MULTI"]);
    queued(&mut m, &["GET", &missing]);
    m.roundtrip(&encode(&["EXEC"]), b"*1\r\n$-1\r\n");
}

/// Forward mode (one server, 16 databases): FLUSHDB of another database leaves the
/// watch alone, SWAPDB with the watched key's database touches it; the client's
/// own write touches its watch too.
fn watch_flushdb_swapdb_and_own_writes(server: &Server) {
    let key = key_on_shard("tx-swap", server.shards - 1, server.shards);
    let mut a = conn_for(server, &key);
    let mut b = conn_for(server, &key);
    ok(&mut a, &["SET", &key, "v"]);
    ok(&mut a, &["WATCH", &key]);
    ok(&mut b, &["SELECT", "9"]);
    ok(&mut b, &["FLUSHDB"]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["GET", &key]);
    a.roundtrip(&encode(&["EXEC"]), b"*1\r\n$1\r\nv\r\n");
    ok(&mut a, &["WATCH", &key]);
    ok(&mut b, &["SWAPDB", "0", "9"]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["GET", &key]);
    a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
    ok(&mut b, &["SWAPDB", "0", "9"]);
    ok(&mut a, &["WATCH", &key]);
    ok(&mut a, &["SET", &key, "mine"]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["GET", &key]);
    a.roundtrip(&encode(&["EXEC"]), b"*-1\r\n");
    a.cmd(&["DEL", &key]);
}

fn blocking_commands_do_not_block(server: &Server) {
    let key = key_on_shard("tx-block", server.shards - 1, server.shards);
    let mut a = conn_for(server, &key);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["BLPOP", &key, "0"]);
    queued(&mut a, &["BRPOPLPUSH", &key, &key, "0"]);
    a.roundtrip(&encode(&["EXEC"]), b"*2\r\n*-1\r\n$-1\r\n");
}

/// Every blocking command inside MULTI answers at once what it would answer on
/// a timeout, whatever its timeout (0, 5 s), with keys on one or two shards:
/// Redis runs a queued command with `CLIENT_DENY_BLOCKING`. Its argument errors
/// are found at EXEC, as Redis finds them. RESP2 nulls of each reply's type, RESP3
/// `_` (checked against redis-server 7.0). (Redis 7.0's WAIT answers `:0` here, but
/// Ruvio has no WAIT.)
fn every_blocking_command_in_multi_answers_at_once(server: &Server, resp3: bool) {
    let l1 = key_on_shard("tx-bl1-", 0, server.shards);
    let l2 = key_on_shard("tx-bl2-", server.shards - 1, server.shards);
    let z1 = key_on_shard("tx-bz1-", server.shards - 1, server.shards);
    let z2 = key_on_shard("tx-bz2-", 0, server.shards);
    let s1 = key_on_shard("tx-bs1-", 0, server.shards);
    let s2 = key_on_shard("tx-bs2-", server.shards - 1, server.shards);
    let text = key_on_shard("tx-bt-", 0, server.shards);
    let mut a = server.raw();
    ok(&mut a, &["SET", &text, "v"]);
    ok(&mut a, &["XGROUP", "CREATE", &s2, "g", "$", "MKSTREAM"]);
    if resp3 {
        a.cmd(&["HELLO", "3"]);
    }
    let queue: &[&[&str]] = &[
        &["BLPOP", &l1, "0"],
        &["BRPOP", &l1, &l2, "5"],
        &["BLMOVE", &l1, &l2, "LEFT", "RIGHT", "0"],
        &["BRPOPLPUSH", &l1, &l2, "0"],
        &["BLMPOP", "0", "2", &l1, &l2, "LEFT"],
        &["BLMPOP", "5", "1", &l1, "RIGHT", "COUNT", "3"],
        &["BZPOPMIN", &z1, "0"],
        &["BZPOPMAX", &z1, &z2, "5"],
        &["BZMPOP", "0", "2", &z1, &z2, "MIN"],
        &["XREAD", "BLOCK", "0", "STREAMS", &s1, "$"],
        &["XREAD", "BLOCK", "5000", "STREAMS", &s1, "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "0",
            "STREAMS",
            &s2,
            ">",
        ],
        &["BLPOP", &l1, "-1"],
        &["BLPOP", &l1, "abc"],
        &["BLPOP", &text, "0"],
        &["XREAD", "BLOCK", "-5", "STREAMS", &s1, "$"],
    ];
    let null = |resp2: &'static str| -> &'static str {
        if resp3 {
            "_\r\n"
        } else {
            resp2
        }
    };
    let mut expected = format!("*{}\r\n", queue.len());
    for resp2 in ["*-1\r\n", "*-1\r\n", "$-1\r\n", "$-1\r\n"] {
        expected.push_str(null(resp2));
    }
    for _ in 0..8 {
        expected.push_str(null("*-1\r\n"));
    }
    expected.push_str("-ERR timeout is negative\r\n");
    expected.push_str("-ERR timeout is not a float or out of range\r\n");
    expected.push_str("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    expected.push_str("-ERR timeout is negative\r\n");
    let started = std::time::Instant::now();
    ok(&mut a, &["MULTI"]);
    for command in queue {
        queued(&mut a, command);
    }
    a.roundtrip(&encode(&["EXEC"]), expected.as_bytes());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(3),
        "EXEC waited {:?}",
        started.elapsed()
    );
    a.cmd(&["DEL", &text, &s2]);
}

fn client_list_and_commandstats(server: &Server) {
    let key = key_on_shard("tx-stats", 0, server.shards);
    let mut a = conn_for(server, &key);
    let mut b = conn_for(server, &key);
    ok(&mut a, &["CLIENT", "SETNAME", "txer"]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["SET", &key, "1"]);
    queued(&mut a, &["SET", &key, "2"]);
    let list = b.cmd(&["CLIENT", "LIST"]);
    let line = String::from_utf8_lossy(&list)
        .lines()
        .find(|l| l.contains("name=txer"))
        .map(str::to_string)
        .expect("the client is listed");
    assert!(
        line.contains(" flags=x ") && line.contains(" multi=2 "),
        "{line}"
    );
    ok(&mut b, &["CONFIG", "RESETSTAT"]);
    a.roundtrip(&encode(&["EXEC"]), b"*2\r\n+OK\r\n+OK\r\n");
    let stats = String::from_utf8_lossy(&a.cmd(&["INFO", "commandstats"])).to_string();
    assert!(stats.contains("cmdstat_exec:calls=1,"), "{stats}");
    assert!(stats.contains("cmdstat_set:calls=2,"), "{stats}");
    let list = b.cmd(&["CLIENT", "LIST"]);
    let line = String::from_utf8_lossy(&list)
        .lines()
        .find(|l| l.contains("name=txer"))
        .map(str::to_string)
        .expect("the client is listed");
    assert!(
        line.contains(" flags=N ") && line.contains(" multi=-1 "),
        "{line}"
    );
    a.cmd(&["DEL", &key]);
}

/// RESET ends the transaction and the watches.
fn reset_ends_it(server: &Server) {
    let key = key_on_shard("tx-reset", 0, server.shards);
    let mut a = conn_for(server, &key);
    let mut b = conn_for(server, &key);
    ok(&mut a, &["WATCH", &key]);
    ok(&mut a, &["MULTI"]);
    queued(&mut a, &["SET", &key, "1"]);
    a.roundtrip(&encode(&["RESET"]), b"+RESET\r\n");
    a.roundtrip(&encode(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
    ok(&mut b, &["SET", &key, "2"]);
    ok(&mut a, &["MULTI"]);
    a.roundtrip(&encode(&["EXEC"]), b"*0\r\n");
    b.cmd(&["DEL", &key]);
}

fn all_cases(server: &Server) {
    queues_and_runs_with_per_command_errors(server);
    misuse_errors(server);
    refused_command_aborts_exec(server);
    watch_touched_by_another_client(server);
    watch_and_expiry(server);
    watch_and_flushall(server);
    blocking_commands_do_not_block(server);
    client_list_and_commandstats(server);
    reset_ends_it(server);
}

/// Per-shard mode: keys of another node answer MOVED, keys of two slots CROSSSLOT,
/// and either aborts the transaction, as Redis Cluster.
fn cluster_rules(server: &Server) {
    let here = key_on_shard("tx-cl", 0, server.shards);
    let there = key_on_shard("tx-cl", 1, server.shards);
    let mut c = conn_for(server, &here);
    ok(&mut c, &["MULTI"]);
    let moved = c.cmd(&["SET", &there, "1"]);
    assert!(moved.starts_with(b"-MOVED "), "{}", show(&moved));
    c.roundtrip(
        &encode(&["EXEC"]),
        b"-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    let other_slot = (0..)
        .map(|i| format!("tx-cl2-{i}"))
        .find(|k| {
            shard_of_key(k, server.shards) == 0
                && key_slot(k.as_bytes()) != key_slot(here.as_bytes())
        })
        .expect("a key in another slot of shard 0");
    ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SET", &here, "1"]);
    // Each command is checked alone when queued; EXEC checks them together.
    queued(&mut c, &["SET", &other_slot, "1"]);
    c.roundtrip(
        &encode(&["EXEC"]),
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
    );
    c.roundtrip(&encode(&["EXEC"]), b"-ERR EXEC without MULTI\r\n");
    c.roundtrip(&encode(&["EXISTS", &here]), b":0\r\n");
    // WATCH follows the same rules.
    let moved = c.cmd(&["WATCH", &there]);
    assert!(moved.starts_with(b"-MOVED "), "{}", show(&moved));
    c.roundtrip(
        &encode(&["WATCH", &here, &other_slot]),
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n",
    );
}

/// A writer moves one unit between two keys on different shards in transactions;
/// readers, in transactions too, always see the sum intact.
fn atomic_across_shards(server: &Server) {
    let n = server.shards.max(2);
    let a = key_on_shard("tx-atom", 0, n);
    let b = key_on_shard("tx-atom", n - 1, n);
    let mut setup = server.raw();
    ok(&mut setup, &["MSET", &a, "1000", &b, "1000"]);
    let rounds = 300;
    let writer = {
        let (a, b, mut c) = (a.clone(), b.clone(), server.raw());
        thread::spawn(move || {
            for _ in 0..rounds {
                ok(&mut c, &["MULTI"]);
                queued(&mut c, &["DECR", &a]);
                queued(&mut c, &["INCR", &b]);
                let reply = c.cmd(&["EXEC"]);
                assert!(reply.starts_with(b"*2\r\n:"), "{}", show(&reply));
            }
        })
    };
    let readers = sum_readers(server, (&a, &b), rounds, &["0", "0"]);
    join_all(writer, readers);
    setup.roundtrip(&encode(&["DEL", &a, &b]), b":2\r\n");
}

/// The same with server commands in the writer's queue (CLIENT SETNAME, INFO and
/// CONFIG SET, whose answers are gathered from every shard in forward mode): still
/// never seen half-applied, the replies in order, the connection's state set. Once
/// with the two keys on different shards, once on one shard.
fn atomic_with_server_commands(server: &Server) {
    let n = server.shards.max(2);
    for (first, second) in [(0, n - 1), (n - 1, n - 1)] {
        let a = key_on_shard("tx-srv-a", first, n);
        let b = key_on_shard("tx-srv-b", second, n);
        let mut setup = server.raw();
        ok(&mut setup, &["MSET", &a, "1000", &b, "1000"]);
        let rounds = 150;
        let writer = {
            let (a, b, mut c) = (a.clone(), b.clone(), server.raw());
            thread::spawn(move || {
                for i in 0..rounds {
                    let name = format!("w{i}");
                    ok(&mut c, &["MULTI"]);
                    queued(&mut c, &["DECR", &a]);
                    queued(&mut c, &["CLIENT", "SETNAME", &name]);
                    queued(&mut c, &["INFO", "server"]);
                    queued(&mut c, &["CONFIG", "SET", "maxmemory-samples", "5"]);
                    queued(&mut c, &["INCR", &b]);
                    let reply = c.cmd(&["EXEC"]);
                    let Value::Array(items) = decode(&reply) else {
                        panic!("not an array: {}", show(&reply));
                    };
                    assert_eq!(items.len(), 5, "{}", show(&reply));
                    assert_eq!(items[1].text(), "OK", "{}", show(&reply));
                    assert!(
                        items[2].text().contains("redis_version:"),
                        "{}",
                        show(&reply)
                    );
                    assert_eq!(items[3].text(), "OK", "{}", show(&reply));
                    let (x, y) = (items[0].text(), items[4].text());
                    let sum = x.parse::<i64>().unwrap() + y.parse::<i64>().unwrap();
                    assert_eq!(sum, 2000, "{}", show(&reply));
                    let got = c.cmd(&["CLIENT", "GETNAME"]);
                    assert_eq!(got, format!("${}\r\n{name}\r\n", name.len()).as_bytes());
                }
            })
        };
        let readers = sum_readers(server, (&a, &b), rounds, &["0", "0"]);
        join_all(writer, readers);
        setup.roundtrip(&encode(&["DEL", &a, &b]), b":2\r\n");
    }
}

/// A queue with a command every shard answers (DBSIZE) and one that needs the
/// connection, on one shard's key: from connections of every shard (forward mode
/// spreads them), so on the key's owner every key is lent at once.
fn every_shard_and_connection_commands(server: &Server) {
    let key = key_on_shard("tx-dbsize", 0, server.shards);
    let mut setup = server.raw();
    setup.cmd(&["FLUSHALL"]);
    for i in 0..(2 * server.shards) {
        let mut c = server.raw();
        let name = format!("c{i}");
        ok(&mut c, &["MULTI"]);
        queued(&mut c, &["SET", &key, "v"]);
        queued(&mut c, &["DBSIZE"]);
        queued(&mut c, &["CLIENT", "SETNAME", &name]);
        queued(&mut c, &["GET", &key]);
        c.roundtrip(&encode(&["EXEC"]), b"*4\r\n+OK\r\n:1\r\n+OK\r\n$1\r\nv\r\n");
        let got = c.cmd(&["CLIENT", "GETNAME"]);
        assert_eq!(got, format!("${}\r\n{name}\r\n", name.len()).as_bytes());
    }
    setup.roundtrip(&encode(&["DEL", &key]), b":1\r\n");
}

/// SWAPDB inside a transaction over keys of two shards: the keys named after it
/// are the other database's, and a writer whose transactions move a unit between
/// the keys in both databases (swapping twice) is never seen half-way by readers
/// of either database.
fn swapdb_in_transactions(server: &Server) {
    let n = server.shards.max(2);
    let a = key_on_shard("tx-swap-a", 0, n);
    let b = key_on_shard("tx-swap-b", n - 1, n);
    let mut c = server.raw();
    ok(&mut c, &["MSET", &a, "1", &b, "1"]);
    ok(&mut c, &["SELECT", "1"]);
    ok(&mut c, &["MSET", &a, "10", &b, "10"]);
    ok(&mut c, &["SELECT", "0"]);
    ok(&mut c, &["MULTI"]);
    queued(&mut c, &["INCR", &a]);
    queued(&mut c, &["SWAPDB", "0", "1"]);
    queued(&mut c, &["INCR", &a]);
    queued(&mut c, &["INCR", &b]);
    c.roundtrip(&encode(&["EXEC"]), b"*4\r\n:2\r\n+OK\r\n:11\r\n:11\r\n");
    c.roundtrip(
        &encode(&["MGET", &a, &b]),
        b"*2\r\n$2\r\n11\r\n$2\r\n11\r\n",
    );
    ok(&mut c, &["SELECT", "1"]);
    c.roundtrip(&encode(&["MGET", &a, &b]), b"*2\r\n$1\r\n2\r\n$1\r\n1\r\n");
    ok(&mut c, &["MSET", &a, "1000", &b, "1000"]);
    ok(&mut c, &["SELECT", "0"]);
    ok(&mut c, &["MSET", &a, "1000", &b, "1000"]);
    move_units_while_swapping(server, (&a, &b), |b| vec!["INCR".into(), b.into()]);
}

/// SWAPDB inside a transaction over keys of two shards that also runs scripts
/// reaching undeclared keys and SORT ... BY/GET, which borrow keys while the queue
/// runs: after a swap they read the other database, and the same key name is
/// borrowed in both databases within one transaction. Readers of either database
/// never see a unit moved half-way.
fn swapdb_with_scripts_in_transactions(server: &Server) {
    let n = server.shards.max(2);
    let a = key_on_shard("tx-swap-script-a", 0, n);
    let b = key_on_shard("tx-swap-script-b", n - 1, n);
    let w = key_on_shard("tx-swap-script-w", n - 1, n);
    // The list's one element is empty: SORT's GET pattern names `w` itself.
    let pattern = format!("{w}*");
    let mut c = server.raw();
    for (db, value) in [("1", "db1"), ("0", "db0")] {
        ok(&mut c, &["SELECT", db]);
        ok(&mut c, &["SET", &w, value]);
        c.cmd(&["DEL", &a]);
        c.roundtrip(&encode(&["RPUSH", &a, ""]), b":1\r\n");
    }
    ok(&mut c, &["MULTI"]);
    queued(&mut c, &["SORT", &a, "BY", "nosort", "GET", &pattern]);
    queued(&mut c, &["SWAPDB", "0", "1"]);
    queued(&mut c, &["SORT", &a, "BY", "nosort", "GET", &pattern]);
    queued(
        &mut c,
        &["EVAL", "return redis.call('GET', ARGV[1])", "0", &w],
    );
    queued(&mut c, &["SWAPDB", "0", "1"]);
    queued(
        &mut c,
        &["EVAL", "return redis.call('GET', ARGV[1])", "0", &w],
    );
    c.roundtrip(
        &encode(&["EXEC"]),
        b"*6\r\n*1\r\n$3\r\ndb0\r\n+OK\r\n*1\r\n$3\r\ndb1\r\n$3\r\ndb1\r\n+OK\r\n$3\r\ndb0\r\n",
    );
    c.roundtrip(&encode(&["GET", &w]), b"$3\r\ndb0\r\n");
    ok(&mut c, &["SELECT", "1"]);
    c.roundtrip(&encode(&["GET", &w]), b"$3\r\ndb1\r\n");
    for db in ["1", "0"] {
        ok(&mut c, &["SELECT", db]);
        c.cmd(&["DEL", &a, &w]);
        ok(&mut c, &["MSET", &a, "1000", &b, "1000"]);
    }
    move_units_while_swapping(server, (&a, &b), |b| {
        ["EVAL", INCRBY_SCRIPT, "0", b, "1"]
            .map(String::from)
            .to_vec()
    });
}

/// A writer whose 100 transactions each move a unit from `a` to `b` (`incr_b`
/// is the increment of `b` it queues) and swap databases 0 and 1 twice, beside
/// readers of both databases (never half a transaction seen); then each database
/// holds 900 and 1100, and the keys are deleted.
fn move_units_while_swapping(
    server: &Server,
    (a, b): (&str, &str),
    incr_b: fn(&str) -> Vec<String>,
) {
    let rounds = 100;
    let writer = {
        let (a, increment, mut c) = (a.to_string(), incr_b(b), server.raw());
        thread::spawn(move || {
            let increment: Vec<&str> = increment.iter().map(String::as_str).collect();
            for _ in 0..rounds {
                ok(&mut c, &["MULTI"]);
                for _ in 0..2 {
                    queued(&mut c, &["DECR", &a]);
                    queued(&mut c, &increment);
                    queued(&mut c, &["SWAPDB", "0", "1"]);
                }
                let reply = c.cmd(&["EXEC"]);
                assert!(reply.starts_with(b"*6\r\n:"), "{}", show(&reply));
            }
        })
    };
    let readers = sum_readers(server, (a, b), rounds, &["0", "1"]);
    join_all(writer, readers);
    let expected = format!(
        "*2\r\n$3\r\n{}\r\n$4\r\n{}\r\n",
        1000 - rounds,
        1000 + rounds
    );
    let mut c = server.raw();
    for db in ["1", "0"] {
        ok(&mut c, &["SELECT", db]);
        c.roundtrip(&encode(&["MGET", a, b]), expected.as_bytes());
        c.roundtrip(&encode(&["DEL", a, b]), b":2\r\n");
    }
}

/// Plain SWAPDBs from one client beside locked scripts moving units between keys
/// of two shards (in batches, keeping borrowed keys between runs) and SWAPDB
/// transactions with scripts: a SWAPDB waits for a quiet server under the script
/// lock and runs on every shard at once, so no unit is lost (before, a swap on a
/// shard holding a batch's borrowed keys moved them under their names: about half
/// the units were lost in seconds) and readers of either database never see a
/// swap on one shard only.
fn swapdb_beside_scripts_and_transactions(server: &Server) {
    let n = server.shards.max(2);
    let a = key_on_shard("swap-beside-a", 0, n);
    let b = key_on_shard("swap-beside-b", n - 1, n);
    let mut c = server.raw();
    for db in ["1", "0"] {
        ok(&mut c, &["SELECT", db]);
        ok(&mut c, &["MSET", &a, "1000", &b, "1000"]);
    }
    let rounds = 150;
    let swapper = {
        let mut c = server.raw();
        thread::spawn(move || {
            for _ in 0..rounds {
                ok(&mut c, &["SWAPDB", "0", "1"]);
            }
        })
    };
    let scripters: Vec<_> = (0..2)
        .map(|_| {
            let (a, b, mut c) = (a.clone(), b.clone(), server.raw());
            thread::spawn(move || {
                let give = "redis.call('INCRBY', ARGV[1], -1) \
                            return redis.call('INCRBY', ARGV[2], 1)";
                for _ in 0..rounds {
                    let reply = c.cmd(&["EVAL", give, "0", &a, &b]);
                    assert_eq!(reply[0], b':', "{}", show(&reply));
                }
            })
        })
        .collect();
    let writer = {
        let (a, b, mut c) = (a.clone(), b.clone(), server.raw());
        thread::spawn(move || {
            for _ in 0..rounds / 3 {
                ok(&mut c, &["MULTI"]);
                queued(&mut c, &["DECR", &a]);
                queued(&mut c, &["EVAL", INCRBY_SCRIPT, "0", &b, "1"]);
                queued(&mut c, &["SWAPDB", "0", "1"]);
                let reply = c.cmd(&["EXEC"]);
                assert!(reply.starts_with(b"*3\r\n:"), "{}", show(&reply));
            }
        })
    };
    let readers = sum_readers(server, (&a, &b), rounds, &["0", "1"]);
    join_all(swapper, readers);
    writer.join().expect("writer");
    for s in scripters {
        s.join().expect("scripter");
    }
    let mut total = 0;
    for db in ["1", "0"] {
        ok(&mut c, &["SELECT", db]);
        for key in [&a, &b] {
            let value = decode(&c.cmd(&["GET", key])).text();
            total += value.parse::<i64>().expect("a number");
        }
        c.roundtrip(&encode(&["DEL", &a, &b]), b":2\r\n");
    }
    assert_eq!(total, 4000, "units lost");
}

/// One reader per database in `dbs`, each reading keys `a` and `b` in a
/// transaction `rounds` times: their values always sum to 2000.
fn sum_readers(
    server: &Server,
    (a, b): (&str, &str),
    rounds: usize,
    dbs: &[&'static str],
) -> Vec<thread::JoinHandle<()>> {
    dbs.iter()
        .map(|&db| {
            let (a, b, mut c) = (a.to_string(), b.to_string(), server.raw());
            thread::spawn(move || {
                ok(&mut c, &["SELECT", db]);
                for _ in 0..rounds {
                    ok(&mut c, &["MULTI"]);
                    queued(&mut c, &["GET", &a]);
                    queued(&mut c, &["GET", &b]);
                    let reply = c.cmd(&["EXEC"]);
                    let Value::Array(items) = decode(&reply) else {
                        panic!("not an array: {}", show(&reply));
                    };
                    let sum: i64 = items
                        .iter()
                        .map(|x| x.text().parse::<i64>().expect("a number"))
                        .sum();
                    assert_eq!(sum, 2000, "half-applied transaction seen: {}", show(&reply));
                }
            })
        })
        .collect()
}

fn join_all(writer: thread::JoinHandle<()>, readers: Vec<thread::JoinHandle<()>>) {
    writer.join().expect("writer");
    for r in readers {
        r.join().expect("reader");
    }
}

/// Connections on every shard pipeline transactions on two keys of shard 0 (one
/// of plain commands, one with a script, which may also name keys of its slot),
/// each followed by a read of one of them; readers on every shard see the keys
/// equal at every moment. From another shard such a transaction runs on the
/// keys' owner as one message (docs/transactions.md).
fn pipelined_transactions_on_the_owner(server: &Server) {
    let tag = key_on_shard("txo", 0, server.shards);
    let (x, y) = (format!("{{{tag}}}:x"), format!("{{{tag}}}:y"));
    let mut setup = server.raw();
    setup.cmd(&["DEL", &x, &y]);
    let rounds = 40;
    let writers: Vec<_> = (0..server.shards)
        .map(|shard| {
            let (x, y) = (x.clone(), y.clone());
            let mut c = RawConn::connect(server.shard_port(shard));
            thread::spawn(move || {
                for _ in 0..rounds {
                    let script = "redis.call('INCR', KEYS[1]); return redis.call('INCR', KEYS[2])";
                    let mut request = Vec::new();
                    for tx in [
                        vec![vec!["INCR", x.as_str()], vec!["INCR", y.as_str()]],
                        vec![vec!["EVAL", script, "2", x.as_str(), y.as_str()]],
                    ] {
                        request.extend(encode(&["MULTI"]));
                        for command in &tx {
                            request.extend(encode(command));
                        }
                        request.extend(encode(&["EXEC"]));
                        request.extend(encode(&["GET", &x]));
                    }
                    c.send(&request);
                    for commands in [2, 1] {
                        assert_eq!(c.read_reply(), b"+OK\r\n");
                        for _ in 0..commands {
                            assert_eq!(c.read_reply(), b"+QUEUED\r\n");
                        }
                        let Value::Array(items) = decode(&c.read_reply()) else {
                            panic!("EXEC did not answer an array");
                        };
                        let last = items.last().expect("a reply per command").text();
                        let after = decode(&c.read_reply()).text();
                        // Never older than the EXEC's own result (answered in order);
                        // newer when another writer's transaction came between, as
                        // with one Redis.
                        let number = |text: &str| text.parse::<u64>().expect("a count");
                        assert!(
                            number(&after) >= number(&last),
                            "GET after EXEC: {after} < {last}"
                        );
                    }
                }
            })
        })
        .collect();
    let readers: Vec<_> = (0..server.shards)
        .map(|shard| {
            let (x, y) = (x.clone(), y.clone());
            let mut c = RawConn::connect(server.shard_port(shard));
            thread::spawn(move || {
                for _ in 0..rounds * 4 {
                    let reply = c.cmd(&["MGET", &x, &y]);
                    let Value::Array(items) = decode(&reply) else {
                        panic!("not an array: {}", show(&reply));
                    };
                    assert_eq!(items[0], items[1], "half-applied transaction seen");
                }
            })
        })
        .collect();
    for t in writers.into_iter().chain(readers) {
        t.join().expect("client");
    }
    let total = (2 * rounds * server.shards).to_string();
    setup.roundtrip(
        &encode(&["MGET", &x, &y]),
        format!(
            "*2\r\n${n}\r\n{total}\r\n${n}\r\n{total}\r\n",
            n = total.len()
        )
        .as_bytes(),
    );
    setup.cmd(&["DEL", &x, &y]);
}

/// Clients increment a counter of another shard with WATCH / GET / MULTI / SET /
/// EXEC, retrying when EXEC answers null: no increment is lost.
fn watch_retry_loop_loses_nothing(server: &Server) {
    let key = key_on_shard("tx-counter", server.shards - 1, server.shards);
    let per_client = 100;
    let clients: Vec<_> = (0..3)
        .map(|_| {
            let (key, mut c) = (key.clone(), conn_for(server, &key));
            thread::spawn(move || {
                let mut done = 0;
                while done < per_client {
                    ok(&mut c, &["WATCH", &key]);
                    let n: i64 = match decode(&c.cmd(&["GET", &key])) {
                        Value::Nil => 0,
                        v => v.text().parse().expect("a number"),
                    };
                    ok(&mut c, &["MULTI"]);
                    queued(&mut c, &["SET", &key, &(n + 1).to_string()]);
                    if c.cmd(&["EXEC"]) != b"*-1\r\n" {
                        done += 1;
                    }
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("client");
    }
    let mut c = conn_for(server, &key);
    c.roundtrip(&encode(&["GET", &key]), b"$3\r\n300\r\n");
    c.cmd(&["DEL", &key]);
}

#[test]
fn forward_one_shard() {
    let server = Server::forward(1);
    all_cases(&server);
    watch_flushdb_swapdb_and_own_writes(&server);
    watch_retry_loop_loses_nothing(&server);
}

#[test]
fn forward_two_shards() {
    let server = Server::forward(2);
    all_cases(&server);
    watch_flushdb_swapdb_and_own_writes(&server);
    watch_across_shards(&server);
    atomic_across_shards(&server);
    atomic_with_server_commands(&server);
    every_shard_and_connection_commands(&server);
    swapdb_in_transactions(&server);
    swapdb_with_scripts_in_transactions(&server);
    swapdb_beside_scripts_and_transactions(&server);
    pipelined_transactions_on_the_owner(&server);
    watch_retry_loop_loses_nothing(&server);
}

#[test]
fn blocking_commands_in_multi_one_shard() {
    let server = Server::forward(1);
    every_blocking_command_in_multi_answers_at_once(&server, false);
    every_blocking_command_in_multi_answers_at_once(&server, true);
}

#[test]
fn blocking_commands_in_multi_two_shards() {
    let server = Server::forward(2);
    every_blocking_command_in_multi_answers_at_once(&server, false);
    every_blocking_command_in_multi_answers_at_once(&server, true);
}

#[test]
fn forward_four_shards() {
    let server = Server::forward(4);
    all_cases(&server);
    watch_flushdb_swapdb_and_own_writes(&server);
    watch_across_shards(&server);
    atomic_across_shards(&server);
    atomic_with_server_commands(&server);
    every_shard_and_connection_commands(&server);
    swapdb_in_transactions(&server);
    swapdb_with_scripts_in_transactions(&server);
    swapdb_beside_scripts_and_transactions(&server);
}

#[test]
fn per_shard_two_shards() {
    let server = Server::per_shard(2);
    all_cases(&server);
    cluster_rules(&server);
    watch_retry_loop_loses_nothing(&server);
}

/// EXEC refused before it runs aborts with or without MULTI, as Redis's
/// rejectCommand does (execCommandAbort): EXEC alone from a client that must
/// authenticate is `-EXECABORT ... NOAUTH ...`; once authenticated, `EXEC
/// without MULTI`. 1 and 2 shards, and redis-server when installed.
#[test]
fn exec_refused_without_multi_aborts_as_redis() {
    let mut servers = vec![
        Server::ruvio(PortMode::Forward, 1),
        Server::ruvio(PortMode::Forward, 2),
    ];
    if require_redis_server("transactions").is_some() {
        servers.push(Server::redis());
    }
    for server in &servers {
        let mut admin = server.raw();
        assert_eq!(
            admin.cmd(&["config", "set", "requirepass", "pw"]),
            b"+OK\r\n"
        );
        let mut c = server.raw();
        assert_eq!(
            c.cmd(&["exec"]),
            b"-EXECABORT Transaction discarded because of: NOAUTH Authentication required.\r\n"
        );
        assert_eq!(c.cmd(&["auth", "pw"]), b"+OK\r\n");
        assert_eq!(c.cmd(&["exec"]), b"-ERR EXEC without MULTI\r\n");
    }
}
