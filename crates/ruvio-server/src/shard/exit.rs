//! Leaving on a shard: [`Leaving`] for `ShardCore`, what SHUTDOWN and SIGTERM's
//! protocol (`persistence::shutdown`) asks of it: the exit every shard shares, the
//! broadcast to the other shards, its log, its snapshot.

use crate::config::change::ConfigChange;
use crate::persistence::shutdown::{ExitState, Leaving};
use crate::persistence::wal::Wal;
use crate::shard::ShardCore;

impl Leaving for ShardCore {
    fn shard(&self) -> usize {
        self.id
    }

    fn shards(&self) -> usize {
        self.topo.nodes.len()
    }

    fn exit_state(&self) -> &ExitState {
        &self.shared.exit
    }

    fn has_save_rules(&self) -> bool {
        !self.cfg.save.is_empty()
    }

    fn tell_others(&mut self, save: bool) {
        self.outbox.broadcast(ConfigChange::Exit { save });
    }

    fn wal(&mut self) -> Option<&mut Wal> {
        self.wal.as_mut()
    }

    fn save_snapshot(&mut self) -> Result<(), String> {
        crate::persistence::snapshot::save(self)
    }
}
