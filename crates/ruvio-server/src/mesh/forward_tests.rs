//! Unit tests of `forward.rs`: the outbox's request batches, reused once answered.

use super::*;

fn tag() -> Tag {
    Tag {
        conn: 0,
        gen: 0,
        seq: 0,
        part: 0,
        db: 0,
        resp3: false,
        no_touch: false,
        tls: false,
        client_id: 1,
        may_block: true,
        tracking: 0,
        whole: true,
        ran_ns: 0,
        row: 0,
    }
}

fn get(outbox: &mut Outbox, key: &[u8]) {
    outbox.request(1, 0, tag(), [&b"GET"[..], key].into_iter());
}

/// The owner sends a request batch it ran back with its replies (never
/// alone), and the origin's batch after next reuses its buffers.
#[test]
fn a_request_batch_comes_back_for_a_later_one() {
    let (mut origin, mut owner) = (Outbox::new(0, 2), Outbox::new(1, 2));
    let mut sent = Vec::new();
    get(&mut origin, b"a");
    origin.take_messages(&mut sent);
    let Some((1, ShardMsg::Requests(batch))) = sent.pop() else {
        panic!("one request batch");
    };
    let tags_at = batch.tags.as_ptr();
    owner.send_back(batch, None);
    owner.take_messages(&mut sent);
    assert!(sent.is_empty(), "a spare batch is not sent alone");
    owner.reply(0, tag(), b"$-1\r\n");
    owner.take_messages(&mut sent);
    let Some((0, ShardMsg::Replies(mut replies))) = sent.pop() else {
        panic!("one reply batch");
    };
    let mut spare = replies.spare.take().expect("the batch comes back");
    let back = spare.requests.as_ref().expect("the request batch");
    assert!(back.tags.is_empty() && back.commands.is_empty());
    assert_eq!(back.tags.as_ptr(), tags_at);
    origin.recycle(1, &mut spare);
    assert!(spare.requests.is_none());
    // The reply batch's buffers go back in the same box with the next requests.
    let (replies_at, box_at) = (replies.tags.as_ptr(), &*spare as *const Spare);
    origin.keep_spare(spare, replies.replies, replies.tags);
    // The batch being filled was sized when the first left; the one after it is the spare.
    get(&mut origin, b"b");
    origin.take_messages(&mut sent);
    get(&mut origin, b"c");
    origin.take_messages(&mut sent);
    let Some((1, ShardMsg::Requests(third))) = sent.pop() else {
        panic!("the third request batch");
    };
    assert_eq!(third.tags.as_ptr(), tags_at);
    // The box went with the second batch, the reply buffers in it.
    let Some((1, ShardMsg::Requests(mut second))) = sent.pop() else {
        panic!("the second request batch");
    };
    let mut spare = second.spare.take().expect("the box goes back");
    assert_eq!(&*spare as *const Spare, box_at);
    assert!(third.spare.is_none(), "one box");
    // The owner's next reply batch but one reuses them, and the box carries
    // its request batch back.
    owner.recycle(0, &mut spare);
    owner.reply(0, tag(), b"$-1\r\n");
    owner.send_back(second, Some(spare));
    owner.take_messages(&mut sent);
    let Some((0, ShardMsg::Replies(mut next))) = sent.pop() else {
        panic!("a reply batch");
    };
    assert_eq!(next.spare.take().map(|b| &*b as *const Spare), Some(box_at));
    owner.reply(0, tag(), b"$-1\r\n");
    owner.take_messages(&mut sent);
    let Some((0, ShardMsg::Replies(after))) = sent.pop() else {
        panic!("a reply batch");
    };
    assert_eq!(after.tags.as_ptr(), replies_at);
    assert_eq!(
        third.commands.get(0).map(|a| a.get(1).to_vec()),
        Some(b"c".to_vec())
    );
    assert_eq!(third.commands.len(), 1);
}
