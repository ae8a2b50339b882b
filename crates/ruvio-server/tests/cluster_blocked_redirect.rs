//! Clients blocked on keys (BLPOP, BZPOPMIN, XREAD BLOCK, BLMOVE) of a slot
//! the node stops serving are answered as Redis 7 answers them
//! (`clusterRedirectBlockedClientIfNeeded`): `-MOVED` to the slot's new owner,
//! `-CLUSTERDOWN` once the cluster is down; a slot only MIGRATING keeps its
//! waiters. Side by side with a redis-server node for SETSLOT NODE, a slot
//! lost on the bus and DELSLOTS; Ruvio alone for CLUSTER MIGRATESLOTS's
//! handover and for a forward-mode node whose waiters live on either shard.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{
    cluster_nodes, halves, migrate_slots, ok, split_at, text, three_masters_and_a_replica, Node,
    SideBySide,
};
use common::cluster_tools::myid;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a client that must stay blocked is watched for a reply.
const STILL_BLOCKED: Duration = Duration::from_millis(300);

/// How long a redirection may take: redis-server checks its blocked clients
/// in its clients' cron (every 100 ms at `hz 10`), Ruvio once its slot map
/// changed (after the bus brought the change, for a slot lost there).
const REDIRECTED_WITHIN: Duration = Duration::from_secs(10);

/// A key of `slot` (a `{n}` hash tag), with `suffix` after the tag.
fn key_in_slot(slot: u16, suffix: &str) -> String {
    (0u32..)
        .map(|n| format!("{{{n}}}{suffix}"))
        .find(|key| key_slot(key.as_bytes()) == slot)
        .unwrap()
}

/// A client that sent a blocking command and waits for its reply.
struct Waiting {
    stream: TcpStream,
    command: String,
}

impl Waiting {
    /// Send `words` on a fresh connection to `port`; it must block (no reply
    /// within [`STILL_BLOCKED`]).
    fn start(port: u16, words: &[&str]) -> Waiting {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream.write_all(&encode(words)).unwrap();
        let mut waiting = Waiting {
            stream,
            command: words.join(" "),
        };
        waiting.still_blocked();
        waiting
    }

    /// [`Self::start`] on a connection served by shard `shard` of a
    /// forward-mode process (connections are opened until DEBUG SHARD names
    /// it).
    fn start_on_shard(port: u16, shard: usize, words: &[&str]) -> Waiting {
        let wanted = format!(":{shard}\r\n");
        for _ in 0..200 {
            let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream.write_all(&encode(&["DEBUG", "SHARD"])).unwrap();
            let mut reply = [0u8; 16];
            let n = stream.read(&mut reply).unwrap();
            if &reply[..n] != wanted.as_bytes() {
                continue;
            }
            stream.write_all(&encode(words)).unwrap();
            let mut waiting = Waiting {
                stream,
                command: format!("{} (shard {shard})", words.join(" ")),
            };
            waiting.still_blocked();
            return waiting;
        }
        panic!("no connection landed on shard {shard} in 200 tries");
    }

    fn still_blocked(&mut self) {
        self.stream.set_read_timeout(Some(STILL_BLOCKED)).unwrap();
        let mut buf = [0u8; 256];
        match self.stream.read(&mut buf) {
            Err(_) => {}
            Ok(n) => panic!("{} answered {}", self.command, show(&buf[..n])),
        }
    }

    /// The reply that ends the wait.
    fn reply(&mut self) -> Vec<u8> {
        self.stream
            .set_read_timeout(Some(REDIRECTED_WITHIN))
            .unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        loop {
            let n = self
                .stream
                .read(&mut chunk)
                .unwrap_or_else(|e| panic!("{}: no reply: {e}", self.command));
            assert!(n > 0, "{}: connection closed", self.command);
            buf.extend_from_slice(&chunk[..n]);
            if frame_len(&buf).unwrap().is_some() {
                return buf;
            }
        }
    }
}

/// One pair's transcript: waiters on slots 0-3 of `tested` (serving 0-8191
/// beside `peer`), then SETSLOT MIGRATING (they stay), SETSLOT NODE of slot
/// 0 (its waiter is sent to the peer), slot 1 taken by the peer (IMPORTING,
/// then SETSLOT NODE on the peer: `tested` learns it on the bus), and
/// DELSLOTS of slot 2 (the cluster goes down: every waiter left is told).
/// Ports read as ME and PEER.
fn transcript(tested: u16, peer: u16) -> Vec<String> {
    let (me, them) = (myid(tested), myid(peer));
    let keys: Vec<String> = (0..4).map(|slot| key_in_slot(slot, "k")).collect();
    let dst = key_in_slot(3, "dst");
    let mut seen = Vec::new();
    let mut note = |what: &str, reply: &[u8]| {
        let reply = show(reply)
            .replace(&peer.to_string(), "PEER")
            .replace(&tested.to_string(), "ME");
        seen.push(format!("{what} -> {reply}"));
    };
    let mut blpop = Waiting::start(tested, &["BLPOP", &keys[0], "0"]);
    let mut bzpopmin = Waiting::start(tested, &["BZPOPMIN", &keys[1], "0"]);
    let mut xread = Waiting::start(
        tested,
        &["XREAD", "BLOCK", "0", "STREAMS", keys[2].as_str(), "$"],
    );
    let mut blmove = Waiting::start(tested, &["BLMOVE", &keys[3], &dst, "LEFT", "RIGHT", "0"]);

    // MIGRATING: the slot is still this node's, its waiter stays.
    ok(tested, &["CLUSTER", "SETSLOT", "0", "MIGRATING", &them]);
    blpop.still_blocked();
    ok(tested, &["CLUSTER", "SETSLOT", "0", "NODE", &them]);
    note("BLPOP after SETSLOT 0 NODE peer", &blpop.reply());
    bzpopmin.still_blocked();

    // Slot 1 taken by the peer, seen on the bus.
    ok(peer, &["CLUSTER", "SETSLOT", "1", "IMPORTING", &me]);
    ok(peer, &["CLUSTER", "SETSLOT", "1", "NODE", &them]);
    note("BZPOPMIN after the peer took slot 1", &bzpopmin.reply());
    xread.still_blocked();
    blmove.still_blocked();

    // Slot 2 unassigned: the cluster is down, every waiter is told.
    ok(tested, &["CLUSTER", "DELSLOTS", "2"]);
    note("XREAD after DELSLOTS 2", &xread.reply());
    note("BLMOVE after DELSLOTS 2", &blmove.reply());
    seen
}

/// SETSLOT NODE, a slot lost on the bus and a cluster down: the same replies
/// from a Ruvio node as from a redis-server node, waiters on a MIGRATING slot
/// left waiting.
#[test]
fn blocked_clients_of_a_slot_given_away_are_redirected_as_by_redis_server() {
    let side = SideBySide::start(&unique_dir("blocked-redirect"));
    let [(ruvio, ruvio_peer), (redis, redis_peer)] = side.pairs();
    let ours = transcript(ruvio, ruvio_peer);
    let theirs = transcript(redis, redis_peer);
    assert_eq!(ours, theirs);
    assert!(
        ours[0].ends_with("\"-MOVED 0 127.0.0.1:PEER\\r\\n\""),
        "{ours:?}"
    );
    assert!(
        ours[1].ends_with("\"-MOVED 1 127.0.0.1:PEER\\r\\n\""),
        "{ours:?}"
    );
    assert!(
        ours[2].contains("CLUSTERDOWN The cluster is down"),
        "{ours:?}"
    );
}

/// CLUSTER MIGRATESLOTS's handover: the source's waiters on keys of the moved
/// slots get `-MOVED` to the target (RESP2 and RESP3 alike); a waiter on a
/// slot that stays is still served by the next push.
#[test]
fn migrateslots_redirects_the_waiters_of_the_moved_slots() {
    let (a, b) = (free_ports(1, true), free_ports(1, true));
    let _nodes = [
        Node::start(a, 1, &unique_dir("blocked-slotmig-a")),
        Node::start(b, 1, &unique_dir("blocked-slotmig-b")),
    ];
    halves(a, b);
    let (moved, stays) = (key_in_slot(5, "list"), key_in_slot(200, "list"));
    let stream = key_in_slot(6, "stream");
    let mut blpop = Waiting::start(a, &["BLPOP", &moved, "0"]);
    let mut resp3 = TcpStream::connect(("127.0.0.1", a)).unwrap();
    resp3.write_all(&encode(&["HELLO", "3"])).unwrap();
    let mut hello = [0u8; 1024];
    let _ = resp3.read(&mut hello).unwrap();
    resp3
        .write_all(&encode(&["XREAD", "BLOCK", "0", "STREAMS", &stream, "$"]))
        .unwrap();
    let mut xread = Waiting {
        stream: resp3,
        command: "XREAD (RESP3)".into(),
    };
    xread.still_blocked();
    let mut staying = Waiting::start(a, &["BLPOP", &stays, "0"]);

    let target = myid(b);
    migrate_slots(a, 0, 99, &target);
    assert_eq!(
        text(&blpop.reply()),
        format!("MOVED 5 127.0.0.1:{b}"),
        "BLPOP"
    );
    assert_eq!(
        xread.reply(),
        format!("-MOVED 6 127.0.0.1:{b}\r\n").into_bytes()
    );
    staying.still_blocked();
    let pushed = RawConn::connect(a).cmd(&["RPUSH", &stays, "x"]);
    assert_eq!(pushed, b":1\r\n");
    assert_eq!(
        staying.reply(),
        encode(&[stays.as_str(), "x"]),
        "the waiter of a slot that stayed"
    );
    wait_for("the job succeeds", || {
        let jobs = show(&RawConn::connect(a).cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]));
        match jobs.contains("success") {
            true => Ok(()),
            false => Err(jobs),
        }
    });
}

/// A forward-mode node of two shards: waiters on keys held by shard 0 and by
/// shard 1 (clients of either shard) are redirected when SETSLOT NODE gives
/// their slot away and when the peer takes one on the bus.
#[test]
fn a_forward_mode_node_redirects_the_waiters_on_both_shards() {
    let (node_port, peer_port) = (free_ports(1, true), free_ports(1, true));
    let _nodes = [
        Node::start_forward(node_port, 2, &unique_dir("blocked-forward")),
        Node::start(peer_port, 1, &unique_dir("blocked-forward-peer")),
    ];
    // The node serves 0-11999: shard 0 holds 0-8191, shard 1 8192-11999.
    split_at(node_port, peer_port, 12000);
    let (me, them) = (myid(node_port), myid(peer_port));
    for slot in [10u16, 9000, 9001] {
        let key = key_in_slot(slot, "list");
        // A client of each shard, whichever holds the key.
        let mut waiters: Vec<Waiting> = (0..2)
            .map(|shard| Waiting::start_on_shard(node_port, shard, &["BLPOP", &key, "0"]))
            .collect();
        let slot_arg = slot.to_string();
        if slot == 9001 {
            ok(
                peer_port,
                &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", &me],
            );
            ok(peer_port, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &them]);
        } else {
            ok(node_port, &["CLUSTER", "SETSLOT", &slot_arg, "NODE", &them]);
        }
        for waiter in &mut waiters {
            assert_eq!(
                text(&waiter.reply()),
                format!("MOVED {slot} 127.0.0.1:{peer_port}"),
                "slot {slot}"
            );
        }
    }
}

/// A replica's READONLY client blocked on a read of its master's slot
/// (XREAD BLOCK) stays blocked when the replica's slot map changes (Redis
/// lets it: the replica serves that slot's reads), and is served by the
/// master's next XADD once it is replicated.
#[test]
fn a_readonly_reader_on_a_replica_stays_blocked_across_a_map_change() {
    let (masters, replica) = three_masters_and_a_replica("blocked-readonly", &[]);
    let stream = key_in_slot(10, "stream");
    let mut reader = TcpStream::connect(("127.0.0.1", replica.port)).unwrap();
    reader.write_all(&encode(&["READONLY"])).unwrap();
    let mut answer = [0u8; 16];
    let n = reader.read(&mut answer).unwrap();
    assert_eq!(&answer[..n], b"+OK\r\n");
    reader
        .write_all(&encode(&["XREAD", "BLOCK", "0", "STREAMS", &stream, "$"]))
        .unwrap();
    let mut xread = Waiting {
        stream: reader,
        command: "XREAD on the replica".into(),
    };
    xread.still_blocked();
    // Slot 6000 moves from the second master to the third (IMPORTING, then
    // NODE there: a new epoch the replica learns on the bus).
    let (second, third) = (myid(masters[1].port), myid(masters[2].port));
    ok(
        masters[2].port,
        &["CLUSTER", "SETSLOT", "6000", "IMPORTING", &second],
    );
    ok(
        masters[2].port,
        &["CLUSTER", "SETSLOT", "6000", "NODE", &third],
    );
    wait_for("the replica sees slot 6000 moved", || {
        let nodes = cluster_nodes(replica.port);
        let owner = nodes.iter().find(|l| l.name == third).unwrap();
        match owner.slots.iter().any(|&(a, b)| (a..=b).contains(&6000)) {
            true => Ok(()),
            false => Err(format!("{nodes:?}")),
        }
    });
    xread.still_blocked();
    let added = RawConn::connect(masters[0].port).cmd(&["XADD", &stream, "1-1", "f", "v"]);
    assert_eq!(added, b"$3\r\n1-1\r\n");
    assert_eq!(
        xread.reply(),
        [
            b"*1\r\n*2\r\n".as_slice(),
            format!("${}\r\n{stream}\r\n", stream.len()).as_bytes(),
            b"*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
        ]
        .concat()
    );
}
