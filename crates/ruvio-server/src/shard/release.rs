//! Held replies on a shard (`--durability always`): [`Release`] for `ShardCore`,
//! where `persistence::durable` sends a reply once its log group is on disk: a
//! connection flushed, another shard's reply or acknowledgement through the
//! outbox, a woken blocked client (`shard::exec::deliver`), a borrowed command's
//! answer (`shard::lending::deliver`).

use super::lending::Answer;
use crate::mesh::forward::Tag;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::persistence::durable::{Gated, Release};
use crate::persistence::wal::Wal;
use crate::shard::blocking::Waiter;
use crate::shard::ShardCore;

impl Release for ShardCore {
    type Tag = Tag;
    type Waiter = Waiter;
    type Answer = Answer;

    #[inline]
    fn log(&self) -> Option<&Wal> {
        self.wal.as_ref()
    }

    #[inline]
    fn gated(&mut self) -> &mut Gated<Tag, Waiter, Answer> {
        &mut self.gated
    }

    fn mark_dirty(&mut self, who: (u32, u32)) {
        self.dirty.push(who);
    }

    #[inline(always)]
    fn reply(&mut self, to: usize, tag: Tag, reply: &[u8]) {
        self.outbox.reply(to, tag, reply);
    }

    fn ran_now(&mut self, to: usize, ticket: u64, reply: Vec<u8>) {
        self.outbox.ran_now(to, ticket, reply);
    }

    fn acknowledge(&mut self, to: usize, ticket: u64) {
        self.outbox.durable(to, ticket);
    }

    fn deliver(&mut self, conns: &mut Slab<Conn>, waiter: Waiter, reply: Vec<u8>) {
        crate::shard::exec::deliver(self, conns, waiter, reply);
    }

    fn answer(&mut self, conns: &mut Slab<Conn>, answer: Answer) {
        super::lending::deliver(self, conns, answer);
    }
}
