//! Unit tests of `primary.rs`: the backlog and its trim, the cut of a full
//! sync across shards (`barrier_tests`), and what a replica has not taken yet
//! (`pin_tests`).

use super::*;

fn flushed(bytes: &[u8], db: usize) -> Flushed {
    Flushed::plain(bytes.to_vec(), db, db)
}

#[test]
fn backlog_keeps_the_last_bytes_and_selects() {
    let p = Primary::default();
    let offset = AtomicU64::new(100);
    p.create_backlog(100, 64);
    assert!(p.append(flushed(b"abc", 0), &offset));
    let select0 = b"*2\r\n$6\r\nSELECT\r\n$1\r\n0\r\n".len() as u64;
    assert_eq!(offset.load(Relaxed), 100 + select0 + 3);
    assert!(p.append(flushed(b"def", 0), &offset));
    let mut out = Vec::new();
    let end = offset.load(Relaxed);
    assert_eq!(p.copy_since(1, end - 6, &mut out, 100), Some(end));
    assert_eq!(out, b"abcdef");
    // Overrun (the replica that had them gone): the first bytes are gone.
    p.detach(1, 0);
    p.append(flushed(&[b'x'; 70], 0), &offset);
    assert_eq!(p.copy_since(2, 100, &mut Vec::new(), 10), None);
    let (_, first, len) = p.backlog_info();
    assert_eq!(len, 64);
    assert_eq!(first + 64, offset.load(Relaxed) + 1);
    assert!(p.can_continue(offset.load(Relaxed) + 1, offset.load(Relaxed)));
}

fn replica_on(p: &Primary, client_id: u64, host: usize) {
    p.attach(ReplicaInfo {
        client_id,
        host,
        ip: "127.0.0.1".into(),
        port: 6380,
        state: "online",
        ack_offset: 0,
        aof_offset: 0,
        last_ack_ms: 0,
        acks: 0,
    });
}

/// A host's doorbell rings once for any number of appends until the host
/// looks at the backlog again; the appender itself is never rung.
#[test]
fn a_host_is_rung_once_until_it_answers() {
    let p = Primary::default();
    replica_on(&p, 1, 0);
    replica_on(&p, 2, 2);
    assert_eq!(p.hosts_to_ring(0), 0b101, "both hosts, after attaching");
    assert_eq!(p.hosts_to_ring(0), 0, "rung already: no second ring");
    assert_eq!(p.hosts_to_ring(1 << 2), 0);
    p.ring_answered(2);
    assert_eq!(p.hosts_to_ring(1 << 0), 0b100, "host 2 looked: rung again");
    assert_eq!(p.hosts_to_ring(1 << 0), 0);
    p.ring_answered(0);
    assert_eq!(p.hosts_to_ring(1 << 0), 0, "the appender is not rung");
    assert_eq!(p.hosts_to_ring(0), 0b001);
    // A host that attaches looks at the backlog from its next step.
    replica_on(&p, 3, 0);
    assert_eq!(p.hosts_to_ring(0), 0b001);
}

#[test]
fn the_cut_offset_is_the_end_when_the_last_shard_cuts() {
    let p = Primary::default();
    let offset = AtomicU64::new(0);
    p.create_backlog(0, 1 << 20);
    let job = p.request_sync(2).unwrap();
    assert!(p.request_sync(2).is_none(), "one sync at a time");
    let mut feed = super::super::feed::Feed::default();
    feed.set_on(true);
    feed.record(0, &mut [&b"a"[..]].into_iter());
    assert!(p.cut(0, &mut feed, &offset, || {}).is_some());
    assert!(feed.is_empty());
    assert!(p.holding(0) && !p.holding(1));
    assert_eq!(job.offset(), None);
    p.append(flushed(b"bb", 0), &offset);
    assert!(
        p.cut(0, &mut feed, &offset, || {}).is_none(),
        "once per shard"
    );
    p.cut(1, &mut feed, &offset, || {});
    assert_eq!(job.offset(), Some(offset.load(Relaxed)));
    assert!(!p.cutting() && !p.holding(0));
    p.sync_ended(job.id);
    assert!(p.request_sync(2).is_some());
}

mod barrier_tests {
    use super::super::*;
    use crate::replication::feed::Feed;

    fn shard_feed() -> Feed {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        feed
    }

    fn rec(feed: &mut Feed, args: &[&[u8]]) {
        feed.record(0, &mut args.iter().copied());
    }

    /// A primary with a backlog that replica 9 reads from its start, and
    /// its offset counter.
    fn backlog_read_by_9() -> (Primary, AtomicU64) {
        let p = Primary::default();
        p.create_backlog(0, 1 << 20);
        p.pin(9, 0);
        (p, AtomicU64::new(0))
    }

    fn stream(p: &Primary) -> String {
        let mut out = Vec::new();
        p.copy_since(9, 0, &mut out, usize::MAX);
        String::from_utf8(out)
            .unwrap()
            .replace("\r\n", " ")
            .replace("*2 $6 SELECT $1 0 ", "")
    }

    /// Shard 0's records `a` and shard 1's `b` appended in that order (or
    /// `b` first) to a backlog: the stream read from it, every barrier passed.
    fn both_appended(mut a: Feed, mut b: Feed, b_first: bool) -> String {
        let (p, offset) = backlog_read_by_9();
        let (a, b) = (a.take().unwrap(), b.take().unwrap());
        let mut parts = [((0, 2), a), ((1, 2), b)];
        if b_first {
            parts.reverse();
        }
        for (shard, records) in parts {
            p.append_shard(shard, records, &offset);
        }
        assert!(!p.barrier_open());
        stream(&p)
    }

    /// Two FLUSHALLs in shard 0's transaction, shard 1's own transaction
    /// run between its parts of them (it runs each when asked, its clients'
    /// commands meanwhile): that goes in between the transaction's two
    /// parts, never inside one (before, it went inside: a nested MULTI).
    #[test]
    fn records_between_two_barriers_of_a_transaction_go_between_its_parts() {
        for shard_1_first in [false, true] {
            let (mut a, mut b) = (shard_feed(), shard_feed());
            a.begin_group();
            rec(&mut a, &[b"SET", b"x", b"1"]);
            rec(&mut a, &[b"FLUSHALL"]);
            rec(&mut a, &[b"SET", b"f", b"1"]);
            rec(&mut a, &[b"FLUSHALL"]);
            rec(&mut a, &[b"SET", b"g", b"1"]);
            a.end_group();
            rec(&mut b, &[b"FLUSHALL"]);
            for key in [&b"bm"[..], b"b1"] {
                b.begin_group();
                rec(&mut b, &[b"SET", key, b"1"]);
                rec(&mut b, &[b"INCR", key]);
                b.end_group();
                if key == b"bm" {
                    rec(&mut b, &[b"FLUSHALL"]);
                }
            }
            let stream = both_appended(a, b, shard_1_first);
            let at = |what: &str| {
                stream
                    .find(what)
                    .unwrap_or_else(|| panic!("{what} in {stream}"))
            };
            assert_eq!(stream.matches("FLUSHALL").count(), 2, "{stream}");
            let order = [
                at("$1 x"),
                at("FLUSHALL"),
                at("$1 f"),
                at("$2 bm"),
                stream.rfind("FLUSHALL").unwrap(),
                at("$1 g"),
                at("$2 b1"),
            ];
            assert!(order.windows(2).all(|w| w[0] < w[1]), "{stream}");
            // MULTI and EXEC alternate: no transaction inside another.
            let mut open = false;
            for word in stream.split(' ') {
                match word {
                    "MULTI" => assert!(!std::mem::replace(&mut open, true), "{stream}"),
                    "EXEC" => assert!(std::mem::replace(&mut open, false), "{stream}"),
                    _ => {}
                }
            }
            assert!(!open, "{stream}");
        }
    }

    /// A FLUSHALL inside shard 0's transaction: shard 1's records from
    /// before its own run go in before the transaction's MULTI, and its
    /// records after it after the transaction's EXEC, whichever shard passed
    /// first (a redis-server replica got them inside the transaction, and a
    /// MULTI among them answered `MULTI calls can not be nested`).
    #[test]
    fn a_flush_inside_a_transaction_keeps_the_transaction_whole() {
        for shard_1_first in [false, true] {
            let (mut a, mut b) = (shard_feed(), shard_feed());
            rec(&mut a, &[b"SET", b"a0", b"1"]);
            a.begin_group();
            rec(&mut a, &[b"SET", b"x", b"1"]);
            rec(&mut a, &[b"FLUSHALL"]);
            rec(&mut a, &[b"SET", b"f", b"1"]);
            a.end_group();
            rec(&mut a, &[b"SET", b"a1", b"1"]);
            b.begin_group();
            rec(&mut b, &[b"SET", b"b0", b"1"]);
            rec(&mut b, &[b"INCR", b"b0"]);
            b.end_group();
            rec(&mut b, &[b"FLUSHALL"]);
            b.begin_group();
            rec(&mut b, &[b"SET", b"b1", b"1"]);
            rec(&mut b, &[b"INCR", b"b1"]);
            b.end_group();
            let stream = both_appended(a, b, shard_1_first);
            let at = |what: &str| {
                stream
                    .find(what)
                    .unwrap_or_else(|| panic!("{what} in {stream}"))
            };
            assert_eq!(stream.matches("FLUSHALL").count(), 1, "{stream}");
            assert_eq!(stream.matches("MULTI").count(), 3, "{stream}");
            // b0's group, then a's transaction whole, then b1's group.
            let order = [
                at("$2 b0"),
                at("$1 x"),
                at("FLUSHALL"),
                at("$1 f"),
                at("$2 a1"),
                at("$2 b1"),
            ];
            assert!(order.windows(2).all(|w| w[0] < w[1]), "{stream}");
            let exec_after_f = stream[at("$1 f")..].find("EXEC").unwrap() + at("$1 f");
            assert!(exec_after_f < at("$2 a1"), "{stream}");
            assert!(
                at("$2 b0") < at("$1 x") && at("$2 a0") < at("$1 x"),
                "{stream}"
            );
            let multi_of_a = stream[..at("$1 x")].rfind("MULTI").unwrap();
            assert!(at("$2 b0") < multi_of_a, "{stream}");
        }
    }

    #[test]
    fn a_flush_goes_in_once_between_every_shards_before_and_after() {
        let (p, offset) = backlog_read_by_9();
        let (mut a, mut b) = (shard_feed(), shard_feed());
        // Shard 0 flushes first and writes after it; shard 1 writes before its
        // flush meanwhile.
        rec(&mut a, &[b"SET", b"a0", b"1"]);
        rec(&mut a, &[b"FLUSHALL"]);
        rec(&mut a, &[b"SET", b"a1", b"1"]);
        assert!(p.append_shard((0, 2), a.take().unwrap(), &offset));
        assert!(p.at_barrier(0) && !p.at_barrier(1));
        assert!(p.barrier_open(), "seen without the lock");
        rec(&mut a, &[b"SET", b"a2", b"1"]);
        p.append_shard((0, 2), a.take().unwrap(), &offset);
        rec(&mut b, &[b"SET", b"b0", b"1"]);
        p.append_shard((1, 2), b.take().unwrap(), &offset);
        assert_eq!(
            stream(&p),
            "*3 $3 SET $2 a0 $1 1 *3 $3 SET $2 b0 $1 1 ",
            "shard 0's writes after its flush wait"
        );
        rec(&mut b, &[b"FLUSHALL"]);
        rec(&mut b, &[b"SET", b"b1", b"1"]);
        p.append_shard((1, 2), b.take().unwrap(), &offset);
        assert!(!p.at_barrier(0) && !p.at_barrier(1));
        assert!(!p.barrier_open());
        assert_eq!(
            stream(&p),
            "*3 $3 SET $2 a0 $1 1 *3 $3 SET $2 b0 $1 1 *1 $8 FLUSHALL \
             *3 $3 SET $2 a1 $1 1 *3 $3 SET $2 a2 $1 1 *3 $3 SET $2 b1 $1 1 "
        );
        assert_eq!(offset.load(Relaxed) as usize, {
            let mut out = Vec::new();
            p.copy_since(9, 0, &mut out, usize::MAX);
            out.len()
        });
    }

    #[test]
    fn a_shard_at_a_barrier_does_not_cut_and_a_stuck_cut_gives_way() {
        let p = Primary::default();
        let offset = AtomicU64::new(0);
        p.create_backlog(0, 1 << 20);
        let job = p.request_sync(2).unwrap();
        let (mut a, mut b) = (shard_feed(), shard_feed());
        // Shard 1 cuts; then shard 0 runs a FLUSHALL and waits for shard 1,
        // whose records (its FLUSHALL too) wait for the cut.
        assert!(p.cut(1, &mut b, &offset, || {}).is_some());
        rec(&mut a, &[b"FLUSHALL"]);
        let mut begun = false;
        assert!(p.cut(0, &mut a, &offset, || begun = true).is_none());
        assert!(!begun, "no snapshot while its records wait at a barrier");
        assert!(job.abandoned.load(Relaxed), "the cut gave way");
        assert!(!p.cutting() && !p.holding(1));
        rec(&mut b, &[b"FLUSHALL"]);
        p.append_shard((1, 2), b.take().unwrap(), &offset);
        assert!(!p.at_barrier(0));
        assert!(p.request_sync(2).is_some(), "the next sync may start");
    }
}

mod pin_tests {
    use super::super::*;

    #[test]
    fn a_replica_keeps_what_it_has_not_taken() {
        let p = Primary::default();
        let offset = AtomicU64::new(0);
        p.create_backlog(0, 16);
        p.pin(7, 0);
        let record = Flushed::plain(vec![b'x'; 100], 0, 0);
        p.append(record, &offset);
        // Far beyond the backlog's 16 bytes, all kept for replica 7.
        let mut out = Vec::new();
        let end = offset.load(Relaxed);
        assert_eq!(p.copy_since(7, 0, &mut out, usize::MAX), Some(end));
        assert_eq!(out.len() as u64, end);
        // Taken: the backlog is back to its size.
        let (_, _, held) = p.backlog_info();
        assert_eq!(held, 16);
    }
}
