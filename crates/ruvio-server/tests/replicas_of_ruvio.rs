//! Ruvio as a primary, on Redis's own replication protocol, forward mode with 1
//! and 2 shards. A real redis-server 7.0 replica: `REPLICAOF` on the
//! redis-server attaches it (PSYNC, a diskless full sync cut across the shards,
//! then the stream), its data ends equal to Ruvio's after every kind of write
//! (types, TTLs, SELECT, MULTI/EXEC, scripts, served blocking pops, keys
//! expiring) under several writing clients, WAIT counts it, ROLE and INFO
//! replication show it, a killed link continues with `+CONTINUE` (no second
//! full sync), `min-replicas-to-write` refuses writes with Redis's text, and
//! WAIT's errors are Redis's bytes. A Ruvio replica of a Ruvio primary (2
//! shards each, over the same single stream): the same data after the load,
//! promoted by REPLICAOF NO ONE with it.

mod common;

use common::replication::*;
use common::*;
use std::time::Duration;

fn info_field(conn: &mut RawConn, section: &str, name: &str) -> String {
    let info = decode(&conn.cmd(&["INFO", section])).text();
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// SET `count` keys `prefix0..` to `value`, pipelined 500 at a time.
fn set_keys(c: &mut RawConn, prefix: &str, count: usize, value: &str) {
    for chunk in 0..count.div_ceil(500) {
        let keys = chunk * 500..((chunk + 1) * 500).min(count);
        let mut batch = Vec::new();
        for i in keys.clone() {
            batch.extend(encode(&["SET", &format!("{prefix}{i}"), value]));
        }
        c.send(&batch);
        for _ in keys {
            c.read_reply();
        }
    }
}

fn attach(replica: &Server, primary: &Server) {
    follow(replica, primary);
    let mut p = primary.raw();
    wait_for("the replica online", || {
        info_field(&mut p, "replication", "slave0").contains("state=online")
    });
}

fn redis_replica_of_ruvio(shards: usize) {
    let primary = Server::ruvio(PortMode::Forward, shards);
    let mut p = primary.raw();
    fill(&mut p);
    let replica = Server::redis();
    attach(&replica, &primary);
    assert_eq!(sync_counts(&mut p), (1, 0));
    compare_all(&primary, &replica, "after the full sync");

    write_load(&primary, 4, 150);
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    // Keys written with PX 30 expired on the primary: their DELs reached it.
    std::thread::sleep(Duration::from_millis(100));
    p.cmd(&["SCAN", "0", "COUNT", "100000"]);
    assert_eq!(wait_all(&mut p, "1", "5000"), b":1\r\n");
    compare_all(&primary, &replica, "after the load");

    // The offsets agree, and ROLE and INFO name the replica.
    let mut r = replica.raw();
    let offset = field(&mut p, "master_repl_offset");
    wait_for("the replica's offset", || {
        field(&mut r, "slave_repl_offset") == offset
    });
    let role = decode(&p.cmd(&["ROLE"]));
    let Value::Array(role) = role else {
        panic!("ROLE: {role:?}")
    };
    assert_eq!(role[0].text(), "master");
    assert_eq!(field(&mut p, "connected_slaves"), "1");
    assert_eq!(field(&mut p, "repl_backlog_active"), "1");
    assert_eq!(
        field(&mut p, "master_replid"),
        field(&mut r, "master_replid")
    );

    // The link killed: the replica continues from the backlog.
    let killed = p.cmd(&["CLIENT", "KILL", "TYPE", "replica"]);
    assert_eq!(killed, b":1\r\n");
    p.cmd(&["SET", "after-kill", "1"]);
    wait_for("the replica back online", || {
        info_field(&mut p, "replication", "slave0").contains("state=online")
    });
    assert_eq!(sync_counts(&mut p), (1, 1), "a partial resync, no full one");
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_all(&primary, &replica, "after the partial resync");

    // min-replicas-to-write: two are wanted, one is there.
    p.cmd(&["CONFIG", "SET", "min-replicas-to-write", "2"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        p.cmd(&["SET", "k", "v"]),
        b"-NOREPLICAS Not enough good replicas to write.\r\n"
    );
    assert_eq!(p.cmd(&["GET", "after-kill"]), b"$1\r\n1\r\n");
    p.cmd(&["CONFIG", "SET", "min-replicas-to-write", "0"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.cmd(&["SET", "k", "v"]), b"+OK\r\n");
}

#[test]
fn redis_replica_of_ruvio_1_shard() {
    if require_redis_server("redis_replica_of_ruvio_1_shard").is_none() {
        return;
    }
    redis_replica_of_ruvio(1);
}

#[test]
fn redis_replica_of_ruvio_2_shards() {
    if require_redis_server("redis_replica_of_ruvio_2_shards").is_none() {
        return;
    }
    redis_replica_of_ruvio(2);
}

/// WAIT's replies and errors without replicas, byte for byte with a Redis primary.
#[test]
fn wait_replies_as_redis() {
    if require_redis_server("wait_replies_as_redis").is_none() {
        return;
    }
    let (ruvio, redis) = (Server::ruvio(PortMode::Forward, 2), Server::redis());
    let (mut a, mut b) = (ruvio.raw(), redis.raw());
    for command in [
        vec!["WAIT", "0", "0"],
        vec!["WAIT", "1", "10"],
        vec!["WAIT", "x", "0"],
        vec!["WAIT", "1", "-1"],
        vec!["WAIT", "1", "1.5"],
        vec!["WAIT", "1"],
        vec!["ROLE"],
    ] {
        let want = b.cmd(&command);
        let got = a.cmd(&command);
        if command[0] == "ROLE" {
            // The offsets differ: the shapes are Redis's.
            assert_eq!(show(&got[..10]), show(&want[..10]), "{command:?}");
            continue;
        }
        assert_eq!(show(&got), show(&want), "{command:?}");
    }
    a.cmd(&["MULTI"]);
    b.cmd(&["MULTI"]);
    for c in [&mut a, &mut b] {
        c.cmd(&["WAIT", "1", "0"]);
    }
    assert_eq!(
        show(&a.cmd(&["EXEC"])),
        show(&b.cmd(&["EXEC"])),
        "WAIT in MULTI"
    );
}

/// `SET` of another shard's key pipelined with `WAIT 1 300`, the replica
/// stopped after acknowledging everything before: WAIT counts the SET, so it
/// answers 0 at its timeout, as redis-server does. (It answered 1 at once: it
/// took the offset while the SET was still on its way to its shard.)
fn wait_after_a_pipelined_write(primary: &Server, writer: &mut RawConn, key: &str) -> Vec<u8> {
    let replica = Server::redis();
    attach(&replica, primary);
    let mut p = primary.raw();
    // No PING to the replicas moves the offset meanwhile.
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]),
        b"+OK\r\n"
    );
    assert_eq!(p.cmd(&["SET", "before", "1"]), b"+OK\r\n");
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    // The replica's once-a-second ACK covers the GETACK too.
    std::thread::sleep(Duration::from_millis(1300));
    unsafe { libc::kill(replica.pid() as i32, libc::SIGSTOP) };
    let mut pipeline = encode(&["SET", key, "v"]);
    pipeline.extend(encode(&["WAIT", "1", "300"]));
    writer.send(&pipeline);
    assert_eq!(writer.read_reply(), b"+OK\r\n");
    let waited = writer.read_reply();
    unsafe { libc::kill(replica.pid() as i32, libc::SIGCONT) };
    waited
}

#[test]
fn wait_counts_the_forwarded_writes_before_it() {
    if require_redis_server("wait_counts_the_forwarded_writes_before_it").is_none() {
        return;
    }
    let redis = Server::redis();
    let want = wait_after_a_pipelined_write(&redis, &mut redis.raw(), "k");
    assert_eq!(want, b":0\r\n");
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    let key = key_on_shard("wait-forwarded", 1, 2);
    let mut writer = conn_on_shard(&ruvio, 0);
    let got = wait_after_a_pipelined_write(&ruvio, &mut writer, &key);
    assert_eq!(show(&got), show(&want));
}

/// WAIT waits for the client's own writes (Redis's `c->woff`), not for
/// everyone's: with the replica stopped after acknowledging a client's write,
/// that client's WAIT, and that of a client that never wrote, still count it
/// while another client's write is unacknowledged; a new write of its own
/// is not counted. The replies of each step, for comparison with Redis's.
fn waits_of_writers_and_readers(primary: &Server) -> Vec<String> {
    let replica = Server::redis();
    attach(&replica, primary);
    let (mut writer, mut other, mut reader) = (primary.raw(), primary.raw(), primary.raw());
    let mut p = primary.raw();
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-ping-replica-period", "3600"]),
        b"+OK\r\n"
    );
    let mut replies = vec![
        show(&writer.cmd(&["SET", "mine", "1"])),
        show(&writer.cmd(&["WAIT", "1", "5000"])),
    ];
    // The replica's once-a-second ACK covers the GETACK too.
    std::thread::sleep(Duration::from_millis(1300));
    unsafe { libc::kill(replica.pid() as i32, libc::SIGSTOP) };
    replies.push(show(&other.cmd(&["SET", "theirs", "1"])));
    replies.push(show(&writer.cmd(&["WAIT", "1", "200"])));
    replies.push(show(&reader.cmd(&["WAIT", "1", "200"])));
    replies.push(show(&writer.cmd(&["SET", "mine", "2"])));
    replies.push(show(&writer.cmd(&["WAIT", "1", "200"])));
    unsafe { libc::kill(replica.pid() as i32, libc::SIGCONT) };
    replies
}

#[test]
fn wait_waits_for_the_clients_own_writes() {
    if require_redis_server("wait_waits_for_the_clients_own_writes").is_none() {
        return;
    }
    let want = waits_of_writers_and_readers(&Server::redis());
    assert_eq!(
        want[3..5],
        [":1", ":1"].map(|r| show(format!("{r}\r\n").as_bytes()))
    );
    for shards in [1, 2] {
        let got = waits_of_writers_and_readers(&Server::ruvio(PortMode::Forward, shards));
        assert_eq!(got, want, "{shards} shard(s)");
    }
}

#[test]
fn ruvio_replica_of_ruvio() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut p = primary.raw();
    fill(&mut p);
    let replica = Server::ruvio(PortMode::Forward, 2);
    attach(&replica, &primary);
    compare_all(&primary, &replica, "after the full sync");
    write_load(&primary, 3, 100);
    // The load's 30 ms keys expire first (on both sides), then compare.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_all(&primary, &replica, "after the load");
    let mut r = replica.raw();
    let offset = field(&mut p, "master_repl_offset");
    wait_for("the replica's offset", || {
        field(&mut r, "slave_repl_offset") == offset
    });
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["SET", "promoted", "yes"]), b"+OK\r\n");
    assert_eq!(field(&mut r, "role"), "master");
}

/// Keys evicted under `maxmemory` leave the replica too (their DELs are in the
/// stream), so it holds exactly the primary's keys.
#[test]
fn evicted_keys_leave_the_replica() {
    if require_redis_server("evicted_keys_leave_the_replica").is_none() {
        return;
    }
    let limit = (8u64 << 20).to_string();
    let args = ["--maxmemory", &limit, "--maxmemory-policy", "allkeys-lru"];
    let primary = Server::ruvio_with(PortMode::Forward, 2, &args);
    let replica = Server::redis();
    attach(&replica, &primary);
    let mut p = primary.raw();
    set_keys(&mut p, "k", 20_000, &"v".repeat(1000));
    assert_ne!(info_field(&mut p, "stats", "evicted_keys"), "0");
    // At the limit any allocation (the comparison's own KEYS replies) evicts
    // more: lift it, then compare.
    assert_eq!(p.cmd(&["CONFIG", "SET", "maxmemory", "0"]), b"+OK\r\n");
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    let mut r = replica.raw();
    assert_eq!(show(&r.cmd(&["DBSIZE"])), show(&p.cmd(&["DBSIZE"])));
    compare_all(&primary, &replica, "after the evictions");
}

/// A replica's side of the protocol by hand: PSYNC, the RDB skipped, the first
/// ACK, then the stream's commands one by one.
fn raw_replica(primary: &Server) -> RawConn {
    let mut r = primary.raw();
    assert_eq!(r.cmd(&["REPLCONF", "listening-port", "1"]), b"+OK\r\n");
    assert_eq!(
        r.cmd(&["REPLCONF", "capa", "eof", "capa", "psync2"]),
        b"+OK\r\n"
    );
    r.send(&encode(&["PSYNC", "?", "-1"]));
    let line = r.read_until(b"\r\n");
    assert!(line.starts_with(b"+FULLRESYNC "), "{}", show(&line));
    let eof = r.read_until(b"\r\n");
    let mark = eof[5..eof.len() - 2].to_vec();
    assert!(
        eof.starts_with(b"$EOF:") && mark.len() == 40,
        "{}",
        show(&eof)
    );
    r.read_until(&mark);
    // As a replica does once its RDB is loaded: the stream starts after it.
    r.send(&encode(&["REPLCONF", "ACK", "0"]));
    r
}

/// The next command of the stream, PINGs and SELECTs skipped, as words.
fn next_command(r: &mut RawConn) -> Vec<String> {
    loop {
        let Value::Array(words) = decode(&r.read_reply()) else {
            panic!("not a command")
        };
        let words: Vec<String> = words.iter().map(Value::text).collect();
        if !["PING", "SELECT"].contains(&words[0].to_uppercase().as_str()) {
            return words;
        }
    }
}

/// A transaction and a script whose keys live on both shards reach the replica
/// as one MULTI/EXEC each: a replica never shows half of them.
#[test]
fn cross_shard_transactions_replicate_as_one() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let mut stream = raw_replica(&primary);
    let (a, b) = (key_on_shard("a", 0, 2), key_on_shard("b", 1, 2));
    let mut c = primary.raw();
    c.cmd(&["MULTI"]);
    c.cmd(&["SET", &a, "1"]);
    c.cmd(&["INCR", &b]);
    assert_eq!(c.cmd(&["EXEC"]), b"*2\r\n+OK\r\n:1\r\n");
    let script = "redis.call('incr', KEYS[1]); return redis.call('incr', KEYS[2])";
    assert_eq!(c.cmd(&["EVAL", script, "2", &a, &b]), b":2\r\n");
    for _ in 0..2 {
        assert_eq!(next_command(&mut stream), ["MULTI"]);
        let mut keys = Vec::new();
        loop {
            let words = next_command(&mut stream);
            if words[0] == "EXEC" {
                break;
            }
            keys.push(words[1].clone());
        }
        keys.sort();
        let mut want = vec![a.clone(), b.clone()];
        want.sort();
        assert_eq!(keys, want, "both shards' keys in one MULTI/EXEC");
    }
}

/// FAILOVER's errors, byte for byte with a redis-server primary, with no
/// replica and then with one.
#[test]
fn failover_errors_match_redis() {
    if require_redis_server("failover_errors_match_redis").is_none() {
        return;
    }
    let (ruvio, redis) = (Server::ruvio(PortMode::Forward, 2), Server::redis());
    // (A bare FAILOVER would start one with a replica: only errors here.)
    let commands: Vec<Vec<&str>> = vec![
        vec!["FAILOVER", "ABORT"],
        vec!["FAILOVER", "TIMEOUT", "0"],
        vec!["FAILOVER", "TIMEOUT", "x"],
        vec!["FAILOVER", "FORCE"],
        vec!["FAILOVER", "TO", "h"],
        vec!["FAILOVER", "TO", "h", "x"],
        vec!["FAILOVER", "ABORT", "x"],
        vec!["FAILOVER", "FORCE", "FORCE"],
        vec!["FAILOVER", "TO", "127.0.0.1", "1", "FORCE"],
        vec!["FAILOVER", "TO", "127.0.0.9", "1"],
        vec!["PSYNC", "x", "1", "FAILOVER"],
    ];
    let compare = |stage: &str| {
        let (mut a, mut b) = (ruvio.raw(), redis.raw());
        for command in &commands {
            assert_eq!(
                show(&a.cmd(command)),
                show(&b.cmd(command)),
                "{stage}: {command:?}"
            );
        }
    };
    compare("no replica");
    assert_eq!(
        show(&ruvio.raw().cmd(&["FAILOVER"])),
        show(&redis.raw().cmd(&["FAILOVER"]))
    );
    let (ra, rb) = (Server::redis(), Server::redis());
    attach(&ra, &ruvio);
    attach(&rb, &redis);
    compare("one replica");
}

/// After a failover the new primary takes writes and the old one has them.
fn writes_reach_the_old_primary(new: &Server, old: &Server) {
    let mut r = new.raw();
    assert_eq!(r.cmd(&["SET", "after", "failover"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_all(new, old, "after the failover");
}

fn role(server: &Server) -> String {
    field(&mut server.raw(), "role")
}

/// FAILOVER to a Ruvio replica: writes pause, the replica catches up and takes
/// over, the old primary follows it and refuses writes; no write is lost.
#[test]
fn failover_to_a_ruvio_replica() {
    let primary = Server::ruvio(PortMode::Forward, 2);
    let replica = Server::ruvio(PortMode::Forward, 2);
    attach(&replica, &primary);
    let mut p = primary.raw();
    fill(&mut p);
    write_load(&primary, 2, 50);
    assert_eq!(p.cmd(&["FAILOVER"]), b"+OK\r\n");
    assert_eq!(
        p.cmd(&["FAILOVER"]),
        b"-ERR FAILOVER already in progress.\r\n"
    );
    wait_for("the replica took over", || role(&replica) == "master");
    wait_for("the old primary follows it", || {
        let mut c = primary.raw();
        field(&mut c, "master_port") == replica.port().to_string()
            && field(&mut c, "master_link_status") == "up"
            && field(&mut c, "master_failover_state") == "no-failover"
    });
    assert_eq!(
        primary.raw().cmd(&["SET", "k", "v"]),
        b"-READONLY You can't write against a read only replica.\r\n"
    );
    writes_reach_the_old_primary(&replica, &primary);
}

/// FAILOVER TO a redis-server replica: Redis takes over on `PSYNC ... FAILOVER`
/// and Ruvio follows it.
#[test]
fn failover_to_a_redis_replica() {
    if require_redis_server("failover_to_a_redis_replica").is_none() {
        return;
    }
    let primary = Server::ruvio(PortMode::Forward, 2);
    let replica = Server::redis();
    attach(&replica, &primary);
    let mut p = primary.raw();
    fill(&mut p);
    let port = replica.port().to_string();
    assert_eq!(
        p.cmd(&["FAILOVER", "TO", "127.0.0.1", &port, "TIMEOUT", "10000"]),
        b"+OK\r\n"
    );
    wait_for("Redis took over", || role(&replica) == "master");
    wait_for("Ruvio follows Redis", || {
        let mut c = primary.raw();
        field(&mut c, "master_port") == port && field(&mut c, "master_link_status") == "up"
    });
    writes_reach_the_old_primary(&replica, &primary);
}

/// A FAILOVER whose replica never catches up ends at its timeout: writes go on,
/// the server stays a primary. ABORT ends one at once.
#[test]
fn failover_times_out_and_aborts() {
    if require_redis_server("failover_times_out_and_aborts").is_none() {
        return;
    }
    let primary = Server::ruvio(PortMode::Forward, 1);
    let replica = Server::redis();
    attach(&replica, &primary);
    let mut p = primary.raw();
    // The replica stops acknowledging, then a write moves the offset past it.
    unsafe { libc::kill(replica.pid() as i32, libc::SIGSTOP) };
    p.cmd(&["SET", "moved", "on"]);
    assert_eq!(p.cmd(&["FAILOVER", "TIMEOUT", "300"]), b"+OK\r\n");
    assert_eq!(field(&mut p, "master_failover_state"), "waiting-for-sync");
    // A write waits for the failover to end, then runs.
    let mut writer = primary.raw();
    writer.send(&encode(&["SET", "paused", "write"]));
    wait_for("the failover given up", || {
        field(&mut primary.raw(), "master_failover_state") == "no-failover"
    });
    assert_eq!(writer.read_reply(), b"+OK\r\n");
    assert_eq!(field(&mut p, "role"), "master");
    assert_eq!(p.cmd(&["FAILOVER"]), b"+OK\r\n");
    assert_eq!(p.cmd(&["FAILOVER", "ABORT"]), b"+OK\r\n");
    assert_eq!(field(&mut p, "master_failover_state"), "no-failover");
    assert_eq!(p.cmd(&["SET", "k", "v"]), b"+OK\r\n");
    unsafe { libc::kill(replica.pid() as i32, libc::SIGCONT) };
}

/// A promoted replica of the single stream keeps its primary's history (its
/// backlog holds the stream byte for byte, `replid2` names the old primary):
/// the old primary's other replicas, Ruvio and redis-server, continue from it
/// without a full sync. (A promoted replica on shard links has no such
/// bytes: tests/single_stream_beneath_shard_links.rs.)
#[test]
fn replicas_continue_from_a_promoted_replica() {
    if require_redis_server("replicas_continue_from_a_promoted_replica").is_none() {
        return;
    }
    let primary = Server::ruvio(PortMode::Forward, 2);
    let single_stream = ["--replica-shard-links", "no"];
    let promoted = Server::ruvio_with(PortMode::Forward, 2, &single_stream);
    let (other, redis) = (Server::ruvio(PortMode::Forward, 1), Server::redis());
    for replica in [&promoted, &other, &redis] {
        attach(replica, &primary);
    }
    let mut p = primary.raw();
    fill(&mut p);
    write_load(&primary, 2, 50);
    assert_eq!(p.cmd(&["WAIT", "3", "5000"]), b":3\r\n");
    // Every replica at the primary's offset (the load's short-lived keys stop
    // expiring first): one that got more than the promoted one could not
    // continue from it, with Redis either.
    std::thread::sleep(Duration::from_millis(300));
    wait_for("the replicas at the primary's offset", || {
        let offset = field(&mut p, "master_repl_offset");
        [&promoted, &other, &redis]
            .iter()
            .all(|r| field(&mut r.raw(), "slave_repl_offset") == offset)
    });
    let old_replid = field(&mut p, "master_replid");
    let mut n = promoted.raw();
    assert_eq!(n.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(field(&mut n, "master_replid2"), old_replid);
    for replica in [&other, &redis] {
        follow(replica, &promoted);
    }
    wait_for("both online", || {
        let info = decode(&n.cmd(&["INFO", "replication"])).text();
        info.matches("state=online").count() == 2
    });
    assert_eq!(
        sync_counts(&mut n),
        (0, 2),
        "partial resyncs only: {}",
        promoted.logs()
    );
    assert_eq!(n.cmd(&["SET", "after", "promotion"]), b"+OK\r\n");
    assert_eq!(n.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    compare_all(&promoted, &other, "the Ruvio replica");
    compare_all(&promoted, &redis, "the redis-server replica");
}

/// WAITAOF (Redis 7.2): the local count is 1 once every shard's log synced the
/// writes made before it (everysec: within a second; always: at once), 0
/// without a log; replicas count only when they report their own log's offset
/// (a Redis 7.0 replica does not); Redis 7.2's errors.
#[test]
fn waitaof_counts_the_logs() {
    let dir = unique_dir("waitaof");
    let dir = dir.to_str().unwrap();
    for (durability, shards) in [("everysec", 2), ("always", 1)] {
        let args = ["--durability", durability, "--dir", dir];
        let server = Server::ruvio_with(PortMode::Forward, shards, &args);
        let mut c = server.raw();
        for key in ["a", "b", "c", "d"] {
            assert_eq!(c.cmd(&["SET", key, "v"]), b"+OK\r\n");
        }
        assert_eq!(
            c.cmd(&["WAITAOF", "1", "0", "0"]),
            b"*2\r\n:1\r\n:0\r\n",
            "{durability}"
        );
        // In MULTI it answers at once.
        c.cmd(&["MULTI"]);
        c.cmd(&["SET", "e", "v"]);
        c.cmd(&["WAITAOF", "1", "0", "0"]);
        let exec = c.cmd(&["EXEC"]);
        assert!(exec.starts_with(b"*2\r\n+OK\r\n*2\r\n:"), "{}", show(&exec));
        drop(server);
        std::fs::remove_dir_all(dir).ok();
    }
    let server = Server::ruvio(PortMode::Forward, 2);
    let mut c = server.raw();
    assert_eq!(c.cmd(&["WAITAOF", "0", "0", "0"]), b"*2\r\n:0\r\n:0\r\n");
    for (command, error) in [
        (
            vec!["WAITAOF", "1", "0", "0"],
            "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n",
        ),
        (
            vec!["WAITAOF", "2", "0", "0"],
            "-ERR value is out of range, value must between 0 and 1\r\n",
        ),
        (
            vec!["WAITAOF", "0", "-1", "0"],
            "-ERR value is out of range, must be positive\r\n",
        ),
        (
            vec!["WAITAOF", "0", "0", "-1"],
            "-ERR timeout is negative\r\n",
        ),
        (
            vec!["WAITAOF", "x", "0", "0"],
            "-ERR value is not an integer or out of range\r\n",
        ),
        (
            vec!["WAITAOF", "0", "0", "x"],
            "-ERR timeout is not an integer or out of range\r\n",
        ),
    ] {
        assert_eq!(
            show(&c.cmd(&command)),
            show(error.as_bytes()),
            "{command:?}"
        );
    }
    if require_redis_server("waitaof_counts_the_logs").is_none() {
        return;
    }
    // A Redis 7.0 replica acknowledges the stream but not a log: WAIT counts it,
    // WAITAOF does not (it times out).
    let replica = Server::redis();
    attach(&replica, &server);
    c.cmd(&["SET", "k", "v"]);
    assert_eq!(c.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    assert_eq!(c.cmd(&["WAITAOF", "0", "1", "100"]), b"*2\r\n:0\r\n:0\r\n");
}

/// DEBUG CHANGE-REPL-ID: a new replication ID, no second one, so a replica that
/// comes back needs a full sync.
#[test]
fn debug_change_repl_id_forces_a_full_sync() {
    let primary = Server::ruvio(PortMode::Forward, 1);
    let replica = Server::ruvio(PortMode::Forward, 1);
    attach(&replica, &primary);
    let mut p = primary.raw();
    let before = field(&mut p, "master_replid");
    assert_eq!(p.cmd(&["DEBUG", "CHANGE-REPL-ID"]), b"+OK\r\n");
    assert_ne!(field(&mut p, "master_replid"), before);
    assert_eq!(field(&mut p, "master_replid2"), "0".repeat(40));
    assert_eq!(p.cmd(&["CLIENT", "KILL", "TYPE", "replica"]), b":1\r\n");
    wait_for("the replica back", || {
        info_field(&mut p, "replication", "slave0").contains("state=online")
    });
    assert_eq!(sync_counts(&mut p), (2, 0));
}

/// A replica that reads nothing for a while (stopped, as one loading a big RDB
/// does) gets the stream it missed from its output buffer, far beyond the
/// backlog's size, with no second full sync (`client-output-buffer-limit
/// replica` bounds it, as in Redis).
#[test]
fn a_paused_replica_catches_up_from_its_output() {
    if require_redis_server("a_paused_replica_catches_up_from_its_output").is_none() {
        return;
    }
    let primary = Server::ruvio(PortMode::Forward, 2);
    let replica = Server::redis();
    attach(&replica, &primary);
    unsafe { libc::kill(replica.pid() as i32, libc::SIGSTOP) };
    let mut p = primary.raw();
    set_keys(&mut p, "k", 20_000, &"v".repeat(1000));
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(replica.pid() as i32, libc::SIGCONT) };
    assert_eq!(p.cmd(&["WAIT", "1", "10000"]), b":1\r\n");
    assert_eq!(sync_counts(&mut p), (1, 0), "no second full sync");
    assert_eq!(show(&replica.raw().cmd(&["DBSIZE"])), show(b":20000\r\n"));
}

/// Writes during a full sync, many times the backlog's size: the replica still
/// gets them all after its RDB (they wait with it, as in Redis's replica output
/// buffer), with one full sync.
#[test]
fn writes_during_a_full_sync_are_not_lost() {
    if require_redis_server("writes_during_a_full_sync_are_not_lost").is_none() {
        return;
    }
    let args = ["--repl-backlog-size", "16kb"];
    let primary = Server::ruvio_with(PortMode::Forward, 2, &args);
    let mut p = primary.raw();
    let value = "v".repeat(100);
    set_keys(&mut p, "before:", 200_000, &value);
    let replica = Server::redis();
    let port = primary.port().to_string();
    assert_eq!(
        replica.raw().cmd(&["REPLICAOF", "127.0.0.1", &port]),
        b"+OK\r\n"
    );
    // Written while the sync runs.
    set_keys(&mut p, "during:", 50_000, &value);
    let waited = p.cmd(&["WAIT", "1", "20000"]);
    assert_eq!(waited, b":1\r\n", "{}\n{}", primary.logs(), replica.logs());
    assert_eq!(sync_counts(&mut p), (1, 0));
    assert_eq!(show(&replica.raw().cmd(&["DBSIZE"])), show(b":250000\r\n"));
}
