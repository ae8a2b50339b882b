//! Replica migration, as Redis 7's `clusterCron` and
//! `clusterHandleSlaveMigration` do it: a master that serves slots and was
//! meant to have replicas (it had some, or it is a promoted replica) but has
//! no working one left is orphaned; after five seconds of that, a replica of
//! the master with the most working replicas (at least two, and more than
//! `cluster-migration-barrier` left after it goes) moves over to it: the one
//! with the smallest name among those masters' replicas, so that only one
//! moves. It re-points as CLUSTER REPLICATE does, so the shard's link fetches
//! the new master's data (`shard/node_replica.rs`).
//!
//! Why apart from the election (membership_failure.rs): this is the rule
//! that keeps every master covered after a failure without an operator, and
//! it reads the whole table (every master's working replicas) where the
//! election reads only this node's master.

use super::{Action, Cluster, State, MYSELF};
use crate::cluster::bus::message::node_flags as flag;
use crate::serverlog::{log, Level};

/// Redis's `CLUSTER_SLAVE_MIGRATION_DELAY`: a master orphaned this long gets a
/// replica, so that during a failover the replicas of the old master have
/// time to announce they follow the new one.
const ORPHANED_FOR_MS: u64 = 5000;

impl Cluster {
    /// Replicas of master `m` not flagged `fail` (and, with `timed_out`, not
    /// `fail?` either).
    fn working_replicas(&self, m: usize, timed_out: bool) -> u64 {
        let down = match timed_out {
            true => flag::FAIL | flag::PFAIL,
            false => flag::FAIL,
        };
        let working = self
            .live()
            .filter(|(_, n)| !n.is_master() && n.master == Some(m) && !n.has(down));
        working.count() as u64
    }

    /// Master `m` was meant to have replicas: it has or had one (a replica
    /// that failed is still listed under it), or it is a promoted replica
    /// (`CLUSTER_NODE_MIGRATE_TO`).
    fn meant_to_have_replicas(&self, m: usize) -> bool {
        self.node(m).has(flag::MIGRATE_TO)
            || self
                .live()
                .any(|(_, n)| !n.is_master() && n.master == Some(m))
    }

    /// The cron's part: when this replica is one of the masters' with the most
    /// working replicas and some master is orphaned, consider moving to it.
    pub(super) fn migrate_to_orphans_if_needed(&mut self, now: u64, actions: &mut Vec<Action>) {
        let me = self.node(MYSELF);
        let Some(my_master) = me.master.filter(|_| !me.is_master()) else {
            return;
        };
        let masters: Vec<usize> = self
            .live()
            .filter(|(_, n)| n.is_master() && !n.has(flag::FAIL))
            .map(|(i, _)| i)
            .collect();
        let mut orphaned = 0;
        let mut most = 0;
        let mut mine = 0;
        for &m in &masters {
            let working = self.working_replicas(m, false);
            if working == 0 && self.owners.contains(&(m as u32)) && self.meant_to_have_replicas(m) {
                orphaned += 1;
            }
            most = most.max(working);
            if m == my_master {
                mine = working;
            }
        }
        // A move makes sense only from a master with at least two.
        if orphaned == 0 || most < 2 || mine != most || !self.rules.allow_migration {
            return;
        }
        self.migrate_to_orphan(my_master, most, now, actions);
    }

    /// `clusterHandleSlaveMigration`: the move itself, when the cluster is
    /// up, this node's master keeps more than `cluster-migration-barrier`
    /// working replicas, and this node is the candidate.
    fn migrate_to_orphan(
        &mut self,
        my_master: usize,
        most: u64,
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        if self.state != State::Ok {
            return;
        }
        if self.working_replicas(my_master, true) <= self.rules.migration_barrier {
            return;
        }
        let mut candidate = self.node(MYSELF).name;
        let mut target = None;
        let indexes: Vec<usize> = self.live().map(|(i, _)| i).collect();
        for i in indexes {
            let node = self.node(i);
            let working = match node.is_master() {
                true => self.working_replicas(i, false),
                false => 0,
            };
            let orphaned = node.is_master()
                && !node.has(flag::FAIL)
                && working == 0
                && self.meant_to_have_replicas(i);
            if orphaned {
                if target.is_none() && self.owners.contains(&(i as u32)) {
                    target = Some(i);
                }
                let node = self.node_mut(i);
                if node.orphaned_since == 0 {
                    node.orphaned_since = now;
                }
            } else {
                self.node_mut(i).orphaned_since = 0;
            }
            if working == most {
                let replicas = self
                    .live()
                    .filter(|(_, n)| !n.is_master() && n.master == Some(i));
                for (_, replica) in replicas {
                    candidate = candidate.min(replica.name);
                }
            }
        }
        let Some(t) = target else {
            return;
        };
        let orphaned_since = self.node(t).orphaned_since;
        if candidate != self.node(MYSELF).name
            || now.saturating_sub(orphaned_since) <= ORPHANED_FOR_MS
        {
            return;
        }
        let name = String::from_utf8_lossy(&self.node(t).name).into_owned();
        log(
            Level::Notice,
            &format!("Migrating to orphaned master {name}"),
        );
        self.node_mut(MYSELF).master = Some(t);
        self.join_shard_of(t);
        self.reset_manual_failover(actions);
        self.update_state();
        actions.push(Action::SaveConfig);
    }
}
