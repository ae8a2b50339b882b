//! What a full sync does to a Ruvio replica besides its data: it fails the
//! transactions of the clients that WATCH a key it replaced, as Redis's flush
//! before loading does (compared with a redis-server replica doing the same);
//! and its load is checked as a whole: an RDB with a value one shard cannot
//! build (a fake primary serving a crafted file) leaves every shard on its old
//! data, and the next full sync replaces them all.

mod common;

use common::replication::*;
use common::*;

/// The replies of three watching clients' EXEC (of a key the new primary
/// changed, one it kept equal, one that existed only on the new primary) after
/// `replica` moves from `first` to `second`, a full sync.
fn execs_after_a_full_sync(replica: &Server, first: &Server, second: &Server) -> Vec<String> {
    follow(replica, first);
    let mut r = replica.raw();
    wait_for("the first primary's data", || {
        r.cmd(&["GET", "changed"]) == b"$6\r\nbefore\r\n"
    });
    let keys = ["changed", "same", "fresh"];
    let mut watchers: Vec<RawConn> = keys.iter().map(|_| replica.raw()).collect();
    for (w, key) in watchers.iter_mut().zip(keys) {
        assert_eq!(w.cmd(&["WATCH", key]), b"+OK\r\n");
    }
    follow(replica, second);
    wait_for("the second primary's data", || {
        r.cmd(&["GET", "fresh"]) == b"$3\r\nnew\r\n"
    });
    watchers
        .iter_mut()
        .zip(keys)
        .map(|(w, key)| {
            assert_eq!(w.cmd(&["MULTI"]), b"+OK\r\n");
            assert_eq!(w.cmd(&["GET", key]), b"+QUEUED\r\n");
            show(&w.cmd(&["EXEC"]))
        })
        .collect()
}

#[test]
fn a_full_sync_fails_the_watchers_transactions() {
    if require_redis_server("a_full_sync_fails_the_watchers_transactions").is_none() {
        return;
    }
    let (first, second) = (Server::redis(), Server::redis());
    for (server, changed) in [(&first, "before"), (&second, "after")] {
        let mut c = server.raw();
        let no_delay = ["CONFIG", "SET", "repl-diskless-sync-delay", "0"];
        assert_eq!(c.cmd(&no_delay), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", "changed", changed]), b"+OK\r\n");
        assert_eq!(c.cmd(&["SET", "same", "kept"]), b"+OK\r\n");
    }
    assert_eq!(second.raw().cmd(&["SET", "fresh", "new"]), b"+OK\r\n");
    let twin = Server::redis();
    let expected = execs_after_a_full_sync(&twin, &first, &second);
    for shards in [1, 2] {
        let ruvio = Server::ruvio(PortMode::Forward, shards);
        let got = execs_after_a_full_sync(&ruvio, &first, &second);
        assert_eq!(got, expected, "{shards} shard(s): EXEC after the full sync");
    }
}

/// An RDB file (version 9, checksum 0: not checked) of database 0 holding
/// `count` strings `new:<i>` and, with `bad`, a set whose two members are the
/// same (a value the loader refuses on the key's shard only: the file reads
/// whole on every shard, the value is built only where the key lives).
fn crafted_rdb(count: usize, bad: bool) -> Vec<u8> {
    let mut rdb = b"REDIS0009".to_vec();
    rdb.extend([0xfe, 0x00]);
    let string = |rdb: &mut Vec<u8>, s: &[u8]| {
        rdb.push(s.len() as u8);
        rdb.extend_from_slice(s);
    };
    for i in 0..count {
        rdb.push(0x00);
        string(&mut rdb, format!("new:{i}").as_bytes());
        string(&mut rdb, b"v");
    }
    if bad {
        rdb.push(0x02);
        string(&mut rdb, b"bad");
        rdb.push(2);
        string(&mut rdb, b"a");
        string(&mut rdb, b"a");
    }
    rdb.push(0xff);
    rdb.extend([0u8; 8]);
    rdb
}

fn count_keys(r: &mut RawConn, pattern: &str) -> usize {
    match decode(&r.cmd(&["KEYS", pattern])) {
        Value::Array(keys) => keys.len(),
        other => panic!("KEYS {pattern}: {other:?}"),
    }
}

/// A full sync's RDB with a value that one shard cannot build: no shard
/// serves any of it (each keeps its old data, the log says why), the link
/// tries again, and the next, good RDB replaces every shard's data.
#[test]
fn a_load_one_shard_refuses_leaves_every_shard_on_its_data() {
    const KEYS: usize = 20;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let (serve_good, good_wanted) = std::sync::mpsc::channel::<()>();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let primary = std::thread::spawn(move || {
        let mut held = Vec::new();
        for bad in [true, false] {
            let (mut stream, _) = listener.accept().expect("the replica connects");
            if !bad {
                good_wanted.recv().expect("the test's go");
            }
            for reply in ["+PONG\r\n", "+OK\r\n", "+OK\r\n"] {
                read_command(&mut stream);
                std::io::Write::write_all(&mut stream, reply.as_bytes()).expect("a reply");
            }
            assert_eq!(read_command(&mut stream)[0], "PSYNC");
            let rdb = crafted_rdb(KEYS, bad);
            let head = format!("+FULLRESYNC {} 0\r\n${}\r\n", "c".repeat(40), rdb.len());
            std::io::Write::write_all(&mut stream, head.as_bytes()).expect("the reply");
            std::io::Write::write_all(&mut stream, &rdb).expect("the RDB");
            held.push(stream);
        }
        let _ = finished.recv();
    });
    // The fake primary speaks the single stream only, as a redis-server,
    // whose refusal of `REPLCONF ruvio-shard` a replica wanting shard links
    // falls back from (`refused_shard_links_fall_back_to_the_single_stream`).
    let ruvio = Server::ruvio_with(PortMode::Forward, 2, &["--replica-shard-links", "no"]);
    let mut r = ruvio.raw();
    for i in 0..KEYS {
        let key = format!("old:{i}");
        assert_eq!(r.cmd(&["SET", &key, "mine"]), b"+OK\r\n");
    }
    let port = port.to_string();
    assert_eq!(r.cmd(&["REPLICAOF", "127.0.0.1", &port]), b"+OK\r\n");
    wait_for("the failed load in the log", || {
        ruvio
            .logs()
            .contains("the MASTER's RDB did not load on every shard")
    });
    assert_eq!(count_keys(&mut r, "old:*"), KEYS, "every shard's old data");
    assert_eq!(count_keys(&mut r, "new:*"), 0, "none of the failed load");
    let logs = ruvio.logs();
    assert!(logs.contains("does not load"), "why, in the log: {logs}");
    assert!(logs.contains("keeps its data"), "the other shard: {logs}");
    assert_eq!(field(&mut r, "master_link_status"), "down");
    serve_good.send(()).expect("the fake primary waits");
    wait_for("the good RDB loaded", || {
        field(&mut r, "master_link_status") == "up"
    });
    assert_eq!(count_keys(&mut r, "new:*"), KEYS);
    assert_eq!(count_keys(&mut r, "old:*"), 0);
    drop(done);
    primary.join().expect("the fake primary");
}
