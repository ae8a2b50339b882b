//! Claims on slots and epochs from other nodes, and what is refused, as
//! Redis 7's `clusterProcessPacket` judges them: a sender claiming slots whose
//! owner has a newer config epoch is answered with an UPDATE about that owner
//! (its claim changes nothing here); an UPDATE moves slots only under a newer
//! epoch than the one this node knows, and never this node's own; two masters
//! with one config epoch are separated; and a node this one does not know
//! claims nothing (its slots, FAIL and UPDATE are ignored).
//!
//! Why apart from the message loop (membership.rs): these are the rules that
//! keep a slot with its owner against bad or stale input from the network
//! (a master back from a partition, a forged or garbled message), read in one
//! place with the log line each refusal leaves, so an operator sees why a
//! claim did not take (tests/cluster_bus_input.rs sends each to a live node).

use super::{Action, Cluster, LinkId, MYSELF, NO_OWNER};
use crate::cluster::bus::message::{Body, Header, Kind, Message, NodeName, SLOT_BYTES};
use crate::serverlog::{log, Level};

/// A node name as the log shows it.
fn text(name: &NodeName) -> String {
    String::from_utf8_lossy(name).into_owned()
}

impl Cluster {
    /// A sender claiming a slot whose owner has a newer config epoch is told with
    /// an UPDATE about that owner (one per message, as Redis).
    pub(super) fn answer_stale_claim(
        &mut self,
        link: LinkId,
        s: usize,
        header: &Header,
        actions: &mut Vec<Action>,
    ) {
        for slot in 0..SLOT_BYTES * 8 {
            if header.slots[slot / 8] & (1 << (slot % 8)) == 0 {
                continue;
            }
            let owner = self.owners[slot];
            if owner == s as u32 || owner == NO_OWNER {
                continue;
            }
            let owner = owner as usize;
            if self.node(owner).config_epoch > header.config_epoch {
                log(
                    Level::Verbose,
                    &format!(
                        "Node {} has old slots configuration, sending an UPDATE message about {}",
                        text(&self.node(s).name),
                        text(&self.node(owner).name)
                    ),
                );
                let body = Body::Update {
                    config_epoch: self.node(owner).config_epoch,
                    node: self.node(owner).name,
                    slots: Box::new(self.slots_of(owner)),
                };
                let message = Message::new(Kind::Update, self.header(), body);
                actions.push(Action::Send {
                    link,
                    message: Box::new(message),
                });
                return;
            }
        }
    }

    /// An UPDATE from a known node: node `about` serves `slots` under
    /// `config_epoch`. Taken only when that epoch is newer than the one this
    /// node knows for it; one about this node itself moves no slot (Redis:
    /// "Discarding UPDATE message about myself.").
    pub(super) fn on_update(
        &mut self,
        config_epoch: u64,
        about: &NodeName,
        slots: &[u8; SLOT_BYTES],
        actions: &mut Vec<Action>,
    ) {
        let Some(n) = self.lookup(about) else {
            return;
        };
        let known = self.node(n).config_epoch;
        if known >= config_epoch {
            log(
                Level::Verbose,
                &format!(
                    "Ignoring UPDATE message about {} with config epoch {config_epoch}: \
                     not newer than {known}",
                    text(about)
                ),
            );
            return;
        }
        if !self.node(n).is_master() {
            self.set_master_role(n);
        }
        self.node_mut(n).config_epoch = config_epoch;
        actions.push(Action::SaveConfig);
        if n == MYSELF {
            log(Level::Warning, "Discarding UPDATE message about myself.");
            return;
        }
        self.update_slots_with(n, config_epoch, slots, actions);
    }

    /// Two masters with one config epoch: the one with the smaller name takes a
    /// new epoch (`clusterHandleConfigEpochCollision`).
    pub(super) fn handle_epoch_collision(&mut self, s: usize, actions: &mut Vec<Action>) {
        let (me, other) = (self.node(MYSELF), self.node(s));
        if other.config_epoch != me.config_epoch || !other.is_master() || !me.is_master() {
            return;
        }
        if other.name <= me.name {
            return;
        }
        self.current_epoch += 1;
        let epoch = self.current_epoch;
        self.node_mut(MYSELF).config_epoch = epoch;
        actions.push(Action::SaveConfig);
    }

    /// A PING, PONG or MEET from a node this one does not know (nor is
    /// meeting): answered, but the slots it claims change nothing. Said in the
    /// log when it claims any, since a node not in the table claiming slots is
    /// either one about to be met or input not to be trusted.
    pub(super) fn ignore_unknown_claim(&self, kind: Kind, header: &Header) {
        let claimed = header.slots.iter().map(|b| b.count_ones()).sum::<u32>();
        if claimed == 0 {
            return;
        }
        log(
            Level::Verbose,
            &format!(
                "Ignoring the {claimed} slots claimed by unknown node {} \
                 (config epoch {}) in a {} packet",
                text(&header.sender),
                header.config_epoch,
                kind.name()
            ),
        );
    }

    /// FAIL, UPDATE, PUBLISH, the votes and MFSTART from a node this one does
    /// not know are dropped: Redis logs the FAIL it ignores; the UPDATE is said
    /// too, since it is the one that would move slots.
    pub(super) fn ignore_unknown_sender(&self, message: &Message) {
        let sender = text(&message.header.sender);
        match &message.body {
            Body::Fail { node } => log(
                Level::Notice,
                &format!(
                    "Ignoring FAIL message from unknown node {sender} about {}",
                    text(node)
                ),
            ),
            Body::Update { node, .. } => log(
                Level::Notice,
                &format!(
                    "Ignoring UPDATE message from unknown node {sender} about {}",
                    text(node)
                ),
            ),
            _ => {}
        }
    }
}
