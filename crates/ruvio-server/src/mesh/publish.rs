//! A publication's way between shards: the outbox as Pub/Sub's
//! [`Relay`](crate::messaging::pubsub::Relay) (messaging sits below the mesh and
//! names no outbox), and a forward-mode PUBLISH whose receivers are on other shards
//! ([`start_publish`]).

use crate::mesh::forward::{Outbox, Tag};
use crate::messaging::pubsub::{int_reply, Kind, Publication, Relay};
use crate::net::conn::{ClientState, Merge, ReplyQueue};

impl Relay for Outbox {
    type Tag = Tag;

    #[inline]
    fn message(&mut self, to: usize, tag: Option<Tag>, kind: Kind, channel: &[u8], message: &[u8]) {
        Outbox::message(self, to, tag, kind, channel, message);
    }

    #[inline]
    fn reply(&mut self, to: usize, tag: Tag, reply: &[u8]) {
        Outbox::reply(self, to, tag, reply);
    }
}

/// Send a publication to the other shards; its reply is held until each has
/// answered its count, then the sum.
pub fn start_publish(
    outbox: &mut Outbox,
    client: &ClientState,
    replies: &mut ReplyQueue,
    who: (u32, u32),
    p: Publication,
) {
    let seq = replies.hold(Merge::SumInts, p.shards.len() + 1);
    for (i, &to) in p.shards.iter().enumerate() {
        let tag = Tag::for_client(client, who, seq, (i + 1) as u16);
        outbox.message(to, Some(tag), p.kind, &p.channel, &p.message);
    }
    replies.fill(seq, 0, int_reply(p.local));
}
