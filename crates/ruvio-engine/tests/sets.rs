//! The set family against the engine, request bytes in and reply bytes out. The
//! expected replies were taken from redis-server 7.0 (`redis-cli`, raw RESP)
//! where 7.0 and 7.2 agree; encodings follow 7.2 (7.0 has no listpack sets).

mod common;

use common::*;
use ruvio_engine::command::EventClass;

fn set3(items: &[&str]) -> String {
    let mut out = format!("~{}\r\n", items.len());
    for i in items {
        out.push_str(&bulk(i));
    }
    out
}

/// The members of a RESP2 array reply of bulk strings, sorted.
fn sorted_members(reply: &str) -> Vec<String> {
    let mut lines = reply.split("\r\n").skip(1);
    let mut out = Vec::new();
    while let (Some(len), Some(v)) = (lines.next(), lines.next()) {
        if len.starts_with('$') {
            out.push(v.to_string());
        }
    }
    out.sort();
    out
}

#[test]
fn add_remove_and_read() {
    let mut h = Harness::default();
    assert_eq!(h.run("SADD s 3 1 2 1"), int(3));
    assert_eq!(h.effects.dirty, 3);
    assert_eq!(events(&h), [(EventClass::Set, "sadd")]);
    assert_eq!(h.run("OBJECT ENCODING s"), bulk("intset"));
    assert_eq!(h.run("SMEMBERS s"), arr(&["1", "2", "3"]));
    assert_eq!(h.run("SADD s 2"), int(0));
    assert_eq!(h.effects.dirty, 0);
    assert_eq!(h.run("SCARD s"), int(3));
    assert_eq!(h.run("SCARD missing"), int(0));
    assert_eq!(h.run("SISMEMBER s 2"), int(1));
    assert_eq!(h.run("SISMEMBER s 02"), int(0));
    assert_eq!(h.run("SISMEMBER missing 2"), int(0));
    assert_eq!(h.run("SMISMEMBER s 1 x 3"), "*3\r\n:1\r\n:0\r\n:1\r\n");
    assert_eq!(h.run("SMISMEMBER missing 1 2"), "*2\r\n:0\r\n:0\r\n");
    assert_eq!(h.run("SADD s a"), int(1));
    assert_eq!(h.run("OBJECT ENCODING s"), bulk("listpack"));
    assert_eq!(h.run("SMEMBERS s"), arr(&["1", "2", "3", "a"]));
    assert_eq!(h.run("SREM s 1 x 2"), int(2));
    assert_eq!(events(&h), [(EventClass::Set, "srem")]);
    assert_eq!(h.run("SREM s 3 a b"), int(2));
    assert_eq!(
        events(&h),
        [(EventClass::Set, "srem"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS s"), int(0));
    assert_eq!(h.run("SREM missing a"), int(0));
    assert_eq!(h.run("SMEMBERS missing"), "*0\r\n");
    h.run("SET str x");
    for cmd in [
        "SADD str a",
        "SREM str a",
        "SISMEMBER str a",
        "SMISMEMBER str a",
        "SMEMBERS str",
        "SCARD str",
        "SPOP str",
        "SRANDMEMBER str",
        "SINTER str",
        "SUNION str",
        "SDIFF str",
        "SSCAN str 0",
    ] {
        assert_eq!(h.run(cmd), WRONGTYPE, "{cmd}");
    }
    assert_eq!(h.run("TYPE s"), "+none\r\n");
    h.run("SADD s x");
    assert_eq!(h.run("TYPE s"), "+set\r\n");
}

#[test]
fn resp3_replies_are_sets() {
    let mut h = Harness::resp3();
    h.run("SADD s 2 1");
    h.run("SADD t 2 3");
    assert_eq!(h.run("SMEMBERS s"), set3(&["1", "2"]));
    assert_eq!(h.run("SMEMBERS missing"), "~0\r\n");
    assert_eq!(h.run("SINTER s t"), set3(&["2"]));
    assert_eq!(h.run("SINTER s missing"), "~0\r\n");
    assert_eq!(h.run("SUNION s t"), set3(&["1", "2", "3"]));
    assert_eq!(h.run("SDIFF s t"), set3(&["1"]));
    assert_eq!(h.run("SPOP missing"), NIL3);
    assert_eq!(h.run("SPOP missing 2"), "~0\r\n");
    assert_eq!(h.run("SPOP s 0"), "~0\r\n");
    assert_eq!(h.run("SRANDMEMBER missing 2"), "*0\r\n");
}

#[test]
fn encodings_convert_where_redis_72_does() {
    let mut h = Harness::default();
    // A long member can't go in a listpack.
    h.run(&format!("SADD a {}", "x".repeat(65)));
    assert_eq!(h.run("OBJECT ENCODING a"), bulk("hashtable"));
    h.run(&format!("SADD b {}", "x".repeat(64)));
    assert_eq!(h.run("OBJECT ENCODING b"), bulk("listpack"));
    // Intset -> listpack uses a strict `<` on the new member's length.
    h.run("SADD c 1");
    h.run(&format!("SADD c {}", "y".repeat(64)));
    assert_eq!(h.run("OBJECT ENCODING c"), bulk("hashtable"));
    // Past set-max-intset-entries.
    let many: Vec<String> = (0..513).map(|i| i.to_string()).collect();
    h.run(&format!("SADD d {}", many[..512].join(" ")));
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("intset"));
    h.run("SADD d 512");
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("hashtable"));
    // SADD of more members than the listpack limit creates a hash table at once,
    // even when they are duplicates.
    let dup = vec!["m"; 129].join(" ");
    h.run(&format!("SADD e {dup}"));
    assert_eq!(h.run("SCARD e"), int(1));
    assert_eq!(h.run("OBJECT ENCODING e"), bulk("hashtable"));
    // Never back.
    h.run(&format!("SREM d {}", many[1..].join(" ")));
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("hashtable"));
    // Thresholds from CONFIG.
    h.engine.config_mut().set_max_listpack_entries = 2;
    h.run("SADD f a b");
    assert_eq!(h.run("OBJECT ENCODING f"), bulk("listpack"));
    h.run("SADD f c");
    assert_eq!(h.run("OBJECT ENCODING f"), bulk("hashtable"));
}

#[test]
fn store_results_take_redis_encodings() {
    let mut h = Harness::default();
    h.run("SADD a x 1 2 3");
    h.run("SADD b 1 2 3 y");
    assert_eq!(h.run("SINTERSTORE d a b"), int(3));
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(events(&h), [(EventClass::Set, "sinterstore")]);
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("intset"));
    assert_eq!(h.run("SUNIONSTORE d a b"), int(5));
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("listpack"));
    assert_eq!(h.run("SDIFFSTORE d a b"), int(1));
    assert_eq!(h.run("SMEMBERS d"), arr(&["x"]));
    assert_eq!(h.run("SINTERSTORE d a missing"), int(0));
    assert_eq!(events(&h), [(EventClass::Generic, "del")]);
    assert_eq!(h.run("EXISTS d"), int(0));
    assert_eq!(h.run("SINTERSTORE d a missing"), int(0));
    assert_eq!(h.effects.dirty, 0);
    h.run("SET str v");
    assert_eq!(h.run("SUNIONSTORE str a"), int(4));
    assert_eq!(h.run("TYPE str"), "+set\r\n");
    assert_eq!(h.run("SINTERSTORE d missing str2 a"), int(0));
    h.run("SET str2 v");
    assert_eq!(h.run("SINTER missing str2"), WRONGTYPE);
    assert_eq!(h.run("SDIFF a a"), "*0\r\n");
    assert_eq!(h.run("SDIFF missing a"), "*0\r\n");
}

#[test]
fn sintercard_arguments() {
    let mut h = Harness::default();
    h.run("SADD a 1 2 3 4");
    h.run("SADD b 2 3 4 5");
    assert_eq!(h.run("SINTERCARD 2 a b"), int(3));
    assert_eq!(h.run("SINTERCARD 2 a b LIMIT 2"), int(2));
    assert_eq!(h.run("SINTERCARD 2 a b LIMIT 0"), int(3));
    assert_eq!(h.run("SINTERCARD 1 a"), int(4));
    assert_eq!(h.run("SINTERCARD 2 a missing"), int(0));
    assert_eq!(
        h.run("SINTERCARD 0 a"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        h.run("SINTERCARD x a"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        h.run("SINTERCARD 3 a b"),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        h.run("SINTERCARD 2 a b LIMIT -1"),
        err("ERR LIMIT can't be negative")
    );
    assert_eq!(h.run("SINTERCARD 2 a b LIMIT"), SYNTAX);
    assert_eq!(h.run("SINTERCARD 1 a b"), SYNTAX);
}

#[test]
fn spop_and_srandmember() {
    let mut h = Harness::default();
    h.run("SADD s a b c d e");
    let one = h.run("SRANDMEMBER s");
    assert!(["a", "b", "c", "d", "e"].iter().any(|m| one == bulk(m)));
    let five = h.run("SRANDMEMBER s 10");
    assert_eq!(sorted_members(&five), ["a", "b", "c", "d", "e"]);
    let three = sorted_members(&h.run("SRANDMEMBER s 3"));
    assert_eq!(three.len(), 3);
    assert!(three.windows(2).all(|w| w[0] != w[1]));
    let rep = sorted_members(&h.run("SRANDMEMBER s -20"));
    assert_eq!(rep.len(), 20);
    assert_eq!(h.run("SRANDMEMBER s 0"), "*0\r\n");
    assert_eq!(h.run("SRANDMEMBER s x"), NOT_INT);
    assert_eq!(
        h.run("SRANDMEMBER s -9223372036854775808"),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
    assert_eq!(h.run("SRANDMEMBER s 1 2"), SYNTAX);
    assert_eq!(h.run("SRANDMEMBER missing"), NIL);
    assert_eq!(
        h.run("SPOP s -1"),
        err("ERR value is out of range, must be positive")
    );
    assert_eq!(h.run("SPOP s 1 2"), SYNTAX);
    let popped = h.log_of("SPOP s");
    assert_eq!(popped.len(), 1);
    assert!(popped[0].starts_with("SREM s "));
    assert_eq!(h.run("SCARD s"), int(4));
    let records = h.log_of("SPOP s 2");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].split(' ').count(), 4);
    assert_eq!(h.effects.dirty, 2);
    assert_eq!(h.run("SCARD s"), int(2));
    assert_eq!(h.log_of("SPOP s 5"), ["DEL s"]);
    assert_eq!(
        events(&h),
        [(EventClass::Set, "spop"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS s"), int(0));
    assert_eq!(h.run("SPOP missing"), NIL);
    assert_eq!(h.run("SPOP missing 3"), "*0\r\n");
}

#[test]
fn smove_cases() {
    let mut h = Harness::default();
    h.run("SADD a 1 2");
    assert_eq!(h.run("SMOVE a b 1"), int(1));
    assert_eq!(h.effects.dirty, 2);
    assert_eq!(
        events(&h),
        [(EventClass::Set, "srem"), (EventClass::Set, "sadd")]
    );
    assert_eq!(h.run("OBJECT ENCODING b"), bulk("intset"));
    assert_eq!(h.run("SMOVE a b 9"), int(0));
    assert_eq!(h.run("SMOVE a a 2"), int(1));
    assert_eq!(h.run("SMOVE a a 9"), int(0));
    assert_eq!(h.run("SMOVE missing b 1"), int(0));
    h.run("SET str v");
    assert_eq!(h.run("SMOVE a str 2"), WRONGTYPE);
    assert_eq!(h.run("SMOVE str a 2"), WRONGTYPE);
    assert_eq!(h.run("SMOVE missing str 2"), int(0));
    assert_eq!(h.log_of("SMOVE a b 2"), ["SMOVE a b 2"]);
    assert_eq!(h.run("EXISTS a"), int(0));
    assert_eq!(h.run("SMEMBERS b"), arr(&["1", "2"]));
}

#[test]
fn sscan_small_and_big() {
    let mut h = Harness::default();
    h.run("SADD s a1 a2 b1");
    assert_eq!(
        h.run("SSCAN s 0 MATCH a*"),
        "*2\r\n$1\r\n0\r\n*2\r\n$2\r\na1\r\n$2\r\na2\r\n"
    );
    assert_eq!(h.run("SSCAN missing 0"), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(h.run("SSCAN s x"), err("ERR invalid cursor"));
    assert_eq!(h.run("SSCAN s 0 COUNT 0"), SYNTAX);
    assert_eq!(h.run("SSCAN s 0 TYPE set"), SYNTAX);
    let members: Vec<String> = (0..300).map(|i| format!("m{i}")).collect();
    h.run(&format!("SADD big {}", members.join(" ")));
    let mut seen = Vec::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let reply = h.run(&format!("SSCAN big {cursor} COUNT 7"));
        let mut lines = reply.split("\r\n");
        cursor = lines.nth(2).unwrap_or("0").to_string();
        let body: Vec<&str> = lines.collect();
        seen.extend(body.iter().skip(2).step_by(2).map(|s| s.to_string()));
        seen.retain(|s| !s.is_empty());
        calls += 1;
        // Remove members while scanning: the others still come back.
        h.run(&format!("SREM big m{calls}"));
        if cursor == "0" || calls > 1000 {
            break;
        }
    }
    for (i, m) in members.iter().enumerate() {
        if i > calls {
            assert!(seen.contains(m), "{m} missed");
        }
    }
}

#[test]
fn copy_and_memory_of_small_sets() {
    let mut h = Harness::default();
    h.run("SADD s m1 m2 m3 m4");
    assert_eq!(h.run("COPY s t"), int(1));
    assert_eq!(h.run("SMEMBERS t"), arr(&["m1", "m2", "m3", "m4"]));
    h.run("SADD s m5");
    assert_eq!(h.run("SCARD t"), int(4));
}
