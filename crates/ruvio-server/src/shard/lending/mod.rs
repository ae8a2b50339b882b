//! The mesh's lending as the shard drives it (docs/cross-shard.md): the
//! coordinator's protocol ([`coordinate`]: ask the owners in order, install,
//! run, send home, answer), the keys going home with their log records
//! ([`home`]), answers and the commands that wait ([`waiting`]), the owner's
//! side ([`owner`]) and batches of locked commands ([`batch`]); and
//! [`Reporting`] for `ShardCore`, what telling the owners about written keys
//! asks here (the outbox, and CLIENT TRACKING's side of a gathered write: the
//! invalidations this shard owes itself for the keys, and the gather started
//! with them).
//!
//! The shard's, not the mesh's, because each step runs commands on the core or
//! answers its connections; the tables they keep (keys out on loan, requests
//! waiting, the commands coordinated) and the messages between shards are the
//! mesh's ([`crate::mesh::lending`]).

mod batch;
mod coordinate;
mod home;
mod owner;
mod waiting;

pub use batch::{end_batch_if_done, run_on_kept_now, send_kept_home};
pub use coordinate::{
    finish_starting_with_conn, join_transaction, lent, must_wait_for_transaction, other_db,
    resume_parked_for_lock, send_loans_home, start, start_transaction, touches_only_named_keys,
    ReplyTo,
};
pub use home::links_follow;
pub use owner::{count_lent, keys_free, lend, take_back, take_back_acked};
pub use waiting::{deliver, expire, forget, retry, unblock, unwatch, wake, watch, Answer};

use crate::cluster::topology::Topology;
use crate::mesh::forward::Outbox;
use crate::mesh::lending::{HeldWriter, Reporting};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::ShardCore;

impl Reporting for ShardCore {
    #[inline]
    fn shard_id(&self) -> usize {
        self.id
    }

    #[inline]
    fn topology(&self) -> &Topology {
        &self.topo
    }

    #[inline]
    fn outbox(&mut self) -> &mut Outbox {
        &mut self.outbox
    }

    #[inline]
    fn invalidations_owed(&self) -> usize {
        self.tracking.owed_len()
    }

    fn gather_invalidations(
        &mut self,
        conns: &mut Slab<Conn>,
        (ticket, since): (u64, usize),
        keys: &[&[u8]],
        owners: usize,
        held: Vec<HeldWriter>,
    ) {
        let mine = self
            .tracking
            .take_part_owed(since, self.id, keys, &self.outbox);
        let mine = mine
            .into_iter()
            .map(|(at, shard, inv)| (at as u32, shard, inv));
        let (tracking, mut to) = self.tracking_parts();
        let gathered = (mine.collect(), held);
        tracking.gather_started(&mut to, conns, ticket, owners, gathered);
    }
}

#[cfg(test)]
mod tests;
