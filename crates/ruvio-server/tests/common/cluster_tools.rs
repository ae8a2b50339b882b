//! What the tests that move slots with `redis-cli --cluster` share
//! (tests/cluster_reshard.rs, tests/cluster_migrate.rs): the tool found beside
//! redis-server, its reshard and check, a redis-py RedisCluster writer and the
//! check that every acknowledged write reads back.

use super::cluster_process::text;
use super::*;
use std::process::{Command, Stdio};

/// The node's name (CLUSTER MYID).
pub fn myid(port: u16) -> String {
    myid_at(LOOPBACK, port)
}

/// The name of the node at `host`:`port` (CLUSTER MYID).
pub fn myid_at(host: &str, port: u16) -> String {
    text(&RawConn::connect_to(host, port).cmd(&["CLUSTER", "MYID"]))
}

/// Where the tests on one machine reach their nodes.
const LOOPBACK: &str = "127.0.0.1";

/// redis-cli beside redis-server, when it and redis-py are installed (`None`:
/// the test `test` is skipped, unless RUVIO_REQUIRE_REDIS=1).
pub fn redis_cli(test: &str) -> Option<std::path::PathBuf> {
    let bin = require_redis_server(test)?.with_file_name("redis-cli");
    if bin.is_file() && require_redis_py(test) {
        return Some(bin);
    }
    assert!(
        std::env::var("RUVIO_REQUIRE_REDIS").as_deref() != Ok("1"),
        "redis-cli or redis-py is not installed but RUVIO_REQUIRE_REDIS=1"
    );
    eprintln!("SKIPPED {test}: redis-cli or redis-py is not installed");
    None
}

/// redis-py's RedisCluster writing `w:<n>` keys from `port` until `stop`
/// exists, then printing how many writes were acknowledged.
pub fn start_writer(port: u16, stop: &std::path::Path) -> std::process::Child {
    start_writer_at(LOOPBACK, port, stop)
}

/// [`start_writer`] from the node at `host`:`port`.
pub fn start_writer_at(host: &str, port: u16, stop: &std::path::Path) -> std::process::Child {
    let script = format!(
        "import os\n\
         from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='{host}', port={port})\n\
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

/// Stops a [`start_writer`] (creates `stop`) and returns how many writes it
/// had acknowledged (at least one).
pub fn stop_writer(writer: std::process::Child, stop: &std::path::Path) -> usize {
    std::fs::write(stop, b"").expect("stop file");
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
    written
}

/// Every `w:<n>` below `count` reads back through RedisCluster from `port`.
pub fn all_written_present(port: u16, count: usize) {
    all_written_present_at(LOOPBACK, port, count)
}

/// [`all_written_present`] read from the node at `host`:`port`.
pub fn all_written_present_at(host: &str, port: u16, count: usize) {
    let script = format!(
        "from redis.cluster import RedisCluster\n\
         rc = RedisCluster(host='{host}', port={port})\n\
         bad = [i for i in range({count}) if rc.get('w:%d' % i) != b'v%d' % i]\n\
         assert not bad, (len(bad), bad[:10])\n"
    );
    python(&script);
}

/// How long one `redis-cli --cluster reshard` may take: the slowest seen, 1000
/// slots between forward-mode nodes of the debug build on a loaded machine,
/// took about 65 s.
const RESHARD_TIMEOUT_S: u64 = 300;

/// `redis-cli --cluster reshard` moving `slots` slots from `from` to `to`.
pub fn reshard(cli: &std::path::Path, from: u16, to: u16, slots: u16) {
    reshard_at(cli, (LOOPBACK, from), (LOOPBACK, to), slots)
}

/// [`reshard`] between the nodes at `from` and `to` (host, port).
pub fn reshard_at(cli: &std::path::Path, from: (&str, u16), to: (&str, u16), slots: u16) {
    let (from_id, to_id) = (myid_at(from.0, from.1), myid_at(to.0, to.1));
    let (from, to) = (
        format!("{}:{}", from.0, from.1),
        format!("{}:{}", to.0, to.1),
    );
    // Bounded: a node that stops answering mid-reshard (seen once on a
    // forward-mode target, docs/cluster.md) fails the test instead of hanging it.
    let out = Command::new("timeout")
        .args(["--kill-after=5", &RESHARD_TIMEOUT_S.to_string()])
        .arg(cli)
        .args(["--cluster", "reshard", &from])
        .args(["--cluster-from", &from_id, "--cluster-to", &to_id])
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

/// `redis-cli --cluster create` of the nodes at `addresses` (`host:port`)
/// with `extra` options (`--cluster-replicas 1` ...), answering yes; its
/// output, once it says every slot is covered.
pub fn create(cli: &std::path::Path, addresses: &[String], extra: &[&str]) -> String {
    let out = Command::new(cli)
        .args(["--cluster", "create"])
        .args(addresses)
        .args(extra)
        .arg("--cluster-yes")
        .output()
        .expect("redis-cli");
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && said.contains("[OK] All 16384 slots covered."),
        "create: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

/// `redis-cli --cluster check` from `port` finds the cluster whole: every
/// slot covered, the nodes agreeing, no slot left open.
pub fn check_whole(cli: &std::path::Path, port: u16) -> Result<(), String> {
    check_whole_at(cli, LOOPBACK, port)
}

/// [`check_whole`] from the node at `host`:`port`.
pub fn check_whole_at(cli: &std::path::Path, host: &str, port: u16) -> Result<(), String> {
    let out = Command::new(cli)
        .args(["--cluster", "check", &format!("{host}:{port}")])
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
pub fn slots_of(port: u16) -> usize {
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

/// The slots in flight on `port`'s own CLUSTER NODES line (`[slot->-id]`,
/// `[slot-<-id]`), the node names read as `ME` and `PEER`.
pub fn in_flight(port: u16, peer: u16) -> Vec<String> {
    let nodes = text(&RawConn::connect(port).cmd(&["CLUSTER", "NODES"]));
    let own = nodes.lines().find(|l| l.contains("myself")).unwrap_or("");
    own.split(' ')
        .filter(|word| word.starts_with('['))
        .map(|word| word.replace(&myid(peer), "PEER").replace(&myid(port), "ME"))
        .collect()
}

/// SETSLOT's walk of a slot out of and one into `tested` (serving 0-8191
/// beside `peer`), with GET/SET/MGET/ASKING and their errors, sent on `conn`
/// (a connection to `tested`): each line with its reply, the node names and
/// the peer's port read as `MYID`, `PEERID` and `PEER`; the slots in flight
/// midway, and after.
pub fn setslot_walk(
    conn: &mut RawConn,
    tested: u16,
    peer: u16,
) -> (Vec<String>, Vec<String>, Vec<String>) {
    // `{06S}...` are slot 0 (the tested node's), `foo` 12182 (the peer's).
    let (me, them) = (myid(tested), myid(peer));
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
}
