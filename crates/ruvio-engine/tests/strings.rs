//! The string family, command by command: request in, exact RESP bytes out.

mod common;

use common::*;
use ruvio_engine::Engine;

#[test]
fn run_helper_works_on_a_plain_engine() {
    let mut engine = Engine::new(16);
    assert_eq!(run(&mut engine, "SET k v EX 10"), OK);
    assert_eq!(run(&mut engine, "GET k"), bulk("v"));
}

#[test]
fn get_and_set_basics() {
    let mut h = Harness::default();
    assert_eq!(h.run("GET missing"), NIL);
    assert_eq!(h.run("SET foo bar"), OK);
    assert_eq!(h.run("GET foo"), bulk("bar"));
    assert_eq!(h.run("SET foo \"\""), OK);
    assert_eq!(h.run("GET foo"), bulk(""));
    assert_eq!(h.run("SET n 12345"), OK);
    assert_eq!(h.run("GET n"), bulk("12345"));
    assert_eq!(
        h.run("GET"),
        err("ERR wrong number of arguments for 'get' command")
    );
    let big = "x".repeat(1000);
    assert_eq!(h.run(&format!("SET big {big}")), OK);
    assert_eq!(h.run("GET big"), bulk(&big));
}

#[test]
fn set_nx_xx_get() {
    let mut h = Harness::default();
    assert_eq!(h.run("SET k v1 XX"), NIL);
    assert_eq!(h.run("SET k v1 NX"), OK);
    assert_eq!(h.run("SET k v2 NX"), NIL);
    assert_eq!(h.run("SET k v2 XX"), OK);
    assert_eq!(h.run("SET k v3 GET"), bulk("v2"));
    assert_eq!(h.run("SET new v GET"), NIL);
    assert_eq!(h.run("GET new"), bulk("v"));
    // Redis 7.0 allows NX with GET: the old value comes back and nothing is set.
    assert_eq!(h.run("SET k v4 NX GET"), bulk("v3"));
    assert_eq!(h.run("GET k"), bulk("v3"));
    assert_eq!(h.run("SET k v NX XX"), SYNTAX);
    assert_eq!(h.run("SET k v XX NX"), SYNTAX);
    assert_eq!(h.run("SET k v foo"), SYNTAX);
    assert_eq!(h.run("set k v nx"), NIL);
}

#[test]
fn set_expire_options() {
    let mut h = Harness::default();
    assert_eq!(h.run("SET k v EX 10"), OK);
    assert_eq!(h.run("PTTL k"), int(10_000));
    assert_eq!(h.run("SET k v PX 1500"), OK);
    assert_eq!(h.run("PTTL k"), int(1500));
    assert_eq!(h.run("TTL k"), int(2));
    let at = NOW_MS / 1000 + 100;
    assert_eq!(h.run(&format!("SET k v EXAT {at}")), OK);
    assert_eq!(h.run("EXPIRETIME k"), int(at as i64));
    assert_eq!(h.run(&format!("SET k v PXAT {}", NOW_MS + 5)), OK);
    assert_eq!(h.run("PTTL k"), int(5));
    assert_eq!(h.run("SET k v2 KEEPTTL"), OK);
    assert_eq!(h.run("PTTL k"), int(5));
    assert_eq!(h.run("SET k v3"), OK);
    assert_eq!(h.run("PTTL k"), int(-1));
    // The same option twice is fine (the last wins); two kinds are not.
    assert_eq!(h.run("SET k v EX 1 EX 2"), OK);
    assert_eq!(h.run("TTL k"), int(2));
    assert_eq!(h.run("SET k v EX 1 PX 2"), SYNTAX);
    assert_eq!(h.run("SET k v EX 10 KEEPTTL"), SYNTAX);
    assert_eq!(h.run("SET k v KEEPTTL EX 10"), SYNTAX);
    assert_eq!(h.run("SET k v EX"), SYNTAX);
    assert_eq!(h.run("SET k v PERSIST"), SYNTAX);
    assert_eq!(
        h.run("SET k v EX 0"),
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(
        h.run("SET k v PX -5"),
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(
        h.run("SET k v EX 9223372036854775"),
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(
        h.run("SET k v PX 9223372036854775807"),
        err("ERR invalid expire time in 'set' command")
    );
    assert_eq!(h.run("SET k v EX abc"), NOT_INT);
    // The expire error wins over NX/XX outcomes.
    assert_eq!(
        h.run("SET k v NX EX 0"),
        err("ERR invalid expire time in 'set' command")
    );
}

#[test]
fn keys_expire_lazily() {
    let mut h = Harness::default();
    assert_eq!(h.run("SET k v PX 100"), OK);
    h.now_ms += 100;
    assert_eq!(h.run("GET k"), bulk("v"));
    h.now_ms += 1;
    assert_eq!(h.run("GET k"), NIL);
    assert_eq!(h.engine.stats().expired_keys, 1);
    assert_eq!(h.run("DBSIZE"), int(0));
}

#[test]
fn setnx_setex_psetex_getset() {
    let mut h = Harness::default();
    assert_eq!(h.run("SETNX k a"), int(1));
    assert_eq!(h.run("SETNX k b"), int(0));
    assert_eq!(h.run("GET k"), bulk("a"));
    assert_eq!(h.run("SETEX k 100 v"), OK);
    assert_eq!(h.run("TTL k"), int(100));
    assert_eq!(
        h.run("SETEX k 0 v"),
        err("ERR invalid expire time in 'setex' command")
    );
    assert_eq!(h.run("SETEX k x v"), NOT_INT);
    assert_eq!(h.run("PSETEX k 2500 v"), OK);
    assert_eq!(h.run("PTTL k"), int(2500));
    assert_eq!(
        h.run("PSETEX k -1 v"),
        err("ERR invalid expire time in 'psetex' command")
    );
    assert_eq!(h.run("GETSET k new"), bulk("v"));
    assert_eq!(h.run("TTL k"), int(-1));
    assert_eq!(h.run("GETSET other x"), NIL);
    assert_eq!(h.run("GET other"), bulk("x"));
}

#[test]
fn mset_msetnx_mget() {
    let mut h = Harness::default();
    assert_eq!(h.run("MSET a 1 b 2"), OK);
    assert_eq!(h.run("MGET a b c"), "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n");
    assert_eq!(
        h.run("MSET a 1 b"),
        err("ERR wrong number of arguments for 'mset' command")
    );
    assert_eq!(h.run("MSETNX c 3 a 9"), int(0));
    assert_eq!(h.run("GET c"), NIL);
    assert_eq!(h.run("MSETNX c 3 d 4"), int(1));
    assert_eq!(
        h.run("MGET c d a"),
        "*3\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n1\r\n"
    );
    assert_eq!(
        h.run("MSETNX c"),
        err("ERR wrong number of arguments for 'msetnx' command")
    );
    let mut h3 = Harness::resp3();
    assert_eq!(h3.run("MGET nope"), "*1\r\n_\r\n");
}

#[test]
fn getdel_and_getex() {
    let mut h = Harness::default();
    assert_eq!(h.run("GETDEL k"), NIL);
    assert_eq!(h.run("SET k v"), OK);
    assert_eq!(h.run("GETDEL k"), bulk("v"));
    assert_eq!(h.run("EXISTS k"), int(0));
    assert_eq!(h.run("GETEX k"), NIL);
    assert_eq!(h.run("SET k v"), OK);
    assert_eq!(h.run("GETEX k EX 50"), bulk("v"));
    assert_eq!(h.run("TTL k"), int(50));
    assert_eq!(h.run("GETEX k PX 1234"), bulk("v"));
    assert_eq!(h.run("PTTL k"), int(1234));
    assert_eq!(h.run("GETEX k PERSIST"), bulk("v"));
    assert_eq!(h.run("TTL k"), int(-1));
    assert_eq!(
        h.run(&format!("GETEX k EXAT {}", NOW_MS / 1000 + 10)),
        bulk("v")
    );
    assert_eq!(h.run("TTL k"), int(10));
    // An absolute time already past deletes the key after replying.
    assert_eq!(h.run(&format!("GETEX k PXAT {}", NOW_MS - 1)), bulk("v"));
    assert_eq!(h.run("EXISTS k"), int(0));
    assert_eq!(h.run("SET k v"), OK);
    assert_eq!(
        h.run("GETEX k EX 0"),
        err("ERR invalid expire time in 'getex' command")
    );
    assert_eq!(h.run("GETEX k EX 10 PERSIST"), SYNTAX);
    assert_eq!(h.run("GETEX k KEEPTTL"), SYNTAX);
    assert_eq!(h.run("GETEX k NX"), SYNTAX);
    // Options are checked before the key; the expire value only when the key exists.
    assert_eq!(h.run("GETEX missing EX 0"), NIL);
    assert_eq!(h.run("GETEX missing FOO"), SYNTAX);
}

#[test]
fn append_strlen_getrange() {
    let mut h = Harness::default();
    assert_eq!(h.run("APPEND k Hello"), int(5));
    assert_eq!(h.run("APPEND k \" World\""), int(11));
    assert_eq!(h.run("GET k"), bulk("Hello World"));
    assert_eq!(h.run("STRLEN k"), int(11));
    assert_eq!(h.run("STRLEN nope"), int(0));
    assert_eq!(h.run("GETRANGE k 0 4"), bulk("Hello"));
    assert_eq!(h.run("GETRANGE k -5 -1"), bulk("World"));
    assert_eq!(h.run("GETRANGE k 6 1000"), bulk("World"));
    assert_eq!(h.run("GETRANGE k 5 3"), bulk(""));
    assert_eq!(h.run("GETRANGE nope 0 -1"), bulk(""));
    assert_eq!(h.run("GETRANGE k a 1"), NOT_INT);
    assert_eq!(h.run("SUBSTR k 0 0"), bulk("H"));
    assert_eq!(h.run("SET n 12345"), OK);
    assert_eq!(h.run("GETRANGE n 1 2"), bulk("23"));
    assert_eq!(h.run("STRLEN n"), int(5));
    assert_eq!(h.run("APPEND n 6"), int(6));
    assert_eq!(h.run("GET n"), bulk("123456"));
    for _ in 0..100 {
        h.run("APPEND grow 0123456789");
    }
    assert_eq!(h.run("STRLEN grow"), int(1000));
}

#[test]
fn setrange() {
    let mut h = Harness::default();
    assert_eq!(h.run("SETRANGE k 0 \"\""), int(0));
    assert_eq!(h.run("EXISTS k"), int(0));
    assert_eq!(h.run("SETRANGE k 5 abc"), int(8));
    assert_eq!(h.run("GET k"), bulk("\0\0\0\0\0abc"));
    assert_eq!(h.run("SET k \"Hello World\""), OK);
    assert_eq!(h.run("SETRANGE k 6 Redis"), int(11));
    assert_eq!(h.run("GET k"), bulk("Hello Redis"));
    assert_eq!(h.run("SETRANGE k 0 \"\""), int(11));
    assert_eq!(h.run("SETRANGE k -1 x"), err("ERR offset is out of range"));
    assert_eq!(h.run("SETRANGE k x x"), NOT_INT);
    assert_eq!(
        h.run("SETRANGE k 536870911 xx"),
        err("ERR string exceeds maximum allowed size (proto-max-bulk-len)")
    );
    assert_eq!(h.run("DEL k"), int(1));
    assert_eq!(h.run("SETRANGE k 100 x"), int(101));
    assert_eq!(h.run("GETRANGE k 99 100"), bulk("\0x"));
}

#[test]
fn incr_decr_family() {
    let mut h = Harness::default();
    assert_eq!(h.run("INCR c"), int(1));
    assert_eq!(h.run("INCRBY c 10"), int(11));
    assert_eq!(h.run("DECR c"), int(10));
    assert_eq!(h.run("DECRBY c 20"), int(-10));
    assert_eq!(h.run("GET c"), bulk("-10"));
    assert_eq!(h.run("SET c 9223372036854775807"), OK);
    assert_eq!(
        h.run("INCR c"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(h.run("SET c -9223372036854775808"), OK);
    assert_eq!(
        h.run("DECR c"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(
        h.run("DECRBY c -9223372036854775808"),
        err("ERR decrement would overflow")
    );
    assert_eq!(h.run("SET s abc"), OK);
    assert_eq!(h.run("INCR s"), NOT_INT);
    assert_eq!(h.run("SET s \" 1\""), OK);
    assert_eq!(h.run("INCR s"), NOT_INT);
    assert_eq!(h.run("SET s 01"), OK);
    assert_eq!(h.run("INCR s"), NOT_INT);
    assert_eq!(h.run("INCRBY c x"), NOT_INT);
    assert_eq!(h.run("INCRBY c 1.5"), NOT_INT);
    // INCR keeps the TTL.
    assert_eq!(h.run("SET t 5 EX 100"), OK);
    assert_eq!(h.run("INCR t"), int(6));
    assert_eq!(h.run("TTL t"), int(100));
    // A raw-encoded numeric string still increments.
    assert_eq!(h.run("SET r 1"), OK);
    assert_eq!(h.run("APPEND r 0"), int(2));
    assert_eq!(h.run("INCR r"), int(11));
}

#[test]
fn incrbyfloat() {
    let mut h = Harness::default();
    assert_eq!(h.run("SET k 10.50"), OK);
    assert_eq!(h.run("INCRBYFLOAT k 0.1"), bulk("10.6"));
    assert_eq!(h.run("INCRBYFLOAT k -5"), bulk("5.6"));
    assert_eq!(h.run("SET k 5.0e3"), OK);
    assert_eq!(h.run("INCRBYFLOAT k 2.0e2"), bulk("5200"));
    assert_eq!(h.run("INCRBYFLOAT new 0.1"), bulk("0.1"));
    assert_eq!(h.run("INCRBYFLOAT new 0.2"), bulk("0.3"));
    assert_eq!(h.run("SET i 3"), OK);
    assert_eq!(h.run("INCRBYFLOAT i 1"), bulk("4"));
    assert_eq!(h.run("OBJECT ENCODING i"), bulk("embstr"));
    assert_eq!(
        h.run("INCRBYFLOAT i abc"),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        h.run("INCRBYFLOAT i inf"),
        err("ERR increment would produce NaN or Infinity")
    );
    assert_eq!(h.run("SET s hello"), OK);
    assert_eq!(
        h.run("INCRBYFLOAT s 1"),
        err("ERR value is not a valid float")
    );
    // The stored value is parsed before the increment: its error wins.
    assert_eq!(
        h.run("INCRBYFLOAT s inf"),
        err("ERR value is not a valid float")
    );
    assert_eq!(h.run("INCRBYFLOAT hex 0x1p3"), bulk("8"));
    assert_eq!(h.run("SET g 10000000.5"), OK);
    assert_eq!(h.run("INCRBYFLOAT g 1.5"), bulk("10000002"));
    assert_eq!(
        h.run("INCRBYFLOAT g 0.1"),
        bulk("10000002.1000000000003638")
    );
    assert_eq!(h.run("SET m -1"), OK);
    assert_eq!(h.run("INCRBYFLOAT m 1"), bulk("0"));
    let mut h3 = Harness::resp3();
    assert_eq!(h3.run("INCRBYFLOAT k 1.5"), bulk("1.5"));
}

#[test]
fn object_encoding_follows_redis_rules() {
    let mut h = Harness::default();
    let cases = [
        ("12345", "int"),
        ("-1", "int"),
        ("9223372036854775807", "int"),
        ("9223372036854775808", "embstr"),
        ("012", "embstr"),
        ("+1", "embstr"),
        ("hello", "embstr"),
    ];
    for (value, encoding) in cases {
        assert_eq!(h.run(&format!("SET k {value}")), OK);
        assert_eq!(h.run("OBJECT ENCODING k"), bulk(encoding), "{value}");
    }
    let v44 = "a".repeat(44);
    let v45 = "a".repeat(45);
    h.run(&format!("SET k {v44}"));
    assert_eq!(h.run("OBJECT ENCODING k"), bulk("embstr"));
    h.run(&format!("SET k {v45}"));
    assert_eq!(h.run("OBJECT ENCODING k"), bulk("raw"));
    h.run("SET k abc");
    h.run("APPEND k d");
    assert_eq!(h.run("OBJECT ENCODING k"), bulk("raw"));
    h.run("SET k 10");
    h.run("APPEND k \"\"");
    assert_eq!(h.run("OBJECT ENCODING k"), bulk("raw"));
    h.run("SET k abc");
    h.run("SETRANGE k 0 x");
    assert_eq!(h.run("OBJECT ENCODING k"), bulk("raw"));
    h.run("SET k abc");
    h.run("INCR n");
    assert_eq!(h.run("OBJECT ENCODING n"), bulk("int"));
    h.run("APPEND fresh 123");
    assert_eq!(h.run("OBJECT ENCODING fresh"), bulk("int"));
}

#[test]
fn lcs() {
    let mut h = Harness::default();
    assert_eq!(h.run("MSET key1 ohmytext key2 mynewtext"), OK);
    assert_eq!(h.run("LCS key1 key2"), bulk("mytext"));
    assert_eq!(h.run("LCS key1 key2 LEN"), int(6));
    assert_eq!(
        h.run("LCS key1 key2 IDX"),
        "*4\r\n$7\r\nmatches\r\n*2\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n*2\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n$3\r\nlen\r\n:6\r\n"
    );
    assert_eq!(
        h.run("LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN"),
        "*4\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n"
    );
    let mut h3 = Harness::resp3();
    h3.run("MSET key1 ohmytext key2 mynewtext");
    assert_eq!(
        h3.run("LCS key1 key2 IDX MINMATCHLEN 4"),
        "%2\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n"
    );
    assert_eq!(
        h.run("LCS key1 key2 LEN IDX"),
        err("ERR If you want both the length and indexes, please just use IDX.")
    );
    assert_eq!(h.run("LCS key1 key2 FOO"), SYNTAX);
    assert_eq!(h.run("LCS key1 key2 MINMATCHLEN"), SYNTAX);
    assert_eq!(h.run("LCS key1 key2 MINMATCHLEN x"), NOT_INT);
    assert_eq!(h.run("LCS nope1 nope2"), bulk(""));
    assert_eq!(h.run("LCS key1 nope LEN"), int(0));
}

#[test]
fn resp3_nulls() {
    let mut h = Harness::resp3();
    assert_eq!(h.run("GET nope"), NIL3);
    assert_eq!(h.run("SET k v XX"), NIL3);
    assert_eq!(h.run("GETDEL nope"), NIL3);
    assert_eq!(h.run("GETEX nope"), NIL3);
    assert_eq!(h.run("SET k v GET"), NIL3);
}
