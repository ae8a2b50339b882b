//! The undo journal (src/undo.rs): a write command made to panic at each of its
//! change points in turn (debug builds: `fault::panic_at_change_point`) either
//! leaves the keyspace exactly as it found it once rolled back (every key of every
//! database with its value (DUMP), encoding and TTL, and every key in the slot it
//! had: SCAN order), or says it cannot (after a change in place of a big value:
//! a quicklist, hash table, set table, skiplist, stream or a string past the copy
//! bound, which the journal does not copy: the server then exits). Every command
//! on strings and compact collections is always undone. The run that finally completes leaves what a run
//! never interrupted leaves (a twin engine runs the same commands without panics).

mod common;

use common::*;
use proptest::prelude::*;
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
    "SET a-key-name-long-enough-to-live-on-the-heap a-value-long-enough-for-the-heap-too-0123456789",
    "SET another-key-name-long-enough-for-the-heap 41",
    "HSET a-hash-key-name-long-enough-for-the-heap f v",
    "BIG VALUES",
    "SELECT 1",
    "SET s1 in-db-one",
    "RPUSH l one two",
    "SELECT 0",
];

/// Write commands of every family, single- and multi-key, run in order; those
/// marked `true` change only what the journal copies or reverses (the setup's
/// values are all compact; streams are never copied), so a panic anywhere in
/// them is always undone.
const COMMANDS: &[(&str, bool)] = &[
    ("SET s1 replaced", true),
    ("SET s2 x", true),
    ("SET fresh new-key EX 100", true),
    ("MSET s1 a s2 b m1 c m2 d", true),
    ("MSETNX m3 a m4 b", true),
    ("INCR n", true),
    ("INCRBYFLOAT n 1.5", true),
    ("APPEND s1 -appended", true),
    ("SETRANGE s2 3 patch", true),
    ("GETDEL m1", true),
    ("GETEX t PERSIST", true),
    ("EXPIRE s2 1000", true),
    ("PEXPIREAT m2 1", true),
    ("PERSIST s2", true),
    ("DEL s1 m3 m4 nosuch", true),
    ("RENAME s2 renamed", true),
    ("RENAME renamed n", true),
    ("COPY l lcopy", true),
    ("MOVE lcopy 2", true),
    ("LPUSH l p q r", true),
    ("RPOP l 2", true),
    ("LMOVE l l2 LEFT RIGHT", true),
    ("LMOVE l2 l2 LEFT RIGHT", true),
    ("LPOP l2 10", true),
    ("LINSERT l BEFORE c ins", true),
    ("LREM l 0 ins", true),
    ("LTRIM l 1 -1", true),
    ("HSET h f1 new f4 v4 f5 v5", true),
    ("HINCRBY h count 3", true),
    ("HDEL h f1 f3", true),
    ("HPERSIST h FIELDS 1 f2", true),
    ("SADD si 5 six", true),
    ("SREM si 1 2", true),
    ("SMOVE sl si a", true),
    ("SUNIONSTORE su si sl", true),
    ("SINTERSTORE su si sl", true),
    ("SPOP sl 5", true),
    ("ZADD z 5 five 2.5 two", true),
    ("ZINCRBY z 10 one", true),
    ("ZREM z three", true),
    ("ZUNIONSTORE zu 2 z z WEIGHTS 1 2", true),
    ("ZPOPMIN zu 2", true),
    ("ZREMRANGEBYRANK z 0 0", true),
    ("XADD x 2-1 f v2", false),
    ("XREADGROUP GROUP g c1 COUNT 2 STREAMS x >", false),
    ("XACK x g 1-1", false),
    ("XDEL x 1-2", false),
    ("XTRIM x MAXLEN 1", false),
    ("PFADD hll d e f g", true),
    ("PFMERGE hll2 hll", true),
    ("SETBIT bits 7 1", true),
    ("BITOP OR bits2 bits bits", true),
    ("SORT l ALPHA STORE sorted", true),
    (
        "EVAL \"redis.call('SET', 'e1', 'one'); redis.call('DEL', 'n', 'sorted'); \
         redis.call('RENAME', 'bits2', 'e3'); return redis.call('INCR', 'e2')\" 0",
        true,
    ),
    (
        "EVAL \"redis.call('SET', 'e4', 'one'); return redis.call('LPUSH', 'l', 'x')\" 0",
        false,
    ),
    (
        "APPEND a-key-name-long-enough-to-live-on-the-heap -more",
        true,
    ),
    ("INCR another-key-name-long-enough-for-the-heap", true),
    (
        "SET another-key-name-long-enough-for-the-heap value-long-enough-for-the-heap-0123456789",
        true,
    ),
    (
        "HSET a-hash-key-name-long-enough-for-the-heap f w g x",
        true,
    ),
    ("LPUSH bl p q r", true),
    ("RPUSH bl s", true),
    ("RPOP bl 3", true),
    ("LPOP bl", true),
    ("LMOVE bl bl LEFT RIGHT", true),
    ("LMOVE bl l RIGHT LEFT", true),
    ("LTRIM bl 2 -3", true),
    ("LSET bl 10 changed", true),
    ("LINSERT bl BEFORE element-00000500 ins", true),
    (
        "LINSERT bl BEFORE element-00000100 an-element-too-long-to-fit-its-node",
        true,
    ),
    ("LREM bl 1 ins", true),
    ("LREM bl -2 element-00000600", true),
    ("HSET bh f0 new fnew v", true),
    ("HINCRBY bh count 3", true),
    ("HDEL bh f1 f3 nosuch", true),
    ("HPEXPIRE bh 900000 FIELDS 2 f2 f4", true),
    ("HPERSIST bh FIELDS 1 f2", true),
    ("SADD bs m1 new1 new2", true),
    ("SREM bs m2 m3 nosuch", true),
    ("SREM bs m10 m11 m12", true),
    ("SMOVE bs sl m4", true),
    ("ZADD bz 500 new 7.5 m7", true),
    ("ZINCRBY bz 10 m8", true),
    ("ZREM bz m9 nosuch", true),
    ("ZPOPMIN bz 2", true),
    ("ZREMRANGEBYRANK bz 0 4", true),
    (
        "EVAL \"redis.call('LPUSH', 'bl', 'a'); redis.call('HSET', 'bh', 'x', 'y'); \
         redis.call('SADD', 'bs', 'z'); return redis.call('ZADD', 'bz', 1, 'w')\" 0",
        true,
    ),
    ("LTRIM bl2 0 9", true),
    ("RPOP bl2", true),
    ("APPEND bstr -more", true),
    ("SETRANGE bstr 100 patch", true),
    ("SETRANGE bstr 40000 far-out", true),
    ("SETBIT bstr 7 1", true),
    ("SETBIT bstr 400000 1", true),
    ("BITFIELD bstr SET u8 8 255 INCRBY u16 100 3", true),
    ("SET bstr2 replaced", true),
    ("SET bh a-string-now", true),
    ("SET s1 back", true),
    ("UNLINK zu su", true),
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

/// Big encodings (quicklist, hash table, set table, skiplist), whose changes the
/// journal reverses one primitive at a time.
fn add_big_values(h: &mut Harness) {
    let many = |f: &dyn Fn(usize) -> String| (0..200).map(f).collect::<Vec<_>>().join(" ");
    let elements: Vec<String> = (0..1000).map(|i| format!("element-{i:08}")).collect();
    let lines = [
        format!("RPUSH bl {}", elements.join(" ")),
        format!("RPUSH bl2 {}", elements.join(" ")),
        format!("HSET bh {}", many(&|i| format!("f{i} v{i}"))),
        "HPEXPIRE bh 600000 FIELDS 2 f1 f2".to_string(),
        format!("SADD bs {}", many(&|i| format!("m{i}"))),
        format!("ZADD bz {}", many(&|i| format!("{i} m{i}"))),
        format!(
            "SET bstr {}",
            "x".repeat(ruvio_engine::undo::COPY_BYTES_MAX + 100)
        ),
        format!(
            "SET bstr2 {}",
            "y".repeat(ruvio_engine::undo::COPY_BYTES_MAX + 100)
        ),
    ];
    for line in lines {
        let reply = h.run(&line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
    }
    for (key, encoding) in [
        ("bl", "quicklist"),
        ("bh", "hashtable"),
        ("bs", "hashtable"),
        ("bz", "skiplist"),
    ] {
        let reply = h.run(&format!("OBJECT ENCODING {key}"));
        assert!(reply.contains(encoding), "{key}: {reply}");
    }
}

fn set_up(h: &mut Harness) {
    for line in SETUP {
        if let Some(db) = line.strip_prefix("SELECT ") {
            h.db = db.parse().expect("a database number");
            continue;
        }
        if *line == "BIG VALUES" {
            add_big_values(h);
            continue;
        }
        let reply = h.run(line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
    }
}

/// A harness that has run the setup and `done` of the commands, uninterrupted.
fn replayed(done: &[(&str, bool)]) -> Harness {
    let mut h = Harness::default();
    set_up(&mut h);
    for (line, _) in done {
        let reply = h.run(line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
    }
    h
}

#[test]
fn a_command_cut_at_any_change_point_is_undone_whole_or_says_it_cannot() {
    quiet_panics();
    let mut h = replayed(&[]);
    let mut twin = replayed(&[]);
    let (mut undone, mut refused) = (0, 0);
    for (i, (line, always_undone)) in COMMANDS.iter().enumerate() {
        let mut point = 1;
        loop {
            let before = state(&mut h);
            match run_cut_at(&mut h, line, point) {
                Cut::Completed => break,
                Cut::RolledBack => {
                    assert_eq!(state(&mut h), before, "{line} cut at change point {point}");
                    undone += 1;
                }
                Cut::Unrecoverable => {
                    assert!(
                        !always_undone,
                        "{line}: unrecoverable at change point {point}"
                    );
                    // The server would exit here; go on from a fresh copy.
                    h = replayed(&COMMANDS[..i]);
                    refused += 1;
                }
            }
            point += 1;
        }
        let reply = twin.run(line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
        assert_eq!(state(&mut h), state(&mut twin), "after {line}");
    }
    assert!(undone > COMMANDS.len(), "only {undone} cuts undone");
    assert!(refused > 0, "nothing refused");
}

#[test]
fn a_change_without_a_copy_or_an_inverse_or_a_flush_cannot_be_undone() {
    quiet_panics();
    let mut h = Harness::default();
    // A compact hash past the copy bound (limits raised) has neither.
    h.engine.config_mut().hash_max_listpack_value = 1 << 20;
    let long = "v".repeat(ruvio_engine::undo::COPY_BYTES_MAX);
    h.run(&format!("HSET wide f {long}"));
    assert_eq!(h.run("OBJECT ENCODING wide"), "$8\r\nlistpack\r\n");
    assert_eq!(run_cut_at(&mut h, "HSET wide g x", 2), Cut::Unrecoverable);
    // A stream is never copied nor reversed.
    h.run("XADD stream 1-1 f v");
    assert_eq!(
        run_cut_at(&mut h, "XADD stream 2-1 f v", 2),
        Cut::Unrecoverable
    );
    // A flush cannot be undone either (the script's SET after it panics).
    let mut h = Harness::default();
    h.run("SET k v");
    let flush_then_set = "EVAL \"redis.call('FLUSHDB'); redis.call('SET', 'a', 'b')\" 0";
    assert_eq!(run_cut_at(&mut h, flush_then_set, 1), Cut::RolledBack);
    assert_eq!(run_cut_at(&mut h, flush_then_set, 2), Cut::Unrecoverable);
}

/// A compact value changed several times by one command (a script) comes back as
/// the command found it: the first copy is the one restored.
#[test]
fn a_compact_value_changed_again_and_again_comes_back_as_found() {
    quiet_panics();
    let mut h = Harness::default();
    h.run("HSET h a 1 b 2");
    h.run("SET s a-string-long-enough-to-live-on-the-heap-rather-than-inline-0123456789");
    let before = state(&mut h);
    let script = "EVAL \"for i = 1, 20 do redis.call('HSET', 'h', 'f' .. i, i); \
                  redis.call('APPEND', 's', 'more') end; redis.call('HDEL', 'h', 'a')\" 0";
    assert_eq!(run_cut_at(&mut h, script, 41), Cut::RolledBack);
    assert_eq!(state(&mut h), before);
    assert_eq!(run_cut_at(&mut h, script, 1000), Cut::Completed);
    assert_eq!(h.run("HLEN h"), int(21));
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

/// A command of the random runs below: a template of the pool with its numbers.
#[derive(Clone, Debug)]
struct Pick {
    template: usize,
    a: u32,
    b: u32,
}

/// Writes on big and small values whose arguments the random runs choose: `{a}`
/// and `{b}` become small numbers, so pivots, members and fields often exist.
const POOL: &[&str] = &[
    "LPUSH bl element-{a}-padding-to-make-it-long",
    "RPUSH bl element-{a}-padding-to-make-it-long",
    "LPOP bl {b}",
    "RPOP bl",
    "LREM bl {b} element-{a}-padding-to-make-it-long",
    "LREM bl -{b} element-{a}-padding-to-make-it-long",
    "LINSERT bl AFTER element-{a}-padding-to-make-it-long x{b}",
    "LINSERT bl BEFORE element-{a}-padding-to-make-it-long a-long-element-{b}-to-split-a-full-node",
    "LSET bl {b} replaced-{a}",
    "LTRIM bl {b} -{a}",
    "LMOVE bl sl LEFT RIGHT",
    "LMOVE sl bl RIGHT LEFT",
    "HSET bh f{a} v{b} n{b} v{a}",
    "HDEL bh f{a} f{b} n{a}",
    "HINCRBY bh f{a} {b}",
    "HPEXPIRE bh 100000 FIELDS 2 f{a} f{b}",
    "HPERSIST bh FIELDS 1 f{a}",
    "HSET sh f{a} v{b}",
    "SADD bs m{a} n{b}",
    "SREM bs m{a} m{b} n{a}",
    "SPOP bs {b}",
    "SMOVE bs ss m{a}",
    "SADD ss m{a}",
    "ZADD bz {b} m{a} {a} n{b}",
    "ZINCRBY bz {b} m{a}",
    "ZREM bz m{a} m{b} n{a}",
    "ZPOPMIN bz {b}",
    "ZREMRANGEBYRANK bz {a} {b}",
    "ZADD sz {b} m{a}",
    "APPEND bstr tail-{a}",
    "SETRANGE bstr {a}00 patch-{b}",
    "SETBIT bstr {a}{b}1 1",
    "EVAL \"redis.call('RPUSH', 'bl', 'x'); redis.call('HDEL', 'bh', 'f{a}'); \
     redis.call('SREM', 'bs', 'm{b}'); return redis.call('ZINCRBY', 'bz', 1, 'm{a}')\" 0",
];

fn pick_line(p: &Pick) -> String {
    POOL[p.template]
        .replace("{a}", &p.a.to_string())
        .replace("{b}", &p.b.to_string())
}

/// The keys of the random runs: a quicklist of several nodes, a hash, set and
/// sorted set in their big encodings with small ones beside them, a long string.
fn random_setup() -> Harness {
    let mut h = Harness::default();
    let elements: Vec<String> = (0..900)
        .map(|i| format!("element-{}-padding-to-make-it-long", i % 40))
        .collect();
    let fields: Vec<String> = (0..200).map(|i| format!("f{i} v{i}")).collect();
    let members: Vec<String> = (0..200).map(|i| format!("m{i}")).collect();
    let scored: Vec<String> = (0..200).map(|i| format!("{i} m{i}")).collect();
    for line in [
        format!("RPUSH bl {}", elements.join(" ")),
        "RPUSH sl a b c".to_string(),
        format!("HSET bh {}", fields.join(" ")),
        "HSET sh f v".to_string(),
        format!("SADD bs {}", members.join(" ")),
        "SADD ss a".to_string(),
        format!("ZADD bz {}", scored.join(" ")),
        "ZADD sz 1 a".to_string(),
        format!(
            "SET bstr {}",
            "s".repeat(ruvio_engine::undo::COPY_BYTES_MAX + 10)
        ),
    ] {
        let reply = h.run(&line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
    }
    h
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random writes, each cut at a random change point first: a roll-back always
    /// leaves the keyspace as it was, and none says it cannot.
    #[test]
    fn random_writes_cut_anywhere_are_undone(
        picks in prop::collection::vec(
            (0..POOL.len(), 0u32..40, 0u32..12).prop_map(|(template, a, b)| Pick { template, a, b }),
            1..24,
        ),
        cuts in prop::collection::vec(1u64..6, 24),
    ) {
        quiet_panics();
        let mut h = random_setup();
        for (pick, cut) in picks.iter().zip(&cuts) {
            let line = pick_line(pick);
            let before = state(&mut h);
            match run_cut_at(&mut h, &line, *cut) {
                Cut::Completed => {}
                Cut::RolledBack => {
                    prop_assert_eq!(state(&mut h), before, "{} cut at {}", line, cut);
                    h.run(&line);
                }
                Cut::Unrecoverable => prop_assert!(false, "{} cut at {}: unrecoverable", line, cut),
            }
        }
    }
}
