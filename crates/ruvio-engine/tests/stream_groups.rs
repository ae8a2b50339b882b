//! Consumer groups against the engine: the log records Redis 7.0 propagates
//! (checked against a redis-server AOF), keyspace events, block requests and
//! memory accounting. Replies are compared with redis-server 7.0 by
//! ruvio-server's differential_stream_groups.rs.

mod common;

use common::*;
use ruvio_engine::command::EventClass;

fn stream_with_group() -> Harness {
    let mut h = Harness::default();
    h.run("XADD s 1-1 a 1");
    h.run("XADD s 1-2 b 2");
    h.run("XGROUP CREATE s g 0");
    h
}

/// XREADGROUP `>` is logged as one XCLAIM per entry (the consumer and the
/// group's last ID travel with it); with NOACK as XGROUP SETID with ENTRIESREAD,
/// plus XGROUP CREATECONSUMER for a new consumer; history reads log nothing.
#[test]
fn xreadgroup_is_logged_as_redis_propagates_it() {
    let mut h = stream_with_group();
    assert_eq!(
        h.log_of("XREADGROUP GROUP g c1 COUNT 1 STREAMS s >"),
        [format!(
            "XCLAIM s g c1 0 1-1 TIME {NOW_MS} RETRYCOUNT 1 FORCE JUSTID LASTID 1-1"
        )]
    );
    assert_eq!(events(&h), [(EventClass::Stream, "xgroup-createconsumer")]);
    assert!(h.log_of("XREADGROUP GROUP g c1 STREAMS s 0").is_empty());
    assert!(h.log_of("XREADGROUP GROUP g c3 STREAMS s 0").is_empty());
    assert_eq!(
        h.log_of("XREADGROUP GROUP g c4 NOACK STREAMS s >"),
        [
            "XGROUP CREATECONSUMER s g c4",
            "XGROUP SETID s g 1-2 ENTRIESREAD 2",
        ]
    );
    // Nothing new: no consumer is made, nothing logged, a null array.
    assert_eq!(h.run("XREADGROUP GROUP g c5 STREAMS s >"), "*-1\r\n");
    assert!(h.log_of("XREADGROUP GROUP g c5 STREAMS s >").is_empty());
    assert_eq!(h.run("XINFO CONSUMERS s g").matches("name").count(), 3);
}

/// XCLAIM and XAUTOCLAIM are logged as the idempotent XCLAIM per entry; an entry
/// deleted from the stream is dropped from the PEL and logged so too; a LASTID
/// that only moves the group is XGROUP SETID.
#[test]
fn claims_are_logged_as_forced_xclaims() {
    let mut h = stream_with_group();
    h.run("XREADGROUP GROUP g c1 STREAMS s >");
    h.now_ms += 100;
    assert_eq!(
        h.log_of("XCLAIM s g c2 0 1-1 RETRYCOUNT 7"),
        [format!(
            "XCLAIM s g c2 0 1-1 TIME {} RETRYCOUNT 7 FORCE JUSTID LASTID 1-2",
            NOW_MS + 100
        )]
    );
    assert_eq!(
        h.log_of("XCLAIM s g c2 0 9-9 LASTID 5-0"),
        ["XGROUP SETID s g 5-0 ENTRIESREAD 2"]
    );
    h.run("XDEL s 1-2");
    assert_eq!(
        h.log_of("XAUTOCLAIM s g c3 0 0"),
        [
            format!(
                "XCLAIM s g c3 0 1-1 TIME {} RETRYCOUNT 8 FORCE JUSTID LASTID 5-0",
                NOW_MS + 100
            ),
            format!("XCLAIM s g c1 0 1-2 TIME {NOW_MS} RETRYCOUNT 1 FORCE JUSTID LASTID 5-0"),
        ]
    );
    assert_eq!(
        h.run("XPENDING s g"),
        "*4\r\n:1\r\n$3\r\n1-1\r\n$3\r\n1-1\r\n*1\r\n*2\r\n$2\r\nc3\r\n$1\r\n1\r\n"
    );
}

/// XGROUP subcommands are logged as given and raise Redis's events; XACK counts
/// its acknowledgements with no event.
#[test]
fn xgroup_events_and_xack() {
    let mut h = Harness::default();
    assert_eq!(
        h.log_of("XGROUP CREATE s g $ MKSTREAM"),
        ["XGROUP CREATE s g $ MKSTREAM"]
    );
    assert_eq!(events(&h), [(EventClass::Stream, "xgroup-create")]);
    h.run("XGROUP SETID s g 0");
    assert_eq!(events(&h), [(EventClass::Stream, "xgroup-setid")]);
    h.run("XGROUP CREATECONSUMER s g c");
    assert_eq!(events(&h), [(EventClass::Stream, "xgroup-createconsumer")]);
    assert!(h.log_of("XGROUP CREATECONSUMER s g c").is_empty());
    h.run("XGROUP DELCONSUMER s g c");
    assert_eq!(events(&h), [(EventClass::Stream, "xgroup-delconsumer")]);
    h.run("XADD s 1-1 f v");
    h.run("XREADGROUP GROUP g c STREAMS s >");
    assert_eq!(h.log_of("XACK s g 1-1 1-1 2-2"), ["XACK s g 1-1 1-1 2-2"]);
    assert!(events(&h).is_empty());
    assert!(h.log_of("XACK s g 1-1").is_empty());
    h.run("XGROUP DESTROY s g");
    assert_eq!(events(&h), [(EventClass::Stream, "xgroup-destroy")]);
}

/// A blocking XREADGROUP parks with its `>` rewritten to a marker; run again
/// with it after the group is gone it answers Redis 7.0's blocked-client error.
#[test]
fn xreadgroup_blocks_and_knows_it_blocked() {
    let mut h = stream_with_group();
    h.run("XREADGROUP GROUP g c STREAMS s >");
    assert_eq!(h.run("XREADGROUP GROUP g c BLOCK 100 STREAMS s >"), "");
    let block = h.blocked.take().expect("blocked");
    assert_eq!(block.keys.as_slice(), [7]);
    assert_eq!(block.deadline_ms, Some(NOW_MS + 100));
    let (at, marker) = block.rewrite[0].clone();
    assert_eq!(at, 8);
    assert_ne!(marker, b">");
    let rerun = |h: &mut Harness| {
        let args: Vec<&[u8]> = vec![
            b"XREADGROUP",
            b"GROUP",
            b"g",
            b"c",
            b"BLOCK",
            b"100",
            b"STREAMS",
            b"s",
            &marker,
        ];
        String::from_utf8_lossy(&h.run_args(&args)).into_owned()
    };
    assert_eq!(rerun(&mut h), "");
    h.run("XADD s 2-1 x y");
    assert!(rerun(&mut h).contains("2-1"));
    h.run("XGROUP DESTROY s g");
    assert_eq!(
        rerun(&mut h),
        "-NOGROUP the consumer group this client was blocked on no longer exists\r\n"
    );
    h.run("DEL s");
    assert_eq!(
        rerun(&mut h),
        "-UNBLOCKED the stream key no longer exists\r\n"
    );
    // History reads never block.
    let mut h = stream_with_group();
    assert_eq!(
        h.run("XREADGROUP GROUP g c BLOCK 0 STREAMS s 0"),
        "*1\r\n*2\r\n$1\r\ns\r\n*0\r\n"
    );
}

/// Groups count towards the key's memory, and dropping them gives it back.
#[test]
fn group_state_is_accounted() {
    let mut h = stream_with_group();
    let usage = |h: &mut Harness| -> i64 {
        let r = h.run("MEMORY USAGE s");
        r.trim_start_matches(':')
            .trim_end()
            .parse()
            .expect("integer")
    };
    let before = usage(&mut h);
    h.run("XREADGROUP GROUP g alice STREAMS s >");
    let read = usage(&mut h);
    assert!(read > before, "{read} > {before}");
    h.run("XACK s g 1-1 1-2");
    h.run("XGROUP DELCONSUMER s g alice");
    assert_eq!(usage(&mut h), before);
    h.run("XGROUP DESTROY s g");
    assert!(usage(&mut h) < before);
}
