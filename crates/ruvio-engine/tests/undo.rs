//! The undo journal (src/undo.rs): a write command made to panic at each of its
//! change points in turn (debug builds: `fault::panic_at_change_point`) leaves the
//! keyspace exactly as it found it once rolled back: every key of every database
//! with its value (DUMP), encoding and TTL, and every key in the slot it had (SCAN
//! order). And the run that finally completes leaves what a run never interrupted
//! leaves (a twin engine runs the same commands without panics).

mod common;

use common::*;
use std::panic::AssertUnwindSafe;

/// Databases the commands below touch.
const DBS: usize = 3;

/// A keyspace with every type in its compact encodings, TTLs and field TTLs.
const SETUP: &[&str] = &[
    "SET s1 small",
    "SET s2 a-string-long-enough-to-live-on-the-heap-rather-than-inline-0123456789",
    "SET n 41",
    "SET t ttl-value PX 600000",
    "RPUSH l a b c d e",
    "RPUSH l2 x",
    "HSET h f1 v1 f2 v2 f3 v3",
    "HPEXPIRE h 600000 FIELDS 1 f2",
    "SADD si 1 2 3 4",
    "SADD sl a b c",
    "ZADD z 1 one 2 two 3 three",
    "XADD x 1-1 f v",
    "XADD x 1-2 f w",
    "XGROUP CREATE x g 0",
    "PFADD hll a b c",
    "SETBIT bits 100 1",
    "SELECT 1",
    "SET s1 in-db-one",
    "RPUSH l one two",
    "SELECT 0",
];

/// Write commands of every family, single- and multi-key, run in order.
const COMMANDS: &[&str] = &[
    "SET s1 replaced",
    "SET s2 x",
    "SET fresh new-key EX 100",
    "MSET s1 a s2 b m1 c m2 d",
    "MSETNX m3 a m4 b",
    "INCR n",
    "INCRBYFLOAT n 1.5",
    "APPEND s1 -appended",
    "SETRANGE s2 3 patch",
    "GETDEL m1",
    "GETEX t PERSIST",
    "EXPIRE s2 1000",
    "PEXPIREAT m2 1",
    "PERSIST s2",
    "DEL s1 m3 m4 nosuch",
    "RENAME s2 renamed",
    "RENAME renamed n",
    "COPY l lcopy",
    "MOVE lcopy 2",
    "LPUSH l p q r",
    "RPOP l 2",
    "LMOVE l l2 LEFT RIGHT",
    "LMOVE l2 l2 LEFT RIGHT",
    "LPOP l2 10",
    "LINSERT l BEFORE c ins",
    "LREM l 0 ins",
    "LTRIM l 1 -1",
    "HSET h f1 new f4 v4 f5 v5",
    "HINCRBY h count 3",
    "HDEL h f1 f3",
    "HPERSIST h FIELDS 1 f2",
    "SADD si 5 six",
    "SREM si 1 2",
    "SMOVE sl si a",
    "SUNIONSTORE su si sl",
    "SINTERSTORE su si sl",
    "SPOP sl 5",
    "ZADD z 5 five 2.5 two",
    "ZINCRBY z 10 one",
    "ZREM z three",
    "ZUNIONSTORE zu 2 z z WEIGHTS 1 2",
    "ZPOPMIN zu 2",
    "ZREMRANGEBYRANK z 0 0",
    "XADD x 2-1 f v2",
    "XREADGROUP GROUP g c1 COUNT 2 STREAMS x >",
    "XACK x g 1-1",
    "XDEL x 1-2",
    "XTRIM x MAXLEN 1",
    "PFADD hll d e f g",
    "PFMERGE hll2 hll",
    "SETBIT bits 7 1",
    "BITOP OR bits2 bits bits",
    "SORT l ALPHA STORE sorted",
    "EVAL \"redis.call('SET', 'e1', 'one'); redis.call('LPUSH', 'l', 'from-script'); redis.call('DEL', 'n'); return redis.call('INCR', 'e2')\" 0",
    "SET s1 back",
    "UNLINK zu su",
];

/// The whole keyspace as text: per database, SCAN's order of keys (their slots),
/// then each key's DUMP, encoding and TTL.
fn state(h: &mut Harness) -> String {
    let db = h.db;
    let mut out = String::new();
    for i in 0..DBS {
        h.db = i;
        let scanned = h.run("SCAN 0 COUNT 100000");
        out.push_str(&format!("db{i} {scanned}\n"));
        let keys = split_keys(&h.run("KEYS *"));
        for key in keys {
            let k = key.as_bytes();
            let dump = h.run_args(&[b"DUMP", k]);
            let encoding = h.run_args(&[b"OBJECT", b"ENCODING", k]);
            let ttl = h.run_args(&[b"PTTL", k]);
            out.push_str(&format!(
                "  {key} {} {} {}\n",
                show(&dump),
                show(&encoding),
                show(&ttl)
            ));
        }
    }
    h.db = db;
    out
}

fn show(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// The keys of a KEYS reply (RESP2 array of bulk strings), sorted.
fn split_keys(reply: &str) -> Vec<String> {
    let mut keys: Vec<String> = reply
        .split("\r\n")
        .skip(1)
        .filter(|l| !l.starts_with('$') && !l.is_empty())
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

/// How a run cut at a change point ended.
#[derive(Debug, PartialEq)]
enum Cut {
    /// The command ended before the change point came.
    Completed,
    /// It panicked there and its changes were undone.
    RolledBack,
    /// It panicked there after a change the journal cannot undo.
    Unrecoverable,
}

/// Run `line` as the server does (journal begun, a panic caught), panicking at
/// change point `point`.
fn run_cut_at(h: &mut Harness, line: &str, point: u64) -> Cut {
    ruvio_engine::fault::panic_at_change_point(point);
    ruvio_engine::undo::begin();
    let ran = std::panic::catch_unwind(AssertUnwindSafe(|| h.run(line)));
    ruvio_engine::fault::panic_at_change_point(0);
    match ran {
        Ok(_) => {
            h.engine.commit_changes();
            Cut::Completed
        }
        Err(_) if h.engine.roll_back() => Cut::RolledBack,
        Err(_) => Cut::Unrecoverable,
    }
}

fn quiet_panics() {
    std::panic::set_hook(Box::new(|info| {
        let text = info.to_string();
        if !text.contains("change point reached") {
            eprintln!("{text}");
        }
    }));
}

fn set_up(h: &mut Harness) {
    for line in SETUP {
        if let Some(db) = line.strip_prefix("SELECT ") {
            h.db = db.parse().expect("a database number");
            continue;
        }
        let reply = h.run(line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
    }
}

#[test]
fn a_command_cut_at_any_change_point_is_undone_whole() {
    quiet_panics();
    let mut h = Harness::default();
    let mut twin = Harness::default();
    set_up(&mut h);
    set_up(&mut twin);
    let mut cuts = 0;
    for line in COMMANDS {
        let mut point = 1;
        loop {
            let before = state(&mut h);
            match run_cut_at(&mut h, line, point) {
                Cut::Completed => break,
                Cut::RolledBack => {
                    assert_eq!(state(&mut h), before, "{line} cut at change point {point}");
                    cuts += 1;
                }
                Cut::Unrecoverable => panic!("{line}: unrecoverable at change point {point}"),
            }
            point += 1;
        }
        let reply = twin.run(line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
        assert_eq!(state(&mut h), state(&mut twin), "after {line}");
    }
    assert!(cuts > COMMANDS.len(), "only {cuts} change points cut");
}

#[test]
fn a_change_in_place_of_a_big_value_cannot_be_undone() {
    quiet_panics();
    let mut h = Harness::default();
    let elements: Vec<String> = (0..2000).map(|i| format!("element-{i:08}")).collect();
    h.run(&format!("RPUSH big {}", elements.join(" ")));
    // Change point 1 is before LPUSH changes the list (nothing to undo), 2 right
    // after it changed in place, with no copy to go back to.
    assert_eq!(run_cut_at(&mut h, "LPUSH big x", 1), Cut::RolledBack);
    assert_eq!(run_cut_at(&mut h, "LPUSH big x", 2), Cut::Unrecoverable);
    // A flush cannot be undone either (the script's SET after it panics).
    let mut h = Harness::default();
    h.run("SET k v");
    let flush_then_set = "EVAL \"redis.call('FLUSHDB'); redis.call('SET', 'a', 'b')\" 0";
    assert_eq!(run_cut_at(&mut h, flush_then_set, 1), Cut::RolledBack);
    assert_eq!(run_cut_at(&mut h, flush_then_set, 2), Cut::Unrecoverable);
}

#[test]
fn a_deleted_big_value_comes_back_whole() {
    quiet_panics();
    let mut h = Harness::default();
    let elements: Vec<String> = (0..5000).map(|i| format!("element-{i:08}")).collect();
    h.run(&format!("RPUSH big {}", elements.join(" ")));
    h.run("SET other v");
    let before = state(&mut h);
    // DEL big other: the second delete's change point panics after the first.
    assert_eq!(run_cut_at(&mut h, "DEL big other", 2), Cut::RolledBack);
    assert_eq!(state(&mut h), before);
    assert_eq!(h.run("LLEN big"), int(5000));
}

#[test]
fn a_command_holding_more_than_the_journal_bound_cannot_be_undone() {
    quiet_panics();
    let mut h = Harness::default();
    let big = "x".repeat(1 << 20);
    for i in 0..70 {
        h.run(&format!("SET big{i} {big}"));
    }
    let all: Vec<String> = (0..70).map(|i| format!("big{i}")).collect();
    let (within, beyond) = (all[..60].join(" "), all.join(" "));
    // Cut at the last delete's change point: 59 MiB held can go back, 69 cannot.
    assert_eq!(
        run_cut_at(&mut h, &format!("DEL {within}"), 60),
        Cut::RolledBack
    );
    assert_eq!(h.run("DBSIZE"), int(70));
    assert_eq!(
        run_cut_at(&mut h, &format!("DEL {beyond}"), 70),
        Cut::Unrecoverable
    );
}
