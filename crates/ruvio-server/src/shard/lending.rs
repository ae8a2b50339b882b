//! The mesh's lending as the shard serves it: [`Reporting`] for `ShardCore`,
//! what telling the owners about written keys asks here (the outbox, and CLIENT
//! TRACKING's side of a gathered write: the invalidations this shard owes itself
//! for the keys, and the gather started with them).

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
