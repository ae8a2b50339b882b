//! The generic keyspace family, command by command: request in, exact RESP bytes out.

mod common;

use common::*;

#[test]
fn del_unlink_exists_touch_type() {
    let mut h = Harness::default();
    h.run("MSET a 1 b 2 c 3");
    assert_eq!(h.run("EXISTS a b nope a"), int(3));
    assert_eq!(h.run("TOUCH a nope"), int(1));
    assert_eq!(h.run("TYPE a"), "+string\r\n");
    assert_eq!(h.run("TYPE nope"), "+none\r\n");
    assert_eq!(h.run("DEL a b nope"), int(2));
    assert_eq!(h.run("UNLINK c c"), int(1));
    assert_eq!(h.run("DBSIZE"), int(0));
    assert_eq!(
        h.run("DEL"),
        err("ERR wrong number of arguments for 'del' command")
    );
}

#[test]
fn expire_family() {
    let mut h = Harness::default();
    assert_eq!(h.run("EXPIRE nope 10"), int(0));
    h.run("SET k v");
    assert_eq!(h.run("TTL k"), int(-1));
    assert_eq!(h.run("PTTL nope"), int(-2));
    assert_eq!(h.run("EXPIRE k 100"), int(1));
    assert_eq!(h.run("TTL k"), int(100));
    assert_eq!(h.run("PEXPIRE k 1500"), int(1));
    assert_eq!(h.run("PTTL k"), int(1500));
    assert_eq!(h.run("TTL k"), int(2));
    assert_eq!(h.run(&format!("EXPIREAT k {}", NOW_MS / 1000 + 50)), int(1));
    assert_eq!(h.run("EXPIRETIME k"), int((NOW_MS / 1000 + 50) as i64));
    assert_eq!(h.run(&format!("PEXPIREAT k {}", NOW_MS + 1500)), int(1));
    assert_eq!(h.run("PEXPIRETIME k"), int((NOW_MS + 1500) as i64));
    // EXPIRETIME rounds, like Redis' (ttl+500)/1000.
    assert_eq!(
        h.run("EXPIRETIME k"),
        int(((NOW_MS + 1500 + 500) / 1000) as i64)
    );
    assert_eq!(h.run("PERSIST k"), int(1));
    assert_eq!(h.run("PERSIST k"), int(0));
    assert_eq!(h.run("PERSIST nope"), int(0));
    assert_eq!(h.run("EXPIRETIME k"), int(-1));
    assert_eq!(h.run("EXPIRETIME nope"), int(-2));
    // A time in the past deletes the key and replies 1.
    assert_eq!(h.run("EXPIRE k -1"), int(1));
    assert_eq!(h.run("EXISTS k"), int(0));
    h.run("SET k v");
    assert_eq!(h.run(&format!("PEXPIREAT k {NOW_MS}")), int(1));
    assert_eq!(h.run("EXISTS k"), int(0));
    h.run("SET k v");
    assert_eq!(h.run("EXPIRE k x"), NOT_INT);
    assert_eq!(
        h.run("EXPIRE k 9223372036854775807"),
        err("ERR invalid expire time in 'expire' command")
    );
    assert_eq!(
        h.run("PEXPIRE k 9223372036854775807"),
        err("ERR invalid expire time in 'pexpire' command")
    );
    assert_eq!(
        h.run("EXPIREAT k 9223372036854775807"),
        err("ERR invalid expire time in 'expireat' command")
    );
    assert_eq!(h.run("PEXPIREAT k 9223372036854775807"), int(1));
    assert_eq!(h.run("PTTL k"), int(i64::MAX - NOW_MS as i64));
}

#[test]
fn expire_conditions() {
    let mut h = Harness::default();
    h.run("SET k v");
    assert_eq!(h.run("EXPIRE k 100 XX"), int(0));
    assert_eq!(h.run("EXPIRE k 100 GT"), int(0));
    assert_eq!(h.run("EXPIRE k 100 LT"), int(1));
    assert_eq!(h.run("EXPIRE k 50 NX"), int(0));
    assert_eq!(h.run("EXPIRE k 200 GT"), int(1));
    assert_eq!(h.run("EXPIRE k 100 GT"), int(0));
    assert_eq!(h.run("EXPIRE k 300 LT"), int(0));
    assert_eq!(h.run("EXPIRE k 150 lt xx"), int(1));
    assert_eq!(h.run("TTL k"), int(150));
    let nx_err = err("ERR NX and XX, GT or LT options at the same time are not compatible");
    assert_eq!(h.run("EXPIRE k 1 NX XX"), nx_err);
    assert_eq!(h.run("EXPIRE k 1 NX GT"), nx_err);
    assert_eq!(
        h.run("EXPIRE k 1 GT LT"),
        err("ERR GT and LT options at the same time are not compatible")
    );
    assert_eq!(h.run("EXPIRE k 1 FOO"), err("ERR Unsupported option FOO"));
    // Options are checked before the time value and the key.
    assert_eq!(
        h.run("EXPIRE nope x BAR"),
        err("ERR Unsupported option BAR")
    );
    assert_eq!(h.run("PERSIST k"), int(1));
    assert_eq!(h.run("EXPIRE k 100 NX"), int(1));
}

#[test]
fn rename_and_renamenx() {
    let mut h = Harness::default();
    assert_eq!(h.run("RENAME nope x"), err("ERR no such key"));
    assert_eq!(h.run("RENAMENX nope x"), err("ERR no such key"));
    h.run("SET a 1 EX 100");
    assert_eq!(h.run("RENAME a a"), OK);
    assert_eq!(h.run("RENAMENX a a"), int(0));
    assert_eq!(h.run("RENAME a b"), OK);
    assert_eq!(h.run("EXISTS a"), int(0));
    assert_eq!(h.run("GET b"), bulk("1"));
    assert_eq!(h.run("TTL b"), int(100));
    h.run("SET c 3");
    assert_eq!(h.run("RENAMENX b c"), int(0));
    assert_eq!(h.run("RENAME b c"), OK);
    assert_eq!(h.run("GET c"), bulk("1"));
    assert_eq!(h.run("TTL c"), int(100));
    assert_eq!(h.run("RENAMENX c d"), int(1));
    let long = "k".repeat(100);
    assert_eq!(h.run(&format!("RENAME d {long}")), OK);
    assert_eq!(h.run(&format!("GET {long}")), bulk("1"));
    assert_eq!(h.run("DBSIZE"), int(1));
}

#[test]
fn copy_and_move() {
    let mut h = Harness::default();
    h.run("SET src hello PX 5000");
    assert_eq!(h.run("COPY src dst"), int(1));
    assert_eq!(h.run("GET dst"), bulk("hello"));
    assert_eq!(h.run("PTTL dst"), int(5000));
    assert_eq!(h.run("COPY src dst"), int(0));
    h.run("SET src bye");
    assert_eq!(h.run("COPY src dst REPLACE"), int(1));
    assert_eq!(h.run("GET dst"), bulk("bye"));
    assert_eq!(h.run("PTTL dst"), int(-1));
    assert_eq!(
        h.run("COPY src src"),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(h.run("COPY nope x"), int(0));
    assert_eq!(h.run("COPY src dst DB 1"), int(1));
    assert_eq!(h.run("COPY src src DB 1"), int(1));
    assert_eq!(
        h.run("COPY src x DB 16"),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        h.run("COPY src x DB -1"),
        err("ERR DB index is out of range")
    );
    assert_eq!(h.run("COPY src x DB abc"), NOT_INT);
    assert_eq!(h.run("COPY src x FOO"), SYNTAX);
    assert_eq!(h.run("COPY src x DB"), SYNTAX);
    h.db = 1;
    assert_eq!(h.run("GET dst"), bulk("bye"));
    assert_eq!(h.run("GET src"), bulk("bye"));
    h.db = 0;
    assert_eq!(h.run("SET n 5"), OK);
    assert_eq!(h.run("OBJECT REFCOUNT n"), int(2147483647));
    assert_eq!(h.run("COPY n n2"), int(1));
    assert_eq!(h.run("OBJECT REFCOUNT n2"), int(1));
    assert_eq!(h.run("OBJECT ENCODING n2"), bulk("int"));

    assert_eq!(
        h.run("MOVE src 0"),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(h.run("MOVE src 16"), err("ERR DB index is out of range"));
    assert_eq!(h.run("MOVE src x"), NOT_INT);
    assert_eq!(h.run("MOVE nope 1"), int(0));
    assert_eq!(h.run("MOVE src 1"), int(0));
    h.run("SET mv value EX 30");
    assert_eq!(h.run("MOVE mv 2"), int(1));
    assert_eq!(h.run("EXISTS mv"), int(0));
    h.db = 2;
    assert_eq!(h.run("GET mv"), bulk("value"));
    assert_eq!(h.run("TTL mv"), int(30));
}

#[test]
fn keys_and_patterns() {
    let mut h = Harness::default();
    h.run("MSET hello 1 hallo 2 hxllo 3 hllo 4 heeeello 5 \"h*llo\" 6");
    let sorted = |reply: String| {
        let mut lines: Vec<String> = reply
            .split("\r\n")
            .filter(|l| !l.starts_with('$') && !l.starts_with('*'))
            .map(str::to_string)
            .collect();
        lines.retain(|l| !l.is_empty());
        lines.sort();
        lines
    };
    assert_eq!(
        sorted(h.run("KEYS h?llo")),
        ["h*llo", "hallo", "hello", "hxllo"]
    );
    assert_eq!(
        sorted(h.run("KEYS h*llo")),
        ["h*llo", "hallo", "heeeello", "hello", "hllo", "hxllo"]
    );
    assert_eq!(sorted(h.run("KEYS h[ae]llo")), ["hallo", "hello"]);
    assert_eq!(sorted(h.run("KEYS h[^e]llo")), ["h*llo", "hallo", "hxllo"]);
    assert_eq!(sorted(h.run("KEYS h[a-b]llo")), ["hallo"]);
    assert_eq!(sorted(h.run("KEYS h\\*llo")), ["h*llo"]);
    assert_eq!(h.run("KEYS nothing*"), "*0\r\n");
    // Logically expired keys are hidden (but not deleted) by KEYS.
    h.run("SET gone x PX 1");
    h.now_ms += 2;
    assert_eq!(h.run("KEYS gone"), "*0\r\n");
    assert_eq!(h.run("DBSIZE"), int(7));
    h.run("SET \"\" empty");
    assert_eq!(h.run("KEYS *").matches("$0\r\n").count(), 1);
}

#[test]
fn scan_basics() {
    let mut h = Harness::default();
    for i in 0..25 {
        h.run(&format!("SET key:{i} v"));
    }
    h.run("SET other v");
    let mut cursor = "0".to_string();
    let mut seen = Vec::new();
    loop {
        let reply = h.run(&format!("SCAN {cursor} MATCH key:* COUNT 7"));
        let parts: Vec<&str> = reply.split("\r\n").collect();
        assert_eq!(parts[0], "*2");
        cursor = parts[2].to_string();
        seen.extend(
            parts[4..]
                .iter()
                .filter(|p| p.starts_with("key:"))
                .map(|p| p.to_string()),
        );
        if cursor == "0" {
            break;
        }
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 25);
    assert_eq!(
        h.run("SCAN 0 COUNT 1000"),
        h.run("SCAN 0 COUNT 1000 MATCH *")
    );
    assert!(h
        .run("SCAN 0 COUNT 1000")
        .starts_with("*2\r\n$1\r\n0\r\n*26\r\n"));
    assert_eq!(
        h.run("SCAN 0 COUNT 1000 TYPE list"),
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
    assert!(h
        .run("SCAN 0 COUNT 1000 TYPE STRING")
        .starts_with("*2\r\n$1\r\n0\r\n*26\r\n"));
    assert_eq!(h.run("SCAN x"), err("ERR invalid cursor"));
    assert_eq!(h.run("SCAN \" 0\""), err("ERR invalid cursor"));
    assert_eq!(h.run("SCAN 0 COUNT 0"), SYNTAX);
    assert_eq!(h.run("SCAN 0 COUNT x"), NOT_INT);
    assert_eq!(h.run("SCAN 0 FOO bar"), SYNTAX);
    assert_eq!(h.run("SCAN 0 MATCH"), SYNTAX);
    assert_eq!(h.run("SCAN 99999999 COUNT 5"), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(
        h.run("SCAN 0 MATCH nomatch* COUNT 1000"),
        "*2\r\n$1\r\n0\r\n*0\r\n"
    );
}

#[test]
fn scan_deletes_expired_keys_it_meets() {
    let mut h = Harness::default();
    h.run("SET a 1 PX 5");
    h.run("SET b 2");
    h.now_ms += 10;
    assert_eq!(h.run("SCAN 0"), "*2\r\n$1\r\n0\r\n*1\r\n$1\r\nb\r\n");
    assert_eq!(h.run("DBSIZE"), int(1));
}

#[test]
fn randomkey() {
    let mut h = Harness::default();
    assert_eq!(h.run("RANDOMKEY"), NIL);
    h.run("SET only v");
    assert_eq!(h.run("RANDOMKEY"), bulk("only"));
    h.run("SET gone v PX 1");
    h.run("DEL only");
    h.now_ms += 5;
    assert_eq!(h.run("RANDOMKEY"), NIL);
    assert_eq!(h.run("DBSIZE"), int(0));
    let mut h3 = Harness::resp3();
    assert_eq!(h3.run("RANDOMKEY"), NIL3);
}

#[test]
fn dbsize_flush_swapdb() {
    let mut h = Harness::default();
    h.run("MSET a 1 b 2");
    h.db = 3;
    h.run("SET c 3");
    assert_eq!(h.run("DBSIZE"), int(1));
    assert_eq!(h.run("SWAPDB 0 3"), OK);
    assert_eq!(h.run("DBSIZE"), int(2));
    assert_eq!(h.run("SWAPDB 0 16"), err("ERR DB index is out of range"));
    assert_eq!(h.run("SWAPDB x 1"), err("ERR invalid first DB index"));
    assert_eq!(h.run("SWAPDB 1 x"), err("ERR invalid second DB index"));
    assert_eq!(h.run("FLUSHDB"), OK);
    assert_eq!(h.run("DBSIZE"), int(0));
    h.db = 0;
    assert_eq!(h.run("DBSIZE"), int(1));
    assert_eq!(h.run("FLUSHDB FOO"), SYNTAX);
    assert_eq!(h.run("FLUSHALL SYNC EXTRA"), SYNTAX);
    assert_eq!(h.run("FLUSHALL ASYNC"), OK);
    assert_eq!(h.run("DBSIZE"), int(0));
    assert!(h.engine.keyspace_info().is_empty());
    h.engine.active_expire_cycle(h.now_ms, 100);
    h.run("SET x 1");
    assert_eq!(h.run("FLUSHDB sync"), OK);
}

#[test]
fn object_and_memory_usage() {
    let mut h = Harness::default();
    h.run("SET k hello");
    assert_eq!(h.run("OBJECT ENCODING nope"), NIL);
    assert_eq!(h.run("OBJECT REFCOUNT k"), int(1));
    assert_eq!(h.run("OBJECT IDLETIME k"), int(0));
    h.now_ms += 10_000;
    assert_eq!(h.run("OBJECT IDLETIME k"), int(10));
    h.run("GET k");
    assert_eq!(h.run("OBJECT IDLETIME k"), int(0));
    h.now_ms += 5_000;
    h.no_touch = true;
    h.run("GET k");
    assert_eq!(h.run("OBJECT IDLETIME k"), int(5));
    h.run("TOUCH k");
    assert_eq!(h.run("OBJECT IDLETIME k"), int(0));
    h.no_touch = false;
    assert_eq!(
        h.run("OBJECT FREQ k"),
        err("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
    );
    assert_eq!(
        h.run("OBJECT FOO k"),
        err("ERR unknown subcommand 'FOO'. Try OBJECT HELP.")
    );
    assert_eq!(
        h.run("OBJECT ENCODING"),
        err("ERR wrong number of arguments for 'object|encoding' command")
    );
    assert_eq!(
        h.run("OBJECT HELP extra"),
        err("ERR wrong number of arguments for 'object|help' command")
    );
    let help = h.run("object help");
    assert!(help.starts_with("*15\r\n+OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+ENCODING <key>\r\n"));
    assert!(help.ends_with("+HELP\r\n+    Print this help.\r\n"));

    let usage = h.run("MEMORY USAGE k");
    let bytes: i64 = usage.trim_start_matches(':').trim_end().parse().unwrap();
    assert!((48..100).contains(&bytes), "{usage}");
    let big = "x".repeat(500);
    h.run(&format!("SET big {big}"));
    let usage = h.run("MEMORY USAGE big SAMPLES 0");
    let big_bytes: i64 = usage.trim_start_matches(':').trim_end().parse().unwrap();
    assert!(big_bytes > 548, "{usage}");
    assert_eq!(h.run("MEMORY USAGE nope"), NIL);
    assert_eq!(h.run("MEMORY USAGE k SAMPLES -1"), SYNTAX);
    assert_eq!(h.run("MEMORY USAGE k SAMPLES x"), NOT_INT);
    assert_eq!(h.run("MEMORY USAGE k FOO"), SYNTAX);
    assert_eq!(
        h.run("MEMORY USAGE"),
        err("ERR wrong number of arguments for 'memory|usage' command")
    );
    assert_eq!(
        h.run("MEMORY NOPE"),
        err("ERR unknown subcommand 'NOPE'. Try MEMORY HELP.")
    );
    assert_eq!(h.run("MEMORY PURGE"), OK);
    assert!(h
        .run("MEMORY DOCTOR")
        .starts_with("$267\r\nHi Sam, this instance is empty"));
    assert!(h
        .run("memory help")
        .starts_with("*14\r\n+MEMORY <subcommand>"));
    let mut h3 = Harness::resp3();
    assert_eq!(
        h3.run("MEMORY MALLOC-STATS"),
        "=49\r\ntxt:Stats not supported for the current allocator\r\n"
    );
}

#[test]
fn keyspace_hits_and_misses() {
    let mut h = Harness::default();
    h.run("SET k v");
    h.run("GET k");
    h.run("GET nope");
    h.run("EXISTS k nope");
    h.run("SET k2 v");
    let stats = h.engine.stats().clone();
    assert_eq!((stats.keyspace_hits, stats.keyspace_misses), (2, 2));
    h.engine.reset_stats();
    assert_eq!(h.engine.stats().keyspace_hits, 0);
}

#[test]
fn active_expiry_removes_keys_in_slices() {
    let mut h = Harness::default();
    for i in 0..5000 {
        h.run(&format!("SET k{i} v PX {}", 10 + i % 2));
        h.run(&format!("SET p{i} v"));
    }
    assert_eq!(h.engine.keyspace_info(), vec![(0, 10_000, 5000)]);
    h.now_ms += 11;
    // Keys expire strictly after their time: the PX 11 half is still there.
    let mut first_pass = 0;
    for _ in 0..100 {
        first_pass += h.engine.active_expire_cycle(h.now_ms, 200);
    }
    assert_eq!(first_pass, 2500);
    h.now_ms += 1;
    let mut total = 0;
    let mut calls = 0;
    while total < 2500 {
        let expired = h.engine.active_expire_cycle(h.now_ms, 200);
        assert!(expired <= 200);
        total += expired;
        calls += 1;
        assert!(calls < 1000);
    }
    assert_eq!(h.engine.keyspace_info(), vec![(0, 5000, 0)]);
    assert_eq!(h.engine.stats().expired_keys, 5000);
    assert_eq!(h.engine.active_expire_cycle(h.now_ms, 200), 0);
}

#[test]
fn cluster_slot_helpers() {
    let mut h = Harness::default();
    h.run("MSET {user1}:a 1 {user1}:b 2 foo 3");
    let slot = ruvio_engine::slot::key_slot(b"user1");
    assert_eq!(h.engine.count_keys_in_slot(0, slot), 2);
    let mut keys = h.engine.keys_in_slot(0, slot, 10);
    keys.sort();
    assert_eq!(keys, vec![b"{user1}:a".to_vec(), b"{user1}:b".to_vec()]);
    assert_eq!(h.engine.keys_in_slot(0, slot, 1).len(), 1);
    assert_eq!(h.engine.count_keys_in_slot(0, 12182), 1);
    assert_eq!(h.engine.parse_db_index(b"3"), Ok(3));
    assert_eq!(
        h.engine.parse_db_index(b"16"),
        Err(ruvio_engine::CmdError::DbIndexOutOfRange)
    );
    assert_eq!(
        h.engine.parse_db_index(b"x"),
        Err(ruvio_engine::CmdError::InvalidDbIndex)
    );
}

#[test]
fn command_table_flags() {
    use ruvio_engine::command::flags::{ALL_SHARDS, SPLITTABLE};
    use ruvio_engine::command::CommandTree;
    use ruvio_engine::Engine;
    let with = |flag| {
        let mut names: Vec<&str> = Engine::commands()
            .filter(|c| c.meta.has(flag))
            .map(|c| c.meta.name)
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        with(SPLITTABLE),
        ["del", "exists", "mget", "mset", "touch", "unlink"]
    );
    assert_eq!(
        with(ALL_SHARDS),
        [
            "dbsize",
            "flushall",
            "flushdb",
            "keys",
            "randomkey",
            "scan",
            "swapdb"
        ]
    );
    let names: Vec<&str> = Engine::commands().map(|c| c.meta.name).collect();
    let mut unique = names.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "duplicate command rows");
    assert!(
        names.iter().all(|n| !n.contains('|')),
        "subcommands are not top-level rows"
    );
    let resolve = |line: &[&[u8]]| {
        let args: ruvio_resp::OwnedArgs = line.iter().copied().collect();
        Engine::find_command(line[0])
            .unwrap()
            .resolve(args.args())
            .map(|row| (row.meta.name, row.meta.arity))
    };
    assert_eq!(
        resolve(&[b"OBJECT", b"Encoding", b"k"]),
        Ok(("object|encoding", 3))
    );
    assert_eq!(
        resolve(&[b"object", b"encoding"]),
        Err(ruvio_engine::CmdError::WrongArity("object|encoding"))
    );
    assert!(resolve(&[b"object", b"nope"]).is_err());
    assert_eq!(resolve(&[b"GET", b"k"]), Ok(("get", 2)));
    assert_eq!(
        resolve(&[b"OBJECT"]),
        Ok(("object", -2)),
        "a bare container is itself"
    );
    let memory = Engine::find_command(b"memory").unwrap();
    assert_eq!(memory.subcommands.len(), 5);
    assert!(memory.handler.is_none(), "a container runs its subcommands");
}

/// What each write of the generic and string families leaves for the write-ahead
/// log: relative times as absolute ones, floats as their result, no-ops nothing.
#[test]
fn log_records_are_deterministic() {
    let mut h = Harness::default();
    let at = NOW_MS + 10_000;
    assert_eq!(h.log_of("SET k v"), ["SET k v"]);
    assert_eq!(h.log_of("SET k v EX 10"), [format!("SET k v PXAT {at}")]);
    assert_eq!(h.log_of("SETEX k 10 v"), [format!("SET k v PXAT {at}")]);
    assert_eq!(h.log_of("SET k w NX"), Vec::<String>::new());
    assert_eq!(h.log_of("EXPIRE k 10"), [format!("PEXPIREAT k {at}")]);
    assert_eq!(h.log_of("EXPIRE nope 10"), Vec::<String>::new());
    assert_eq!(h.log_of("GETEX k PX 10000"), [format!("PEXPIREAT k {at}")]);
    assert_eq!(h.log_of("PERSIST k"), ["PERSIST k"]);
    assert_eq!(h.log_of("PERSIST k"), Vec::<String>::new());
    assert_eq!(h.log_of("GETEX k PERSIST"), Vec::<String>::new());
    assert_eq!(h.log_of("EXPIRE k -1"), ["DEL k"]);
    h.run("SET f 10.5");
    assert_eq!(h.log_of("INCRBYFLOAT f 0.25"), ["SET f 10.75 KEEPTTL"]);
    assert_eq!(h.log_of("INCR n"), ["INCR n"]);
    assert_eq!(h.log_of("RENAME n m"), ["RENAME n m"]);
    assert_eq!(h.log_of("COPY m c"), ["COPY m c"]);
    assert_eq!(h.log_of("COPY m c"), Vec::<String>::new());
    assert_eq!(h.log_of("MOVE c 1"), ["MOVE c 1"]);
    assert_eq!(h.log_of("DEL m nope"), ["DEL m nope"]);
    assert_eq!(h.log_of("DEL nope"), Vec::<String>::new());
    assert_eq!(h.log_of("GET f"), Vec::<String>::new());
    assert_eq!(h.log_of("FLUSHALL"), ["FLUSHALL"]);
    assert_eq!(
        h.effects.dirty, 3,
        "FLUSHALL counts the keys it removed, plus one"
    );
}

/// `lazyfree-lazy-user-flush`: a FLUSHALL or FLUSHDB without ASYNC or SYNC frees
/// in slices as with ASYNC (the memory stays counted until active expiry frees
/// it); SYNC still frees at once.
#[test]
fn lazy_user_flush_decides_a_plain_flush() {
    let fill = |h: &mut Harness| {
        for i in 0..3000 {
            h.run(&format!("SET key:{i} value"));
        }
    };
    let mut h = Harness::default();
    fill(&mut h);
    let full = h.engine.used_memory_bytes();
    assert_eq!(h.run("FLUSHALL"), "+OK\r\n");
    let eager = h.engine.used_memory_bytes();
    assert!(eager < full / 2, "{eager} of {full}");

    h.engine.config_mut().lazyfree_lazy_user_flush = true;
    fill(&mut h);
    assert_eq!(h.run("FLUSHDB"), "+OK\r\n");
    assert_eq!(h.run("DBSIZE"), int(0));
    let lazy = h.engine.used_memory_bytes();
    assert!(lazy > full / 2, "{lazy} of {full}: freed at once");
    while h.engine.used_memory_bytes() > eager {
        h.engine.active_expire_cycle(NOW_MS, 20);
    }
    fill(&mut h);
    assert_eq!(h.run("FLUSHALL SYNC"), "+OK\r\n");
    assert!(h.engine.used_memory_bytes() < full / 2);
}
