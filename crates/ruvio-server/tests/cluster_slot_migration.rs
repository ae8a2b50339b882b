//! Whole-slot migration between Ruvio nodes (CLUSTER MIGRATESLOTS,
//! GETSLOTMIGRATIONS, CANCELSLOTMIGRATIONS; Valkey 9's atomic slot
//! migration): the slots move with every key and every write made meanwhile,
//! the target takes them in one step, and a client writing throughout sees
//! `-MOVED` once and never `-ASK` nor `-TRYAGAIN`; a cancelled or failed job
//! leaves the source with its slots and keys and the target with none.

mod common;

use common::bus_node::wait_for;
use common::cluster_process::{cluster_nodes, halves, migrate_slots, ok, text, Node};
use common::cluster_tools::myid;
use common::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The slots moved: the first 100 of the source's half.
const MOVED_FIRST: u16 = 0;
const MOVED_LAST: u16 = 99;

/// Keys written into the moved slots.
const KEYS: usize = 20_000;

/// Counters the writer increments, in the moved slots.
const COUNTERS: usize = 10;

/// `count` key names of the moved slots (by their hash slot), after `skip`.
fn keys_in_moved_slots(prefix: &str, count: usize) -> Vec<String> {
    (0..)
        .map(|i| format!("{prefix}{i}"))
        .filter(|k| (MOVED_FIRST..=MOVED_LAST).contains(&key_slot(k.as_bytes())))
        .take(count)
        .collect()
}

/// Pipelined commands on one connection; their replies.
fn pipeline(port: u16, commands: &[Vec<String>]) -> Vec<Vec<u8>> {
    let mut conn = RawConn::connect(port);
    let mut replies = Vec::with_capacity(commands.len());
    for chunk in commands.chunks(1000) {
        let mut bytes = Vec::new();
        for command in chunk {
            bytes.extend(encode(command));
        }
        conn.send(&bytes);
        replies.extend(chunk.iter().map(|_| conn.read_reply()));
    }
    replies
}

/// Strings, some with a TTL, and a hash and a list every hundredth key.
fn fill(port: u16, keys: &[String]) {
    let commands: Vec<Vec<String>> = keys
        .iter()
        .enumerate()
        .map(|(i, key)| {
            let words: Vec<&str> = match i % 100 {
                0 => vec!["HSET", key, "f1", "a", "f2", "b"],
                1 => vec!["RPUSH", key, "x", "y", "z"],
                n if n % 3 == 0 => vec!["SET", key, "value-with-ttl", "PX", "3600000"],
                _ => vec!["SET", key, "value"],
            };
            words.into_iter().map(String::from).collect()
        })
        .collect();
    for reply in pipeline(port, &commands) {
        assert!(!reply.starts_with(b"-"), "{}", show(&reply));
    }
}

/// Each key's DUMP payload and PTTL on `port`.
fn holdings(port: u16, keys: &[String]) -> Vec<(Vec<u8>, i64)> {
    let dumps: Vec<Vec<String>> = keys
        .iter()
        .map(|k| vec!["DUMP".into(), k.clone()])
        .collect();
    let ttls: Vec<Vec<String>> = keys
        .iter()
        .map(|k| vec!["PTTL".into(), k.clone()])
        .collect();
    let dumps = pipeline(port, &dumps);
    let ttls = pipeline(port, &ttls);
    dumps
        .into_iter()
        .zip(ttls)
        .map(|(d, t)| match decode(&t) {
            Value::Int(ttl) => (d, ttl),
            other => panic!("PTTL: {other:?}"),
        })
        .collect()
}

/// Keys of the moved slots `port` holds.
fn keys_in_slots(port: u16) -> i64 {
    let commands: Vec<Vec<String>> = (MOVED_FIRST..=MOVED_LAST)
        .map(|s| vec!["CLUSTER".into(), "COUNTKEYSINSLOT".into(), s.to_string()])
        .collect();
    pipeline(port, &commands)
        .iter()
        .map(|r| match decode(r) {
            Value::Int(n) => n,
            other => panic!("{other:?}"),
        })
        .sum()
}

/// The first job GETSLOTMIGRATIONS lists on `port`: (state, operation,
/// message), or `None` when there is none.
fn newest_job(port: u16) -> Option<(String, String, String)> {
    let reply = RawConn::connect(port).cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]);
    let Value::Array(jobs) = decode(&reply) else {
        panic!("{}", show(&reply));
    };
    let job = jobs.first()?;
    let field = |name: &str| job.get(name).map(Value::text).unwrap_or_default();
    Some((field("state"), field("operation"), field("message")))
}

/// The writer: INCR (some by EVAL) on the counters in turn from `port`, following
/// `-MOVED` to the new owner; any `-ASK`/`-TRYAGAIN` or other error is
/// returned as a failure. Gives each counter's acknowledged increments.
fn start_writer(
    port: u16,
    counters: Vec<String>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Result<HashMap<String, i64>, String>> {
    std::thread::spawn(move || {
        let mut conn = RawConn::connect(port);
        let mut acked: HashMap<String, i64> = HashMap::new();
        let mut moved = 0;
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let key = &counters[i % counters.len()];
            i += 1;
            // Every fifth by a script: its writes reach the target as the
            // keys' state, the plain INCRs as their records.
            let reply = match i % 5 {
                0 => conn.cmd(&[
                    "EVAL",
                    "return redis.call('INCR', KEYS[1])",
                    "1",
                    key.as_str(),
                ]),
                _ => conn.cmd(&["INCR", key.as_str()]),
            };
            match decode(&reply) {
                Value::Int(n) => {
                    let count = acked.entry(key.clone()).or_default();
                    *count += 1;
                    if n != *count {
                        return Err(format!("{key}: INCR answered {n}, acknowledged {count}"));
                    }
                }
                Value::Error(e) if e.starts_with("MOVED ") => {
                    let to: u16 = e.rsplit(':').next().unwrap().parse().unwrap();
                    conn = RawConn::connect(to);
                    moved += 1;
                    if moved > counters.len() + 1 {
                        return Err(format!("moved back and forth: {e}"));
                    }
                    // Not done: the same key again on the new owner.
                    i -= 1;
                }
                other => return Err(format!("{key}: {other:?}")),
            }
        }
        Ok(acked)
    })
}

/// Two 1-shard nodes halving the slots (`a` serves 0-8191, `b` the rest),
/// `a` holding `keys` of the moved slots; the processes live as long as it.
struct Pair {
    a: u16,
    b: u16,
    nodes: [Node; 2],
    keys: Vec<String>,
}

fn pair(name: &str, keys: usize) -> Pair {
    let (a, b) = (free_ports(1, true), free_ports(1, true));
    let nodes = [
        Node::start(a, 1, &unique_dir(&format!("{name}-a"))),
        Node::start(b, 1, &unique_dir(&format!("{name}-b"))),
    ];
    halves(a, b);
    let keys = keys_in_moved_slots("key:", keys);
    fill(a, &keys);
    Pair { a, b, nodes, keys }
}

/// CLUSTER MIGRATESLOTS of the moved slots from `port` to node `target`.
fn migrate_moved(port: u16, target: &str) {
    migrate_slots(port, MOVED_FIRST, MOVED_LAST, target);
}

#[test]
fn migrateslots_moves_the_slots_whole_while_a_client_increments() {
    let Pair { a, b, nodes, keys } = pair("slotmig", KEYS);
    let written = Instant::now();
    let before = holdings(a, &keys);
    let counters = keys_in_moved_slots("counter:", COUNTERS);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = start_writer(a, counters.clone(), stop.clone());
    std::thread::sleep(Duration::from_millis(300));

    let target = myid(b);
    let began = Instant::now();
    migrate_moved(a, &target);
    wait_for("the export succeeds", || match newest_job(a) {
        Some((state, _, _)) if state == "success" => Ok(()),
        Some((state, _, message)) if state == "failed" => panic!("failed: {message}"),
        other => Err(format!("{other:?}")),
    });
    let took = began.elapsed();
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let acked = writer.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
    assert!(acked.values().sum::<i64>() > 0, "the writer wrote nothing");

    // Valkey 9.1's entry: twelve fields in its order, a map in RESP3.
    let fields = [
        "name",
        "operation",
        "slot_ranges",
        "target_node",
        "source_node",
        "create_time",
        "last_update_time",
        "last_ack_time",
        "state",
        "message",
        "cow_size",
        "remaining_repl_size",
    ];
    let reply = RawConn::connect(a).cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]);
    let Value::Array(jobs) = decode(&reply) else {
        panic!("{}", show(&reply));
    };
    let Value::Array(flat) = &jobs[0] else {
        panic!("{}", show(&reply));
    };
    let names: Vec<String> = flat.iter().step_by(2).map(Value::text).collect();
    assert_eq!(names, fields);
    assert_eq!(
        jobs[0].get("slot_ranges").map(Value::text).as_deref(),
        Some("0-99")
    );
    assert_eq!(
        jobs[0].get("target_node").map(Value::text),
        Some(target.clone())
    );
    let mut resp3 = RawConn::connect(a);
    resp3.cmd(&["HELLO", "3"]);
    let reply = resp3.cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]);
    let Value::Array(jobs) = decode(&reply) else {
        panic!("{}", show(&reply));
    };
    assert!(
        matches!(&jobs[0], Value::Map(pairs) if pairs.len() == 12),
        "{}",
        show(&reply)
    );
    // Both list the job, the target as an import that succeeded.
    let (state, operation, _) = newest_job(b).expect("the target lists the job");
    assert_eq!((state.as_str(), operation.as_str()), ("success", "IMPORT"));
    // Every node says the target owns the slots.
    let source = myid(a);
    wait_for("both nodes agree on the new owner", || {
        for port in [a, b] {
            let lines = cluster_nodes(port);
            let owner = |name: &str| lines.iter().find(|l| l.name == name).unwrap().slots.clone();
            let (theirs, mine) = (owner(&target), owner(&source));
            if !theirs.contains(&(MOVED_FIRST, MOVED_LAST)) || mine != [(MOVED_LAST + 1, 8191)] {
                return Err(format!("{port}: {lines:?}"));
            }
        }
        Ok(())
    });
    // Every key on the target as it was written, TTLs included.
    let after = holdings(b, &keys);
    let elapsed_ms = written.elapsed().as_millis() as i64 + 1000;
    for ((key, (dump_before, ttl_before)), (dump_after, ttl_after)) in
        keys.iter().zip(&before).zip(&after)
    {
        assert_eq!(dump_before, dump_after, "{key}");
        match *ttl_before {
            -1 => assert_eq!(*ttl_after, -1, "{key}"),
            ttl => assert!(
                *ttl_after <= ttl && *ttl_after > ttl - elapsed_ms,
                "{key}: {ttl} then {ttl_after}"
            ),
        }
    }
    // The counters hold every acknowledged increment.
    for key in &counters {
        let reply = RawConn::connect(b).cmd(&["GET", key.as_str()]);
        let value: i64 = text(&reply).parse().unwrap_or(0);
        assert_eq!(value, acked.get(key).copied().unwrap_or(0), "{key}");
    }
    // The source has none of those keys left, and sends their clients on.
    wait_for("the source deleted its copies", || match keys_in_slots(a) {
        0 => Ok(()),
        n => Err(format!("{n} keys left")),
    });
    let reply = RawConn::connect(a).cmd(&["GET", keys[0].as_str()]);
    assert!(
        show(&reply).contains(&format!(
            "MOVED {} 127.0.0.1:{b}",
            key_slot(keys[0].as_bytes())
        )),
        "{}",
        show(&reply)
    );
    let log = std::fs::read_to_string(nodes[0].dir.join("ruvio.log")).unwrap();
    let held = log
        .lines()
        .find(|l| l.contains("handed over"))
        .expect("the handover's log line");
    eprintln!("{KEYS} keys moved in {took:?}; {held}");
}

/// Between the two shards of one process in per-shard mode: each shard is a
/// node, and the job runs as between processes, over loopback.
#[test]
fn migrateslots_moves_slots_between_two_shards_of_one_process() {
    let port = free_ports(2, true);
    let _node = Node::start(port, 2, &unique_dir("slotmig-shards"));
    halves(port, port + 1);
    let keys = keys_in_moved_slots("key:", 2_000);
    fill(port, &keys);
    let before = holdings(port, &keys);
    let target = myid(port + 1);
    ok(
        port,
        &[
            "CLUSTER",
            "MIGRATESLOTS",
            "SLOTSRANGE",
            "0",
            "99",
            "NODE",
            &target,
        ],
    );
    wait_for("the export succeeds", || match newest_job(port) {
        Some((state, _, _)) if state == "success" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let after = holdings(port + 1, &keys);
    for ((key, (dump_before, _)), (dump_after, _)) in keys.iter().zip(&before).zip(&after) {
        assert_eq!(dump_before, dump_after, "{key}");
    }
    wait_for(
        "the source shard deleted its copies",
        || match keys_in_slots(port) {
            0 => Ok(()),
            n => Err(format!("{n} keys left")),
        },
    );
}

/// Argument checks answer Valkey 9.1's texts.
#[test]
fn migrateslots_refuses_what_valkey_refuses() {
    let nodes = pair("slotmig-args", 0);
    let (a, b) = (nodes.a, nodes.b);
    let (me, them) = (myid(a), myid(b));
    let unknown = "1".repeat(40);
    let cases: &[(&[&str], &str)] = &[
        (
            &["SLOTSRANGE"],
            "-ERR wrong number of arguments for 'cluster|migrateslots' command",
        ),
        (
            &["SLOTSRANGE", "0"],
            "-ERR No end slot for final slot range",
        ),
        (&["SLOTSRANGE", "0", "10"], "-ERR syntax error"),
        (&["SLOTSRANGE", "0", "10", "NODE"], "-ERR syntax error"),
        (
            &["SLOTSRANGE", "10", "0", "NODE", &them],
            "-ERR Start slot number 10 is greater than end slot number 0.",
        ),
        (
            &["SLOTSRANGE", "0", "20000", "NODE", &them],
            "-ERR Invalid or out of range slot",
        ),
        (
            &["SLOTSRANGE", "a", "10", "NODE", &them],
            "-ERR No slot ranges specified",
        ),
        (
            &["SLOTSRANGE", "0", "10", "NODE", "abc"],
            "-ERR Invalid node name: abc",
        ),
        (
            &["SLOTSRANGE", "0", "10", "NODE", &unknown],
            &format!("-ERR Unknown node name: {unknown}"),
        ),
        (
            &["SLOTSRANGE", "0", "10", "NODE", &me],
            "-ERR Target node can not be this node.",
        ),
        (
            &["SLOTSRANGE", "9000", "9010", "NODE", &them],
            "-ERR Slots are not served by this node.",
        ),
        (
            &["SLOTSRANGE", "8180", "8200", "NODE", &them],
            "-ERR Requested slots span multiple shards",
        ),
        (&["FOO", "0", "10", "NODE", &them], "-ERR syntax error"),
        (
            &["SLOTSRANGE", "0", "10", "0", "5", "NODE", &them],
            "-ERR Slot range 0-5 overlaps with previous range 0-10.",
        ),
        (
            &[
                "SLOTSRANGE",
                "0",
                "10",
                "NODE",
                &them,
                "SLOTSRANGE",
                "5",
                "20",
                "NODE",
                &them,
            ],
            "-ERR Slot ranges in migrations overlap",
        ),
        (
            &["SLOTSRANGE", "0", "10", "NODE", &them, "extra"],
            "-ERR syntax error",
        ),
    ];
    let mut conn = RawConn::connect(a);
    for (args, expected) in cases {
        let mut words = vec!["CLUSTER", "MIGRATESLOTS"];
        words.extend_from_slice(args);
        let reply = conn.cmd(&words);
        assert_eq!(
            String::from_utf8_lossy(&reply),
            format!("{expected}\r\n"),
            "{words:?}"
        );
    }
    let none = conn.cmd(&["CLUSTER", "CANCELSLOTMIGRATIONS"]);
    assert_eq!(none, b"-ERR No migrations ongoing\r\n");
    let listed = conn.cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]);
    assert_eq!(listed, b"*0\r\n");
}

/// A job cancelled on the source, and one cancelled on the target, each
/// while the target holds its writes (CLIENT PAUSE): the source keeps its
/// slots and every key, the target drops what it imported; a third job
/// then moves the slots.
#[test]
fn a_cancelled_job_leaves_the_slots_and_keys_with_the_source() {
    let Pair { a, b, keys, .. } = &pair("slotmig-cancel", 2_000);
    let (a, b, target) = (*a, *b, myid(*b));
    let source_whole = || {
        assert_eq!(keys_in_slots(a), keys.len() as i64);
        let lines = cluster_nodes(a);
        let mine = &lines.iter().find(|l| l.name == myid(a)).unwrap().slots;
        assert_eq!(mine, &vec![(0, 8191)]);
    };

    for cancel_on in [a, b] {
        ok(b, &["CLIENT", "PAUSE", "100000", "WRITE"]);
        migrate_moved(a, &target);
        wait_for("the target started importing", || match newest_job(b) {
            Some((state, operation, _)) if state == "importing" && operation == "IMPORT" => Ok(()),
            other => Err(format!("{other:?}")),
        });
        ok(cancel_on, &["CLUSTER", "CANCELSLOTMIGRATIONS"]);
        ok(b, &["CLIENT", "UNPAUSE"]);
        wait_for("the source's job ended", || match newest_job(a) {
            Some((state, _, _)) if state == "cancelled" && cancel_on == a => Ok(()),
            Some((state, _, _)) if state == "failed" && cancel_on == b => Ok(()),
            other => Err(format!("{other:?}")),
        });
        wait_for("the target dropped what it imported", || {
            match (newest_job(b), keys_in_slots(b)) {
                (Some((state, _, _)), 0) if state != "importing" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
        source_whole();
        let reply = RawConn::connect(a).cmd(&["GET", keys[5].as_str()]);
        assert_eq!(text(&reply), "value", "{}", show(&reply));
    }

    migrate_moved(a, &target);
    wait_for("the third job succeeds", || match newest_job(a) {
        Some((state, _, _)) if state == "success" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(keys_in_slots(b), keys.len() as i64);
    let reply = RawConn::connect(a).cmd(&["CLUSTER", "GETSLOTMIGRATIONS"]);
    let Value::Array(jobs) = decode(&reply) else {
        panic!("{}", show(&reply));
    };
    assert_eq!(jobs.len(), 3, "{}", show(&reply));
}

/// The target killed in the middle of a job (its writes held by CLIENT
/// PAUSE, so the job is surely under way): the source's job fails, and it
/// keeps its slots and every key; once the target is back, a new job moves
/// them.
#[test]
fn a_job_whose_target_dies_leaves_the_source_whole() {
    let Pair {
        a,
        b,
        mut nodes,
        keys,
    } = pair("slotmig-kill", 2_000);
    let target = myid(b);
    ok(b, &["CLIENT", "PAUSE", "100000", "WRITE"]);
    migrate_moved(a, &target);
    wait_for("the target started importing", || match newest_job(b) {
        Some((state, _, _)) if state == "importing" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    nodes[1].kill();
    wait_for("the source's job failed", || match newest_job(a) {
        Some((state, _, message)) if state == "failed" && !message.is_empty() => Ok(()),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(keys_in_slots(a), keys.len() as i64);
    let reply = RawConn::connect(a).cmd(&["GET", keys[5].as_str()]);
    assert_eq!(text(&reply), "value", "{}", show(&reply));

    nodes[1].restart();
    wait_for("the cluster whole again", || {
        common::cluster_process::agree(&[a, b], 2)
    });
    migrate_moved(a, &target);
    wait_for("the next job succeeds", || match newest_job(a) {
        Some((state, _, _)) if state == "success" => Ok(()),
        Some((state, _, message)) if state == "failed" => panic!("failed: {message}"),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(keys_in_slots(b), keys.len() as i64);
}

/// While the target has not answered FINISH (its writes held by CLIENT
/// PAUSE, so the job waits in `handing-over`), a write to a moved slot
/// waits on the source without an error while one to another slot of the
/// source is answered at once; once the target answers, the held write gets
/// `-MOVED` to it.
#[test]
fn the_handover_holds_writes_to_the_moved_slots_only() {
    let Pair { a, b, keys, .. } = &pair("slotmig-hold", 200);
    let (a, b, target) = (*a, *b, myid(*b));
    ok(b, &["CLIENT", "PAUSE", "100000", "WRITE"]);
    migrate_moved(a, &target);
    wait_for("the source is handing over", || match newest_job(a) {
        Some((state, _, _)) if state == "handing-over" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    let mut held = std::net::TcpStream::connect(("127.0.0.1", a)).unwrap();
    held.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    std::io::Write::write_all(&mut held, &encode(&["INCR", keys[7].as_str()])).unwrap();
    let mut reply = [0u8; 256];
    let waited = std::io::Read::read(&mut held, &mut reply);
    assert!(waited.is_err(), "the write was answered: {waited:?}");
    let other = RawConn::connect(a).cmd(&["SET", "{user1000}other", "x"]);
    assert_eq!(other, b"+OK\r\n");
    ok(b, &["CLIENT", "UNPAUSE"]);
    held.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let n = std::io::Read::read(&mut held, &mut reply).unwrap();
    let slot = key_slot(keys[7].as_bytes());
    assert_eq!(
        String::from_utf8_lossy(&reply[..n]),
        format!("-MOVED {slot} 127.0.0.1:{b}\r\n")
    );
    assert_eq!(newest_job(a).map(|j| j.0).as_deref(), Some("success"));
}

/// A directory on tmpfs, removed when dropped.
struct TmpfsDir(std::path::PathBuf);

impl TmpfsDir {
    fn new(tag: &str) -> TmpfsDir {
        let dir = unique_dir(tag);
        let _ = std::fs::remove_dir_all(&dir);
        let name = dir.file_name().unwrap().to_owned();
        let shm = std::path::Path::new("/dev/shm").join(name);
        std::fs::create_dir_all(&shm).unwrap();
        TmpfsDir(shm)
    }
}

impl Drop for TmpfsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// With no other traffic the source still reads FINISH's answer within about
/// a millisecond (its loop wakes every millisecond while a job works,
/// rather than sleeping to its 10 ms tick): the writes held are held that
/// long. The nodes keep their files on tmpfs, so the target's fsync of
/// nodes.conf before it answers (tens of ms on the shared disk) does not
/// hide the source's wait (before, it waited for its tick: 10 ms and more);
/// the fastest of five jobs, each a slice of the moved slots, counts.
#[test]
fn an_idle_handover_holds_the_writes_about_a_millisecond() {
    let dirs = [
        TmpfsDir::new("slotmig-idle-a"),
        TmpfsDir::new("slotmig-idle-b"),
    ];
    let (a, b) = (free_ports(1, true), free_ports(1, true));
    let nodes = [Node::start(a, 1, &dirs[0].0), Node::start(b, 1, &dirs[1].0)];
    halves(a, b);
    fill(a, &keys_in_moved_slots("key:", 300));
    let target = myid(b);
    let slices = [(0, 19), (20, 39), (40, 59), (60, 79), (80, 99)];
    for (i, (first, last)) in slices.iter().enumerate() {
        let (first, last) = (first.to_string(), last.to_string());
        let range = ["SLOTSRANGE", first.as_str(), last.as_str()];
        ok(
            a,
            &[&["CLUSTER", "MIGRATESLOTS"][..], &range, &["NODE", &target]].concat(),
        );
        // The source's log alone: a command to it would wake its loop.
        wait_for("the export succeeds", || {
            let log = std::fs::read_to_string(nodes[0].dir.join("ruvio.log")).unwrap();
            match log.lines().filter(|l| l.contains("handed over")).count() {
                n if n > i => Ok(()),
                n => Err(format!("{n} handed over")),
            }
        });
    }
    let log = std::fs::read_to_string(nodes[0].dir.join("ruvio.log")).unwrap();
    let held_ms: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("handed over"))
        .map(|l| {
            let ms = l.rsplit("held for ").next().unwrap();
            ms.trim_end_matches(" ms").parse().unwrap()
        })
        .collect();
    assert_eq!(held_ms.len(), slices.len(), "{log}");
    let fastest = *held_ms.iter().min().unwrap();
    eprintln!("writes held {held_ms:?} ms");
    assert!(fastest < 8, "writes held {held_ms:?} ms");
}

/// The source's copies deleted after a job leave its replica node too: the
/// shard deletes them as the server's own client (id 0), whose writes the
/// replication feed did not record until 2026-12-07 (the replica kept every
/// moved key).
#[test]
fn the_sources_replica_drops_the_moved_keys() {
    let pair = pair("slotmig-replica", 2_000);
    let replica = free_ports(1, true);
    let _replica_node = Node::start(replica, 1, &unique_dir("slotmig-replica-r"));
    let a_id = myid(pair.a);
    ok(
        replica,
        &["CLUSTER", "MEET", "127.0.0.1", &pair.a.to_string()],
    );
    wait_for("the replica knows the source", || {
        let nodes = text(&RawConn::connect(replica).cmd(&["CLUSTER", "NODES"]));
        match nodes.contains(&a_id) {
            true => Ok(()),
            false => Err(nodes),
        }
    });
    ok(replica, &["CLUSTER", "REPLICATE", &a_id]);
    wait_for(
        "the replica holds the moved slots' keys",
        || match keys_in_slots(replica) {
            2_000 => Ok(()),
            n => Err(format!("{n} keys")),
        },
    );
    migrate_moved(pair.a, &myid(pair.b));
    wait_for("the export succeeds", || match newest_job(pair.a) {
        Some((state, _, _)) if state == "success" => Ok(()),
        other => Err(format!("{other:?}")),
    });
    for (port, name) in [(pair.a, "the source"), (replica, "its replica")] {
        wait_for(
            &format!("{name} without the moved keys"),
            || match keys_in_slots(port) {
                0 => Ok(()),
                n => Err(format!("{n} keys left")),
            },
        );
    }
}
