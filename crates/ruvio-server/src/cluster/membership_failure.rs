//! How a node finds another failed and how a replica takes its failed
//! master's place, as Redis 7 does: a node silent past the node timeout is
//! PFAIL (the cron's watch, `clusterCron`), PFAIL becomes FAIL by a majority of the
//! masters' reports (`markNodeAsFailingIfNeeded`) and is lifted when the node
//! answers again (`clearNodeFailureIfNeeded`); a replica of a FAILed master
//! asks for votes and takes its slots with a majority
//! (`clusterHandleSlaveFailover`), and a master votes once per epoch
//! (`clusterSendFailoverAuthIfNeeded`). CLUSTER REPLICATE sets the role the
//! election starts from.
//!
//! Apart from the message rules (membership.rs) because these are the rules a
//! reader checks against a failover's timeline: what counts as a majority,
//! which delays and epochs, who votes for whom. They read and change the same
//! [`Cluster`]; the messages that carry them are processed there.

use super::{Action, Cluster, LinkId, MYSELF, NO_OWNER};
use crate::cluster::bus::message::{
    node_flags as flag, Body, Header, Kind, Message, NodeName, MFLAG_FORCEACK, SLOT_BYTES,
};
use crate::serverlog::{log, Level};

/// Redis's `CLUSTER_CANT_FAILOVER_RELOG_PERIOD`: one reason is logged again
/// after this long at the soonest.
const CANT_FAILOVER_RELOG_MS: u64 = 10_000;
/// Redis's `nolog_fail_time` beyond the node timeout: a replica says why it
/// cannot fail over only once its master has been failing this much longer
/// (the log is for a replica stalled for long, not for the usual wait).
const CANT_FAILOVER_QUIET_MS: u64 = 5_000;

/// The settings a replica's automatic failover and replica migration obey
/// (CONFIG SET changes them while running).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailoverRules {
    /// `cluster-replica-no-failover`: never start an election on its own (a
    /// manual CLUSTER FAILOVER still runs).
    pub no_failover: bool,
    /// `cluster-replica-validity-factor`: a replica whose link to its master
    /// was down longer than `ping_period_ms + node_timeout * factor` (past
    /// the node timeout) does not run (0: any replica may).
    pub validity_factor: u64,
    /// `repl-ping-replica-period`, in milliseconds.
    pub ping_period_ms: u64,
    /// `cluster-migration-barrier`: a master gives a replica to an orphaned
    /// master only if it keeps this many working ones.
    pub migration_barrier: u64,
    /// `cluster-allow-replica-migration`.
    pub allow_migration: bool,
}

impl Default for FailoverRules {
    /// Redis's defaults.
    fn default() -> FailoverRules {
        FailoverRules {
            no_failover: false,
            validity_factor: 10,
            ping_period_ms: 10_000,
            migration_barrier: 1,
            allow_migration: true,
        }
    }
}

/// Why a replica of a failing master is not failing over, last logged
/// (`cant_failover_reason`, `lastlog_time`).
#[derive(Default)]
pub(super) struct CantFailover {
    reason: Option<&'static str>,
    logged_at: u64,
}

/// Where a replica is in taking over its failed master.
#[derive(Default)]
pub(super) struct Election {
    /// Unix ms the votes are asked for (0: no election).
    pub(super) start: u64,
    /// The epoch the votes are asked for.
    pub(super) epoch: u64,
    pub(super) requested: bool,
    pub(super) votes: usize,
}

impl Cluster {
    /// CLUSTER REPLICATE: this node, a master without slots, follows `master`.
    pub fn replicate(&mut self, master: &NodeName) -> Result<(), &'static str> {
        self.replicate_holding(master, false)
    }

    /// CLUSTER REPLICATE on a node whose database 0 `holds_keys`: a master
    /// must be empty (its keys would be replaced by the master's), as
    /// redis-server checks.
    pub fn replicate_holding(
        &mut self,
        master: &NodeName,
        holds_keys: bool,
    ) -> Result<(), &'static str> {
        let m = self.lookup(master).ok_or("ERR Unknown node")?;
        if m == MYSELF {
            return Err("ERR Can't replicate myself");
        }
        if !self.node(m).is_master() {
            return Err("ERR I can only replicate a master, not a replica.");
        }
        let master_itself = self.node(MYSELF).is_master();
        if master_itself && (self.owners.contains(&(MYSELF as u32)) || holds_keys) {
            return Err("ERR To set a master the node must be empty and without assigned slots.");
        }
        self.become_replica_of(m);
        self.update_state();
        Ok(())
    }

    /// A master's vote for a replica asking to replace its failed master
    /// (`clusterSendFailoverAuthIfNeeded`): one vote per epoch, not twice for
    /// one master within twice the node timeout, never for a claim on slots a
    /// newer config epoch owns.
    pub(super) fn vote_if_needed(
        &mut self,
        s: usize,
        header: &Header,
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        let me = self.node(MYSELF);
        if !me.is_master() || !self.owners.contains(&(MYSELF as u32)) {
            return;
        }
        if header.current_epoch < self.current_epoch || self.last_vote_epoch == self.current_epoch {
            return;
        }
        let requester = self.node(s);
        let Some(m) = requester.master.filter(|_| !requester.is_master()) else {
            return;
        };
        let forced = header.mflags[0] & MFLAG_FORCEACK != 0;
        let master = self.node(m);
        if !master.has(flag::FAIL) && !forced {
            return;
        }
        if now.saturating_sub(master.voted_time) < self.settings.node_timeout * 2 {
            return;
        }
        for slot in 0..SLOT_BYTES * 8 {
            if header.slots[slot / 8] & (1 << (slot % 8)) == 0 {
                continue;
            }
            let owner = self.owners[slot];
            if owner != NO_OWNER && self.node(owner as usize).config_epoch > header.config_epoch {
                return;
            }
        }
        self.last_vote_epoch = self.current_epoch;
        self.node_mut(m).voted_time = now;
        actions.push(Action::SaveConfig);
        if let Some((link, _)) = self.node(s).link {
            let message = Message::new(Kind::FailoverAuthAck, self.header(), Body::Empty);
            actions.push(Action::Send {
                link,
                message: Box::new(message),
            });
        }
    }

    /// A replica whose master FAILed asks the masters for votes after a short
    /// random delay, and takes its master's slots with a majority
    /// (`clusterHandleSlaveFailover`, `clusterFailoverReplaceYourMaster`).
    pub(super) fn run_election(&mut self, now: u64, actions: &mut Vec<Action>) {
        // CLUSTER FAILOVER (FORCE, or the master's stream caught up): the
        // election runs with the master alive, at once.
        let manual = self.manual.end != 0 && self.manual.can_start;
        let me = self.node(MYSELF);
        let failed_master = me
            .master
            .filter(|&m| !me.is_master() && self.nodes[m].is_some())
            .filter(|&m| self.node(m).has(flag::FAIL) || manual)
            .filter(|&m| self.owners.contains(&(m as u32)));
        let Some(m) = failed_master.filter(|_| manual || !self.rules.no_failover) else {
            self.election = Election::default();
            self.cant_failover.reason = None;
            return;
        };
        if !manual && self.data_too_old(now) {
            self.log_cant_failover(
                m,
                "Disconnected from master for longer than allowed. Please check the \
                 'cluster-replica-validity-factor' configuration option.",
                now,
            );
            return;
        }
        let auth_timeout = (self.settings.node_timeout * 2).max(2000);
        if now.saturating_sub(self.election.start) > auth_timeout * 2 {
            // A new election: wait 500-1000 ms so the FAIL reaches every master,
            // and a second more per replica of the master ahead of this one
            // (the one with the most data asks first: `clusterGetSlaveRank`).
            let delay = match manual {
                true => 0,
                false => 500 + self.next_random() % 500 + self.rank_among_replicas(m) * 1000,
            };
            self.election = Election {
                start: now + delay,
                ..Election::default()
            };
            if !manual {
                return;
            }
        }
        if now < self.election.start || now - self.election.start > auth_timeout {
            return;
        }
        if !self.election.requested {
            self.current_epoch += 1;
            self.election.epoch = self.current_epoch;
            self.election.requested = true;
            let mut header = self.header();
            if self.manual.end != 0 {
                // The masters vote though the master is not failing.
                header.mflags[0] |= MFLAG_FORCEACK;
            }
            let request = Message::new(Kind::FailoverAuthRequest, header, Body::Empty);
            self.broadcast(&request, actions);
            actions.push(Action::SaveConfig);
            return;
        }
        if self.election.votes <= self.size() / 2 {
            return;
        }
        let epoch = self.election.epoch;
        let me = self.node_mut(MYSELF);
        if me.config_epoch < epoch {
            me.config_epoch = epoch;
        }
        self.election = Election::default();
        self.replace_master(m, now, actions);
    }

    /// This replica takes its master `m`'s slots and tells every node
    /// (`clusterFailoverReplaceYourMaster`): after an election, or at once
    /// for CLUSTER FAILOVER TAKEOVER.
    pub(super) fn replace_master(&mut self, m: usize, now: u64, actions: &mut Vec<Action>) {
        let me = self.node_mut(MYSELF);
        me.flags = (me.flags | flag::MASTER) & !flag::REPLICA;
        me.master = None;
        for owner in self.owners.iter_mut().filter(|o| **o == m as u32) {
            *owner = MYSELF as u32;
        }
        self.reset_manual_failover(actions);
        self.update_state();
        actions.push(Action::SaveConfig);
        let links: Vec<(usize, LinkId)> = self
            .live()
            .filter(|(i, n)| *i != MYSELF && !n.has(flag::HANDSHAKE))
            .filter_map(|(i, n)| n.link.map(|(l, _)| (i, l)))
            .collect();
        for (_, link) in links {
            self.send_ping(link, Kind::Pong, None, now, actions);
        }
    }

    /// `clusterHandleSlaveFailover`'s data age: how long the link to the
    /// master has been down, less the node timeout (a master is down that
    /// long before it is FAIL), above `repl-ping-replica-period` plus
    /// `cluster-node-timeout` times `cluster-replica-validity-factor`. A link
    /// that runs counts as fresh data (Redis counts the time since its last
    /// byte, at most a ping period while it runs).
    fn data_too_old(&self, now: u64) -> bool {
        let rules = self.rules;
        if rules.validity_factor == 0 {
            return false;
        }
        let timeout = self.settings.node_timeout;
        let mut age = match self.master_link_down_since {
            None => 0,
            Some(since) => now.saturating_sub(since),
        };
        if age > timeout {
            age -= timeout;
        }
        let allowed = rules
            .ping_period_ms
            .saturating_add(timeout.saturating_mul(rules.validity_factor));
        age > allowed
    }

    /// `clusterLogCantFailover`: why this replica of failing master `m` does
    /// not fail over, once per reason every ten seconds, and not while the
    /// master failed only lately.
    fn log_cant_failover(&mut self, m: usize, reason: &'static str, now: u64) {
        let known = &self.cant_failover;
        if known.reason == Some(reason)
            && now.saturating_sub(known.logged_at) < CANT_FAILOVER_RELOG_MS
        {
            return;
        }
        self.cant_failover.reason = Some(reason);
        let master = self.node(m);
        let quiet = self.settings.node_timeout + CANT_FAILOVER_QUIET_MS;
        if master.has(flag::FAIL) && now.saturating_sub(master.fail_time) < quiet {
            return;
        }
        self.cant_failover.logged_at = now;
        log(
            Level::Warning,
            &format!("Currently unable to failover: {reason}"),
        );
    }

    /// CONFIG SET of the settings failover and replica migration obey; a
    /// replica that may not fail over says so in its flags (`nofailover`,
    /// `clusterUpdateMyselfFlags`), so the others' elections rank without it.
    pub fn set_failover_rules(&mut self, rules: FailoverRules) {
        self.rules = rules;
        let me = self.node_mut(MYSELF);
        let before = me.flags;
        me.flags = match rules.no_failover {
            true => me.flags | flag::NOFAILOVER,
            false => me.flags & !flag::NOFAILOVER,
        };
        if me.flags != before {
            self.pending.push(Action::SaveConfig);
        }
    }

    /// The settings failover and replica migration obey now.
    pub fn failover_rules(&self) -> FailoverRules {
        self.rules
    }

    /// How the replication link to this node's master is: `None` while its
    /// stream runs, else the Unix ms it stopped (0: it never ran, as Redis's
    /// `repl_down_since` starts).
    pub fn set_master_link(&mut self, down_since: Option<u64>) {
        self.master_link_down_since = down_since;
    }

    /// How many other replicas of master `m` have applied more of its
    /// stream than this node (by the offsets their messages carry).
    fn rank_among_replicas(&self, m: usize) -> u64 {
        let mine = self.node(MYSELF).repl_offset;
        let ahead = self.live().filter(|(i, n)| {
            *i != MYSELF
                && !n.is_master()
                && n.master == Some(m)
                && !n.has(flag::FAIL | flag::PFAIL | flag::NOFAILOVER)
                && n.repl_offset > mine
        });
        ahead.count() as u64
    }

    /// The cron's watch over the other nodes (`indexes`): a link that stopped
    /// answering is dropped (the next run reconnects), a node not pinged for
    /// half the node timeout is pinged, and one silent past the timeout is
    /// `fail?` (PFAIL), as `clusterCron` does.
    pub(super) fn detect_failures(
        &mut self,
        indexes: &[usize],
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        let timeout = self.settings.node_timeout;
        let mut changed = false;
        for &i in indexes {
            let Some(node) = self.nodes[i].as_ref() else {
                continue;
            };
            if i == MYSELF || node.has(flag::NOADDR | flag::HANDSHAKE) {
                continue;
            }
            let ping_delay = now.saturating_sub(node.ping_sent);
            let data_delay = now.saturating_sub(node.data_received);
            let stalled = node.link.filter(|&(_, since)| {
                now.saturating_sub(since) > timeout
                    && node.ping_sent != 0
                    && ping_delay > timeout / 2
                    && data_delay > timeout / 2
            });
            if let Some((link, _)) = stalled {
                // A link that stopped answering: drop it, the next run reconnects.
                self.links.remove(&link);
                self.node_mut(i).link = None;
                actions.push(Action::Close { link });
                continue;
            }
            let node = self.node(i);
            let quiet = node.ping_sent == 0 && now.saturating_sub(node.pong_received) > timeout / 2;
            if let Some((link, _)) = node.link.filter(|_| quiet) {
                self.send_ping(link, Kind::Ping, Some(i), now, actions);
                continue;
            }
            let node = self.node(i);
            if node.ping_sent == 0 {
                continue;
            }
            if ping_delay.min(data_delay) > timeout && !node.has(flag::PFAIL | flag::FAIL) {
                self.node_mut(i).flags |= flag::PFAIL;
                changed = true;
            }
        }
        if changed {
            self.update_state();
        }
    }

    /// The masters that serve at least one slot (Redis's `cluster->size`).
    pub fn size(&self) -> usize {
        let mut serving = vec![false; self.nodes.len()];
        for &owner in &self.owners {
            if owner != NO_OWNER {
                serving[owner as usize] = true;
            }
        }
        serving.iter().filter(|s| **s).count()
    }

    /// PFAIL becomes FAIL once a majority of the masters with slots report it
    /// (this node counting itself when it is one); then every node hears FAIL.
    pub(super) fn mark_failing_if_needed(&mut self, n: usize, now: u64, actions: &mut Vec<Action>) {
        let validity = self.settings.node_timeout * 2;
        let node = self.node(n);
        if !node.has(flag::PFAIL) || node.has(flag::FAIL) {
            return;
        }
        let mut failures = node
            .fail_reports
            .iter()
            .filter(|(_, at)| now.saturating_sub(*at) <= validity)
            .count();
        if self.node(MYSELF).is_master() {
            failures += 1;
        }
        if failures <= self.size() / 2 {
            return;
        }
        let node = self.node_mut(n);
        node.flags = (node.flags | flag::FAIL) & !flag::PFAIL;
        node.fail_time = now;
        let name = node.name;
        self.update_state();
        let message = Message::new(Kind::Fail, self.header(), Body::Fail { node: name });
        self.broadcast(&message, actions);
        actions.push(Action::SaveConfig);
    }

    /// A FAIL lifted when the node answers again: at once for replicas and
    /// masters without slots, after twice the node timeout for a master with
    /// slots nobody took over (`clearNodeFailureIfNeeded`).
    pub(super) fn clear_failure_if_needed(
        &mut self,
        n: usize,
        now: u64,
        actions: &mut Vec<Action>,
    ) {
        let owns_slots = self.owners.contains(&(n as u32));
        let node = self.node(n);
        let long_enough = now.saturating_sub(node.fail_time) > self.settings.node_timeout * 2;
        if !node.is_master() || !owns_slots || long_enough {
            self.node_mut(n).flags &= !flag::FAIL;
            self.update_state();
            actions.push(Action::SaveConfig);
        }
    }
}
