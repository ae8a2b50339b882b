//! A node's replica side, as Redis 7 keeps it: the master it follows (its
//! client address, for the shard's replication link), the offset its
//! messages carry, slots going to a newer claimant and a node whose slots all
//! went turning into the claimant's replica (`clusterUpdateSlotsConfigWith`),
//! and CLUSTER
//! FAILOVER with its MFSTART handshake (`clusterCommand`'s failover,
//! `clusterHandleManualFailover`, `manualFailoverCheckTimeout`).
//!
//! Why apart from the election (membership_failure.rs): these are the rules
//! an operator's failover follows, read against redis-server's manual
//! failover timeline: the replica asks its master to pause (MFSTART), the
//! master holds its clients' writes and PINGs the replica flagged PAUSED with
//! its offset, the replica waits until it applied that offset, then runs the
//! election at once with FORCEACK (the masters vote though its master is
//! alive). FORCE skips the master; TAKEOVER skips the votes.

use super::{Action, Cluster, LinkId, MYSELF, NO_OWNER};
use crate::cluster::bus::message::{node_flags as flag, Body, Kind, Message, NodeName, SLOT_BYTES};
use crate::serverlog::{log, Level};

/// Redis's `CLUSTER_MF_TIMEOUT`: a manual failover not done by then is
/// abandoned.
const MANUAL_FAILOVER_MS: u64 = 5000;
/// Redis's `CLUSTER_MF_PAUSE_MULT`: the master holds writes up to twice as
/// long, so the pause outlives the failover's own timeout.
const PAUSE_MULTIPLIER: u64 = 2;

/// CLUSTER FAILOVER's option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverMode {
    /// With the master's help: it pauses, the replica catches up.
    Default,
    /// Without the master (it may be down): the election at once.
    Force,
    /// Without the master nor the votes: a new config epoch, the slots taken.
    Takeover,
}

/// A manual failover under way (`mf_*`), on the replica or on its master.
#[derive(Default)]
pub(super) struct ManualFailover {
    /// Unix ms it is abandoned (0: none under way).
    pub(super) end: u64,
    /// Replica: the election may run (FORCE, or the master's offset reached).
    pub(super) can_start: bool,
    /// Replica: the offset the paused master announced.
    master_offset: Option<u64>,
    /// Master: the replica it pauses for.
    replica: Option<usize>,
}

impl Cluster {
    /// The client address of the master this node replicates (CLUSTER
    /// REPLICATE), once known.
    pub fn master_address(&self) -> Option<(&str, u16)> {
        let me = self.node(MYSELF);
        let m = me.master.filter(|_| !me.is_master())?;
        let master = self.nodes.get(m)?.as_ref()?;
        (master.port != 0 && !master.ip.is_empty()).then_some((master.ip.as_str(), master.port))
    }

    /// The name of the master this node replicates.
    pub fn master_name(&self) -> Option<NodeName> {
        let me = self.node(MYSELF);
        let m = me.master.filter(|_| !me.is_master())?;
        Some(self.nodes.get(m)?.as_ref()?.name)
    }

    /// What this node has applied of its master's stream (a replica) or
    /// written (a master): the offset its messages carry, which ranks the
    /// replicas of one master in an election and ends a manual failover's
    /// wait.
    pub fn set_repl_offset(&mut self, offset: u64) {
        self.node_mut(MYSELF).repl_offset = offset;
    }

    /// `clusterUpdateSlotsConfigWith`: each claimed slot goes to `s` when it has
    /// no owner or its owner's config epoch is older than `epoch`.
    pub(super) fn update_slots_with(
        &mut self,
        s: usize,
        epoch: u64,
        slots: &[u8; SLOT_BYTES],
        actions: &mut Vec<Action>,
    ) {
        let mut changed = false;
        // The master whose slots this node serves: itself, or its master.
        let me = self.node(MYSELF);
        let serving = match me.master {
            Some(m) if !me.is_master() => m as u32,
            _ => MYSELF as u32,
        };
        // How many slots `s` claims, and how many of them it took from the
        // master this node serves.
        let (mut claimed, mut took_ours) = (0, 0);
        for slot in 0..SLOT_BYTES * 8 {
            if slots[slot / 8] & (1 << (slot % 8)) == 0 {
                continue;
            }
            claimed += 1;
            let owner = self.owners[slot];
            // A slot being imported is the operator's to give (SETSLOT NODE).
            if owner == s as u32 || self.importing.contains_key(&(slot as u16)) {
                continue;
            }
            if owner == NO_OWNER || self.node(owner as usize).config_epoch < epoch {
                took_ours += usize::from(owner == serving);
                self.owners[slot] = s as u32;
                changed = true;
            }
        }
        // Left without slots: follow their new owner, unless replica
        // migration is off and `s` holds more than what it took from here
        // (a failover's new master holds exactly that: it is followed).
        let follows = self.rules.allow_migration || claimed == took_ours;
        if took_ours > 0 && !self.owners.contains(&serving) && s != MYSELF && follows {
            self.follow_new_owner(s, actions);
            changed = true;
        }
        if changed {
            self.update_state();
            actions.push(Action::SaveConfig);
        }
    }

    /// Every slot this node served (its own, or its master's) went to `s`
    /// under a newer epoch: follow `s` (a replica promoted in its place, or
    /// in its master's place; a master back after a failover).
    pub(super) fn follow_new_owner(&mut self, s: usize, actions: &mut Vec<Action>) {
        let name = String::from_utf8_lossy(&self.node(s).name).into_owned();
        log(
            Level::Notice,
            &format!("Configuration change detected. Reconfiguring myself as a replica of {name}"),
        );
        self.become_replica_of(s);
        self.reset_manual_failover(actions);
    }

    /// This node replicates master `m` from now on. A master that turns
    /// replica gives up its slots in flight (Redis's `clusterSetMaster`
    /// closes them all): a replica migrates and imports nothing, and a
    /// migrating slot left behind kept `redis-cli --cluster check` warning
    /// about an open slot on a node that owns none.
    pub(super) fn become_replica_of(&mut self, m: usize) {
        if self.node(MYSELF).is_master() {
            self.migrating.clear();
            self.importing.clear();
        }
        let me = self.node_mut(MYSELF);
        me.flags = (me.flags | flag::REPLICA) & !flag::MASTER;
        me.master = Some(m);
        self.join_shard_of(m);
    }

    /// CLUSTER FAILOVER [FORCE|TAKEOVER] on this node, with redis-server
    /// 7.0's refusals.
    pub fn failover(&mut self, mode: FailoverMode, now: u64) -> Result<Vec<Action>, &'static str> {
        let me = self.node(MYSELF);
        if me.is_master() {
            return Err("ERR You should send CLUSTER FAILOVER to a replica");
        }
        let Some(m) = me.master.filter(|&m| self.nodes[m].is_some()) else {
            return Err("ERR I'm a replica but my master is unknown to me");
        };
        let master = self.node(m);
        if mode == FailoverMode::Default && (master.has(flag::FAIL) || master.link.is_none()) {
            return Err("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE");
        }
        let mut actions = Vec::new();
        self.reset_manual_failover(&mut actions);
        self.manual.end = now + MANUAL_FAILOVER_MS;
        match mode {
            FailoverMode::Takeover => {
                log(Level::Warning, "Taking over the master (user request).");
                // A config epoch above every one this node knows, as
                // `clusterBumpConfigEpochWithoutConsensus` (its current
                // epoch is never below a config epoch it saw).
                let seen = self.live().map(|(_, n)| n.config_epoch).max();
                self.current_epoch = self.current_epoch.max(seen.unwrap_or(0));
                self.bump_epoch();
                self.replace_master(m, now, &mut actions);
            }
            FailoverMode::Force => {
                log(Level::Warning, "Forced failover user request accepted.");
                self.manual.can_start = true;
            }
            FailoverMode::Default => {
                log(Level::Warning, "Manual failover user request accepted.");
                if let Some((link, _)) = self.node(m).link {
                    let start = Message::new(Kind::MfStart, self.header(), Body::Empty);
                    actions.push(Action::Send {
                        link,
                        message: Box::new(start),
                    });
                }
            }
        }
        actions.push(Action::SaveConfig);
        Ok(actions)
    }

    /// This master holds its writes for a replica's manual failover.
    pub fn pausing_for_failover(&self) -> bool {
        self.manual.end != 0 && self.manual.replica.is_some()
    }

    /// MFSTART from `s`: one of this master's replicas asks it to pause so
    /// that it can take over without losing writes.
    pub(super) fn manual_failover_requested(
        &mut self,
        s: usize,
        link: LinkId,
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        let sender = self.node(s);
        if sender.is_master() || sender.master != Some(MYSELF) {
            return;
        }
        let name = String::from_utf8_lossy(&sender.name).into_owned();
        self.reset_manual_failover(actions);
        self.manual.end = now + MANUAL_FAILOVER_MS;
        self.manual.replica = Some(s);
        actions.push(Action::PauseWrites {
            until: now + MANUAL_FAILOVER_MS * PAUSE_MULTIPLIER,
        });
        log(
            Level::Warning,
            &format!("Manual failover requested by replica {name}."),
        );
        // Its header carries the paused offset: the replica's wait starts.
        self.send_ping(link, Kind::Ping, Some(s), now, actions);
    }

    /// `s` sent a message flagged PAUSED at `offset`: if it is this
    /// replica's master during a manual failover, the offset to reach.
    pub(super) fn master_paused(&mut self, s: usize, offset: u64) {
        let me = self.node(MYSELF);
        let mine = !me.is_master() && me.master == Some(s);
        if mine && self.manual.end != 0 && self.manual.master_offset.is_none() {
            self.manual.master_offset = Some(offset);
        }
    }

    /// The manual failover's step of the cron: abandoned past its end; the
    /// master keeps PINGing the replica (its offset); the replica may start
    /// once it applied the paused master's offset.
    pub(super) fn manual_failover_cron(&mut self, now: u64, actions: &mut Vec<Action>) {
        if self.manual.end == 0 {
            return;
        }
        if now > self.manual.end {
            log(Level::Warning, "Manual failover timed out.");
            self.reset_manual_failover(actions);
            return;
        }
        if self.node(MYSELF).is_master() {
            let link = self
                .manual
                .replica
                .and_then(|r| self.nodes[r].as_ref())
                .and_then(|r| r.link);
            if let (Some((link, _)), Some(r)) = (link, self.manual.replica) {
                self.send_ping(link, Kind::Ping, Some(r), now, actions);
            }
            return;
        }
        let reached = self.manual.master_offset == Some(self.node(MYSELF).repl_offset);
        if !self.manual.can_start && reached {
            self.manual.can_start = true;
            log(
                Level::Warning,
                "All master replication stream processed, manual failover can start.",
            );
        }
    }

    /// No manual failover under way any more (a master lets its clients'
    /// writes go), as Redis's `resetManualFailover`.
    pub(super) fn reset_manual_failover(&mut self, actions: &mut Vec<Action>) {
        if self.manual.replica.is_some() {
            actions.push(Action::Unpause);
        }
        self.manual = ManualFailover::default();
    }
}
