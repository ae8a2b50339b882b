//! What a full sync does to a Ruvio replica besides its data: it fails the
//! transactions of the clients that WATCH a key it replaced, as Redis's flush
//! before loading does (compared with a redis-server replica doing the same).

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
