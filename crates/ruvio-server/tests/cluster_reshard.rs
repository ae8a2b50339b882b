//! Moving slots live on a node of the cluster bus in the `ruvio` binary
//! (`--cluster-enabled yes`), compared with redis-server 7.0: CLUSTER SETSLOT
//! MIGRATING / IMPORTING / NODE / STABLE with their errors, `-ASK` for a
//! migrating slot's missing keys, ASKING for an importing slot's, `-TRYAGAIN`
//! for several keys of a slot in flight not all on one node, the slots in
//! flight in CLUSTER NODES, and COUNTKEYSINSLOT / GETKEYSINSLOT meanwhile.
//! Then `redis-cli --cluster reshard` into a Ruvio node while a client writes.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{halves, text, Node, SideBySide};
use common::*;
use std::process::{Command, Stdio};

fn myid(port: u16) -> String {
    text(&RawConn::connect(port).cmd(&["CLUSTER", "MYID"]))
}

/// The slots in flight on `port`'s own CLUSTER NODES line (`[slot->-id]`,
/// `[slot-<-id]`), the node names read as `ME` and `PEER`.
fn in_flight(port: u16, peer: u16) -> Vec<String> {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    let own = nodes.lines().find(|l| l.contains("myself")).unwrap_or("");
    own.split(' ')
        .filter(|word| word.starts_with('['))
        .map(|word| word.replace(&myid(peer), "PEER").replace(&myid(port), "ME"))
        .collect()
}

#[test]
fn setslot_ask_and_tryagain_as_redis_server() {
    if require_redis_server("cluster_reshard").is_none() {
        return;
    }
    let side = SideBySide::start(&unique_dir("reshard-setslot"));
    let pairs = side.pairs();
    // `{06S}...` are slot 0 (the tested node's), `foo` 12182 (the peer's).
    let replies = |(tested, peer): (u16, u16)| {
        let (me, them) = (myid(tested), myid(peer));
        let mut conn = RawConn::connect(tested);
        let mut seen = Vec::new();
        let mut run = |line: &str| {
            let line = line.replace("$ME", &me).replace("$PEER", &them);
            let words: Vec<&str> = line.split(' ').collect();
            let reply = show(&conn.cmd(&words))
                .replace(&peer.to_string(), "PEER")
                .replace(&them, "PEERID");
            let line = line.replace(&them, "PEERID").replace(&me, "MYID");
            seen.push(format!("{line} -> {reply}"));
        };
        for line in [
            "SET {06S}a 1",
            "CLUSTER SETSLOT 0 MIGRATING $PEER",
            "GET {06S}a",
            "GET {06S}b",
            "SET {06S}b 1",
            "MGET {06S}a {06S}b",
            "EXISTS {06S}b",
            "CLUSTER SETSLOT 9000 MIGRATING $PEER",
            "CLUSTER SETSLOT 0 MIGRATING 0123456789012345678901234567890123456789",
            "CLUSTER SETSLOT 0 IMPORTING $PEER",
            "CLUSTER SETSLOT 0 FOO",
            "CLUSTER SETSLOT 0 STABLE extra",
            "CLUSTER SETSLOT 0 NODE",
            "CLUSTER SETSLOT 16384 STABLE",
            "CLUSTER SETSLOT x STABLE",
            "CLUSTER SETSLOT 0 NODE nobody",
            "CLUSTER SETSLOT 0 NODE $PEER",
            "CLUSTER SETSLOT 12182 IMPORTING nobody",
            "CLUSTER SETSLOT 12182 IMPORTING $PEER",
            "GET foo",
            "ASKING",
            "GET foo",
            "GET foo",
            "ASKING",
            "SET foo 1",
            "CLUSTER COUNTKEYSINSLOT 12182",
            "CLUSTER GETKEYSINSLOT 12182 10",
            "CLUSTER COUNTKEYSINSLOT 0",
            "CLUSTER GETKEYSINSLOT 0 10",
            "CLUSTER GETKEYSINSLOT 0 -1",
            "ASKING",
            "MGET foo {foo}x",
            "ASKING",
            "MGET foo foo",
            "ASKING",
            "PING",
            "GET foo",
        ] {
            run(line);
        }
        let during = in_flight(tested, peer);
        for line in [
            "CLUSTER SETSLOT 0 STABLE",
            "GET {06S}b",
            "CLUSTER SETSLOT 12182 NODE $ME",
            "GET foo",
            "CLUSTER SETSLOT 12182 STABLE",
        ] {
            run(line);
        }
        (seen, during, in_flight(tested, peer))
    };
    let (ruvio, redis) = (replies(pairs[0]), replies(pairs[1]));
    assert_eq!(ruvio.0, redis.0);
    assert_eq!(ruvio.1, redis.1);
    assert_eq!(ruvio.1, ["[0->-PEER]", "[12182-<-PEER]"]);
    assert_eq!(ruvio.2, redis.2);
}

fn redis_cli() -> Option<std::path::PathBuf> {
    let bin = require_redis_server("cluster_reshard")?.with_file_name("redis-cli");
    if bin.is_file() && require_redis_py("cluster_reshard") {
        return Some(bin);
    }
    assert!(
        std::env::var("RUVIO_REQUIRE_REDIS").as_deref() != Ok("1"),
        "redis-cli or redis-py is not installed but RUVIO_REQUIRE_REDIS=1"
    );
    eprintln!("SKIPPED a cluster_reshard test: redis-cli or redis-py is not installed");
    None
}

/// redis-py's RedisCluster writing `w:<n>` keys from `port` until `stop`
/// exists, then printing how many writes were acknowledged.
fn start_writer(port: u16, stop: &std::path::Path) -> std::process::Child {
    let script = format!(
        "import os\n\
         from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={port})\n\
         n = 0\n\
         while not os.path.exists('{stop}'):\n\
         \x20   rc.set('w:%d' % n, 'v%d' % n)\n\
         \x20   n += 1\n\
         print(n)\n",
        stop = stop.display()
    );
    Command::new("python3")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3")
}

/// Every `w:<n>` below `count` reads back through RedisCluster from `port`.
fn all_written_present(port: u16, count: usize) {
    let script = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='127.0.0.1', port={port})\n\
         bad = [i for i in range({count}) if rc.get('w:%d' % i) != b'v%d' % i]\n\
         assert not bad, (len(bad), bad[:10])\n"
    );
    python(&script);
}

/// `redis-cli --cluster reshard` moving `slots` slots from `from` to `to`.
fn reshard(cli: &std::path::Path, from: u16, to: u16, slots: u16) {
    let out = Command::new(cli)
        .args(["--cluster", "reshard", &format!("127.0.0.1:{from}")])
        .args(["--cluster-from", &myid(from), "--cluster-to", &myid(to)])
        .args(["--cluster-slots", &slots.to_string(), "--cluster-yes"])
        .output()
        .expect("redis-cli");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && !stdout.contains("[ERR]"),
        "reshard {from} -> {to}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `redis-cli --cluster check` from `port` finds the cluster whole: every
/// slot covered, the nodes agreeing, no slot left open.
fn check_whole(cli: &std::path::Path, port: u16) -> Result<(), String> {
    let out = Command::new(cli)
        .args(["--cluster", "check", &format!("127.0.0.1:{port}")])
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let whole = out.status.success()
        && stdout.contains("[OK] All nodes agree about slots configuration.")
        && stdout.contains("[OK] All 16384 slots covered.")
        && !stdout.contains("[WARNING]")
        && !stdout.contains("[ERR]");
    match whole {
        true => Ok(()),
        false => Err(stdout),
    }
}

/// A slot count of each node, from its own CLUSTER NODES.
fn slots_of(port: u16) -> usize {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    let own = nodes.lines().find(|l| l.contains("myself")).unwrap_or("");
    own.split(' ')
        .skip(8)
        .filter(|w| !w.starts_with('['))
        .map(|range| match range.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap_or(0) - a.parse::<usize>().unwrap_or(0) + 1,
            None => 1,
        })
        .sum()
}

/// `redis-cli --cluster reshard` moves slots from a redis-server node to a
/// Ruvio node while redis-py's RedisCluster writes (following `-ASK` and
/// `-MOVED`): every acknowledged write reads back, and `redis-cli --cluster
/// check` finds the cluster whole, from either node.
#[test]
fn redis_cli_reshards_from_redis_server_to_ruvio_while_a_client_writes() {
    let Some(cli) = redis_cli() else {
        return;
    };
    let port = free_ports(1, true);
    let _node = Node::start(port, 1, &unique_dir("reshard-in"));
    let redis = Server::redis_cluster_node();
    halves(port, redis.port());
    let stop = unique_dir("reshard-in-stop").join("stop");
    let writer = start_writer(port, &stop);
    std::thread::sleep(std::time::Duration::from_millis(500));
    reshard(&cli, redis.port(), port, 200);
    std::fs::write(&stop, b"").expect("stop file");
    let out = writer.wait_with_output().expect("writer");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: usize = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("a count");
    assert!(written > 0);
    assert_eq!(slots_of(port), 8192 + 200);
    wait_for("the cluster whole", || {
        check_whole(&cli, port)?;
        check_whole(&cli, redis.port())
    });
    all_written_present(port, written);
}
