//! The list family against the engine, request bytes in and reply bytes out. The
//! expected replies were taken from redis-server 7.0 (`redis-cli`, raw RESP) where
//! 7.0 and 7.2 agree; the comments mark where Ruvio follows 7.2.

mod common;

use common::*;
use ruvio_engine::command::{Block, EventClass, Outcome};
use ruvio_engine::{Engine, ExecCtx};
use ruvio_resp::{CommandParser, Limits, Parsed, Protocol, Reply};

#[test]
fn push_pop_and_read() {
    let mut h = Harness::default();
    assert_eq!(h.run("RPUSH l a b c"), int(3));
    assert_eq!(h.effects.dirty, 3);
    assert_eq!(events(&h), [(EventClass::List, "rpush")]);
    assert_eq!(h.run("LPUSH l z y"), int(5));
    assert_eq!(h.run("LRANGE l 0 -1"), arr(&["y", "z", "a", "b", "c"]));
    assert_eq!(h.run("LRANGE l -100 100"), arr(&["y", "z", "a", "b", "c"]));
    assert_eq!(h.run("LRANGE l 2 1"), "*0\r\n");
    assert_eq!(h.run("LRANGE missing 0 -1"), "*0\r\n");
    assert_eq!(h.run("LRANGE l a 1"), NOT_INT);
    assert_eq!(h.run("LRANGE missing a 1"), NOT_INT);
    assert_eq!(h.run("LLEN l"), int(5));
    assert_eq!(h.run("LLEN missing"), int(0));
    assert_eq!(h.run("LINDEX l -1"), bulk("c"));
    assert_eq!(h.run("LINDEX l 5"), NIL);
    assert_eq!(h.run("LINDEX l -6"), NIL);
    assert_eq!(h.run("LINDEX missing abc"), NIL);
    assert_eq!(h.run("LINDEX l abc"), NOT_INT);
    assert_eq!(h.run("LPOP l"), bulk("y"));
    assert_eq!(h.run("RPOP l 2"), arr(&["c", "b"]));
    assert_eq!(h.effects.dirty, 2);
    assert_eq!(h.run("LPOP l 0"), "*0\r\n");
    assert_eq!(h.run("LPOP l 10"), arr(&["z", "a"]));
    assert_eq!(
        events(&h),
        [(EventClass::List, "lpop"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS l"), int(0));
    assert_eq!(h.run("LPOP missing"), NIL);
    assert_eq!(h.run("LPOP missing 2"), "*-1\r\n");
    assert_eq!(h.run("LPUSHX missing a"), int(0));
    assert_eq!(h.run("EXISTS missing"), int(0));
    assert_eq!(h.run("RPUSH x 1"), int(1));
    assert_eq!(h.run("RPUSHX x 2 3"), int(3));
    assert_eq!(h.run("LPUSHX x 0"), int(4));
    assert_eq!(h.run("LRANGE x 0 -1"), arr(&["0", "1", "2", "3"]));
    assert_eq!(h.run("TYPE x"), "+list\r\n");
}

#[test]
fn resp3_nulls() {
    let mut h = Harness::resp3();
    assert_eq!(h.run("LPOP missing"), NIL3);
    assert_eq!(h.run("LPOP missing 2"), NIL3);
    assert_eq!(h.run("LMPOP 1 missing RIGHT"), NIL3);
    assert_eq!(h.run("LPOS missing 1"), NIL3);
    assert_eq!(h.run("LRANGE missing 0 -1"), "*0\r\n");
}

#[test]
fn argument_errors_in_redis_order() {
    let mut h = Harness::default();
    h.run("RPUSH l a b c a");
    h.run("SET s x");
    let positive = err("ERR value is out of range, must be positive");
    assert_eq!(h.run("LPOP l abc"), positive);
    assert_eq!(h.run("LPOP l -1"), positive);
    assert_eq!(h.run("LPOP missing abc"), positive);
    assert_eq!(
        h.run("LPOP l 1 2"),
        err("ERR wrong number of arguments for 'lpop' command")
    );
    assert_eq!(h.run("LINDEX s abc"), WRONGTYPE);
    assert_eq!(h.run("LPOS l a RANK 0"), err("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
    assert_eq!(h.run("LPOS l a RANK abc"), NOT_INT);
    assert_eq!(
        h.run("LPOS l a COUNT -1"),
        err("ERR COUNT can't be negative")
    );
    assert_eq!(
        h.run("LPOS l a COUNT abc"),
        err("ERR COUNT can't be negative")
    );
    assert_eq!(
        h.run("LPOS l a MAXLEN -1"),
        err("ERR MAXLEN can't be negative")
    );
    assert_eq!(h.run("LPOS l a foo"), SYNTAX);
    assert_eq!(h.run("LPOS l a RANK"), SYNTAX);
    // Redis 7.2 range-checks RANK and LREM's count (7.0 let LONG_MIN through).
    let range = err("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807");
    assert_eq!(h.run("LPOS l a RANK -9223372036854775808"), range);
    assert_eq!(h.run("LREM l -9223372036854775808 a"), range);
    assert_eq!(h.run("LREM l abc a"), NOT_INT);
    assert_eq!(h.run("LINSERT l middle a x"), SYNTAX);
    assert_eq!(h.run("LINSERT missing middle a x"), SYNTAX);
    assert_eq!(h.run("LSET missing 0 x"), err("ERR no such key"));
    assert_eq!(h.run("LSET missing abc x"), err("ERR no such key"));
    assert_eq!(h.run("LSET l 10 x"), err("ERR index out of range"));
    assert_eq!(h.run("LSET l abc x"), NOT_INT);
    assert_eq!(h.run("LMOVE l l2 up down"), SYNTAX);
    assert_eq!(h.run("LMOVE missing l2 up left"), SYNTAX);
    let numkeys = err("ERR numkeys should be greater than 0");
    assert_eq!(h.run("LMPOP 0 l LEFT"), numkeys);
    assert_eq!(h.run("LMPOP abc l LEFT"), numkeys);
    assert_eq!(h.run("LMPOP 2 l LEFT"), SYNTAX);
    assert_eq!(h.run("LMPOP 1 l middle"), SYNTAX);
    assert_eq!(
        h.run("LMPOP 1 l LEFT COUNT 0"),
        err("ERR count should be greater than 0")
    );
    assert_eq!(h.run("LMPOP 1 l LEFT COUNT 1 COUNT 1"), SYNTAX);
    assert_eq!(h.run("LMPOP 1 l LEFT foo"), SYNTAX);
    assert_eq!(
        h.run("LMPOP 1 l"),
        err("ERR wrong number of arguments for 'lmpop' command")
    );
    for cmd in [
        "LPUSH s a",
        "LLEN s",
        "LRANGE s 0 1",
        "LPOP s",
        "LREM s 0 a",
        "LTRIM s 0 1",
    ] {
        assert_eq!(h.run(cmd), WRONGTYPE, "{cmd}");
    }
    assert_eq!(h.run("GET l"), WRONGTYPE);
    // Nothing changed by the failed commands.
    assert_eq!(h.run("LRANGE l 0 -1"), arr(&["a", "b", "c", "a"]));
}

#[test]
fn timeouts_and_blocking_errors() {
    let mut h = Harness::default();
    h.run("RPUSH l a");
    let not_float = err("ERR timeout is not a float or out of range");
    assert_eq!(h.run("BLPOP l abc"), not_float);
    assert_eq!(h.run("BLPOP l \" 1\""), not_float);
    assert_eq!(h.run("BLPOP l -1"), err("ERR timeout is negative"));
    // Redis 7.2: out of range (7.0 cast it to a negative number).
    assert_eq!(h.run("BLPOP l inf"), err("ERR timeout is out of range"));
    assert_eq!(
        h.run("BLMPOP 0 0 l LEFT"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(h.run("BLMPOP abc 1 l LEFT"), not_float);
    assert_eq!(
        h.run("BLMPOP 1 1 l LEFT COUNT 0"),
        err("ERR count should be greater than 0")
    );
    assert_eq!(h.run("BRPOPLPUSH missing x abc"), not_float);
    assert_eq!(h.run("BLMOVE missing x LEFT middle abc"), SYNTAX);
    assert_eq!(h.run("BLPOP l 0x10"), arr(&["l", "a"]));
}

#[test]
fn lset_linsert_lrem_ltrim_lpos() {
    let mut h = Harness::default();
    assert_eq!(h.run("RPUSH n 1 2 3 4 5"), int(5));
    assert_eq!(h.run("LPOS n 3"), int(2));
    assert_eq!(h.run("LPOS n 9"), NIL);
    assert_eq!(h.run("LPOS n 9 COUNT 0"), "*0\r\n");
    assert_eq!(h.run("LPOS missing 1 COUNT 2"), "*0\r\n");
    assert_eq!(h.run("LPOS n 3 COUNT 0 RANK -1"), "*1\r\n:2\r\n");
    assert_eq!(h.run("LSET n -1 x"), OK);
    assert_eq!(h.run("LSET n -6 x"), err("ERR index out of range"));
    assert_eq!(h.run("LINSERT n BEFORE 3 z"), int(6));
    assert_eq!(h.run("LINSERT n after nothere z"), int(-1));
    assert_eq!(h.effects.dirty, 0);
    assert_eq!(h.run("LINSERT missing after a z"), int(0));
    assert_eq!(h.run("LRANGE n 0 -1"), arr(&["1", "2", "z", "3", "4", "x"]));
    assert_eq!(h.run("LREM n 0 z"), int(1));
    assert_eq!(h.run("LTRIM n 1 -2"), OK);
    assert_eq!(h.effects.dirty, 2);
    assert_eq!(h.run("LRANGE n 0 -1"), arr(&["2", "3", "4"]));
    assert_eq!(h.run("LTRIM n 5 1"), OK);
    assert_eq!(
        events(&h),
        [(EventClass::List, "ltrim"), (EventClass::Generic, "del")]
    );
    assert_eq!(h.run("EXISTS n"), int(0));
    assert_eq!(h.run("LTRIM missing 0 1"), OK);

    h.run("RPUSH r a b a c a d a");
    assert_eq!(h.run("LREM r -2 a"), int(2));
    assert_eq!(h.run("LRANGE r 0 -1"), arr(&["a", "b", "a", "c", "d"]));
    assert_eq!(h.run("LREM r 1 a"), int(1));
    assert_eq!(h.run("LRANGE r 0 -1"), arr(&["b", "a", "c", "d"]));
    assert_eq!(h.run("LPOS r a RANK 1 MAXLEN 1"), NIL);
    assert_eq!(h.run("LPOS r d RANK -1 MAXLEN 1"), int(3));
    assert_eq!(h.run("LREM r 0 nothere"), int(0));
    assert!(h.effects.events().next().is_none());
}

#[test]
fn lmove_and_rpoplpush() {
    let mut h = Harness::default();
    h.run("RPUSH l a b c");
    assert_eq!(h.run("LMOVE l l2 LEFT RIGHT"), bulk("a"));
    assert_eq!(
        events(&h),
        [(EventClass::List, "rpush"), (EventClass::List, "lpop")]
    );
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(h.run("LMOVE missing l2 left right"), NIL);
    assert_eq!(h.run("RPOPLPUSH l l"), bulk("c"));
    assert_eq!(h.run("LRANGE l 0 -1"), arr(&["c", "b"]));
    assert_eq!(h.run("LMOVE l l RIGHT RIGHT"), bulk("b"));
    h.run("SET s x");
    assert_eq!(h.run("LMOVE l s LEFT LEFT"), WRONGTYPE);
    assert_eq!(h.run("LMOVE s l LEFT LEFT"), WRONGTYPE);
    assert_eq!(h.run("LLEN l"), int(2));
    assert_eq!(h.run("RPOPLPUSH l2 l"), bulk("a"));
    assert_eq!(
        events(&h),
        [
            (EventClass::List, "lpush"),
            (EventClass::List, "rpop"),
            (EventClass::Generic, "del")
        ]
    );
    assert_eq!(h.run("LRANGE l 0 -1"), arr(&["a", "c", "b"]));
    assert_eq!(
        h.log_of("LMOVE l new RIGHT LEFT"),
        ["LMOVE l new RIGHT LEFT"]
    );
}

#[test]
fn lmpop_replies_and_log() {
    let mut h = Harness::default();
    h.run("RPUSH a 1 2 3");
    assert_eq!(
        h.run("LMPOP 2 missing a LEFT COUNT 5"),
        "*2\r\n$1\r\na\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"
    );
    assert_eq!(h.run("LMPOP 1 missing RIGHT"), "*-1\r\n");
    h.run("RPUSH a 1 2 3");
    assert_eq!(h.log_of("LMPOP 1 a RIGHT COUNT 2"), ["RPOP a 2"]);
    assert_eq!(h.log_of("LMPOP 1 a RIGHT COUNT 2"), ["RPOP a 1"]);
    h.run("SET s x");
    h.run("RPUSH b 1");
    assert_eq!(h.run("LMPOP 2 s b LEFT"), WRONGTYPE);
    assert_eq!(
        h.run("LMPOP 2 b s LEFT"),
        "*2\r\n$1\r\nb\r\n*1\r\n$1\r\n1\r\n"
    );
}

#[test]
fn blocking_pops_block_or_serve() {
    let mut h = Harness::default();
    assert_eq!(h.run("BLPOP a b 0"), "");
    assert_eq!(
        h.blocked,
        Some(Block {
            keys: [1, 2].into_iter().collect(),
            deadline_ms: None,
            rewrite: Vec::new(),
        })
    );
    assert_eq!(h.run("BRPOP a 1.5"), "");
    assert_eq!(h.blocked.as_ref().unwrap().deadline_ms, Some(NOW_MS + 1500));
    h.run("RPUSH b x y");
    assert_eq!(h.run("BLPOP a b 0"), arr(&["b", "x"]));
    assert_eq!(h.blocked, None);
    assert_eq!(h.log_of("BRPOP a b 0"), ["RPOP b"]);
    assert_eq!(h.run("EXISTS b"), int(0));

    assert_eq!(h.run("BLMPOP 0 2 a b RIGHT COUNT 3"), "");
    assert_eq!(h.blocked.as_ref().unwrap().keys.as_slice(), [3, 4]);
    h.run("RPUSH b 1 2");
    assert_eq!(h.log_of("BLMPOP 0 2 a b RIGHT COUNT 3"), ["RPOP b 2"]);

    assert_eq!(h.run("BLMOVE src dst LEFT RIGHT 0"), "");
    assert_eq!(h.blocked.as_ref().unwrap().keys.as_slice(), [1]);
    h.run("RPUSH src v");
    assert_eq!(
        h.log_of("BLMOVE src dst LEFT RIGHT 0"),
        ["LMOVE src dst LEFT RIGHT"]
    );
    assert_eq!(h.run("LRANGE dst 0 -1"), arr(&["v"]));
    h.run("RPUSH src w");
    assert_eq!(h.log_of("BRPOPLPUSH src dst 0"), ["RPOPLPUSH src dst"]);
    assert_eq!(h.run("BRPOPLPUSH src dst 0"), "");
    h.run("SET s x");
    assert_eq!(h.run("BLPOP s 0"), WRONGTYPE);
    assert_eq!(h.run("BLMOVE s dst LEFT LEFT 0"), WRONGTYPE);
}

/// Run `line` with blocking not allowed (MULTI, scripts).
fn run_no_block(engine: &mut Engine, line: &str) -> String {
    let args = split_line(line);
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let request = encode_request(&refs);
    let mut parser = CommandParser::default();
    let Ok(Parsed::Complete { args, .. }) = parser.parse(&request, &Limits::default()) else {
        panic!("incomplete request")
    };
    let handler = Engine::find_command(args.get(0))
        .and_then(|row| row.handler)
        .expect("a list command");
    let mut ctx = ExecCtx::new(0, NOW_MS);
    ctx.may_block = false;
    let mut out = Vec::new();
    let mut reply = Reply::new(&mut out, Protocol::Resp2);
    match handler(engine, &mut ctx, args, &mut reply) {
        Ok(Outcome::Done) => {}
        Ok(Outcome::Block(_)) => panic!("blocked where it may not"),
        Err(e) => e.write(&mut reply),
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn no_blocking_where_not_allowed() {
    let mut engine = Engine::new(1);
    assert_eq!(run_no_block(&mut engine, "BLPOP a 0"), "*-1\r\n");
    assert_eq!(run_no_block(&mut engine, "BLMPOP 0 1 a LEFT"), "*-1\r\n");
    // blmoveGenericCommand answers a null bulk under CLIENT_DENY_BLOCKING.
    assert_eq!(run_no_block(&mut engine, "BLMOVE a b LEFT LEFT 0"), NIL);
    assert_eq!(run_no_block(&mut engine, "BRPOPLPUSH a b 0"), NIL);
}

#[test]
fn encodings_flip_where_redis_7_2_flips() {
    let mut h = Harness::default();
    h.run("RPUSH l a b c");
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("listpack"));
    let big = "x".repeat(9000);
    h.run(&format!("RPUSH l {big}"));
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("quicklist"));
    h.run("RPOP l");
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("listpack"));

    // A count limit: 3 elements per node; shrinking back needs at most 1.
    h.engine.config_mut().list_max_listpack_size = 3;
    h.run("DEL l");
    h.run("RPUSH l a b c");
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("listpack"));
    h.run("RPUSH l d");
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("quicklist"));
    h.run("RPOP l 2");
    assert_eq!(
        h.run("OBJECT ENCODING l"),
        bulk("quicklist"),
        "two in one node > 3 / 2"
    );
    h.run("RPOP l");
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("listpack"));
    // LSET checks one more element against the limit, even out of range.
    h.run("RPUSH l b c");
    assert_eq!(h.run("LSET l 10 z"), err("ERR index out of range"));
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("quicklist"));
    // COPY keeps the encoding.
    assert_eq!(h.run("COPY l l2"), int(1));
    assert_eq!(h.run("OBJECT ENCODING l2"), bulk("quicklist"));
    assert_eq!(h.run("LRANGE l2 0 -1"), arr(&["a", "b", "c"]));
}

#[test]
fn many_elements_round_trip_through_both_encodings() {
    let mut h = Harness::default();
    for i in 0..2000 {
        h.run(&format!("RPUSH l e{i:09}"));
    }
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("quicklist"));
    assert_eq!(h.run("LINDEX l 1234"), bulk("e000001234"));
    assert_eq!(h.run("LINDEX l -1"), bulk("e000001999"));
    assert_eq!(h.run("LPOS l e000001500"), int(1500));
    assert_eq!(
        h.run("LRANGE l 998 1000"),
        arr(&["e000000998", "e000000999", "e000001000"])
    );
    assert_eq!(h.run("LTRIM l 10 19"), OK);
    assert_eq!(h.run("OBJECT ENCODING l"), bulk("listpack"));
    assert_eq!(h.run("LLEN l"), int(10));
    assert_eq!(h.run("LRANGE l 0 1"), arr(&["e000000010", "e000000011"]));
}

// ---- against a real server ----------------------------------------------------

/// Random list commands against a running server and the engine, reply bytes
/// compared one by one. Run with `RUVIO_COMPARE_PORT=<port> cargo test -p
/// ruvio-engine --test lists -- --ignored`; add `RUVIO_COMPARE_ENCODING=1` for a
/// server whose list encodings follow Redis 7.2 (7.2 itself, Valkey) to compare
/// OBJECT ENCODING too (elements stay below 4 KiB, where Valkey's plain nodes
/// never differ from 7.2's packed ones). `RUVIO_COMPARE_SEED` picks another run.
#[test]
#[ignore = "needs a server: RUVIO_COMPARE_PORT"]
fn matches_a_real_server() {
    let Some(mut real) = RealServer::from_env() else {
        return;
    };
    let with_encoding = std::env::var("RUVIO_COMPARE_ENCODING").is_ok();
    let mut server = |args: &[Vec<u8>]| real.call(args);

    let mut rand = compare_rand();
    let mut h = Harness::default();
    server(&[b"FLUSHALL".to_vec()]);
    server(&[
        b"CONFIG".to_vec(),
        b"SET".to_vec(),
        b"list-max-listpack-size".to_vec(),
        b"-2".to_vec(),
    ]);
    h.run("SET s x");
    server(&[b"SET".to_vec(), b"s".to_vec(), b"x".to_vec()]);
    let keys = ["k1", "k2", "s"];
    let mut history: Vec<String> = Vec::new();
    for step in 0..20_000 {
        let elem = |rand: &mut dyn FnMut(u64) -> u64| -> Vec<u8> {
            match rand(10) {
                0 => b"a".to_vec(),
                1 => b"b".to_vec(),
                2 => rand(300).to_string().into_bytes(),
                3 => (1_000_000_000 + rand(10)).to_string().into_bytes(),
                4 => b"007".to_vec(),
                5 => Vec::new(),
                6 => vec![b'L'; 300 + rand(3500) as usize],
                _ => vec![b'a' + rand(3) as u8; rand(70) as usize],
            }
        };
        let key = |rand: &mut dyn FnMut(u64) -> u64| {
            keys[(rand(10) as usize).min(9) / 4].as_bytes().to_vec()
        };
        let end = |rand: &mut dyn FnMut(u64) -> u64| {
            if rand(2) == 0 {
                b"LEFT".to_vec()
            } else {
                b"RIGHT".to_vec()
            }
        };
        let small = |rand: &mut dyn FnMut(u64) -> u64, span: u64| {
            (rand(2 * span + 1) as i64 - span as i64)
                .to_string()
                .into_bytes()
        };
        let mut argv: Vec<Vec<u8>> = Vec::new();
        let word = |s: &str| s.as_bytes().to_vec();
        // Every other stretch of steps mostly pushes, so lists grow long enough for
        // many-node quicklists.
        let pick = match (step / 1500) % 2 {
            1 if rand(3) != 0 => 0,
            _ => rand(17),
        };
        match pick {
            0 | 1 => {
                argv.push(word(
                    ["RPUSH", "LPUSH", "RPUSHX", "LPUSHX"][rand(4) as usize],
                ));
                argv.push(key(&mut rand));
                for _ in 0..1 + rand(6) {
                    argv.push(elem(&mut rand));
                }
            }
            2 => {
                argv.push(word(["LPOP", "RPOP"][rand(2) as usize]));
                argv.push(key(&mut rand));
                if rand(2) == 0 {
                    argv.push(rand(6).to_string().into_bytes());
                }
            }
            3 => argv.extend([word("LLEN"), key(&mut rand)]),
            4 => argv.extend([
                word("LRANGE"),
                key(&mut rand),
                small(&mut rand, 8),
                small(&mut rand, 8),
            ]),
            5 => argv.extend([word("LINDEX"), key(&mut rand), small(&mut rand, 8)]),
            6 => argv.extend([
                word("LSET"),
                key(&mut rand),
                small(&mut rand, 6),
                elem(&mut rand),
            ]),
            7 => {
                let at = if rand(2) == 0 { "BEFORE" } else { "AFTER" };
                argv.extend([
                    word("LINSERT"),
                    key(&mut rand),
                    word(at),
                    elem(&mut rand),
                    elem(&mut rand),
                ]);
            }
            8 => argv.extend([
                word("LREM"),
                key(&mut rand),
                small(&mut rand, 3),
                elem(&mut rand),
            ]),
            9 => argv.extend([
                word("LTRIM"),
                key(&mut rand),
                small(&mut rand, 10),
                small(&mut rand, 10),
            ]),
            10 => {
                argv.extend([word("LPOS"), key(&mut rand), elem(&mut rand)]);
                if rand(2) == 0 {
                    let rank = (rand(5) as i64 - 2).to_string();
                    argv.extend([word("RANK"), word(&rank)]);
                }
                if rand(2) == 0 {
                    argv.extend([word("COUNT"), rand(4).to_string().into_bytes()]);
                }
                if rand(3) == 0 {
                    argv.extend([word("MAXLEN"), rand(6).to_string().into_bytes()]);
                }
            }
            11 => argv.extend([
                word("LMOVE"),
                key(&mut rand),
                key(&mut rand),
                end(&mut rand),
                end(&mut rand),
            ]),
            12 => argv.extend([word("RPOPLPUSH"), key(&mut rand), key(&mut rand)]),
            13 => {
                argv.extend([
                    word("LMPOP"),
                    word("2"),
                    key(&mut rand),
                    key(&mut rand),
                    end(&mut rand),
                ]);
                if rand(2) == 0 {
                    argv.extend([word("COUNT"), (1 + rand(4)).to_string().into_bytes()]);
                }
            }
            14 => {
                // Blocking commands only where they cannot block the connection.
                let (a, b) = (key(&mut rand), key(&mut rand));
                let ready = |k: &[u8], h: &mut Harness| h.run_args(&[b"LLEN", k]) != b":0\r\n";
                if rand(2) == 0 && ready(&a, &mut h) {
                    argv.extend([
                        word("BLMOVE"),
                        a,
                        b,
                        end(&mut rand),
                        end(&mut rand),
                        word("0"),
                    ]);
                } else if ready(&a, &mut h) || ready(&b, &mut h) {
                    argv.extend([word(["BLPOP", "BRPOP"][rand(2) as usize]), a, b, word("0")]);
                } else {
                    continue;
                }
            }
            15 if with_encoding => argv.extend([word("OBJECT"), word("ENCODING"), key(&mut rand)]),
            _ => {
                let fill = rand(16) as i64 - 5;
                h.engine.config_mut().list_max_listpack_size = fill as i32;
                let fill = fill.to_string().into_bytes();
                server(&[
                    word("CONFIG"),
                    word("SET"),
                    word("list-max-listpack-size"),
                    fill.clone(),
                ]);
                history.push(format!(
                    "CONFIG SET list-max-listpack-size {}",
                    String::from_utf8_lossy(&fill)
                ));
                continue;
            }
        }
        let refs: Vec<&[u8]> = argv.iter().map(Vec::as_slice).collect();
        let ours = h.run_args(&refs);
        let theirs = server(&argv);
        let shown: Vec<String> = argv
            .iter()
            .map(|a| match a.len() {
                0..=40 => String::from_utf8_lossy(a).into_owned(),
                n => format!("<{n} bytes>"),
            })
            .collect();
        history.push(shown.join(" "));
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "step {step}: {}\nlast commands:\n{}",
            shown.join(" "),
            history[history.len().saturating_sub(30)..].join("\n")
        );
    }
}

/// The write-ahead log record of every list write, and none for a no-op.
#[test]
fn every_list_write_logs_a_deterministic_record() {
    let mut h = Harness::default();
    let none: Vec<String> = Vec::new();
    let cases: &[(&str, &[&str])] = &[
        ("LPUSHX l a", &[]),
        ("RPUSH l a b c d e", &["RPUSH l a b c d e"]),
        ("LPUSH l z", &["LPUSH l z"]),
        ("LPUSHX l y", &["LPUSHX l y"]),
        ("RPUSHX l f", &["RPUSHX l f"]),
        ("LSET l 0 Y", &["LSET l 0 Y"]),
        ("LINSERT l BEFORE a A", &["LINSERT l BEFORE a A"]),
        ("LINSERT l BEFORE nope x", &[]),
        ("LREM l 1 A", &["LREM l 1 A"]),
        ("LREM l 1 nope", &[]),
        ("LTRIM l 0 -1", &[]),
        ("LTRIM l 1 -1", &["LTRIM l 1 -1"]),
        ("LPOP l", &["LPOP l"]),
        ("RPOP l 2", &["RPOP l 2"]),
        ("LPOP nope", &[]),
        ("LMOVE l m LEFT RIGHT", &["LMOVE l m LEFT RIGHT"]),
        ("RPOPLPUSH l m", &["RPOPLPUSH l m"]),
        ("LMPOP 2 nope m LEFT COUNT 5", &["LPOP m 2"]),
        ("BLPOP nope l 0", &["LPOP l"]),
        ("BLPOP empty 0.01", &[]),
    ];
    for (line, expected) in cases {
        let got = h.log_of(line);
        let want: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        assert_eq!(
            got,
            if want.is_empty() { none.clone() } else { want },
            "{line}"
        );
    }
}
