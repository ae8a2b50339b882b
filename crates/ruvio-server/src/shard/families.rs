//! The server's command families (`cmd`, a floor below) as the shard serves them:
//! [`Server`] and [`SharedReads`] for `ShardCore` and `Shared`, the steps a
//! handler asks of the shard without naming it (CLIENT PAUSE's end, CLIENT
//! UNBLOCK, INFO's gauges as of now and its `maxmemory` count).

use crate::cluster::topology::Topology;
use crate::cmd::{Server, SharedReads};
use crate::config::Config;
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::{ShardCore, Shared};
use crate::transactions::watch::Watches;
use ruvio_engine::Engine;
use std::sync::Arc;

impl Server for ShardCore {
    #[inline]
    fn shard_id(&self) -> usize {
        self.id
    }

    #[inline]
    fn now_ms(&self) -> u64 {
        self.now_ms
    }

    #[inline]
    fn settings(&self) -> &Config {
        &self.cfg
    }

    #[inline]
    fn topology(&self) -> &Arc<Topology> {
        &self.topo
    }

    #[inline]
    fn engine(&self) -> &Engine {
        &self.engine
    }

    #[inline]
    fn engine_mut(&mut self) -> &mut Engine {
        &mut self.engine
    }

    #[inline]
    fn watch_table(&self) -> &Watches {
        &self.watches
    }

    #[inline]
    fn mark_conn_dirty(&mut self, who: (u32, u32)) {
        self.dirty.push(who);
    }

    #[inline]
    fn end_pause(&mut self, conns: &mut Slab<Conn>) {
        super::end_pause(self, conns);
    }

    #[inline]
    fn unblock_client(&mut self, conns: &mut Slab<Conn>, client_id: u64, error: bool) -> bool {
        super::exec::unblock(self, conns, client_id, error)
    }

    #[inline]
    fn publish_gauges_now(&self, clients: usize) {
        super::publish_gauges(self, clients);
    }

    #[inline]
    fn blocked_clients(&self) -> u64 {
        super::blocked_here(self)
    }
}

impl SharedReads for Shared {
    #[inline]
    fn used_for_maxmemory(&self) -> u64 {
        super::eviction::used_for_limit(self)
    }
}
