//! Slots in flight: CLUSTER SETSLOT's MIGRATING, IMPORTING, STABLE and NODE,
//! as Redis 7.0's `clusterCommand` applies them, the state `redis-cli --cluster
//! reshard` walks a slot through (the target importing, the source migrating,
//! the keys moved by MIGRATE, then the slot given to the target by NODE).
//!
//! Apart from the protocol's rules (membership.rs) because none of it is said
//! on the bus: a slot in flight is this node's own note, shown in CLUSTER NODES
//! and nodes.conf (`[slot->-node]`, `[slot-<-node]`) and read by routing (`-ASK`
//! for a migrating slot's missing keys, ASKING for an importing slot's).

use super::{flag, Cluster, Kind, LinkId, Node, MYSELF};
use crate::cluster::bus::message::NodeName;

/// Slots, each with a node's name, as nodes.conf lists slots in flight.
pub(super) type SlotsNamed = Vec<(u16, String)>;

/// What CLUSTER SETSLOT does to a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetSlot<'a> {
    /// This node's slot moves to the named node.
    Migrating(&'a [u8]),
    /// The named node's slot moves here.
    Importing(&'a [u8]),
    /// Neither.
    Stable,
    /// The slot is the named node's from now on; `holds_keys`: this node still
    /// holds keys of it.
    Node(&'a [u8], bool),
}

impl Cluster {
    /// CLUSTER SETSLOT on `slot`, with Redis 7.0's checks and error text (the
    /// node names quoted as given), at Unix ms `now`.
    pub fn set_slot(&mut self, slot: u16, action: SetSlot<'_>, now: u64) -> Result<(), String> {
        if !self.node(MYSELF).is_master() {
            return Err("ERR Please use SETSLOT only with masters.".into());
        }
        let at = usize::from(slot);
        let mine = self.owners[at] == MYSELF as u32;
        let master = |cluster: &Cluster, name: &[u8], unknown: &str| {
            let found = <NodeName>::try_from(name)
                .ok()
                .and_then(|n| cluster.lookup(&n));
            let Some(i) = found else {
                return Err(format!("ERR {unknown} {}", String::from_utf8_lossy(name)));
            };
            match cluster.node(i).is_master() {
                true => Ok(i),
                false => Err("ERR Target node is not a master".to_string()),
            }
        };
        match action {
            SetSlot::Migrating(name) => {
                if !mine {
                    return Err(format!("ERR I'm not the owner of hash slot {slot}"));
                }
                let i = master(self, name, "I don't know about node")?;
                self.migrating.insert(slot, i);
            }
            SetSlot::Importing(name) => {
                if mine {
                    return Err(format!("ERR I'm already the owner of hash slot {slot}"));
                }
                let i = master(self, name, "I don't know about node")?;
                self.importing.insert(slot, i);
            }
            SetSlot::Stable => {
                self.migrating.remove(&slot);
                self.importing.remove(&slot);
            }
            SetSlot::Node(name, holds_keys) => {
                let i = master(self, name, "Unknown node")?;
                if mine && i != MYSELF && holds_keys {
                    return Err(format!(
                        "ERR Can't assign hashslot {slot} to a different node while I still hold keys for this hash slot."
                    ));
                }
                if !holds_keys {
                    self.migrating.remove(&slot);
                }
                // The import is over: a new config epoch without a vote, so
                // this node's claim wins over the old owner's.
                self.owners[at] = i as u32;
                // A master that gave its last slot away follows the slot's new
                // owner (Redis 7.0, with `cluster-allow-replica-migration`).
                let emptied = mine && i != MYSELF && !self.owners.contains(&(MYSELF as u32));
                if emptied && self.rules.allow_migration {
                    let mut actions = Vec::new();
                    self.follow_new_owner(i, &mut actions);
                    self.pending.extend(actions);
                }
                if i == MYSELF && self.importing.remove(&slot).is_some() {
                    self.bump_epoch();
                    self.broadcast_pong(now);
                }
            }
        }
        self.generation += 1;
        self.update_state();
        Ok(())
    }

    /// Tell every node this node's slots and epochs at once
    /// (`clusterBroadcastPong`).
    fn broadcast_pong(&mut self, now: u64) {
        let links: Vec<(usize, LinkId)> = self
            .live()
            .filter(|(i, n)| *i != MYSELF && !n.has(flag::HANDSHAKE))
            .filter_map(|(i, n)| n.link.map(|(l, _)| (i, l)))
            .collect();
        let mut actions = Vec::new();
        for (to, link) in links {
            self.send_ping(link, Kind::Pong, Some(to), now, &mut actions);
        }
        self.pending.extend(actions);
    }

    /// A whole-slot migration's end on the target (`cluster/slot_migration.rs`):
    /// `slots` are this node's in one step, under a config epoch bumped without
    /// a vote (as SETSLOT NODE ends an import), told to every node at once, so
    /// its claim wins over the old owner's everywhere.
    pub fn claim_slots(&mut self, slots: &[u16], now: u64) {
        for &slot in slots {
            self.owners[usize::from(slot)] = MYSELF as u32;
            self.importing.remove(&slot);
        }
        self.bump_epoch();
        self.broadcast_pong(now);
        self.generation += 1;
        self.update_state();
    }

    /// A whole-slot migration's end on the source: `slots` are the node
    /// `to`'s from now on (as SETSLOT NODE on the old owner; the new owner's
    /// newer epoch confirms it on the bus). False when `to` is not known.
    pub fn give_slots(&mut self, slots: &[u16], to: &NodeName) -> bool {
        let Some(i) = self.lookup(to) else {
            return false;
        };
        for &slot in slots {
            self.owners[usize::from(slot)] = i as u32;
            self.migrating.remove(&slot);
        }
        self.generation += 1;
        self.update_state();
        true
    }

    /// Node `name`, when known: whether it is a master, and its client
    /// address.
    pub fn node_named(&self, name: &NodeName) -> Option<(bool, &str, u16)> {
        let node = self.node(self.lookup(name)?);
        Some((node.is_master(), node.ip.as_str(), node.port))
    }

    /// The node `slot` is migrating to (name, ip, client port), when this node
    /// has marked it MIGRATING.
    pub fn migrating_to(&self, slot: u16) -> Option<(NodeName, &str, u16)> {
        let node = self.nodes[*self.migrating.get(&slot)?].as_ref()?;
        Some((node.name, node.ip.as_str(), node.port))
    }

    /// This node has marked `slot` IMPORTING.
    pub fn importing(&self, slot: u16) -> bool {
        self.importing.contains_key(&slot)
    }

    /// Some slot is migrating or importing (routing looks closer only then).
    pub fn slots_in_flight(&self) -> bool {
        !self.migrating.is_empty() || !self.importing.is_empty()
    }

    /// This node's migrating slots, each with the node it moves to: what
    /// `-ASK` names (the slot map's copy).
    pub fn migrating_slots(&self) -> impl Iterator<Item = (u16, &Node)> + '_ {
        self.migrating
            .iter()
            .filter_map(|(&slot, &i)| Some((slot, self.nodes.get(i)?.as_ref()?)))
    }

    /// This node's importing slots.
    pub fn importing_slots(&self) -> impl Iterator<Item = u16> + '_ {
        self.importing.keys().copied()
    }

    /// This node's slots in flight as nodes.conf lists them on its own line:
    /// (migrating, importing), each slot with the other node's name.
    pub(super) fn in_flight_lines(&self) -> (SlotsNamed, SlotsNamed) {
        let named = |map: &std::collections::BTreeMap<u16, usize>| {
            map.iter()
                .filter_map(|(&slot, &i)| {
                    let node = self.nodes[i].as_ref()?;
                    Some((slot, String::from_utf8_lossy(&node.name).into_owned()))
                })
                .collect()
        };
        (named(&self.migrating), named(&self.importing))
    }

    /// Node `i` is forgotten: no slot moves to or from it any more.
    pub(super) fn forget_in_flight(&mut self, i: usize) {
        self.migrating.retain(|_, to| *to != i);
        self.importing.retain(|_, from| *from != i);
    }

    /// nodes.conf's slots in flight for this node, read back at start.
    pub(super) fn restore_in_flight(
        &mut self,
        migrating: &[(u16, String)],
        importing: &[(u16, String)],
    ) {
        let index = |cluster: &Cluster, name: &str| {
            <NodeName>::try_from(name.as_bytes())
                .ok()
                .and_then(|n| cluster.lookup(&n))
        };
        for (slot, name) in migrating {
            if let Some(i) = index(self, name) {
                self.migrating.insert(*slot, i);
            }
        }
        for (slot, name) in importing {
            if let Some(i) = index(self, name) {
                self.importing.insert(*slot, i);
            }
        }
    }
}
