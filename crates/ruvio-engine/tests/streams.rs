//! The stream family against the engine: log records (what a replica or the log
//! replays), keyspace events, dirty counts and block requests. Replies themselves
//! are compared with redis-server 7.0 by ruvio-server's differential_streams.rs.

mod common;

use common::*;
use ruvio_engine::command::EventClass;

#[test]
fn xadd_is_logged_with_the_id_it_made() {
    let mut h = Harness::default();
    let now = format!("{NOW_MS}-0");
    assert_eq!(h.log_of("XADD s * f v"), [format!("XADD s {now} f v")]);
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(events(&h), [(EventClass::Stream, "xadd")]);
    // The clock has not moved: the next `*` is the next sequence.
    assert_eq!(h.log_of("XADD s * f v"), [format!("XADD s {NOW_MS}-1 f v")]);
    assert_eq!(
        h.log_of(&format!("XADD s {NOW_MS}-* f v")),
        [format!("XADD s {NOW_MS}-2 f v")]
    );
    // An explicit ID is logged as sent.
    assert_eq!(
        h.log_of(&format!("XADD s {}-0 f v", NOW_MS + 1)),
        [format!("XADD s {}-0 f v", NOW_MS + 1)]
    );
}

#[test]
fn approximate_trims_are_logged_exact() {
    let mut h = Harness::default();
    for i in 1..=250 {
        h.run(&format!("XADD s {i}-0 f v"));
    }
    // `~` drops whole nodes of 100: 250 -> 150 for MAXLEN ~ 120, logged as the
    // exact length left.
    assert_eq!(
        h.log_of("XADD s MAXLEN ~ 120 251-0 f v"),
        ["XADD s MAXLEN = 151 251-0 f v"]
    );
    assert_eq!(
        events(&h),
        [(EventClass::Stream, "xadd"), (EventClass::Stream, "xtrim")]
    );
    assert_eq!(h.run("XLEN s"), int(151));
    assert_eq!(h.log_of("XTRIM s MINID ~ 240"), ["XTRIM s MINID = 201-0"]);
    assert_eq!(h.effects.dirty, 100);
    // An exact trim is logged as sent; one that drops nothing is not logged.
    assert_eq!(h.log_of("XTRIM s MAXLEN 10"), ["XTRIM s MAXLEN 10"]);
    assert!(h.log_of("XTRIM s MAXLEN 10").is_empty());
}

#[test]
fn xdel_counts_what_it_deleted() {
    let mut h = Harness::default();
    h.run("XADD s 1-1 a 1");
    h.run("XADD s 2-1 b 2");
    assert_eq!(h.run("XDEL s 1-1 1-1 9-9"), int(1));
    assert_eq!(h.effects.dirty, 1);
    assert_eq!(events(&h), [(EventClass::Stream, "xdel")]);
    assert_eq!(h.run("XDEL s 9-9"), int(0));
    assert!(events(&h).is_empty());
    // The key stays when its last entry goes.
    assert_eq!(h.run("XDEL s 2-1"), int(1));
    assert_eq!(h.run("EXISTS s"), int(1));
    assert_eq!(h.run("TYPE s"), "+stream\r\n");
}

#[test]
fn xread_blocks_with_dollar_rewritten() {
    let mut h = Harness::default();
    h.run("XADD a 5-5 f v");
    assert_eq!(h.run("XREAD BLOCK 0 STREAMS a b $ $"), "");
    let block = h.blocked.take().expect("blocked");
    assert_eq!(block.keys.as_slice(), [4, 5]);
    assert_eq!(block.deadline_ms, None);
    // `$` of `a` is its last ID, of the missing `b` 0-0.
    assert_eq!(block.rewrite, [(6, b"5-5".to_vec()), (7, b"0-0".to_vec())]);
    assert_eq!(
        h.run("XREAD BLOCK 250 STREAMS a 0-0"),
        "*1\r\n*2\r\n$1\r\na\r\n*1\r\n*2\r\n$3\r\n5-5\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    );
    assert_eq!(h.run("XREAD BLOCK 250 STREAMS a 5-5"), "");
    let block = h.blocked.take().expect("blocked");
    assert_eq!(block.deadline_ms, Some(NOW_MS + 250));
    assert!(block.rewrite.is_empty());
}

/// Redis 7.0 lets XSETID go below a deleted entry that still heads its node (the
/// next entry then sat below its node's first ID: found by the 60,000-command
/// differential run, it panicked before the delta wrapped). Redis 7.4 refuses an
/// ID below max-deleted-entry-id, and Ruvio follows it: the stream is unchanged.
#[test]
fn xsetid_refuses_an_id_below_a_deleted_one() {
    let mut h = Harness::default();
    h.run("XADD s 5-0 a 1");
    h.run("XADD s 9-0 b 2");
    assert_eq!(h.run("XDEL s 9-0"), int(1));
    assert_eq!(h.run("XTRIM s MINID 7"), int(1));
    assert_eq!(
        h.run("XSETID s 1-0"),
        "-ERR The ID specified in XSETID is smaller than current max_deleted_entry_id\r\n"
    );
    assert!(h.run("XSETID s 8-9").contains("max_deleted_entry_id"));
    assert_eq!(
        h.run("XADD s 2-0 c 3"),
        "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n"
    );
    assert_eq!(h.run("XSETID s 9-0"), "+OK\r\n");
    assert_eq!(h.run("XADD s 10-0 c 3"), bulk("10-0"));
    let entry = "*1\r\n*2\r\n$4\r\n10-0\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n";
    assert_eq!(h.run("XRANGE s - +"), entry);
    assert_eq!(h.run("XREVRANGE s + -"), entry);
    assert_eq!(h.run("XLEN s"), int(1));
}
