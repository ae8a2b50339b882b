//! The slot map a busy script's shard redirects by, when the shard is (or, in
//! forward mode, serves) a node of the cluster bus: Redis redirects a keyed
//! command (`-MOVED`, `-CLUSTERDOWN`, `-CROSSSLOT`) before it answers `-BUSY`
//! (`processCommand` checks the cluster first), so the hook does too.
//!
//! Why a copy kept at each script command's start: the map is the shard's,
//! which the running script has borrowed; it cannot change while the script
//! runs (the bus is stepped, and shard 0's maps adopted, on the loop), so the
//! copy (two reference counts) is what the loop would route by.

use crate::cluster::slot_map::{ClientSide, NodeRoutes};
use ruvio_engine::CmdError;
use std::cell::RefCell;

thread_local! {
    /// The node's routes as the last script command on this shard found them.
    static ROUTES: RefCell<Option<NodeRoutes>> = const { RefCell::new(None) };
}

/// At a script command's start: keep `routes` (`None`: no node) for the hook.
pub fn keep_for_script(routes: Option<&NodeRoutes>) {
    ROUTES.with_borrow_mut(|kept| *kept = routes.cloned());
}

/// The node's redirection of a command of `slot` (a write or not) from
/// `who`: `None` when it runs here, or when its slot is in flight (whether its
/// keys are still here decides, and the keyspace is the script's: `-BUSY`).
pub(super) fn node_redirection(slot: u16, write: bool, who: ClientSide) -> Option<CmdError> {
    ROUTES.with_borrow(|kept| {
        let routes = kept.as_ref()?;
        let map = routes.map();
        if map.slots_in_flight() && (map.migrating(slot) || map.importing(slot)) {
            return None;
        }
        routes.redirect_client(slot, write, who).err()
    })
}
