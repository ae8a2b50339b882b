//! The undo journal (src/undo.rs): a write command made to panic at each of its
//! change points in turn (debug builds: `fault::panic_at_change_point`) leaves the
//! keyspace exactly as it found it once rolled back (every key of every database
//! with its value (DUMP), encoding and TTL, and every key in the slot it had: SCAN
//! order), whatever the type and size of the values it changes; the run that
//! finally completes leaves what a run never interrupted leaves (a twin engine
//! runs the same commands without panics). Only what the journal must not copy
//! says it cannot be undone (a flush, a compact collection past the copy bound,
//! consumer groups past it): the server then exits.

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

/// Write commands of every family, single- and multi-key, on compact and big
/// values, run in order: a panic anywhere in them is always undone.
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
    "XCLAIM x g c2 0 1-1 1-2",
    "XGROUP CREATECONSUMER x g c3",
    "XGROUP DELCONSUMER x g c2",
    "XGROUP SETID x g 1-1",
    "XGROUP DESTROY x g",
    "XDEL x 1-2",
    "XTRIM x MAXLEN 1",
    "PFADD hll d e f g",
    "PFMERGE hll2 hll",
    "SETBIT bits 7 1",
    "BITOP OR bits2 bits bits",
    "SORT l ALPHA STORE sorted",
    "EVAL \"redis.call('SET', 'e1', 'one'); redis.call('DEL', 'n', 'sorted'); \
     redis.call('RENAME', 'bits2', 'e3'); return redis.call('INCR', 'e2')\" 0",
    "EVAL \"redis.call('SET', 'e4', 'one'); return redis.call('LPUSH', 'l', 'x')\" 0",
    "APPEND a-key-name-long-enough-to-live-on-the-heap -more",
    "INCR another-key-name-long-enough-for-the-heap",
    "SET another-key-name-long-enough-for-the-heap value-long-enough-for-the-heap-0123456789",
    "HSET a-hash-key-name-long-enough-for-the-heap f w g x",
    "LPUSH bl p q r",
    "RPUSH bl s",
    "RPOP bl 3",
    "LPOP bl",
    "LMOVE bl bl LEFT RIGHT",
    "LMOVE bl l RIGHT LEFT",
    "LTRIM bl 2 -3",
    "LSET bl 10 changed",
    "LINSERT bl BEFORE element-00000500 ins",
    "LINSERT bl BEFORE element-00000100 an-element-too-long-to-fit-its-node",
    "LREM bl 1 ins",
    "LREM bl -2 element-00000600",
    "LPUSH cl p q r",
    "RPOP cl 3",
    "LSET cl 500 changed",
    "LINSERT cl BEFORE element-00000700 ins",
    "LINSERT cl BEFORE element-00000300 an-element-too-long-to-fit-its-node",
    "LREM cl -2 element-00000600",
    "LTRIM cl 2 -3",
    "HSET bh f0 new fnew v",
    "HINCRBY bh count 3",
    "HDEL bh f1 f3 nosuch",
    "HPEXPIRE bh 900000 FIELDS 2 f2 f4",
    "HPERSIST bh FIELDS 1 f2",
    "SADD bs m1 new1 new2",
    "SREM bs m2 m3 nosuch",
    "SREM bs m10 m11 m12",
    "SMOVE bs sl m4",
    "ZADD bz 500 new 7.5 m7",
    "ZINCRBY bz 10 m8",
    "ZREM bz m9 nosuch",
    "ZPOPMIN bz 2",
    "ZREMRANGEBYRANK bz 0 4",
    "EVAL \"redis.call('LPUSH', 'bl', 'a'); redis.call('HSET', 'bh', 'x', 'y'); \
     redis.call('SADD', 'bs', 'z'); return redis.call('ZADD', 'bz', 1, 'w')\" 0",
    "LTRIM bl2 0 9",
    "RPOP bl2",
    "APPEND bstr -more",
    "SETRANGE bstr 100 patch",
    "SETRANGE bstr 40000 far-out",
    "SETBIT bstr 7 1",
    "SETBIT bstr 400000 1",
    "BITFIELD bstr SET u8 8 255 INCRBY u16 100 3",
    "SET bstr2 replaced",
    "SET bh a-string-now",
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

/// Big encodings (quicklist, hash table, set table, skiplist), whose changes the
/// journal reverses one primitive at a time.
fn add_big_values(h: &mut Harness) {
    let many = |f: &dyn Fn(usize) -> String| (0..200).map(f).collect::<Vec<_>>().join(" ");
    let elements: Vec<String> = (0..1000).map(|i| format!("element-{i:08}")).collect();
    let lines = [
        format!("RPUSH bl {}", elements.join(" ")),
        format!("RPUSH bl2 {}", elements.join(" ")),
        // `list-compress-depth` 1: inner nodes compressed (set just around it).
        "CONFIG LIST-COMPRESS-DEPTH 1".to_string(),
        format!("RPUSH cl {}", elements.join(" ")),
        "CONFIG LIST-COMPRESS-DEPTH 0".to_string(),
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
        if let Some(depth) = line.strip_prefix("CONFIG LIST-COMPRESS-DEPTH ") {
            h.engine.config_mut().list_compress_depth = depth.parse().expect("a depth");
            continue;
        }
        let reply = h.run(&line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
    }
    for (key, encoding) in [
        ("bl", "quicklist"),
        ("cl", "quicklist"),
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

/// A harness that has run the setup.
fn set_up_harness() -> Harness {
    let mut h = Harness::default();
    set_up(&mut h);
    h
}

#[test]
fn a_command_cut_at_any_change_point_is_undone_whole() {
    quiet_panics();
    let mut h = set_up_harness();
    let mut twin = set_up_harness();
    let mut undone = 0;
    for line in COMMANDS {
        let mut point = 1;
        loop {
            let before = state(&mut h);
            match run_cut_at(&mut h, line, point) {
                Cut::Completed => break,
                Cut::RolledBack => {
                    assert_eq!(state(&mut h), before, "{line} cut at change point {point}");
                    undone += 1;
                }
                Cut::Unrecoverable => panic!("{line}: unrecoverable at change point {point}"),
            }
            point += 1;
        }
        let reply = twin.run(line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
        assert_eq!(state(&mut h), state(&mut twin), "after {line}");
    }
    assert!(undone > COMMANDS.len(), "only {undone} cuts undone");
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
    "XADD sx * f{a} v{b}",
    "XDEL sx 1700000000000-{a} 1700000000000-{b}{a}",
    "XTRIM sx MAXLEN {a}{b}",
    "XTRIM sx MAXLEN ~ {a}{b}",
    "XREADGROUP GROUP g c{b} COUNT {b} STREAMS sx >",
    "XGROUP DELCONSUMER sx g c{b}",
    "XGROUP CREATECONSUMER sx g{b} c{a}",
    "XGROUP CREATE sx g{a} {b}",
    "XGROUP DESTROY sx g{b}",
    "XGROUP SETID sx g 1700000000000-{a}",
    "XAUTOCLAIM sx g c{b} 0 0 COUNT {b}",
    "XACK sx g 1700000000000-{a} 1700000000000-{b}",
    "XCLAIM sx g c{a} 0 1700000000000-{b}",
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
        "XGROUP CREATE sx g 0 MKSTREAM".to_string(),
    ] {
        let reply = h.run(&line);
        assert!(!reply.starts_with('-'), "{line}: {reply}");
    }
    for i in 0..300 {
        h.run(&format!("XADD sx * f{i} v{i}"));
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
