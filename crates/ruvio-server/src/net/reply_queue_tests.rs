//! Unit tests of `reply_queue.rs`: held slots keep request order, silenced
//! replies are dropped wherever they went, records and merges of parts.

use super::*;

/// Forwarded replies borrowed from a message's batch: one that completes the
/// front slot goes straight into the ready bytes, followed by what was
/// queued after it and by every later slot already complete; one for a
/// slot further back waits for those before it; a silenced slot's reply is
/// dropped; a large owned reply is moved in, a small one copied (the ready
/// buffer keeps its capacity).
#[test]
fn borrowed_fills_keep_request_order() {
    let mut q = ReplyQueue::default();
    let s1 = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b"+B\r\n");
    let s2 = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b"+D\r\n");
    q.silent_new = true;
    let s3 = q.hold(Merge::Single, 1);
    q.silent_new = false;
    q.sink().extend_from_slice(b"+F\r\n");
    q.fill_part(s2, 0, &b"$1\r\nC\r\n"[..], 0);
    assert!(q.ready.is_empty());
    assert_eq!(q.immediate_bytes(), 12);
    q.fill_part(s1, 0, &b"$1\r\nA\r\n"[..], 0);
    assert_eq!(q.ready, b"$1\r\nA\r\n+B\r\n$1\r\nC\r\n+D\r\n");
    q.fill_part(s3, 0, &b"$1\r\nE\r\n"[..], 0);
    assert_eq!(q.ready, b"$1\r\nA\r\n+B\r\n$1\r\nC\r\n+D\r\n+F\r\n");
    assert!(!q.is_holding());
    assert_eq!(q.immediate_bytes(), q.ready.len());

    q.ready = Vec::with_capacity(64);
    let small = q.hold(Merge::Single, 1);
    q.fill(small, 0, b"+small\r\n".to_vec());
    assert_eq!(
        (q.ready.as_slice(), q.ready.capacity()),
        (&b"+small\r\n"[..], 64)
    );
    q.ready.clear();
    let large = q.hold(Merge::Single, 1);
    let big = vec![b'x'; 1000];
    let at = big.as_ptr();
    q.fill(large, 0, big);
    assert_eq!((q.ready.len(), q.ready.as_ptr()), (1000, at));
}

/// A silenced command's reply is dropped wherever it went: behind a gate
/// released while it ran (an `always` write that logged nothing), behind
/// its own slot still held, and behind the slot an earlier command holds.
#[test]
fn a_silenced_reply_is_dropped_behind_released_and_held_slots() {
    let mut q = ReplyQueue::default();
    q.sink().extend_from_slice(b"+kept\r\n");
    // A gate opened and released within the command, then its reply.
    let (first, before) = (q.next_seq(), q.sink_len());
    q.silent_new = true;
    let gate = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b":0\r\n");
    q.fill(gate, 0, Vec::new());
    q.silent_new = false;
    q.drop_immediate(first, before);
    assert_eq!(q.ready, b"+kept\r\n");
    // A released gate, then a header and the command's own slot.
    let (first, before) = (q.next_seq(), q.sink_len());
    q.silent_new = true;
    let gate = q.hold(Merge::Single, 1);
    q.fill(gate, 0, Vec::new());
    q.sink().extend_from_slice(b"*2\r\n");
    let own = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b"+tail\r\n");
    q.silent_new = false;
    q.drop_immediate(first, before);
    assert_eq!(q.ready, b"+kept\r\n");
    // The next command's reply queues behind the held slot, silenced too.
    let (first, before) = (q.next_seq(), q.sink_len());
    q.silent_new = true;
    let gate = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b"+OK\r\n");
    q.silent_new = false;
    q.drop_immediate(first, before);
    // An unsilenced reply after them.
    q.sink().extend_from_slice(b"+after\r\n");
    q.fill(own, 0, b":5\r\n".to_vec());
    q.fill(gate, 0, Vec::new());
    assert_eq!(q.ready, b"+kept\r\n+after\r\n");
    assert!(!q.is_holding());
    assert_eq!(q.immediate_bytes(), q.ready.len());
}

#[test]
fn held_slots_keep_request_order() {
    let mut q = ReplyQueue::default();
    q.sink().extend_from_slice(b"+A\r\n");
    let s1 = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b"+C\r\n");
    let s2 = q.hold(Merge::SumInts, 2);
    q.sink().extend_from_slice(b"+E\r\n");
    q.fill(s2, 1, b":2\r\n".to_vec());
    q.fill(s2, 0, b":3\r\n".to_vec());
    assert_eq!(q.ready, b"+A\r\n");
    q.fill(s1, 0, b"+B\r\n".to_vec());
    assert_eq!(q.ready, b"+A\r\n+B\r\n+C\r\n:5\r\n+E\r\n");
    assert!(!q.is_holding());
}

/// A command recorded once answered comes back from the fill that completes
/// its reply (behind an earlier slot too), with the parts' times and the
/// merged reply's size.
#[test]
fn a_record_comes_back_with_the_whole_reply() {
    let mut q = ReplyQueue::default();
    let first = q.hold(Merge::Single, 1);
    let seq = q.hold_ordered(Merge::Scatter, 2, vec![1, 0]);
    let record = Box::new(Awaited {
        ns: Some(10),
        ..Awaited::default()
    });
    assert!(q.await_record(seq, record).is_none());
    assert!(q
        .fill_part(seq, 0, b"*1\r\n$1\r\na\r\n".to_vec(), 5)
        .is_none());
    let record = q.fill_part(seq, 1, b"*1\r\n$1\r\nb\r\n".to_vec(), 7);
    let record = record.expect("the last part completes it");
    assert_eq!(record.ns, Some(22));
    assert_eq!(record.reply_bytes, 18);
    assert!(q.ready.is_empty());
    q.fill(first, 0, b"+OK\r\n".to_vec());
    assert_eq!(q.ready, b"+OK\r\n*2\r\n$1\r\nb\r\n$1\r\na\r\n");
    // A slot complete already hands the record back at once.
    let done = q.hold(Merge::Single, 1);
    let late = q.hold(Merge::Single, 1);
    q.fill(late, 0, b":1\r\n".to_vec());
    let back = q.await_record(late, Box::default());
    assert_eq!(back.map(|r| r.reply_bytes), Some(4));
    q.fill(done, 0, b":2\r\n".to_vec());
    assert_eq!(q.ready, b"+OK\r\n*2\r\n$1\r\nb\r\n$1\r\na\r\n:2\r\n:1\r\n");
}

/// A split write's own invalidations go right after its reply, before the
/// replies queued behind it, and count as parked bytes while held.
#[test]
fn put_after_comes_before_the_replies_behind_a_slot() {
    let mut q = ReplyQueue::default();
    let s1 = q.hold(Merge::AllOk, 2);
    q.sink().extend_from_slice(b"+PONG\r\n");
    let s2 = q.hold(Merge::Single, 1);
    q.put_after(s1, b">push\r\n");
    assert_eq!(q.immediate_bytes(), 14);
    q.fill(s1, 0, b"+OK\r\n".to_vec());
    q.fill(s1, 1, b"+OK\r\n".to_vec());
    assert_eq!(q.ready, b"+OK\r\n>push\r\n+PONG\r\n");
    q.put_after(s1, b">late\r\n");
    q.fill(s2, 0, b"$1\r\nv\r\n".to_vec());
    // No longer held: after everything queued.
    assert_eq!(q.ready, b"+OK\r\n>push\r\n+PONG\r\n$1\r\nv\r\n>late\r\n");
}

/// A kept slot waits for its extra part, whenever its reply comes; what
/// goes before and after it keeps its place among the replies.
#[test]
fn a_kept_slot_waits_for_its_extra_part() {
    let mut q = ReplyQueue::default();
    let s1 = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b"+A\r\n");
    let s2 = q.hold(Merge::Single, 1);
    q.sink().extend_from_slice(b"+PONG\r\n");
    assert!(q.keep(s2));
    q.fill(s2, 0, b"*2\r\n+OK\r\n+OK\r\n".to_vec());
    q.fill(s1, 0, b"+S1\r\n".to_vec());
    // s2's reply is in, but the slot stays held for its extra part.
    assert_eq!(q.ready, b"+S1\r\n+A\r\n");
    assert!(q.is_holding());
    q.put_before(s2, b">before\r\n");
    q.put_after(s2, b">own\r\n");
    let after = b">own\r\n+PONG\r\n".len();
    assert_eq!(q.immediate_bytes(), q.ready.len() + after);
    q.let_go(s2);
    assert_eq!(
        q.ready,
        b"+S1\r\n+A\r\n>before\r\n*2\r\n+OK\r\n+OK\r\n>own\r\n+PONG\r\n"
    );
    assert!(!q.is_holding());
    // An error reply is not dropped by the empty part, and a slot that
    // is gone or merges parts is not kept.
    let s3 = q.hold(Merge::Single, 1);
    assert!(q.keep(s3));
    assert!(!q.keep(s3), "kept once");
    q.let_go(s3);
    q.fill(s3, 0, b"-ERR x\r\n".to_vec());
    assert!(q.ready.ends_with(b"+PONG\r\n-ERR x\r\n"));
    assert!(!q.keep(s3));
    q.let_go(s3);
    let s4 = q.hold(Merge::AllOk, 2);
    assert!(!q.keep(s4));
    // Before a front slot: at the end of the ready bytes.
    q.put_before(s4, b">b\r\n");
    assert!(q.ready.ends_with(b"-ERR x\r\n>b\r\n"));
}

/// Replies parked behind every held slot count, not only the last one's.
#[test]
fn immediate_bytes_counts_every_parked_reply() {
    let mut q = ReplyQueue::default();
    let parked =
        |q: &ReplyQueue| q.ready.len() + q.held.iter().map(|h| h.after.len()).sum::<usize>();
    let mut slots = Vec::new();
    for i in 0..5 {
        slots.push(q.hold(Merge::Single, 1));
        q.sink().extend_from_slice(&vec![b'x'; 10 + i]);
        assert_eq!(q.immediate_bytes(), parked(&q));
    }
    for (n, seq) in [2, 0, 4, 1, 3].map(|i| (i, slots[i])) {
        q.fill(seq, 0, vec![b'r'; n + 1]);
        assert_eq!(q.immediate_bytes(), parked(&q));
    }
    assert!(!q.is_holding());
    assert_eq!(q.immediate_bytes(), q.ready.len());
}

/// Large replies arriving shrink how many a connection may await; small ones
/// bring the full depth back.
#[test]
fn held_limit_follows_reply_sizes() {
    let mut q = ReplyQueue::default();
    assert_eq!(q.held_limit(), HELD_REPLIES_MAX);
    let seq = q.hold(Merge::Single, 1);
    q.fill(seq, 0, vec![0; 1 << 20]);
    assert_eq!(q.held_limit(), 4);
    for _ in 0..64 {
        let seq = q.hold(Merge::Single, 1);
        q.fill(seq, 0, b"+OK\r\n".to_vec());
    }
    assert_eq!(q.held_limit(), HELD_REPLIES_MAX);
}

#[test]
fn merges() {
    let mut out = Vec::new();
    let parts = [
        b"*1\r\n$1\r\na\r\n".to_vec(),
        b"*2\r\n$-1\r\n$1\r\nb\r\n".to_vec(),
    ];
    merge_into(Merge::ConcatArrays, &parts, &[], &mut out);
    assert_eq!(out, b"*3\r\n$1\r\na\r\n$-1\r\n$1\r\nb\r\n");
    out.clear();
    merge_into(Merge::Scatter, &parts, &[1, 0, 1], &mut out);
    assert_eq!(out, b"*3\r\n$-1\r\n$1\r\na\r\n$1\r\nb\r\n");
    out.clear();
    merge_into(
        Merge::SumInts,
        &[b"-ERR x\r\n".to_vec(), b":1\r\n".to_vec()],
        &[],
        &mut out,
    );
    assert_eq!(out, b"-ERR x\r\n");
    out.clear();
    let lines = [
        b"$15\r\nid=10 a=1\nid=3\n\r\n".to_vec(),
        b"$9\r\nid=7 b=2\n\r\n".to_vec(),
    ];
    merge_into(Merge::ClientLines { verbatim: true }, &lines, &[], &mut out);
    assert_eq!(out, b"=28\r\ntxt:id=3\nid=7 b=2\nid=10 a=1\n\r\n");
    out.clear();
    let kills = [b":0\r\n".to_vec(), b":0\r\n".to_vec()];
    merge_into(Merge::KillOne, &kills, &[], &mut out);
    assert_eq!(out, b"-ERR No such client\r\n");
}
