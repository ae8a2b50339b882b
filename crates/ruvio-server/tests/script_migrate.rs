//! MIGRATE from a script (`redis.call('MIGRATE', ...)`), which redis-server 7
//! allows (the command is not `noscript`): the same scripts sent to a
//! redis-server and to Ruvio (forward mode, 2 shards: keys of both shards,
//! declared or not), each moving keys into a redis-server target of its own,
//! answer the same bytes (NOKEY, COPY, REPLACE, KEYS, BUSYKEY, a closed port,
//! the syntax, arity and integer errors, `pcall`, read-only scripts) and leave
//! the same keys on the sources and equal targets; the moved keys leave a
//! replica of the source (the script's DEL is propagated, as Redis propagates
//! a MIGRATE), and a watcher of a moved key has its EXEC fail. On a cluster
//! node, a script's MIGRATE answers as a redis-server node's (its slots, a
//! slot in flight).

mod common;

use common::replication::{compare_conns, follow, wait_for};
use common::*;

/// The keys both sources start with; `$K0`/`$K1` are keys of shard 0 and 1 of
/// the Ruvio source.
const SOURCE: &[&[&str]] = &[
    &["SET", "$K0", "zero"],
    &["SET", "$K1", "one"],
    &["RPUSH", "$K0:l", "a", "b"],
    &["HSET", "$K1:h", "f", "v"],
    &["SET", "ttl", "t"],
    &["PEXPIRE", "ttl", "100000"],
    &["SET", "busy", "mine"],
    &["SET", "copied", "c"],
];

/// What the targets hold before: the BUSYKEY case.
const TARGET: &[&[&str]] = &[&["SET", "busy", "theirs"]];

/// The calls; `$T` is the source's own target, `$BAD` a port nobody listens on.
const CALLS: &[&[&str]] = &[
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000)", "1", "$K0", "$T"],
    &["EXISTS", "$K0"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000)", "1", "$K0", "$T"],
    // Undeclared keys of both shards, in one call.
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], '', 0, 5000, 'KEYS', ARGV[2], ARGV[3], 'nosuch')", "0", "$T", "$K1", "$K0:l"],
    &["EXISTS", "$K1", "$K0:l"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000, 'COPY')", "1", "copied", "$T"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000, 'COPY', 'REPLACE')", "1", "copied", "$T"],
    &["EVAL", "redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000) return redis.call('EXISTS', KEYS[1])", "1", "ttl", "$T"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000)", "1", "busy", "$T"],
    &["EVAL", "return redis.pcall('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000)", "1", "busy", "$T"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 500)", "1", "busy", "$BAD"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 'x', 500)", "1", "busy", "$T"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 500, 'FOO')", "1", "busy", "$T"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0)", "1", "busy", "$T"],
    &["EVAL", "return redis.pcall('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 500, 'KEYS', 'a')", "1", "busy", "$T"],
    &["EVAL_RO", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 500)", "1", "busy", "$T"],
    &["EVAL", "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000, 'REPLACE')", "1", "busy", "$T"],
    &["EXISTS", "$K0", "$K1", "$K0:l", "$K1:h", "ttl", "busy", "copied"],
];

/// `words` with the placeholders replaced: `$K0`/`$K1` (and their suffixed
/// forms) by `keys`, `$T` and `$BAD` by `ports`.
fn resolve(words: &[&str], keys: &[String; 2], ports: [u16; 2]) -> Vec<String> {
    words
        .iter()
        .map(|w| match *w {
            "$T" => ports[0].to_string(),
            "$BAD" => ports[1].to_string(),
            w => w.replace("$K0", &keys[0]).replace("$K1", &keys[1]),
        })
        .collect()
}

fn run(conn: &mut RawConn, words: &[String]) -> Vec<u8> {
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    conn.cmd(&words)
}

/// The same scripts to a redis-server and to Ruvio, each into a redis-server
/// target of its own: the same replies, the same keys left, equal targets.
#[test]
fn a_script_s_migrate_answers_and_moves_as_redis_server() {
    if require_redis_server("script_migrate").is_none() {
        return;
    }
    let (ruvio, redis) = (Server::ruvio(PortMode::Forward, 2), Server::redis());
    let targets = [Server::redis(), Server::redis()];
    let keys = [key_on_shard("m", 0, 2), key_on_shard("m", 1, 2)];
    let bad = free_ports(1, false);
    let mut seen = Vec::new();
    for (source, target) in [(&ruvio, &targets[0]), (&redis, &targets[1])] {
        let mut conn = source.raw();
        let mut at_target = target.raw();
        for words in SOURCE {
            run(&mut conn, &resolve(words, &keys, [target.port(), bad]));
        }
        for words in TARGET {
            at_target.cmd(words);
        }
        let replies: Vec<String> = CALLS
            .iter()
            .map(|words| {
                let reply = run(&mut conn, &resolve(words, &keys, [target.port(), bad]));
                format!("{} -> {}", words.join(" "), show(&reply))
            })
            .collect();
        seen.push(replies);
    }
    assert_eq!(seen[0], seen[1]);
    assert!(seen[0][0].ends_with(r#"-> "+OK\r\n""#), "{}", seen[0][0]);
    compare_conns(
        &mut targets[1].raw(),
        &mut targets[0].raw(),
        &["0"],
        "the targets",
    );
    compare_conns(&mut redis.raw(), &mut ruvio.raw(), &["0"], "the sources");
}

/// A script's MIGRATE deletes the moved keys as the script's DEL: a replica of
/// the source loses them (COPY keeps them), and a client watching one has its
/// EXEC fail.
#[test]
fn a_script_s_moved_keys_leave_the_replica_and_abort_a_watcher() {
    if require_redis_server("script_migrate").is_none() {
        return;
    }
    let source = Server::ruvio(PortMode::Forward, 2);
    let (replica, target) = (Server::redis(), Server::redis());
    follow(&replica, &source);
    let keys = [key_on_shard("m", 0, 2), key_on_shard("m", 1, 2)];
    let mut conn = source.raw();
    for key in keys.iter().map(String::as_str).chain(["kept"]) {
        assert_eq!(conn.cmd(&["SET", key, "v"]), b"+OK\r\n");
    }
    let mut watcher = source.raw();
    assert_eq!(watcher.cmd(&["WATCH", &keys[1]]), b"+OK\r\n");
    let port = target.port().to_string();
    let script =
        "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], '', 0, 5000, 'KEYS', ARGV[2], ARGV[3])";
    let moved = conn.cmd(&["EVAL", script, "0", &port, &keys[0], &keys[1]]);
    assert_eq!(show(&moved), show(b"+OK\r\n"));
    let copy = "return redis.call('MIGRATE', '127.0.0.1', ARGV[1], KEYS[1], 0, 5000, 'COPY')";
    let copied = conn.cmd(&["EVAL", copy, "1", "kept", &port]);
    assert_eq!(show(&copied), show(b"+OK\r\n"));
    assert_eq!(watcher.cmd(&["MULTI"]), b"+OK\r\n");
    assert_eq!(watcher.cmd(&["GET", &keys[1]]), b"+QUEUED\r\n");
    assert_eq!(watcher.cmd(&["EXEC"]), b"*-1\r\n");
    let mut at_replica = replica.raw();
    wait_for("the replica without the moved keys", || {
        at_replica.cmd(&["EXISTS", &keys[0], &keys[1], "kept"]) == b":1\r\n"
    });
    let mut at_target = target.raw();
    assert_eq!(
        at_target.cmd(&["EXISTS", &keys[0], &keys[1], "kept"]),
        b":3\r\n"
    );
}

/// On a cluster node (per-shard mode, beside a redis-server peer, and a
/// redis-server node beside its own): a script's MIGRATE of a key of the
/// node's slots to a peer that does not import it gets the peer's `-MOVED`
/// as the target's error, an undeclared key of the peer's slots is refused
/// as a non-local key, a declared one is redirected before the script runs,
/// and a migrating slot's key moves into the importing peer, the node then
/// answering `-ASK` for it: the same bytes as the redis-server node's.
#[test]
fn a_script_s_migrate_on_a_cluster_node_answers_as_redis_server() {
    if require_redis_server("script_migrate").is_none() {
        return;
    }
    let side = common::cluster_process::SideBySide::start(&unique_dir("script-migrate"));
    // `b` is slot 3300 (the tested node's), `a` 15495 (the peer's). No spaces
    // in the scripts: the transcript splits lines on them.
    let lines = [
        "SET b 1",
        "EVAL return(redis.call('MIGRATE','127.0.0.1',ARGV[1],KEYS[1],0,5000)) 1 b $P",
        "EVAL return(redis.call('MIGRATE','127.0.0.1',ARGV[1],ARGV[2],0,5000)) 0 $P a",
        "EVAL return(redis.call('MIGRATE','127.0.0.1',ARGV[1],KEYS[1],0,5000)) 1 a $P",
        "@peer CLUSTER SETSLOT 3300 IMPORTING $MYID",
        "CLUSTER SETSLOT 3300 MIGRATING $PEERID",
        "EVAL return(redis.call('MIGRATE','127.0.0.1',ARGV[1],KEYS[1],0,5000)) 1 b $P",
        "GET b",
        "@peer ASKING",
        "@peer GET b",
        "CLUSTER SETSLOT 3300 STABLE",
        "@peer CLUSTER SETSLOT 3300 STABLE",
    ];
    let [ruvio, redis] = side.replay(&lines);
    assert_eq!(ruvio, redis);
    assert!(ruvio[6].ends_with(r#"-> "+OK\r\n""#), "{}", ruvio[6]);
}
