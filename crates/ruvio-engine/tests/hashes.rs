//! The hash family against the engine, request bytes in and reply bytes out. The
//! expected replies of the commands Redis 7.0 has were taken from redis-server 7.0
//! (raw RESP); those of the field expiry commands, HGETDEL, HGETEX and HSETEX follow
//! Redis 8.0's source (t_hash.c), which the installed 7.0 cannot answer.
//!
//! About 1,000 lines on purpose: one test file per family, as every family has
//! (STYLE.md); the comparison with a real server is one test of it.

mod common;

use common::*;
use ruvio_engine::command::EventClass;

fn ints(items: &[i64]) -> String {
    let mut out = format!("*{}\r\n", items.len());
    for i in items {
        out.push_str(&int(*i));
    }
    out
}

const FIELDS_MISSING: &str =
    "-ERR Mandatory argument FIELDS is missing or not at the right position\r\n";
const NUMFIELDS_MISMATCH: &str =
    "-ERR The `numfields` parameter must match the number of arguments\r\n";
const NUMFIELDS_POSITIVE: &str = "-ERR Number of fields must be a positive integer\r\n";

#[test]
fn set_get_and_friends() {
    let mut h = Harness::default();
    assert_eq!(h.run("HSET h f1 v1 f2 v2"), int(2));
    assert_eq!(h.effects.dirty, 2);
    assert_eq!(events(&h), [(EventClass::Hash, "hset")]);
    assert_eq!(h.run("HSET h f1 x f3 v3"), int(1));
    assert_eq!(h.run("HMSET h f4 v4"), OK);
    assert_eq!(h.run("HGET h f1"), bulk("x"));
    assert_eq!(h.run("HGET h nope"), NIL);
    assert_eq!(h.run("HGET missing f"), NIL);
    assert_eq!(
        h.run("HMGET h f1 nope f2"),
        format!("*3\r\n{}{}{}", bulk("x"), NIL, bulk("v2"))
    );
    assert_eq!(h.run("HMGET missing a b"), format!("*2\r\n{NIL}{NIL}"));
    assert_eq!(h.run("HLEN h"), int(4));
    assert_eq!(h.run("HLEN missing"), int(0));
    assert_eq!(h.run("HSTRLEN h f2"), int(2));
    assert_eq!(h.run("HSTRLEN h nope"), int(0));
    assert_eq!(h.run("HEXISTS h f3"), int(1));
    assert_eq!(h.run("HEXISTS h nope"), int(0));
    assert_eq!(h.run("HKEYS h"), arr(&["f1", "f2", "f3", "f4"]));
    assert_eq!(h.run("HVALS h"), arr(&["x", "v2", "v3", "v4"]));
    assert_eq!(
        h.run("HGETALL h"),
        arr(&["f1", "x", "f2", "v2", "f3", "v3", "f4", "v4"])
    );
    assert_eq!(h.run("HGETALL missing"), "*0\r\n");
    assert_eq!(h.run("HSETNX h f1 y"), int(0));
    assert_eq!(h.effects.dirty, 0);
    assert_eq!(h.run("HSETNX h f5 y"), int(1));
    assert_eq!(h.run("HSETNX new f y"), int(1));
    assert_eq!(h.run("HDEL h f1 nope f2"), int(2));
    assert_eq!(h.effects.dirty, 2);
    assert_eq!(h.run("HDEL new f"), int(1));
    assert_eq!(
        events(&h),
        [(EventClass::Hash, "hdel"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS new"), int(0));
    assert_eq!(h.run("HDEL missing f"), int(0));
    assert_eq!(h.run("TYPE h"), "+hash\r\n");
    assert_eq!(h.run("OBJECT ENCODING h"), bulk("listpack"));
}

#[test]
fn resp3_maps_and_nulls() {
    let mut h = Harness::resp3();
    h.run("HSET h a 1 b 2");
    assert_eq!(
        h.run("HGETALL h"),
        format!("%2\r\n{}{}{}{}", bulk("a"), bulk("1"), bulk("b"), bulk("2"))
    );
    assert_eq!(h.run("HGETALL missing"), "%0\r\n");
    assert_eq!(h.run("HKEYS missing"), "*0\r\n");
    assert_eq!(h.run("HGET h x"), NIL3);
    assert_eq!(h.run("HMGET h a x"), format!("*2\r\n{}{NIL3}", bulk("1")));
    assert_eq!(
        h.run("HRANDFIELD h 2 WITHVALUES"),
        format!(
            "*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk("a"),
            bulk("1"),
            bulk("b"),
            bulk("2")
        )
    );
    assert_eq!(h.run("HRANDFIELD missing"), NIL3);
}

#[test]
fn errors_in_redis_order() {
    let mut h = Harness::default();
    h.run("SET s x");
    assert_eq!(h.run("HSET s f v"), WRONGTYPE);
    assert_eq!(
        h.run("HSET s f v g"),
        err("ERR wrong number of arguments for 'hset' command")
    );
    assert_eq!(
        h.run("HMSET s f v g"),
        err("ERR wrong number of arguments for 'hmset' command")
    );
    assert_eq!(h.run("HGET s f"), WRONGTYPE);
    assert_eq!(h.run("HGETALL s"), WRONGTYPE);
    assert_eq!(h.run("HINCRBY s f x"), NOT_INT);
    assert_eq!(h.run("HINCRBY s f 1"), WRONGTYPE);
    assert_eq!(
        h.run("HINCRBYFLOAT s f x"),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        h.run("HINCRBYFLOAT s f inf"),
        err("ERR value is NaN or Infinity")
    );
    assert_eq!(h.run("HINCRBYFLOAT s f 1"), WRONGTYPE);
    h.run("HSET h f abc n 9223372036854775807 fl 1e4932");
    assert_eq!(
        h.run("HINCRBY h f 1"),
        err("ERR hash value is not an integer")
    );
    assert_eq!(
        h.run("HINCRBY h n 1"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(
        h.run("HINCRBYFLOAT h f 1"),
        err("ERR hash value is not a float")
    );
    assert_eq!(
        h.run("HINCRBYFLOAT h fl 1e4932"),
        err("ERR increment would produce NaN or Infinity")
    );
    assert_eq!(h.run("HRANDFIELD s 1 x"), SYNTAX);
    assert_eq!(h.run("HRANDFIELD s x"), NOT_INT);
    assert_eq!(h.run("HRANDFIELD s 1"), WRONGTYPE);
    assert_eq!(h.run("HRANDFIELD missing 1 x"), SYNTAX);
    assert_eq!(
        h.run("HRANDFIELD missing -9223372036854775808"),
        err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807")
    );
    assert_eq!(
        h.run("HRANDFIELD missing 4611686018427387904 WITHVALUES"),
        err("ERR value is out of range")
    );
    assert_eq!(
        h.run("HRANDFIELD missing 4611686018427387903 WITHVALUES"),
        "*0\r\n"
    );
    assert_eq!(h.run("HSCAN s x"), err("ERR invalid cursor"));
    assert_eq!(h.run("HSCAN s 0"), WRONGTYPE);
    assert_eq!(
        h.run("HSCAN missing 0 BADOPT"),
        format!("*2\r\n{}*0\r\n", bulk("0"))
    );
    assert_eq!(h.run("HSCAN h 0 BADOPT"), SYNTAX);
    assert_eq!(h.run("HSCAN h 0 COUNT 0"), SYNTAX);
    assert_eq!(h.run("HSCAN h 0 COUNT x"), NOT_INT);
    assert_eq!(h.run("HSCAN h 0 MATCH"), SYNTAX);
}

#[test]
fn counters() {
    let mut h = Harness::default();
    assert_eq!(h.run("HINCRBY h n 5"), int(5));
    assert_eq!(h.run("HINCRBY h n -7"), int(-2));
    assert_eq!(h.run("HGET h n"), bulk("-2"));
    assert_eq!(h.run("HINCRBYFLOAT h x 10.5"), bulk("10.5"));
    assert_eq!(h.run("HINCRBYFLOAT h x 0.1"), bulk("10.6"));
    assert_eq!(h.run("HINCRBYFLOAT h n 1.25e2"), bulk("123"));
    assert_eq!(
        h.log_of("HINCRBYFLOAT h x 1"),
        ["HSETEX h KEEPTTL FIELDS 1 x 11.6"]
    );
    assert_eq!(h.log_of("HINCRBY h n 1"), ["HINCRBY h n 1"]);
    assert_eq!(h.run("HSTRLEN h x"), int(4));
}

#[test]
fn encodings_follow_the_thresholds() {
    let mut h = Harness::default();
    h.engine.config_mut().hash_max_listpack_entries = 2;
    h.engine.config_mut().hash_max_listpack_value = 4;
    h.run("HSET a f1 v1 f2 v2");
    assert_eq!(h.run("OBJECT ENCODING a"), bulk("listpack"));
    h.run("HSET a f3 v3");
    assert_eq!(h.run("OBJECT ENCODING a"), bulk("hashtable"));
    h.run("HSET b f1 12345");
    assert_eq!(h.run("OBJECT ENCODING b"), bulk("hashtable"));
    // Redis 7.0: three pairs of one field stay a listpack (7.2+ would convert).
    h.run("HSET c x 1 x 2 x 3");
    assert_eq!(h.run("OBJECT ENCODING c"), bulk("listpack"));
    assert_eq!(h.run("HLEN c"), int(1));
    // HINCRBY's result is checked inside the set.
    h.run("HSET d n 9999");
    h.run("HINCRBY d n 1");
    assert_eq!(h.run("OBJECT ENCODING d"), bulk("hashtable"));
    // Never back.
    h.run("HDEL a f1 f2");
    assert_eq!(h.run("OBJECT ENCODING a"), bulk("hashtable"));
    // A field expiry command makes a listpack a listpackex, for good.
    h.run("HSET e f v");
    h.run("HEXPIRE e 100 FIELDS 1 nope");
    assert_eq!(h.run("OBJECT ENCODING e"), bulk("listpackex"));
    h.run("HPERSIST e FIELDS 1 f");
    assert_eq!(h.run("OBJECT ENCODING e"), bulk("listpackex"));
    h.run("HSET e g v h v");
    assert_eq!(h.run("OBJECT ENCODING e"), bulk("hashtable"));
}

#[test]
fn hrandfield_shapes() {
    let mut h = Harness::default();
    h.run("HSET h a 1 b 2 c 3");
    let one = h.run("HRANDFIELD h");
    assert!([bulk("a"), bulk("b"), bulk("c")].contains(&one), "{one}");
    assert_eq!(h.run("HRANDFIELD h 0"), "*0\r\n");
    assert_eq!(h.run("HRANDFIELD h 5"), arr(&["a", "b", "c"]));
    assert_eq!(
        h.run("HRANDFIELD h 3 WITHVALUES"),
        arr(&["a", "1", "b", "2", "c", "3"])
    );
    assert_eq!(h.run("HRANDFIELD missing 3"), "*0\r\n");
    // Negative: that many picks, repeats allowed.
    let picks = h.run("HRANDFIELD h -5 WITHVALUES");
    assert!(picks.starts_with("*10\r\n"), "{picks}");
    // Two distinct fields of three, in the hash's order (CASE 2.5).
    for _ in 0..20 {
        let two = h.run("HRANDFIELD h 2");
        assert!(
            [arr(&["a", "b"]), arr(&["a", "c"]), arr(&["b", "c"])].contains(&two),
            "{two}"
        );
    }
    // A table: CASE 3 and CASE 4 give distinct fields.
    for i in 0..300 {
        h.run(&format!("HSET t f{i} v{i}"));
    }
    assert_eq!(h.run("OBJECT ENCODING t"), bulk("hashtable"));
    for count in [5, 150] {
        let reply = h.run(&format!("HRANDFIELD t {count}"));
        let fields: std::collections::HashSet<&str> =
            reply.split("\r\n").filter(|l| l.starts_with('f')).collect();
        assert_eq!(fields.len(), count);
    }
    assert_eq!(
        h.run("HRANDFIELD t -16777217"),
        err("ERR value is out of range")
    );
}

#[test]
fn hscan_listpack_and_table() {
    let mut h = Harness::default();
    h.run("HSET h a 1 b 2 bb 3");
    assert_eq!(
        h.run("HSCAN h 0"),
        format!(
            "*2\r\n{}{}",
            bulk("0"),
            arr(&["a", "1", "b", "2", "bb", "3"])
        )
    );
    assert_eq!(
        h.run("HSCAN h 77 MATCH b* NOVALUES"),
        format!("*2\r\n{}{}", bulk("0"), arr(&["b", "bb"]))
    );
    for i in 0..500 {
        h.run(&format!("HSET t f{i} v{i}"));
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let reply = h.run(&format!("HSCAN t {cursor} COUNT 20 NOVALUES"));
        let lines: Vec<&str> = reply.split("\r\n").collect();
        cursor = lines[2].to_string();
        seen.extend(
            lines
                .iter()
                .filter(|l| l.starts_with('f'))
                .map(|l| l.to_string()),
        );
        calls += 1;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 500);
    assert!(calls >= 25, "{calls}");
}

/// Field expiry: HEXPIRE family replies, conditions, deletion by a past time, TTL
/// replies, HPERSIST, lazy expiry on access, and what gets logged.
#[test]
fn field_expiry() {
    let mut h = Harness::default();
    h.run("HSET h a 1 b 2 c 3");
    assert_eq!(h.run("HEXPIRE h 100 FIELDS 2 a nope"), ints(&[1, -2]));
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(events(&h), [(EventClass::Hash, "hexpire")]);
    let at = NOW_MS + 100_000;
    assert_eq!(
        h.log_of("HEXPIRE h 100 FIELDS 2 a nope"),
        [format!("HPEXPIREAT h {at} FIELDS 1 a")]
    );
    assert_eq!(h.run("HTTL h FIELDS 3 a b nope"), ints(&[100, -1, -2]));
    assert_eq!(h.run("HPTTL h FIELDS 1 a"), ints(&[100_000]));
    assert_eq!(
        h.run("HEXPIRETIME h FIELDS 1 a"),
        ints(&[(at as i64 + 999) / 1000])
    );
    assert_eq!(h.run("HPEXPIRETIME h FIELDS 1 a"), ints(&[at as i64]));
    assert_eq!(h.run("HTTL missing FIELDS 2 a b"), ints(&[-2, -2]));
    // NX XX GT LT (Redis 8: LT passes for a field without expiry).
    assert_eq!(h.run("HPEXPIRE h 50000 NX FIELDS 2 a b"), ints(&[0, 1]));
    assert_eq!(h.run("HPEXPIRE h 60000 XX FIELDS 2 a c"), ints(&[1, 0]));
    assert_eq!(
        h.run("HPEXPIRE h 40000 GT FIELDS 3 a b c"),
        ints(&[0, 0, 0])
    );
    assert_eq!(
        h.run("HPEXPIRE h 40000 LT FIELDS 3 a b c"),
        ints(&[1, 1, 1])
    );
    assert_eq!(h.run("HPEXPIRE h 40000 lt FIELDS 1 a"), ints(&[0]));
    // A time not in the future deletes the field.
    assert_eq!(h.log_of("HPEXPIREAT h 5 FIELDS 1 c"), ["HDEL h c"]);
    assert_eq!(h.run("HEXISTS h c"), int(0));
    assert_eq!(h.run("HPEXPIREAT h 0 FIELDS 2 a b"), ints(&[2, 2]));
    assert_eq!(
        events(&h),
        [(EventClass::Hash, "hdel"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS h"), int(0));
    // HPERSIST.
    h.run("HSET p a 1 b 2");
    assert_eq!(h.run("HPERSIST p FIELDS 2 a nope"), ints(&[-1, -2]));
    h.run("HEXPIRE p 10 FIELDS 1 a");
    assert_eq!(h.run("HPERSIST p FIELDS 2 a a"), ints(&[1, -1]));
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(h.run("HTTL p FIELDS 1 a"), ints(&[-1]));
    // Lazy expiry: readers skip, HGET deletes; the last field takes the key.
    h.run("HPEXPIRE p 10 FIELDS 1 a");
    h.now_ms += 11;
    assert_eq!(h.run("HLEN p"), int(2));
    assert_eq!(h.run("HGETALL p"), arr(&["b", "2"]));
    assert_eq!(h.run("HTTL p FIELDS 1 a"), ints(&[-2]));
    assert_eq!(h.run("HPERSIST p FIELDS 1 a"), ints(&[-2]));
    assert_eq!(h.run("HGET p a"), NIL);
    assert_eq!(events(&h), [(EventClass::Hash, "hexpired")]);
    assert_eq!(h.run("HLEN p"), int(1));
    h.run("HPEXPIRE p 10 FIELDS 1 b");
    h.now_ms += 11;
    assert_eq!(h.run("HMGET p b x"), format!("*2\r\n{NIL}{NIL}"));
    assert_eq!(
        events(&h),
        [(EventClass::Hash, "hexpired"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS p"), int(0));
    // HSET on a field clears its expiry; HINCRBY keeps it.
    h.run("HSET q a 1 n 1");
    h.run("HEXPIRE q 100 FIELDS 2 a n");
    h.run("HSET q a 2");
    h.run("HINCRBY q n 2");
    assert_eq!(h.run("HTTL q FIELDS 2 a n"), ints(&[-1, 100]));
    // HRANDFIELD removes expired fields first.
    h.run("HSET r a 1");
    h.run("HPEXPIRE r 1 FIELDS 1 a");
    h.now_ms += 2;
    assert_eq!(h.run("HRANDFIELD r"), NIL);
    assert_eq!(h.run("EXISTS r"), int(0));
}

#[test]
fn field_expiry_errors() {
    let mut h = Harness::default();
    h.run("SET s x");
    h.run("HSET h a 1");
    assert_eq!(h.run("HEXPIRE s 10 FIELDS 1 a"), WRONGTYPE);
    assert_eq!(h.run("HEXPIRE s x FIELDS 1 a"), WRONGTYPE);
    assert_eq!(h.run("HEXPIRE h x FIELDS 1 a"), NOT_INT);
    assert_eq!(
        h.run("HEXPIRE h -1 FIELDS 1 a"),
        err("ERR invalid expire time, must be >= 0")
    );
    assert_eq!(
        h.run("HEXPIRE h 70368744177 FIELDS 1 a"),
        err("ERR invalid expire time in 'hexpire' command")
    );
    assert_eq!(
        h.run("HPEXPIREAT h 70368744177664 FIELDS 1 a"),
        err("ERR invalid expire time in 'hpexpireat' command")
    );
    assert_eq!(h.run("HPEXPIREAT h 70368744177663 FIELDS 1 a"), ints(&[1]));
    assert_eq!(h.run("HEXPIRE h 10 NX XX FIELDS 1 a"), FIELDS_MISSING);
    assert_eq!(h.run("HEXPIRE h 10 FIELD 1 a"), FIELDS_MISSING);
    assert_eq!(
        h.run("HEXPIRE h 10 FIELDS 0 a"),
        err("ERR Parameter `numFields` should be greater than 0")
    );
    assert_eq!(h.run("HEXPIRE h 10 FIELDS 2 a"), NUMFIELDS_MISMATCH);
    assert_eq!(h.run("HEXPIRE missing 10 FIELDS 2 a b"), ints(&[-2, -2]));
    assert_eq!(h.run("HTTL s FIELDS 1 a"), WRONGTYPE);
    assert_eq!(h.run("HTTL h FIELDS x a"), NUMFIELDS_POSITIVE);
    assert_eq!(h.run("HTTL h FIELDS 2 a"), NUMFIELDS_MISMATCH);
    assert_eq!(h.run("HTTL h NOPE 1 a"), FIELDS_MISSING);
    assert_eq!(h.run("HPERSIST h FIELDS -1 a"), NUMFIELDS_POSITIVE);
    assert_eq!(h.run("HGETDEL h FIELDS 2 a"), NUMFIELDS_MISMATCH);
    assert_eq!(h.run("HGETDEL s FIELDS 1 a"), WRONGTYPE);
    assert_eq!(h.run("HGETEX h EX x FIELDS 1 a"), NOT_INT);
    assert_eq!(h.run("HGETEX h EX 10 NOPE 1 a"), FIELDS_MISSING);
    assert_eq!(h.run("HGETEX h PERSIST FIELDS 0"), NUMFIELDS_POSITIVE);
    assert_eq!(
        h.run("HGETEX h EX 10 FIELDS"),
        err("ERR wrong number of arguments for 'hgetex' command")
    );
    assert_eq!(
        h.run("HSETEX h FIELDS 1 a"),
        err("ERR wrong number of arguments for 'hsetex' command")
    );
    assert_eq!(
        h.run("HSETEX h FIELDS 2 a 1"),
        err("ERR wrong number of arguments for 'hsetex' command")
    );
    assert_eq!(
        h.run("HSETEX h FIELDS 0 a 1"),
        err("ERR invalid number of fields")
    );
    assert_eq!(
        h.run("HSETEX h FNX FXX FIELDS 1 a 1"),
        err("ERR Only one of FXX or FNX arguments can be specified")
    );
    assert_eq!(
        h.run("HSETEX h EX 10 KEEPTTL FIELDS 1 a 1"),
        err("ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified")
    );
    assert_eq!(
        h.run("HSETEX h EX -5 FIELDS 1 a 1"),
        err("ERR invalid expire time, must be >= 0")
    );
    assert_eq!(
        h.run("HSETEX h BOGUS FIELDS 1 a 1"),
        err("ERR unknown argument: BOGUS")
    );
    // HSETEX parses before it looks at the key.
    assert_eq!(
        h.run("HSETEX s BOGUS FIELDS 1 a 1"),
        err("ERR unknown argument: BOGUS")
    );
    assert_eq!(h.run("HSETEX s FIELDS 1 a 1"), WRONGTYPE);
}

#[test]
fn hgetdel_hgetex_hsetex() {
    let mut h = Harness::default();
    h.run("HSET h a 1 b 2 c 3");
    assert_eq!(
        h.run("HGETDEL h FIELDS 2 a nope"),
        format!("*2\r\n{}{NIL}", bulk("1"))
    );
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(h.log_of("HGETDEL h FIELDS 2 b b"), ["HDEL h b b"]);
    assert_eq!(
        h.run("HGETDEL h FIELDS 1 c"),
        format!("*1\r\n{}", bulk("3"))
    );
    assert_eq!(
        events(&h),
        [(EventClass::Hash, "hdel"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS h"), int(0));
    assert_eq!(h.run("HGETDEL h FIELDS 1 c"), format!("*1\r\n{NIL}"));
    // HGETEX.
    h.run("HSET g a 1 b 2");
    assert_eq!(
        h.run("HGETEX g FIELDS 2 a x"),
        format!("*2\r\n{}{NIL}", bulk("1"))
    );
    assert_eq!(h.run("OBJECT ENCODING g"), bulk("listpack"));
    assert_eq!(h.run("HGETEX g PERSIST FIELDS 1 x"), format!("*1\r\n{NIL}"));
    assert_eq!(h.run("OBJECT ENCODING g"), bulk("listpackex"));
    let at = NOW_MS + 5000;
    assert_eq!(
        h.log_of("HGETEX g PX 5000 FIELDS 1 a"),
        [format!("HPEXPIREAT g {at} FIELDS 1 a")]
    );
    assert_eq!(h.run("HPTTL g FIELDS 2 a b"), ints(&[5000, -1]));
    assert_eq!(
        h.log_of("HGETEX g PERSIST FIELDS 2 a b"),
        ["HPERSIST g FIELDS 2 a b"]
    );
    assert_eq!(h.run("HPTTL g FIELDS 1 a"), ints(&[-1]));
    assert_eq!(h.log_of("HGETEX g EXAT 1 FIELDS 1 a"), ["HDEL g a"]);
    assert_eq!(
        h.run("HGETEX g EXAT 1 FIELDS 1 b"),
        format!("*1\r\n{}", bulk("2"))
    );
    assert_eq!(h.run("EXISTS g"), int(0));
    assert_eq!(h.run("HGETEX g EX 10 FIELDS 1 b"), format!("*1\r\n{NIL}"));
    // HSETEX.
    assert_eq!(h.run("HSETEX x FXX FIELDS 1 a 1"), int(0));
    assert_eq!(h.run("EXISTS x"), int(0));
    assert_eq!(h.run("HSETEX x FNX FIELDS 2 a 1 b 2"), int(1));
    assert_eq!(h.effects.dirty, 2);
    assert_eq!(h.run("HSETEX x FNX FIELDS 2 c 1 b 2"), int(0));
    assert_eq!(h.run("HSETEX x FXX FIELDS 2 a 9 c 2"), int(0));
    let at = NOW_MS + 10_000;
    assert_eq!(
        h.log_of("HSETEX x FXX EX 10 FIELDS 2 a 9 b 8"),
        [format!("HSETEX x FXX PXAT {at} FIELDS 2 a 9 b 8")]
    );
    assert_eq!(h.run("HTTL x FIELDS 2 a b"), ints(&[10, 10]));
    assert_eq!(h.run("HSETEX x KEEPTTL FIELDS 1 a 7"), int(1));
    assert_eq!(h.run("HTTL x FIELDS 1 a"), ints(&[10]));
    assert_eq!(h.run("HSETEX x FIELDS 1 a 6"), int(1));
    assert_eq!(h.run("HTTL x FIELDS 1 a"), ints(&[-1]));
    assert_eq!(h.run("HGETALL x"), arr(&["b", "8", "a", "6"]));
    assert_eq!(
        h.log_of("HSETEX x PXAT 1 FIELDS 2 a 1 b 2"),
        ["HDEL x a", "HDEL x b"]
    );
    assert_eq!(h.run("EXISTS x"), int(0));
    // FNX sees expired fields as missing, and removes them.
    h.run("HSETEX y PX 10 FIELDS 1 a 1");
    h.now_ms += 11;
    assert_eq!(h.run("HSETEX y FNX FIELDS 1 a 2"), int(1));
    assert_eq!(h.run("HGET y a"), bulk("2"));
}

#[test]
fn active_expiry_removes_fields_and_empty_hashes() {
    let mut h = Harness::default();
    h.run("HSET small a 1 b 2");
    for i in 0..200 {
        h.run(&format!("HSET big f{i} v"));
    }
    h.run("HPEXPIRE small 10 FIELDS 2 a b");
    for i in 0..150 {
        h.run(&format!("HPEXPIRE big {} FIELDS 1 f{i}", 10 + i));
    }
    h.now_ms += 100;
    let mut rounds = 0;
    while h.engine.active_expire_cycle(h.now_ms, 20) > 0 {
        rounds += 1;
        assert!(rounds < 100);
    }
    assert_eq!(h.run("EXISTS small"), int(0));
    assert_eq!(h.run("HLEN big"), int(110));
    assert_eq!(h.engine.stats().expired_fields, 92);
    h.now_ms += 1000;
    while h.engine.active_expire_cycle(h.now_ms, 1000) > 0 {}
    assert_eq!(h.run("HLEN big"), int(50));
    assert_eq!(h.run("HTTL big FIELDS 1 f199"), ints(&[-1]));
}

#[test]
fn copy_rename_and_lazy_free_keep_hashes_whole() {
    let mut h = Harness::default();
    for i in 0..5000 {
        h.run(&format!("HSET big f{i} {}", "v".repeat(20)));
    }
    h.run("HPEXPIRE big 10 FIELDS 2 f1 f2");
    assert_eq!(h.run("COPY big copy"), int(1));
    assert_eq!(h.run("RENAME big moved"), OK);
    assert_eq!(h.run("HLEN copy"), int(5000));
    assert_eq!(h.run("HPTTL moved FIELDS 2 f1 f3"), ints(&[10, -1]));
    h.now_ms += 20;
    while h.engine.active_expire_cycle(h.now_ms, 100) > 0 {}
    assert_eq!(h.run("HLEN moved"), int(4998));
    assert_eq!(h.run("HLEN copy"), int(4998));
    assert_eq!(h.run("DEL moved copy"), int(2));
    for _ in 0..1000 {
        h.engine.active_expire_cycle(h.now_ms, 10);
    }
    assert!(
        h.engine.used_memory_bytes() < 100_000,
        "{}",
        h.engine.used_memory_bytes()
    );
}

// ---- against a real server ----------------------------------------------------

/// A parsed RESP2 reply, for the comparisons that ignore order.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Resp {
    Line(Vec<u8>),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Resp>>),
}

fn parse_resp(bytes: &[u8], at: &mut usize) -> Resp {
    let end = *at + bytes[*at..].windows(2).position(|w| w == b"\r\n").unwrap();
    let line = &bytes[*at..end];
    *at = end + 2;
    let n = || {
        std::str::from_utf8(&line[1..])
            .unwrap()
            .parse::<i64>()
            .unwrap()
    };
    match line[0] {
        b'$' if n() < 0 => Resp::Bulk(None),
        b'$' => {
            let len = n() as usize;
            let body = bytes[*at..*at + len].to_vec();
            *at += len + 2;
            Resp::Bulk(Some(body))
        }
        b'*' if n() < 0 => Resp::Array(None),
        b'*' => Resp::Array(Some((0..n()).map(|_| parse_resp(bytes, at)).collect())),
        b'%' => Resp::Array(Some((0..2 * n()).map(|_| parse_resp(bytes, at)).collect())),
        b'_' => Resp::Bulk(None),
        _ => Resp::Line(line.to_vec()),
    }
}

fn resp(bytes: &[u8]) -> Resp {
    parse_resp(bytes, &mut 0)
}

/// The items of an array reply (empty for anything else).
fn items(r: &Resp) -> Vec<Resp> {
    match r {
        Resp::Array(Some(v)) => v.clone(),
        _ => Vec::new(),
    }
}

/// Random hash commands (and the generic ones that meet hashes) against a running
/// server and the engine, reply bytes compared one by one; where a hashtable's order
/// is its own (HKEYS, HVALS, HGETALL), as multisets; HRANDFIELD by shape and
/// membership; HSCAN by iterating both to the end. Thresholds move now and then.
/// Run with `RUVIO_COMPARE_PORT=<port> cargo test -p ruvio-engine --test hashes --
/// --ignored` against Redis 7.x (commands Redis 7.0 has); `RUVIO_COMPARE_SEED` picks
/// another run, `RUVIO_COMPARE_RESP3=1` speaks RESP3.
#[test]
#[ignore = "needs a server: RUVIO_COMPARE_PORT"]
fn matches_a_real_server() {
    let Some(mut real) = RealServer::from_env() else {
        return;
    };
    let mut server = |args: &[Vec<u8>]| real.call(args);
    let word = |s: &str| s.as_bytes().to_vec();

    let mut rand = compare_rand();
    let mut h = Harness::default();
    fn both(
        h: &mut Harness,
        server: &mut dyn FnMut(&[Vec<u8>]) -> Vec<u8>,
        args: &[Vec<u8>],
    ) -> (Vec<u8>, Vec<u8>) {
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        (h.run_args(&refs), server(args))
    }
    if std::env::var("RUVIO_COMPARE_RESP3").is_ok() {
        server(&[word("HELLO"), word("3")]);
        h.proto = ruvio_resp::Protocol::Resp3;
    }
    both(&mut h, &mut server, &[word("FLUSHALL")]);
    for (name, default) in [
        ("hash-max-listpack-entries", "128"),
        ("hash-max-listpack-value", "64"),
    ] {
        server(&[word("CONFIG"), word("SET"), word(name), word(default)]);
    }
    both(&mut h, &mut server, &[word("SET"), word("s"), word("x")]);
    let keys = ["h1", "h2", "h3", "s"];
    let mut history: Vec<String> = Vec::new();
    let show = |args: &[Vec<u8>]| {
        args.iter()
            .map(|a| String::from_utf8_lossy(&a[..a.len().min(20)]).into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    };
    for _step in 0..30_000 {
        let key = |rand: &mut dyn FnMut(u64) -> u64| {
            keys[(rand(13) as usize).min(12) / 4].as_bytes().to_vec()
        };
        let field = |rand: &mut dyn FnMut(u64) -> u64| -> Vec<u8> {
            match rand(12) {
                0 => vec![b'F'; 60 + rand(10) as usize],
                1 => rand(20).to_string().into_bytes(),
                2 => Vec::new(),
                _ => format!("f{}", rand(12)).into_bytes(),
            }
        };
        let value = |rand: &mut dyn FnMut(u64) -> u64| -> Vec<u8> {
            match rand(10) {
                0 => vec![b'V'; 60 + rand(10) as usize],
                1 => (rand(2000) as i64 - 1000).to_string().into_bytes(),
                2 => b"1.5".to_vec(),
                3 => b"007".to_vec(),
                4 => b"9223372036854775806".to_vec(),
                _ => vec![b'a' + rand(3) as u8; rand(8) as usize],
            }
        };
        let mut argv: Vec<Vec<u8>> = Vec::new();
        match rand(24) {
            0..=4 => {
                argv.push(word(["HSET", "HMSET"][rand(2) as usize]));
                argv.push(key(&mut rand));
                for _ in 0..1 + rand(4) {
                    argv.push(field(&mut rand));
                    argv.push(value(&mut rand));
                }
                if rand(30) == 0 {
                    argv.pop();
                }
            }
            5 => argv.extend([
                word("HSETNX"),
                key(&mut rand),
                field(&mut rand),
                value(&mut rand),
            ]),
            6 => argv.extend([word("HGET"), key(&mut rand), field(&mut rand)]),
            7 => {
                argv.extend([word("HMGET"), key(&mut rand)]);
                for _ in 0..1 + rand(3) {
                    argv.push(field(&mut rand));
                }
            }
            8 | 9 => {
                argv.extend([word("HDEL"), key(&mut rand)]);
                for _ in 0..1 + rand(3) {
                    argv.push(field(&mut rand));
                }
            }
            10 => argv.extend([word("HLEN"), key(&mut rand)]),
            11 => argv.extend([word("HSTRLEN"), key(&mut rand), field(&mut rand)]),
            12 => argv.extend([word("HEXISTS"), key(&mut rand), field(&mut rand)]),
            13 | 14 => argv.extend([
                word(["HKEYS", "HVALS", "HGETALL"][rand(3) as usize]),
                key(&mut rand),
            ]),
            15 => {
                let incr = [
                    b"1".to_vec(),
                    b"-3".to_vec(),
                    b"x".to_vec(),
                    b"9223372036854775807".to_vec(),
                ];
                argv.extend([
                    word("HINCRBY"),
                    key(&mut rand),
                    field(&mut rand),
                    incr[rand(4) as usize].clone(),
                ]);
            }
            16 => {
                let incr = [
                    b"1.5".to_vec(),
                    b"-0.25".to_vec(),
                    b"x".to_vec(),
                    b"inf".to_vec(),
                    b"1e3".to_vec(),
                ];
                argv.extend([
                    word("HINCRBYFLOAT"),
                    key(&mut rand),
                    field(&mut rand),
                    incr[rand(5) as usize].clone(),
                ]);
            }
            17 | 18 => {
                argv.extend([word("HRANDFIELD"), key(&mut rand)]);
                if rand(4) != 0 {
                    argv.push((rand(30) as i64 - 10).to_string().into_bytes());
                    if rand(2) == 0 {
                        argv.push(word(["WITHVALUES", "withvalues", "bad"][rand(3) as usize]));
                    }
                }
            }
            19 => argv.extend([
                word("HSCAN"),
                key(&mut rand),
                word("0"),
                word("COUNT"),
                (1 + rand(5)).to_string().into_bytes(),
            ]),
            20 => argv.extend([word(["OBJECT"][0]), word("ENCODING"), key(&mut rand)]),
            21 => argv.extend([
                word(["DEL", "TYPE", "EXISTS"][rand(3) as usize]),
                key(&mut rand),
            ]),
            22 => {
                let (name, choices): (&str, &[&str]) = if rand(2) == 0 {
                    (
                        "hash-max-listpack-entries",
                        &["0", "1", "2", "4", "8", "128"],
                    )
                } else {
                    ("hash-max-listpack-value", &["0", "1", "4", "8", "64"])
                };
                let v = choices[rand(choices.len() as u64) as usize];
                argv.extend([word("CONFIG"), word("SET"), word(name), word(v)]);
                server(&argv);
                let n: usize = v.parse().unwrap();
                if name.ends_with("entries") {
                    h.engine.config_mut().hash_max_listpack_entries = n;
                } else {
                    h.engine.config_mut().hash_max_listpack_value = n;
                }
                history.push(show(&argv));
                continue;
            }
            _ => argv.extend([
                word("COPY"),
                key(&mut rand),
                key(&mut rand),
                word("REPLACE"),
            ]),
        }
        history.push(show(&argv));
        let context = || history[history.len().saturating_sub(12)..].join("\n");
        let name = String::from_utf8_lossy(&argv[0]).to_ascii_uppercase();
        if name == "HSCAN" {
            let mut sets = Vec::new();
            for side in 0..2 {
                let mut seen = std::collections::BTreeSet::new();
                let mut cursor = b"0".to_vec();
                loop {
                    let mut call = argv.clone();
                    call[2] = cursor.clone();
                    let refs: Vec<&[u8]> = call.iter().map(Vec::as_slice).collect();
                    let out = if side == 0 {
                        h.run_args(&refs)
                    } else {
                        server(&call)
                    };
                    let reply = resp(&out);
                    let parts = items(&reply);
                    if parts.len() != 2 {
                        seen.insert(vec![reply]);
                        break;
                    }
                    for pair in items(&parts[1]).chunks(2) {
                        seen.insert(pair.to_vec());
                    }
                    match &parts[0] {
                        Resp::Bulk(Some(c)) if c != b"0" => cursor = c.clone(),
                        _ => break,
                    }
                }
                sets.push(seen);
            }
            assert_eq!(sets[0], sets[1], "HSCAN differs after:\n{}", context());
            continue;
        }
        let (ours, theirs) = both(&mut h, &mut server, &argv);
        let encoding = server(&[
            word("OBJECT"),
            word("ENCODING"),
            argv.get(1).cloned().unwrap_or_default(),
        ]);
        let table = encoding.windows(9).any(|w| w == b"hashtable");
        match name.as_str() {
            "HKEYS" | "HVALS" | "HGETALL" if table => {
                let chunk = if name == "HGETALL" { 2 } else { 1 };
                let sorted = |b: &[u8]| {
                    let mut v: Vec<Vec<Resp>> = items(&resp(b))
                        .chunks(chunk)
                        .map(<[Resp]>::to_vec)
                        .collect();
                    v.sort();
                    v
                };
                assert_eq!(
                    sorted(&ours),
                    sorted(&theirs),
                    "{name} differs after:\n{}",
                    context()
                );
            }
            "HRANDFIELD" => {
                let (a, b) = (resp(&ours), resp(&theirs));
                match (&a, &b) {
                    (Resp::Array(Some(x)), Resp::Array(Some(y))) => {
                        assert_eq!(x.len(), y.len(), "HRANDFIELD length after:\n{}", context());
                        let hlen = resp(&h.run_args(&[b"HLEN", &argv[1]]));
                        let count: i64 = std::str::from_utf8(&argv[2]).unwrap().parse().unwrap();
                        let withvalues = argv.len() == 4;
                        // RESP3 nests each pair; flatten to RESP2's shape.
                        let flat: Vec<Resp> = x
                            .iter()
                            .flat_map(|i| match i {
                                Resp::Array(Some(pair)) => pair.clone(),
                                other => vec![other.clone()],
                            })
                            .collect();
                        let picks: Vec<Vec<Resp>> = flat
                            .chunks(if withvalues { 2 } else { 1 })
                            .map(<[Resp]>::to_vec)
                            .collect();
                        for p in &picks {
                            let Resp::Bulk(Some(f)) = &p[0] else {
                                panic!("{p:?}")
                            };
                            let got = resp(&h.run_args(&[b"HGET", &argv[1], f]));
                            assert_ne!(
                                got,
                                Resp::Bulk(None),
                                "HRANDFIELD picked a missing field after:\n{}",
                                context()
                            );
                            if withvalues {
                                assert_eq!(got, p[1]);
                            }
                        }
                        if count > 0 {
                            let distinct: std::collections::BTreeSet<_> = picks.iter().collect();
                            assert_eq!(
                                distinct.len(),
                                picks.len(),
                                "repeats after:\n{}",
                                context()
                            );
                        }
                        let _ = hlen;
                    }
                    (Resp::Bulk(Some(_)), Resp::Bulk(Some(_))) => {}
                    _ => assert_eq!(ours, theirs, "HRANDFIELD differs after:\n{}", context()),
                }
            }
            _ => assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "{name} differs after:\n{}",
                context()
            ),
        }
        if argv.len() > 1
            && keys.contains(&std::str::from_utf8(&argv[1]).unwrap_or(""))
            && rand(4) == 0
        {
            let probe = [word("OBJECT"), word("ENCODING"), argv[1].clone()];
            let (a, b) = both(&mut h, &mut server, &probe);
            assert_eq!(
                String::from_utf8_lossy(&a),
                String::from_utf8_lossy(&b),
                "encoding differs after:\n{}",
                context()
            );
        }
    }
}

/// The write-ahead log record of every hash write, and none for a no-op: relative
/// field TTLs become absolute, floats their result.
#[test]
fn every_hash_write_logs_a_deterministic_record() {
    let mut h = Harness::default();
    let at = (NOW_MS + 100_000).to_string();
    let cases: Vec<(&str, Vec<String>)> = vec![
        ("HSET h a 1 b 2", vec!["HSET h a 1 b 2".into()]),
        ("HSET h a 1", vec!["HSET h a 1".into()]),
        ("HSETNX h a 9", vec![]),
        ("HSETNX h c 3", vec!["HSETNX h c 3".into()]),
        ("HMSET h d 4", vec!["HMSET h d 4".into()]),
        ("HDEL h nope", vec![]),
        ("HDEL h d", vec!["HDEL h d".into()]),
        ("HINCRBY h n 5", vec!["HINCRBY h n 5".into()]),
        (
            "HEXPIRE h 100 FIELDS 1 a",
            vec![format!("HPEXPIREAT h {at} FIELDS 1 a")],
        ),
        (
            "HPEXPIRE h 100000 FIELDS 1 b",
            vec![format!("HPEXPIREAT h {at} FIELDS 1 b")],
        ),
        ("HEXPIREAT nope 100 FIELDS 1 a", vec![]),
        (
            "HPERSIST h FIELDS 1 b",
            vec!["HPERSIST h FIELDS 1 b".into()],
        ),
        ("HPERSIST h FIELDS 1 b", vec![]),
    ];
    for (line, want) in cases {
        assert_eq!(h.log_of(line), want, "{line}");
    }
    let float = h.log_of("HINCRBYFLOAT h f 1.5");
    assert_eq!(float, ["HSETEX h KEEPTTL FIELDS 1 f 1.5"]);
    for line in [
        "HGETDEL h FIELDS 1 c",
        "HGETEX h PX 100000 FIELDS 1 n",
        "HSETEX h PX 100000 FIELDS 1 x 1",
    ] {
        let records = h.log_of(line);
        assert!(
            !records.is_empty() && !records.iter().any(|r| r.contains(" PX ")),
            "{line}: {records:?}"
        );
    }
    assert!(h.log_of("HGETDEL h FIELDS 1 nope").is_empty());
}
