//! The bitmap family, command by command: request in, exact RESP bytes out, with
//! the effects (events, dirty count, log records) each write reports. The examples
//! of Redis' own documentation are here with Redis' answers.

mod common;

use common::*;

const BIT_OFFSET: &str = "-ERR bit offset is not an integer or out of range\r\n";
const BIT_VALUE: &str = "-ERR bit is not an integer or out of range\r\n";
const BIT_TYPE: &str = "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n";

fn events(h: &Harness) -> Vec<String> {
    h.effects
        .events()
        .map(|(e, _, key)| format!("{} {}", e.name, String::from_utf8_lossy(key)))
        .collect()
}

fn array(items: &[&str]) -> String {
    format!("*{}\r\n{}", items.len(), items.concat())
}

fn ints(items: &[i64]) -> String {
    let items: Vec<String> = items.iter().map(|&n| int(n)).collect();
    format!("*{}\r\n{}", items.len(), items.concat())
}

#[test]
fn setbit_and_getbit() {
    let mut h = Harness::default();
    assert_eq!(h.run("SETBIT k 7 1"), int(0));
    assert_eq!(events(&h), ["setbit k"]);
    assert_eq!(h.run("GET k"), bulk("\x01"));
    assert_eq!(h.run("OBJECT ENCODING k"), bulk("raw"));
    assert_eq!(h.run("SETBIT k 7 1"), int(1));
    assert_eq!(
        (h.effects.dirty, events(&h).len()),
        (0, 0),
        "nothing changed"
    );
    assert_eq!(h.log_of("SETBIT k 7 1"), Vec::<String>::new());
    assert_eq!(h.log_of("SETBIT k 0 1"), ["SETBIT k 0 1"]);
    assert_eq!(h.run_args(&[b"GET", b"k"]), b"$1\r\n\x81\r\n");
    // Clearing a bit past the end still grows the string, so it counts.
    assert_eq!(h.run("SETBIT k 23 0"), int(0));
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(h.run_args(&[b"GET", b"k"]), b"$3\r\n\x81\0\0\r\n");
    assert_eq!(h.run("GETBIT k 0"), int(1));
    assert_eq!(h.run("GETBIT k 1"), int(0));
    assert_eq!(h.run("GETBIT k 7"), int(1));
    assert_eq!(h.run("GETBIT k 100000"), int(0));
    assert_eq!(h.run("GETBIT missing 5"), int(0));
    assert_eq!(h.run("SETBIT k 0 0"), int(1));
    assert_eq!(h.run("GETBIT k 0"), int(0));
}

#[test]
fn bit_errors() {
    let mut h = Harness::default();
    for bad in ["-1", "x", "4294967296", "1.5", "#1", "99999999999999999999"] {
        assert_eq!(h.run(&format!("SETBIT k {bad} 1")), BIT_OFFSET, "{bad}");
        assert_eq!(h.run(&format!("GETBIT k {bad}")), BIT_OFFSET, "{bad}");
    }
    for bad in ["2", "-1", "x", "01", ""] {
        assert_eq!(h.run(&format!("SETBIT k 0 \"{bad}\"")), BIT_VALUE, "{bad}");
    }
    assert_eq!(h.run("EXISTS k"), int(0));
    h.run("LPUSH l a");
    assert_eq!(h.run("SETBIT l 0 1"), WRONGTYPE);
    assert_eq!(h.run("GETBIT l 0"), WRONGTYPE);
    // The offset is checked before the type, the value too.
    assert_eq!(h.run("SETBIT l -1 1"), BIT_OFFSET);
    assert_eq!(h.run("SETBIT l 0 5"), BIT_VALUE);
    assert_eq!(
        h.run("SETBIT k 1"),
        err("ERR wrong number of arguments for 'setbit' command")
    );
}

#[test]
fn offsets_up_to_the_last_bit_of_512_mb() {
    let mut h = Harness::default();
    let before = h.engine.used_memory_bytes();
    assert_eq!(h.run("SETBIT big 4294967295 1"), int(0));
    assert_eq!(h.run("STRLEN big"), int(536_870_912));
    assert!(
        h.engine.used_memory_bytes() - before >= 536_870_912,
        "counted"
    );
    assert_eq!(h.run("GETBIT big 4294967295"), int(1));
    assert_eq!(h.run("GETBIT big 4294967294"), int(0));
    assert_eq!(h.run("BITCOUNT big -1 -1"), int(1));
    assert_eq!(h.run("BITCOUNT big -8 -1 BIT"), int(1));
    assert_eq!(h.run("BITPOS big 1 -1"), int(4_294_967_295));
    assert_eq!(h.run("BITPOS big 0 -1"), int(4_294_967_288));
    assert_eq!(h.run("BITFIELD big GET u8 4294967288"), ints(&[1]));
    assert_eq!(h.run("BITFIELD big GET u8 #536870911"), ints(&[1]));
    // Written fields may reach a little past the last bit offset, as in Redis.
    assert_eq!(h.run("BITFIELD big SET u8 4294967295 255"), ints(&[128]));
    assert_eq!(h.run("STRLEN big"), int(536_870_913));
    assert_eq!(h.run("BITFIELD big GET u8 4294967296"), BIT_OFFSET);
    assert_eq!(h.run("DEL big"), int(1));
    // proto-max-bulk-len lowers the limit as in Redis (bytes, not bits).
    h.engine.config_mut().proto_max_bulk_len = 1 << 20;
    assert_eq!(h.run("SETBIT k 8388607 1"), int(0));
    assert_eq!(h.run("SETBIT k 8388608 1"), BIT_OFFSET);
    assert_eq!(h.run("BITFIELD k GET u8 #1048576"), BIT_OFFSET);
}

#[test]
fn bits_make_strings_raw_and_keep_ttls() {
    let mut h = Harness::default();
    h.run("SET n 255");
    assert_eq!(h.run("OBJECT ENCODING n"), bulk("int"));
    // Bits of an integer are bits of its decimal text.
    assert_eq!(h.run("GETBIT n 2"), int(1));
    assert_eq!(h.run("BITCOUNT n"), int(11));
    assert_eq!(h.run("BITFIELD n GET u8 0"), ints(&[i64::from(b'2')]));
    assert_eq!(h.run("OBJECT ENCODING n"), bulk("int"));
    assert_eq!(h.run("SETBIT n 6 1"), int(1));
    assert_eq!(h.run("OBJECT ENCODING n"), bulk("raw"), "even unchanged");
    assert_eq!(h.run("GET n"), bulk("255"));
    h.run("SET e hello");
    assert_eq!(h.run("OBJECT ENCODING e"), bulk("embstr"));
    h.run("BITFIELD e GET u8 0 OVERFLOW FAIL INCRBY u8 0 1000");
    assert_eq!(h.run("OBJECT ENCODING e"), bulk("raw"));
    assert_eq!(h.run("GET e"), bulk("hello"));
    h.run("SET t abc EX 100");
    h.run("SETBIT t 100 1");
    h.run("BITFIELD t INCRBY u8 0 1");
    assert_eq!(h.run("TTL t"), int(100));
}

#[test]
fn short_bitmaps_stay_inline() {
    let mut h = Harness::default();
    // The first key allocates a slab chunk: measure after it.
    h.run("SET warm-up 1");
    let before = h.engine.used_memory_bytes();
    assert_eq!(h.run("BITFIELD counter:1 INCRBY u16 0 1"), ints(&[1]));
    assert_eq!(h.run("BITFIELD counter:1 INCRBY u16 0 1"), ints(&[2]));
    assert_eq!(h.run_args(&[b"GET", b"counter:1"]), b"$2\r\n\0\x02\r\n");
    let after = h.engine.used_memory_bytes();
    assert!(
        after - before < 64,
        "a 2-byte counter costs {}",
        after - before
    );
    // A 128-byte bitmap gets exactly 128 bytes, not a doubled block.
    let before = h.engine.used_memory_bytes();
    h.run("SETBIT bitmap:1 1023 1");
    let cost = h.engine.used_memory_bytes() - before;
    assert!(cost <= 48 + 8 + 144, "a 128-byte bitmap costs {cost}");
    assert_eq!(h.run("STRLEN bitmap:1"), int(128));
}

#[test]
fn bitcount_as_documented() {
    let mut h = Harness::default();
    h.run("SET mykey foobar");
    assert_eq!(h.run("BITCOUNT mykey"), int(26));
    assert_eq!(h.run("BITCOUNT mykey 0 0"), int(4));
    assert_eq!(h.run("BITCOUNT mykey 1 1"), int(6));
    assert_eq!(h.run("BITCOUNT mykey 1 1 BYTE"), int(6));
    assert_eq!(h.run("BITCOUNT mykey 5 30 BIT"), int(17));
    assert_eq!(h.run("BITCOUNT mykey 5 30 bit"), int(17));
    assert_eq!(h.run("BITCOUNT mykey -2 -1"), int(7));
    assert_eq!(h.run("BITCOUNT mykey -1 -2"), int(0));
    // Both from the end and crossed: 0 even though clamping would meet at byte 0.
    assert_eq!(h.run("BITCOUNT mykey -10 -20"), int(0));
    assert_eq!(h.run("BITCOUNT mykey -20 -10"), int(4));
    assert_eq!(h.run("BITCOUNT mykey 0 1000"), int(26));
    assert_eq!(h.run("BITCOUNT mykey 6 1000"), int(0));
    assert_eq!(h.run("BITCOUNT mykey 0 -1 BIT"), int(26));
    assert_eq!(h.run("BITCOUNT mykey 47 47 BIT"), int(0));
    assert_eq!(h.run("BITCOUNT mykey 46 46 BIT"), int(1));
    assert_eq!(h.run("BITCOUNT missing"), int(0));
    assert_eq!(h.run("BITCOUNT missing 0 -1"), int(0));
    // Redis 7.2: the arguments are checked even for a missing key.
    assert_eq!(h.run("BITCOUNT missing 0"), SYNTAX);
    assert_eq!(h.run("BITCOUNT missing 0 x"), NOT_INT);
    assert_eq!(h.run("BITCOUNT missing 0 1 BITS"), SYNTAX);
    assert_eq!(h.run("BITCOUNT mykey 0 1 BIT x"), SYNTAX);
    h.run("SET empty \"\"");
    assert_eq!(h.run("BITCOUNT empty"), int(0));
    assert_eq!(h.run("BITCOUNT empty 0 -1 BIT"), int(0));
    h.run("HSET h f v");
    assert_eq!(h.run("BITCOUNT h"), WRONGTYPE);
    assert_eq!(h.run("BITCOUNT h 0 -1"), WRONGTYPE);
    let long = "U".repeat(1024);
    h.run(&format!("SET long {long}"));
    assert_eq!(h.run("BITCOUNT long"), int(4096));
    assert_eq!(h.run("BITCOUNT long 3 1000"), int(3992));
}

#[test]
fn bitpos_as_documented() {
    let mut h = Harness::default();
    h.run("SET mykey \"\\xff\\xf0\\x00\"");
    assert_eq!(h.run("BITPOS mykey 0"), int(12));
    h.run("SET mykey \"\\x00\\xff\\xf0\"");
    assert_eq!(h.run("BITPOS mykey 1 0"), int(8));
    assert_eq!(h.run("BITPOS mykey 1 2"), int(16));
    assert_eq!(h.run("BITPOS mykey 1 2 -1 BYTE"), int(16));
    assert_eq!(h.run("BITPOS mykey 1 7 15 BIT"), int(8));
    assert_eq!(h.run("BITPOS mykey 0 9 12 BIT"), int(-1));
    assert_eq!(h.run("BITPOS mykey 0 8 20 BIT"), int(20));
    h.run("SET mykey \"\\x00\\x00\\x00\"");
    assert_eq!(h.run("BITPOS mykey 1"), int(-1));
    assert_eq!(h.run("BITPOS mykey 1 7 -3 BIT"), int(-1));
    // All ones: with no end the clear bit is the first one past the string.
    h.run("SET ones \"\\xff\\xff\\xff\"");
    assert_eq!(h.run("BITPOS ones 0"), int(24));
    assert_eq!(h.run("BITPOS ones 0 1"), int(24));
    assert_eq!(h.run("BITPOS ones 0 -1"), int(24));
    assert_eq!(h.run("BITPOS ones 0 0 -1"), int(-1));
    assert_eq!(h.run("BITPOS ones 0 0 -1 BIT"), int(-1));
    assert_eq!(h.run("BITPOS ones 0 5"), int(-1));
    assert_eq!(h.run("BITPOS ones 1 2 1"), int(-1));
    assert_eq!(h.run("BITPOS missing 0"), int(0));
    assert_eq!(h.run("BITPOS missing 1"), int(-1));
    assert_eq!(h.run("BITPOS missing 0 5 10 BIT"), int(0));
    h.run("SET empty \"\"");
    assert_eq!(h.run("BITPOS empty 0"), int(-1));
    assert_eq!(h.run("BITPOS empty 1"), int(-1));
    let must = "-ERR The bit argument must be 1 or 0.\r\n";
    assert_eq!(h.run("BITPOS ones 2"), must);
    assert_eq!(h.run("BITPOS ones x"), NOT_INT);
    assert_eq!(h.run("BITPOS missing 1 0 0 BITS"), SYNTAX);
    // Redis reads the unit before the end.
    assert_eq!(h.run("BITPOS ones 1 0 x BITS"), SYNTAX);
    assert_eq!(h.run("BITPOS ones 1 0 x BIT"), NOT_INT);
    assert_eq!(h.run("BITPOS ones 1 0 1 BIT x"), SYNTAX);
    h.run("SET n 10");
    assert_eq!(h.run("BITPOS n 1"), int(2));
    h.run("RPUSH l a");
    assert_eq!(h.run("BITPOS l 1"), WRONGTYPE);
}

#[test]
fn bitop_classic_operations() {
    let mut h = Harness::default();
    h.run("SET a \"\\xff\\x0f\"");
    h.run("SET b \"\\xf0\"");
    let get = |h: &mut Harness, k: &str| h.run_args(&[b"GET", k.as_bytes()]);
    assert_eq!(h.run("BITOP AND d a b"), int(2));
    assert_eq!(events(&h), ["set d"]);
    assert_eq!(get(&mut h, "d"), b"$2\r\n\xf0\0\r\n");
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("raw"));
    assert_eq!(h.run("BITOP or d a b"), int(2));
    assert_eq!(get(&mut h, "d"), b"$2\r\n\xff\x0f\r\n");
    assert_eq!(h.run("BITOP XOR d a b"), int(2));
    assert_eq!(get(&mut h, "d"), b"$2\r\n\x0f\x0f\r\n");
    assert_eq!(h.run("BITOP NOT d a"), int(2));
    assert_eq!(get(&mut h, "d"), b"$2\r\n\0\xf0\r\n");
    // The destination may be a source, and missing sources are empty strings.
    assert_eq!(h.run("BITOP XOR a a missing"), int(2));
    assert_eq!(get(&mut h, "a"), b"$2\r\n\xff\x0f\r\n");
    assert_eq!(h.run("BITOP AND a a missing"), int(2));
    assert_eq!(get(&mut h, "a"), b"$2\r\n\0\0\r\n");
    // An integer source is its decimal text.
    h.run("SET n 12");
    assert_eq!(h.run("BITOP OR d n"), int(2));
    assert_eq!(get(&mut h, "d"), b"$2\r\n12\r\n");
    // An empty result deletes the destination ("del"), whatever it held, and the
    // TTL of a replaced destination is gone.
    h.run("SET d x EX 100");
    assert_eq!(h.run("BITOP OR d b"), int(1));
    assert_eq!(h.run("TTL d"), int(-1));
    assert_eq!(h.log_of("BITOP OR d missing"), ["BITOP OR d missing"]);
    assert_eq!(events(&h), ["del d"]);
    assert_eq!(h.run("EXISTS d"), int(0));
    assert_eq!(h.run("BITOP OR d missing"), int(0));
    assert_eq!(h.effects.dirty, 0);
    h.run("RPUSH l x");
    assert_eq!(h.run("BITOP OR l b"), int(1));
    assert_eq!(h.run("TYPE l"), "+string\r\n");
    assert_eq!(h.run("BITOP OR d b l2 l"), int(1));
    h.run("RPUSH l2 x");
    assert_eq!(h.run("BITOP OR d b l2"), WRONGTYPE);
    assert_eq!(h.run("BITOP NAND d a b"), SYNTAX);
    assert_eq!(
        h.run("BITOP NOT d a b"),
        err("ERR BITOP NOT must be called with a single source key.")
    );
    assert_eq!(
        h.run("BITOP AND d"),
        err("ERR wrong number of arguments for 'bitop' command")
    );
}

#[test]
fn bitop_redis_8_operations() {
    let mut h = Harness::default();
    h.run("SET x \"\\xff\\xff\\x0f\"");
    h.run("SET a \"\\xf0\\x01\"");
    h.run("SET b \"\\x0c\"");
    let get = |h: &mut Harness, k: &str| h.run_args(&[b"GET", k.as_bytes()]);
    // DIFF: X and none of the others.
    assert_eq!(h.run("BITOP DIFF d x a b"), int(3));
    assert_eq!(get(&mut h, "d"), b"$3\r\n\x03\xfe\x0f\r\n");
    // DIFF1: one of the others, not X.
    assert_eq!(h.run("BITOP diff1 d a x b"), int(3));
    assert_eq!(get(&mut h, "d"), b"$3\r\n\x0f\xfe\x0f\r\n");
    // ANDOR: X and at least one of the others.
    assert_eq!(h.run("BITOP ANDOR d x a b"), int(3));
    assert_eq!(get(&mut h, "d"), b"$3\r\n\xfc\x01\0\r\n");
    // ONE: exactly one source.
    assert_eq!(h.run("BITOP ONE d x a b"), int(3));
    assert_eq!(get(&mut h, "d"), b"$3\r\n\x03\xfe\x0f\r\n");
    assert_eq!(h.run("BITOP ONE d a"), int(2));
    assert_eq!(get(&mut h, "d"), b"$2\r\n\xf0\x01\r\n");
    for (op, name) in [("DIFF", "DIFF"), ("diff1", "DIFF1"), ("AndOr", "ANDOR")] {
        assert_eq!(
            h.run(&format!("BITOP {op} d x")),
            err(&format!(
                "ERR BITOP {name} must be called with at least two source keys."
            ))
        );
    }
    assert_eq!(h.run("BITOP DIFF d missing a"), int(2));
    assert_eq!(get(&mut h, "d"), b"$2\r\n\0\0\r\n");
    assert_eq!(h.run("BITOP DIFF1 d missing a"), int(2));
    assert_eq!(get(&mut h, "d"), b"$2\r\n\xf0\x01\r\n");
}

#[test]
fn bitfield_as_documented() {
    let mut h = Harness::default();
    assert_eq!(
        h.run("BITFIELD mykey INCRBY i5 100 1 GET u4 0"),
        ints(&[1, 0])
    );
    assert_eq!(events(&h), ["setbit mykey"]);
    assert_eq!(h.run("STRLEN mykey"), int(14));
    let cmd = "BITFIELD sat incrby u2 100 1 OVERFLOW SAT incrby u2 102 1";
    assert_eq!(h.run(cmd), ints(&[1, 1]));
    assert_eq!(h.run(cmd), ints(&[2, 2]));
    assert_eq!(h.run(cmd), ints(&[3, 3]));
    assert_eq!(h.run(cmd), ints(&[0, 3]));
    assert_eq!(
        h.run("BITFIELD sat OVERFLOW FAIL incrby u2 102 1"),
        array(&[NIL])
    );
    assert_eq!(h.effects.dirty, 0);
    let mut h3 = Harness::resp3();
    assert_eq!(
        h3.run("BITFIELD k OVERFLOW FAIL SET u8 0 256 SET u8 0 255"),
        array(&[NIL3, ":0\r\n"])
    );
}

#[test]
fn bitfield_types_and_overflow_edges() {
    let mut h = Harness::default();
    let one = |h: &mut Harness, line: &str| h.run(line);
    // Unsigned SET reads the value as a u64: -1 is huge, so SAT gives the maximum.
    assert_eq!(one(&mut h, "BITFIELD k SET u8 0 -1"), ints(&[0]));
    assert_eq!(one(&mut h, "BITFIELD k GET u8 0"), ints(&[255]));
    assert_eq!(
        one(&mut h, "BITFIELD k OVERFLOW SAT SET u8 0 -1 GET u8 0"),
        ints(&[255, 255])
    );
    assert_eq!(
        one(&mut h, "BITFIELD k OVERFLOW SAT INCRBY u8 0 -300"),
        ints(&[0])
    );
    assert_eq!(one(&mut h, "BITFIELD k INCRBY u8 0 -1"), ints(&[255]));
    assert_eq!(
        one(&mut h, "BITFIELD k SET i8 0 128 GET i8 0"),
        ints(&[-1, -128])
    );
    assert_eq!(
        one(
            &mut h,
            "BITFIELD k OVERFLOW SAT SET i8 0 128 INCRBY i8 0 -1000"
        ),
        ints(&[-128, -128])
    );
    assert_eq!(
        one(&mut h, "BITFIELD k OVERFLOW WRAP INCRBY i8 0 -1"),
        ints(&[127])
    );
    // Redis' check takes a signed SET value far enough below the range (where
    // `max - value` overflows 64 bits) as too big: SAT stores the maximum.
    let min = i64::MIN;
    for (ty, value, stored) in [
        ("i1", min, 0),
        ("i1", min + 1, -1),
        ("i8", min + 127, 127),
        ("i8", min + 128, -128),
        ("i63", min, (1 << 62) - 1),
    ] {
        let line = format!("BITFIELD q OVERFLOW SAT SET {ty} 0 {value} GET {ty} 0");
        let reply = h.run(&line);
        assert!(reply.ends_with(&int(stored)), "{line}: {reply}");
    }
    assert_eq!(
        one(
            &mut h,
            &format!("BITFIELD q OVERFLOW SAT SET i64 0 {min} GET i64 0")
        ),
        ints(&[i64::MAX - 1, min])
    );
    // The 64-bit edges.
    let max = i64::MAX;
    assert_eq!(
        one(&mut h, &format!("BITFIELD w SET i64 0 {max}")),
        ints(&[0])
    );
    assert_eq!(one(&mut h, "BITFIELD w INCRBY i64 0 1"), ints(&[i64::MIN]));
    assert_eq!(
        one(&mut h, "BITFIELD w OVERFLOW SAT INCRBY i64 0 -1"),
        ints(&[i64::MIN])
    );
    assert_eq!(
        one(&mut h, "BITFIELD w OVERFLOW FAIL INCRBY i64 0 -1"),
        array(&[NIL])
    );
    assert_eq!(
        one(&mut h, &format!("BITFIELD w SET u63 1 {max}")),
        ints(&[0])
    );
    assert_eq!(
        one(&mut h, "BITFIELD w GET u63 1 GET i64 0 GET u1 0"),
        ints(&[max, -1, 1])
    );
    assert_eq!(
        one(&mut h, "BITFIELD w OVERFLOW SAT INCRBY u63 1 5"),
        ints(&[max])
    );
    assert_eq!(one(&mut h, "BITFIELD w INCRBY u63 1 1"), ints(&[0]));
    assert_eq!(
        one(&mut h, "BITFIELD w SET i1 0 1 GET i1 0 GET u1 0"),
        ints(&[-1, -1, 1])
    );
    // `#n` offsets count fields of the type's width.
    assert_eq!(
        one(&mut h, "BITFIELD h SET u8 #2 65 GET u8 16 GET u4 #4"),
        ints(&[0, 65, 4])
    );
    assert_eq!(h.run_args(&[b"GET", b"h"]), b"$3\r\n\0\0A\r\n");
    // A GET-only call creates nothing; a failed write still grows the string.
    assert_eq!(
        one(&mut h, "BITFIELD none GET u8 100 GET i64 #3"),
        ints(&[0, 0])
    );
    assert_eq!(h.run("EXISTS none"), int(0));
    assert_eq!(
        one(&mut h, "BITFIELD grown OVERFLOW FAIL SET u1 63 2"),
        array(&[NIL])
    );
    assert_eq!(h.run("STRLEN grown"), int(8));
    assert_eq!(h.effects.dirty, 0, "STRLEN");
    assert_eq!(
        h.log_of("BITFIELD grown2 OVERFLOW FAIL SET u1 7 2"),
        ["BITFIELD grown2 OVERFLOW FAIL SET u1 7 2"]
    );
    assert_eq!(one(&mut h, "BITFIELD empty"), "*0\r\n");
}

#[test]
fn bitfield_counts_changes_as_redis() {
    let mut h = Harness::default();
    assert_eq!(
        h.log_of("BITFIELD c SET u8 0 1 SET u8 8 0"),
        ["BITFIELD c SET u8 0 1 SET u8 8 0"]
    );
    assert_eq!(h.effects.dirty, 2, "a new string: every write counts");
    h.run("BITFIELD c SET u8 0 1 SET u8 8 0 INCRBY u8 0 0 GET u8 0");
    assert_eq!(h.effects.dirty, 0);
    assert_eq!(
        h.log_of("BITFIELD c SET u8 0 2 INCRBY u8 8 1"),
        ["BITFIELD c SET u8 0 2 INCRBY u8 8 1"]
    );
    assert_eq!(h.effects.dirty, 2);
    h.run("BITFIELD c SET u8 0 2 SET u8 16 0");
    assert_eq!(h.effects.dirty, 2, "grown: the unchanged write counts too");
}

#[test]
fn bitfield_errors_and_read_only() {
    let mut h = Harness::default();
    for bad in ["u64", "i65", "i0", "I8", "8", "u-1"] {
        assert_eq!(h.run(&format!("BITFIELD k GET {bad} 0")), BIT_TYPE, "{bad}");
    }
    assert_eq!(h.run("BITFIELD k GET u8 -1"), BIT_OFFSET);
    assert_eq!(h.run("BITFIELD k GET u8 #-1"), BIT_OFFSET);
    assert_eq!(h.run("BITFIELD k GET u8 #x"), BIT_OFFSET);
    // `#n` times the width wraps in 64 bits, as Redis computes it.
    assert_eq!(h.run("BITFIELD k GET i64 #144115188075855872"), BIT_OFFSET);
    assert_eq!(h.run("BITFIELD k GET i64 #288230376151711745"), ints(&[0]));
    assert_eq!(h.run("BITFIELD k SET u8 0 x"), NOT_INT);
    assert_eq!(h.run("BITFIELD k GET u8"), SYNTAX);
    assert_eq!(h.run("BITFIELD k SET u8 0"), SYNTAX);
    assert_eq!(h.run("BITFIELD k BOGUS u8 0"), SYNTAX);
    assert_eq!(h.run("BITFIELD k OVERFLOW"), SYNTAX);
    assert_eq!(
        h.run("BITFIELD k OVERFLOW NOPE"),
        err("ERR Invalid OVERFLOW type specified")
    );
    // Everything is parsed before anything runs.
    assert_eq!(h.run("BITFIELD k SET u8 0 1 GET u99 0"), BIT_TYPE);
    assert_eq!(h.run("EXISTS k"), int(0));
    h.run("SADD s a");
    assert_eq!(h.run("BITFIELD s GET u8 0"), WRONGTYPE);
    assert_eq!(h.run("BITFIELD s SET u8 0 1"), WRONGTYPE);
    assert_eq!(h.run("BITFIELD_RO s GET u8 0"), WRONGTYPE);
    let ro = err("ERR BITFIELD_RO only supports the GET subcommand");
    assert_eq!(h.run("BITFIELD_RO s SET u8 0 1"), ro);
    assert_eq!(h.run("BITFIELD_RO k INCRBY u8 0 1"), ro);
    h.run("SET k A");
    assert_eq!(h.run("BITFIELD_RO k GET u8 0 GET u4 4"), ints(&[65, 1]));
    assert_eq!(h.run("BITFIELD_RO k"), "*0\r\n");
    assert_eq!(h.run("BITFIELD_RO k GET u8"), SYNTAX);
}

#[test]
fn entry_level_growth_matches_setrange() {
    // SETRANGE shares the growth path: a missing key gets exactly its bytes.
    let mut h = Harness::default();
    assert_eq!(h.run("SETRANGE r 199 x"), int(200));
    assert_eq!(h.run("GETRANGE r 198 199"), "$2\r\n\0x\r\n");
    assert_eq!(h.run("OBJECT ENCODING r"), bulk("raw"));
}
