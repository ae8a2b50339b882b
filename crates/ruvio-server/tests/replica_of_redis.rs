//! Ruvio as a replica of a real redis-server 7.0 primary, on Redis's own
//! replication protocol: REPLICAOF, the full sync (the RDB in both of Redis's
//! forms: `$<len>` from a disk save with 1 shard, `$EOF:<mark>` from a diskless
//! one with 2 shards in forward mode), the command stream applied in order,
//! REPLCONF ACK (WAIT on the primary counts Ruvio), the offset counted as Redis
//! counts it, READONLY, a link killed and continued with `+CONTINUE`, and
//! REPLICAOF NO ONE keeping the data. A second, redis-server replica of the same
//! primary shows INFO replication's fields in the order Ruvio must give them.
//! The refusals (READONLY, scripts' and functions' writes included, MASTERDOWN,
//! scripts and functions on a stale replica by their `allow-stale` flag and the
//! calls they make, REPLICAOF's and REPLCONF's errors) are compared byte for byte
//! with a redis-server replica of the same dead primary.

mod common;

use std::time::Duration;

use common::replication::*;
use common::*;

fn replicate(shards: usize, diskless: &str) {
    let primary = Server::redis();
    let mut p = primary.raw();
    for (name, value) in [
        ("repl-diskless-sync", diskless),
        ("repl-diskless-sync-delay", "0"),
    ] {
        assert_eq!(p.cmd(&["CONFIG", "SET", name, value]), b"+OK\r\n");
    }
    fill(&mut p);
    let library = |name: &str, reply: &str| {
        format!(
            "#!lua name={name}\nredis.register_function{{function_name='{name}', \
             callback=function() return '{reply}' end, flags={{'no-writes'}}}}"
        )
    };
    let loaded = p.cmd(&["FUNCTION", "LOAD", &library("in_rdb", "one")]);
    assert_eq!(loaded, b"$6\r\nin_rdb\r\n");
    let ruvio = Server::ruvio(PortMode::Forward, shards);
    let mut r = ruvio.raw();
    assert_eq!(field(&mut r, "role"), "master");
    follow(&ruvio, &primary);
    compare_all(&primary, &ruvio, "after the full sync");

    // A redis-server replica of the same primary: INFO replication's fields.
    let twin = Server::redis();
    follow(&twin, &primary);
    let names =
        |c: &mut RawConn| -> Vec<String> { replication(c).into_iter().map(|(k, _)| k).collect() };
    assert_eq!(
        names(&mut r),
        names(&mut twin.raw()),
        "INFO replication's fields"
    );
    let replid = field(&mut p, "master_replid");
    assert_eq!(field(&mut r, "master_replid"), replid);

    // The stream, in order, SELECT and transactions and scripts included.
    for c in [
        "SET str changed",
        "INCR int",
        "LPUSH list front",
        "HSET hash h new",
        "ZADD zset 7 c",
        "XADD events 2-1 event done",
        "EXPIRE str 1000",
        "DEL set",
        "SELECT 3",
        "SET db3key v",
        "SELECT 0",
        "MULTI",
        "SET tx1 a",
        "INCRBY int 10",
        "EXEC",
        "EVAL redis.call('set',KEYS[1],'s');redis.call('rpush',KEYS[2],'e') 2 scripted list",
    ] {
        let reply = p.cmd(&words(c));
        assert!(!reply.starts_with(b"-"), "{c}: {}", show(&reply));
    }
    let loaded = p.cmd(&["FUNCTION", "LOAD", &library("streamed", "two")]);
    assert_eq!(loaded, b"$8\r\nstreamed\r\n");
    // Both replicas acknowledged (Ruvio's REPLCONF ACK answers the GETACK).
    assert_eq!(p.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    compare_all(&primary, &ruvio, "after the stream");
    // The RDB's function libraries and the streamed FUNCTION LOAD reach every
    // shard (each connection may land on another one).
    for _ in 0..4 {
        let mut c = ruvio.raw();
        assert_eq!(c.cmd(&["FCALL_RO", "in_rdb", "0"]), b"$3\r\none\r\n");
        assert_eq!(c.cmd(&["FCALL_RO", "streamed", "0"]), b"$3\r\ntwo\r\n");
    }
    // The offset counts the stream's bytes exactly as the primary does.
    let offset = field(&mut p, "master_repl_offset");
    wait_for("the same offset", || {
        field(&mut r, "slave_repl_offset") == offset
    });
    assert_eq!(
        show(&r.cmd(&["ROLE"])),
        show(&encode_role_slave(primary.port(), &offset))
    );
    // Every INFO replication value is the redis-server replica's, but the
    // backlog Ruvio does not keep yet and the second of the last I/O.
    let mut t = twin.raw();
    wait_for("the twin's offset", || {
        field(&mut t, "slave_repl_offset") == offset
    });
    let own = [
        "master_last_io_seconds_ago",
        "repl_backlog_active",
        "repl_backlog_first_byte_offset",
        "repl_backlog_histlen",
    ];
    let values = |c: &mut RawConn| -> Vec<(String, String)> {
        replication(c)
            .into_iter()
            .filter(|(k, _)| !own.contains(&k.as_str()))
            .collect()
    };
    assert_eq!(values(&mut r), values(&mut t), "INFO replication's values");

    // FLUSHDB on database 3 empties it on every shard, nothing else.
    p.cmd(&["SELECT", "3"]);
    assert_eq!(p.cmd(&["FLUSHDB"]), b"+OK\r\n");
    p.cmd(&["SELECT", "0"]);
    assert_eq!(p.cmd(&["WAIT", "1", "0"]).first(), Some(&b':'));
    wait_for("FLUSHDB on db 3", || {
        r.cmd(&["SELECT", "3"]);
        let empty = r.cmd(&["DBSIZE"]) == b":0\r\n";
        r.cmd(&["SELECT", "0"]);
        empty
    });
    compare_all(&primary, &ruvio, "after FLUSHDB");

    // A client blocked on the replica (XREAD BLOCK) is woken by the stream's XADD,
    // whichever shard the key is on.
    let mut blocked = ruvio.raw();
    blocked.send(&encode(&[
        "XREAD", "BLOCK", "5000", "STREAMS", "events", "$",
    ]));
    std::thread::sleep(Duration::from_millis(100));
    let added = p.cmd(&["XADD", "events", "9-1", "event", "late"]);
    assert_eq!(added, b"$3\r\n9-1\r\n");
    let woken = blocked.read_reply();
    assert!(contains(&woken, b"$3\r\n9-1\r\n"), "{}", show(&woken));
    assert!(contains(&woken, b"$4\r\nlate\r\n"), "{}", show(&woken));

    // Clients read, and may not write.
    assert_eq!(r.cmd(&["GET", "tx1"]), b"$1\r\na\r\n");
    assert_eq!(
        r.cmd(&["SET", "mine", "x"]),
        b"-READONLY You can't write against a read only replica.\r\n"
    );

    // The link killed on the primary: Ruvio continues where it was.
    // The stream was in database 3 when the link broke: the backlog goes on
    // there without a SELECT, so the replica must keep its database.
    p.cmd(&["SELECT", "3"]);
    p.cmd(&["SET", "k3a", "1"]);
    assert_eq!(p.cmd(&["WAIT", "2", "5000"]), b":2\r\n");
    let (full_before, partial_before) = sync_counts(&mut p);
    assert!(p
        .cmd(&["CLIENT", "KILL", "TYPE", "replica"])
        .starts_with(b":"));
    p.cmd(&["SET", "k3b", "2"]);
    p.cmd(&["SELECT", "0"]);
    p.cmd(&["SET", "after-kill", "1"]);
    wait_for("the write after the kill", || {
        r.cmd(&["GET", "after-kill"]) == b"$1\r\n1\r\n"
            && field(&mut r, "master_link_status") == "up"
    });
    let (full_after, partial_after) = sync_counts(&mut p);
    assert_eq!(full_after, full_before, "no full sync after the kill");
    assert!(partial_after > partial_before, "+CONTINUE after the kill");
    assert!(ruvio
        .logs()
        .contains("Master accepted a Partial Resynchronization"));
    r.cmd(&["SELECT", "3"]);
    assert_eq!(r.cmd(&["GET", "k3b"]), b"$1\r\n2\r\n");
    r.cmd(&["SELECT", "0"]);
    compare_all(&primary, &ruvio, "after the reconnection");

    // Promoted: writable, the data kept, the primary's history as replid2.
    assert_eq!(r.cmd(&["REPLICAOF", "NO", "ONE"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["SET", "mine", "x"]), b"+OK\r\n");
    assert_eq!(r.cmd(&["GET", "after-kill"]), b"$1\r\n1\r\n");
    assert_eq!(field(&mut r, "role"), "master");
    assert_eq!(field(&mut r, "master_replid2"), replid);
    assert_ne!(field(&mut r, "master_replid"), replid);
    assert!(r.cmd(&["ROLE"]).starts_with(b"*3\r\n$6\r\nmaster\r\n:"));
    let loaded = r.cmd(&["FUNCTION", "LOAD", &library("mine", "three")]);
    assert_eq!(loaded, b"$4\r\nmine\r\n");
    p.cmd(&["SET", "not-followed", "1"]);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        r.cmd(&["EXISTS", "not-followed"]),
        b":0\r\n",
        "{}",
        ruvio.logs()
    );

    // Following again is a second full sync: the primary's keys and function
    // libraries replace the replica's own (as on a redis-server replica).
    follow(&ruvio, &primary);
    compare_all(&primary, &ruvio, "after the second full sync");
    for _ in 0..4 {
        let mut c = ruvio.raw();
        assert_eq!(c.cmd(&["FCALL_RO", "in_rdb", "0"]), b"$3\r\none\r\n");
        assert_eq!(
            c.cmd(&["FCALL_RO", "mine", "0"]),
            b"-ERR Function not found\r\n"
        );
    }
}

/// ROLE's reply on a connected replica of 127.0.0.1:`port` at `offset`.
fn encode_role_slave(port: u16, offset: &str) -> Vec<u8> {
    let port = port.to_string();
    format!("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:{port}\r\n$9\r\nconnected\r\n:{offset}\r\n")
        .into_bytes()
}

#[test]
fn one_shard_follows_a_disk_sync() {
    if require_redis_server("replica_of_redis").is_none() {
        return;
    }
    replicate(1, "no");
}

#[test]
fn two_shards_follow_a_diskless_sync() {
    if require_redis_server("replica_of_redis").is_none() {
        return;
    }
    replicate(2, "yes");
}

/// A replica of a primary that is not there answers as redis-server does.
#[test]
fn refusals_match_redis() {
    if require_redis_server("replica_of_redis").is_none() {
        return;
    }
    let nobody = free_ports(1, false).to_string();
    let redis = Server::redis();
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    let library = "#!lua name=lib\n\
        redis.register_function('w', function(keys) return redis.call('set', keys[1], 'f') end)\n\
        redis.register_function{function_name='r', callback=function(keys) \
        return redis.call('get', keys[1]) end, flags={'no-writes'}}\n\
        redis.register_function{function_name='st', callback=function(keys) \
        return redis.call('get', keys[1]) end, flags={'no-writes', 'allow-stale'}}\n\
        redis.register_function{function_name='sp', callback=function() \
        return redis.call('info', 'keyspace') ~= nil end, flags={'no-writes', 'allow-stale'}}";
    // On a stale replica: a script runs only with `allow-stale` (one without a
    // shebang is refused as it starts, after its key count is checked), and
    // then only calls of commands flagged `stale`.
    let stale_plain = "return 1";
    let stale_no_writes = "#!lua flags=no-writes\nreturn 1";
    let stale_info =
        "#!lua flags=allow-stale,no-writes\nreturn redis.call('info', 'keyspace') ~= nil";
    let stale_get = "#!lua flags=allow-stale,no-writes\nreturn redis.call('get', KEYS[1])";
    let stale_pcall =
        "#!lua flags=allow-stale,no-writes\nreturn redis.pcall('get', KEYS[1])['err']";
    let set_in_script = "return redis.call('set', KEYS[1], 'e')";
    let pcall_in_script = "return redis.pcall('set', KEYS[1], 'e')";
    let shebang_set = "#!lua\nreturn redis.call('set', KEYS[1], 'e')";
    let shebang_get = "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])";
    let script: Vec<Vec<&str>> = vec![
        vec!["FUNCTION", "LOAD", library],
        vec!["SET", "k", "v"],
        vec!["REPLICAOF", "127.0.0.1", "abc"],
        vec!["REPLICAOF", "127.0.0.1", "70000"],
        vec!["REPLICAOF", "NO", "ONE"],
        vec!["REPLICAOF", "127.0.0.1", &nobody],
        vec!["REPLICAOF", "127.0.0.1", &nobody],
        vec!["REPLICAOF", "localhost", &nobody],
        vec!["REPLICAOF", "LOCALHOST", &nobody],
        vec!["SET", "k", "w"],
        vec!["GET", "k"],
        vec!["INCR", "n"],
        vec!["CONFIG", "SET", "replica-serve-stale-data", "no"],
        vec!["GET", "k"],
        vec!["INFO", "keyspace"],
        vec!["EVAL", stale_plain, "0"],
        vec!["EVAL", stale_plain, "5"],
        vec!["EVAL", stale_no_writes, "0"],
        vec!["EVAL_RO", stale_info, "0"],
        vec!["EVAL", stale_get, "1", "k"],
        vec!["EVAL", stale_pcall, "1", "k"],
        vec!["EVALSHA", "0000000000000000000000000000000000000000", "0"],
        vec!["FCALL", "r", "1", "k"],
        vec!["FCALL_RO", "st", "1", "k"],
        vec!["FCALL", "sp", "0"],
        vec!["CONFIG", "SET", "replica-serve-stale-data", "yes"],
        vec!["CONFIG", "SET", "replica-read-only", "no"],
        vec!["SET", "k", "w"],
        vec!["CONFIG", "SET", "replica-read-only", "yes"],
        vec!["MULTI"],
        vec!["SET", "k", "x"],
        vec!["EXEC"],
        vec!["EVAL", set_in_script, "1", "k"],
        vec!["EVAL", pcall_in_script, "1", "k"],
        vec!["EVAL", shebang_set, "1", "k"],
        vec!["EVAL", shebang_get, "1", "k"],
        vec!["FCALL", "w", "1", "k"],
        vec!["FCALL", "r", "1", "k"],
        vec!["FCALL_RO", "r", "1", "k"],
        vec!["FUNCTION", "DELETE", "lib"],
        vec!["REPLCONF", "listening-port", "1"],
        vec!["REPLCONF", "nonsense", "1"],
        vec!["REPLCONF", "capa"],
        vec!["REPLCONF", "ACK", "5"],
        vec!["PING"],
        vec!["REPLICAOF", "no", "one"],
        vec!["SET", "k", "y"],
        vec!["GET", "k"],
    ];
    let (mut a, mut b) = (redis.raw(), ruvio.raw());
    for c in &script {
        if c == &vec!["REPLCONF", "ACK", "5"] {
            // No reply from either: the PING after it shows nothing was sent.
            a.send(&encode(c));
            b.send(&encode(c));
            continue;
        }
        let (want, got) = (a.cmd(c), b.cmd(c));
        assert_eq!(show(&got), show(&want), "{c:?}");
    }
    // RESP3: the same replies.
    a.cmd(&["HELLO", "3"]);
    b.cmd(&["HELLO", "3"]);
    for c in [
        vec!["ROLE"],
        vec!["REPLICAOF", "127.0.0.1", "abc"],
        vec!["REPLCONF", "nonsense", "1"],
        vec!["REPLCONF", "capa", "eof"],
    ] {
        let (want, got) = (a.cmd(&c), b.cmd(&c));
        assert_eq!(show(&got), show(&want), "RESP3 {c:?}");
    }
    let mut r = ruvio.raw();
    r.cmd(&["REPLICAOF", "127.0.0.1", &nobody]);
    assert_eq!(field(&mut r, "master_link_status"), "down");
    let role = decode(&r.cmd(&["ROLE"]));
    let Value::Array(items) = role else {
        panic!("ROLE: {role:?}");
    };
    assert_eq!(items[0].text(), "slave");
    assert!(["connect", "connecting"].contains(&items[3].text().as_str()));
    assert_eq!(items[4], Value::Int(-1));
    let dir = std::env::temp_dir().join(format!("ruvio-test-logged-{}", std::process::id()));
    let dir_arg = dir.to_string_lossy().into_owned();
    let flags = ["--durability", "everysec", "--dir", &dir_arg];
    let logged = Server::ruvio_with(PortMode::Forward, 1, &flags);
    // A replica with a log is supported (tests/replica_log.rs): REPLICAOF as usual.
    assert_eq!(
        logged.raw().cmd(&["REPLICAOF", "127.0.0.1", &nobody]),
        b"+OK\r\n"
    );
    drop(logged);
    let _ = std::fs::remove_dir_all(&dir);
    let per_shard = Server::ruvio(PortMode::PerShard, 2);
    assert_eq!(
        per_shard.raw().cmd(&["REPLICAOF", "127.0.0.1", &nobody]),
        b"-ERR REPLICAOF not allowed in cluster mode.\r\n"
    );
}

/// `ruvio --replicaof HOST PORT --masteruser USER --masterauth PASS`: a replica
/// from the start, through a primary whose default user has another password;
/// CONFIG GET shows the primary.
#[test]
fn replicaof_flag_with_masterauth() {
    if require_redis_server("replica_of_redis").is_none() {
        return;
    }
    let primary = Server::redis();
    let mut p = primary.raw();
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(p.cmd(&["SET", "guarded", "yes"]), b"+OK\r\n");
    let user = ["ACL", "SETUSER", "repl", "on", ">r3pl", "+@all", "~*"];
    assert_eq!(p.cmd(&user), b"+OK\r\n");
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "requirepass", "s3cret"]),
        b"+OK\r\n"
    );
    let port = primary.port().to_string();
    let flags = [
        "--replicaof",
        "127.0.0.1",
        &port,
        "--masteruser",
        "repl",
        "--masterauth",
        "r3pl",
    ];
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &flags);
    let mut r = ruvio.raw();
    wait_for("master_link_status:up", || {
        field(&mut r, "master_link_status") == "up"
    });
    assert_eq!(r.cmd(&["GET", "guarded"]), b"$3\r\nyes\r\n");
    let shown = format!(
        "*2\r\n$9\r\nreplicaof\r\n${}\r\n127.0.0.1 {port}\r\n",
        port.len() + 10
    );
    assert_eq!(
        show(&r.cmd(&["CONFIG", "GET", "replicaof"])),
        show(shown.as_bytes())
    );
    assert_eq!(p.cmd(&["AUTH", "s3cret"]), b"+OK\r\n");
    assert_eq!(p.cmd(&["RPUSH", "after", "1", "2"]), b":2\r\n");
    wait_for("the stream through AUTH", || {
        r.cmd(&["LRANGE", "after", "0", "-1"]) == b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n"
    });

    // The link is the master client: CLIENT LIST shows it (flags=M) under TYPE
    // master only, CLIENT KILL TYPE master drops it and Ruvio continues.
    let masters = decode(&r.cmd(&["CLIENT", "LIST", "TYPE", "master"])).text();
    assert_eq!(masters.lines().count(), 1, "{masters}");
    assert!(masters.contains(" flags=M "), "{masters}");
    let normal = decode(&r.cmd(&["CLIENT", "LIST", "TYPE", "normal"])).text();
    assert!(!normal.contains(" flags=M "), "{normal}");
    assert_eq!(r.cmd(&["CLIENT", "KILL", "TYPE", "master"]), b":1\r\n");
    assert_eq!(p.cmd(&["SET", "after-kill", "1"]), b"+OK\r\n");
    wait_for("the stream after CLIENT KILL TYPE master", || {
        r.cmd(&["GET", "after-kill"]) == b"$1\r\n1\r\n"
    });
    assert!(ruvio
        .logs()
        .contains("Master accepted a Partial Resynchronization"));
}

/// `repl-timeout`: a primary silent longer than it (Redis pings every 10 s) is
/// dropped and connected again, with `+CONTINUE`.
#[test]
fn a_silent_primary_times_out() {
    if require_redis_server("replica_of_redis").is_none() {
        return;
    }
    let primary = Server::redis();
    let mut p = primary.raw();
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    let ruvio = Server::ruvio(PortMode::Forward, 1);
    follow(&ruvio, &primary);
    let mut r = ruvio.raw();
    assert_eq!(r.cmd(&["CONFIG", "SET", "repl-timeout", "1"]), b"+OK\r\n");
    wait_for("the timeout", || {
        ruvio
            .logs()
            .contains("MASTER timeout: no data nor PING received")
    });
    wait_for("the link up again", || {
        field(&mut r, "master_link_status") == "up"
    });
    assert_eq!(sync_counts(&mut p).0, 1, "no second full sync");
}

/// Clients write every type to the primary while Ruvio (2 shards) makes its full
/// sync and after: the writes during the transfer reach it through the stream
/// that follows the RDB, and it ends with exactly the primary's data.
#[test]
fn follows_under_write_load() {
    if require_redis_server("replica_of_redis").is_none() {
        return;
    }
    let primary = Server::redis();
    let mut p = primary.raw();
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    fill(&mut p);
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (port, stop) = (primary.port(), stop.clone());
            std::thread::spawn(move || {
                let mut c = RawConn::connect(port);
                let mut i = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) || i < 300 {
                    let n = i.to_string();
                    let key = format!("w{w}:{}", i % 50);
                    let commands: [Vec<String>; 6] = [
                        words(&format!("SET {key}:s {n}")),
                        words(&format!("RPUSH {key}:l {n}")),
                        words(&format!("HSET {key}:h f{} {n}", i % 7)),
                        words(&format!("ZADD {key}:z {n} m{}", i % 11)),
                        words(&format!("SADD {key}:t {}", i % 13)),
                        words(&format!("INCRBY w{w}:count {}", i % 5)),
                    ];
                    for command in &commands {
                        let reply = c.cmd(command);
                        assert!(!reply.starts_with(b"-"), "{command:?}: {}", show(&reply));
                    }
                    if i.is_multiple_of(97) {
                        c.cmd(&words(&format!("DEL {key}:l")));
                    }
                    i += 1;
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    follow(&ruvio, &primary);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for writer in writers {
        writer.join().expect("a writer failed");
    }
    // WAIT covers this client's writes, which follow the writers' in the stream;
    // Ruvio acknowledges an offset once the commands before it ran on their shards.
    assert_eq!(p.cmd(&["SET", "load-done", "1"]), b"+OK\r\n");
    assert_eq!(p.cmd(&["WAIT", "1", "5000"]), b":1\r\n");
    compare_all(&primary, &ruvio, "after the load");
}

/// Kills the process it holds when dropped (a test's own redis-server).
/// The primary restarted without its data (new replid, empty): the replica's
/// PSYNC gets `+FULLRESYNC`, and it ends with the new primary's data only.
#[test]
fn a_restarted_primary_means_a_full_sync() {
    let Some(bin) = require_redis_server("replica_of_redis") else {
        return;
    };
    let primary = Server::redis();
    let mut p = primary.raw();
    assert_eq!(
        p.cmd(&["CONFIG", "SET", "repl-diskless-sync-delay", "0"]),
        b"+OK\r\n"
    );
    assert_eq!(p.cmd(&["SET", "before", "1"]), b"+OK\r\n");
    let ruvio = Server::ruvio(PortMode::Forward, 2);
    follow(&ruvio, &primary);
    let mut r = ruvio.raw();
    assert_eq!(r.cmd(&["GET", "before"]), b"$1\r\n1\r\n");

    // No fork of the old primary may still hold its listening socket.
    wait_for("the primary's transfer child gone", || {
        let info = decode(&p.cmd(&["INFO", "persistence"])).text();
        info.contains("rdb_bgsave_in_progress:0")
    });
    let killed = std::process::Command::new("kill")
        .args(["-9", &primary.pid().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let dir = std::env::temp_dir().join(format!("ruvio-test-reborn-{}", std::process::id()));
    let (_reborn, mut q) = redis_reborn(&bin, primary.port(), &dir);
    assert_eq!(q.cmd(&["SET", "after", "2"]), b"+OK\r\n");
    wait_for("the new primary's data", || {
        r.cmd(&["GET", "after"]) == b"$1\r\n2\r\n" && field(&mut r, "master_link_status") == "up"
    });
    // Redis takes a new replid as it creates its backlog for the first replica.
    assert_eq!(
        field(&mut r, "master_replid"),
        field(&mut q, "master_replid")
    );
    assert_eq!(r.cmd(&["EXISTS", "before"]), b":0\r\n");
    assert_eq!(sync_counts(&mut q).0, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A primary that misbehaves a different way on each connection: a corrupt RDB,
/// a reply to PSYNC that is not Redis's, a connection closed in the middle of the
/// RDB. The replica says why in its log, keeps serving its data, and tries again.
#[test]
fn a_misbehaving_primary_is_survived() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let primary = std::thread::spawn(move || {
        let full_resync = format!("+FULLRESYNC {} 0\r\n", "a".repeat(40));
        let endings: [Vec<u8>; 3] = [
            format!("{full_resync}$20\r\nREDIS0009\x7f garbage..").into_bytes(),
            b"+WHATEVER\r\n".to_vec(),
            format!("{full_resync}$1000\r\nREDIS0009").into_bytes(),
        ];
        for ending in endings {
            let (mut stream, _) = listener.accept().expect("the replica connects");
            for reply in ["+PONG\r\n", "+OK\r\n", "+OK\r\n"] {
                read_command(&mut stream);
                std::io::Write::write_all(&mut stream, reply.as_bytes()).expect("a reply");
            }
            assert_eq!(read_command(&mut stream)[0], "PSYNC");
            std::io::Write::write_all(&mut stream, &ending).expect("the ending");
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    // The fake speaks the single stream only (a redis-server's refusal of
    // shard links falls back to it: refused_shard_links_fall_back_to_the_single_stream).
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &["--replica-shard-links", "no"]);
    let mut r = ruvio.raw();
    assert_eq!(r.cmd(&["SET", "mine", "kept"]), b"+OK\r\n");
    let port = port.to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    primary.join().expect("the fake primary");
    wait_for("the three failures in the log", || {
        let logs = ruvio.logs();
        logs.contains("the MASTER's RDB did not load on every shard")
            && logs.contains("Unexpected reply to PSYNC from master: +WHATEVER")
            && logs.contains("MASTER closed the connection")
    });
    assert_eq!(r.cmd(&["PING"]), b"+PONG\r\n");
    assert_eq!(r.cmd(&["GET", "mine"]), b"$4\r\nkept\r\n");
    assert_eq!(field(&mut r, "master_link_status"), "down");
}

/// While the RDB arrives, INFO replication shows the transfer's progress with
/// Redis's fields (`master_sync_total_bytes` ... `master_sync_last_io_seconds_ago`,
/// which tools read to wait for a replica): a primary that sends 10 bytes of a
/// 1000-byte RDB and stalls, to Ruvio and to a redis-server replica alike.
#[test]
fn a_transfer_in_progress_shows_in_info() {
    if require_redis_server("replica_of_redis").is_none() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    // Ruvio and a redis-server twin, each a connection of its own.
    let (primary, done) = fake_primary_starting_rdbs(listener, 2);
    // A fake of the single stream, as in a_misbehaving_primary_is_survived.
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &["--replica-shard-links", "no"]);
    let twin = Server::redis();
    let port = port.to_string();
    let (mut r, mut t) = (ruvio.raw(), twin.raw());
    for c in [&mut r, &mut t] {
        assert_eq!(c.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    }
    for c in [&mut r, &mut t] {
        wait_for("10 bytes of the RDB", || {
            field(c, "master_sync_read_bytes") == "10"
        });
    }
    let names =
        |c: &mut RawConn| -> Vec<String> { replication(c).into_iter().map(|(k, _)| k).collect() };
    assert_eq!(names(&mut r), names(&mut t), "INFO replication's fields");
    for name in [
        "master_sync_in_progress",
        "master_sync_total_bytes",
        "master_sync_left_bytes",
        "master_sync_perc",
        "master_link_status",
    ] {
        assert_eq!(field(&mut r, name), field(&mut t, name), "{name}");
    }
    assert_eq!(show(&r.cmd(&["ROLE"])), show(&t.cmd(&["ROLE"])), "ROLE");
    drop(done);
    primary.join().expect("the fake primary");
}
