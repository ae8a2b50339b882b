//! Keyspace notifications (`notify-keyspace-events`): the engine's recorded events
//! published as `__keyspace@<db>__:<key>` (message: the event) and
//! `__keyevent@<db>__:<event>` (message: the key), as Redis publishes them.
//!
//! Events are recorded only while the setting is non-empty ([`wanted`]), so they
//! cost one comparison per command otherwise. A command's events are queued on its
//! shard and delivered once per loop iteration, through the Pub/Sub path
//! ([`crate::messaging::pubsub`]): to the shard's own subscribers, and in forward mode to the
//! other shards with subscribers (one server); in per-shard mode they stay on the
//! shard, as Redis Cluster's notifications stay on their node. Expired keys (lazy
//! and active expiry), added keys (`new`) and evicted keys are reported by the
//! engine and the eviction loop.

use crate::config::keyspace_events::*;
use crate::config::PortMode;
use crate::messaging::pubsub::{self, Caller, Delivery, Kind, Relay};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use ruvio_engine::command::{Effects, EventClass, Published};
use ruvio_engine::{KeyNote, KeyNoteKind};

/// True when the setting's `flags` ask for any channel: commands then record their
/// events.
pub fn wanted(flags: u32) -> bool {
    flags & (KEYSPACE | KEYEVENT) != 0
}

/// True when expired keys must be reported by the engine.
pub fn expiry_wanted(flags: u32) -> bool {
    flags & (KEYSPACE | KEYEVENT) != 0 && flags & EXPIRED != 0
}

/// Which key notes the engine must keep: added keys (the `new` class), missed
/// keys (`m`).
pub fn key_notes_wanted(flags: u32) -> (bool, bool) {
    let on = flags & (KEYSPACE | KEYEVENT) != 0;
    (on && flags & NEW != 0, on && flags & KEY_MISS != 0)
}

fn class_flag(class: EventClass) -> u32 {
    match class {
        EventClass::Generic => GENERIC,
        EventClass::String => STRING,
        EventClass::List => LIST,
        EventClass::Hash => HASH,
        EventClass::ZSet => ZSET,
        EventClass::Set => SET,
        EventClass::Expired => EXPIRED,
        EventClass::Stream => STREAM,
    }
}

/// Events waiting for the end of the loop iteration: `(flag, event, db, key)`.
#[derive(Debug, Default)]
pub struct Pending {
    events: Vec<(u32, &'static str, usize, Vec<u8>)>,
    /// Messages scripts published (see `scripting::host`).
    pub published: Vec<Published>,
}

impl Pending {
    /// Queue a command's recorded events that the setting's `flags` select, each
    /// key it added (`new`) or missed (`keymiss`, the engine's `notes`) announced
    /// just before the event that followed.
    pub fn queue_effects(&mut self, flags: u32, notes: Vec<KeyNote>, effects: &Effects) {
        let mut notes = notes.into_iter().peekable();
        for (i, (event, db, key)) in effects.events().enumerate() {
            while let Some(note) = notes.next_if(|k| k.before <= i) {
                self.queue_note(flags, &note);
            }
            let flag = class_flag(event.class);
            if flags & flag != 0 {
                self.events.push((flag, event.name, db, key.to_vec()));
            }
        }
        for note in notes {
            self.queue_note(flags, &note);
        }
    }

    fn queue_note(&mut self, flags: u32, note: &KeyNote) {
        match note.kind {
            KeyNoteKind::New => self.queue(flags, NEW, "new", note.db, &note.key),
            KeyNoteKind::Miss => self.queue(flags, KEY_MISS, "keymiss", note.db, &note.key),
        }
    }

    /// Queue the keys the engine expired (lazily in a command, or by active expiry).
    pub fn queue_expired_keys(&mut self, flags: u32, expired: Vec<(usize, Vec<u8>)>) {
        for (db, key) in expired {
            self.queue(flags, EXPIRED, "expired", db, &key);
        }
    }

    /// Queue one event when the setting's `flags` select it (an eviction, an
    /// expiry: the events the server itself raises).
    pub fn queue(&mut self, flags: u32, flag: u32, event: &'static str, db: usize, key: &[u8]) {
        if flags & (KEYSPACE | KEYEVENT) != 0 && flags & flag != 0 {
            self.events.push((flag, event, db, key.to_vec()));
        }
    }

    /// Publish the queued events (once per loop iteration, the setting's `flags`
    /// and the port `mode` as they are now), after what scripts published
    /// (`bus`: see [`Pending::deliver_published`]).
    pub fn deliver<R: Relay>(
        &mut self,
        flags: u32,
        (mode, bus): (PortMode, bool),
        to: &mut Delivery<'_>,
        relay: &mut R,
        conns: &mut Slab<Conn>,
    ) {
        self.deliver_published((mode, bus), to, relay, conns, None);
        if self.events.is_empty() {
            return;
        }
        let events = std::mem::take(&mut self.events);
        for (_, event, db, key) in &events {
            if flags & KEYSPACE != 0 {
                let mut channel = format!("__keyspace@{db}__:").into_bytes();
                channel.extend_from_slice(key);
                publish(mode, to, relay, conns, &channel, event.as_bytes());
            }
            if flags & KEYEVENT != 0 {
                let channel = format!("__keyevent@{db}__:{event}").into_bytes();
                publish(mode, to, relay, conns, &channel, key);
            }
        }
    }

    /// Publish what scripts published since the last call: once per loop
    /// iteration with the notifications, and before a client's PUBLISH on this
    /// shard, so that one publisher's messages (a script's, then its client's)
    /// stay in order. `caller` is the running connection, out of the slab while
    /// its command runs. `bus`: this shard is a per-shard node of the cluster
    /// bus, whose plain channels reach the process's other shards as any
    /// nodes, over the bus (the caller sent them there), not the mesh.
    pub fn deliver_published<R: Relay>(
        &mut self,
        (mode, bus): (PortMode, bool),
        to: &mut Delivery<'_>,
        relay: &mut R,
        conns: &mut Slab<Conn>,
        mut caller: Option<Caller<'_>>,
    ) {
        if self.published.is_empty() {
            return;
        }
        for p in std::mem::take(&mut self.published) {
            let kind = if p.shard_channel {
                Kind::Shard
            } else {
                Kind::Channel
            };
            let running = caller.as_mut().map(|c| Caller {
                out: &mut *c.out,
                proto: c.proto,
            });
            pubsub::deliver_here(to, conns, kind, &p.channel, &p.message, running);
            // SPUBLISH in per-shard mode reaches the channel's owner only: this node.
            if (p.shard_channel || bus) && mode == PortMode::PerShard {
                continue;
            }
            let me = to.shard;
            for (s, subscribers) in to.subscribers.shards.iter().enumerate() {
                if s != me && subscribers.may_receive(kind) {
                    relay.message(s, None, kind, &p.channel, &p.message);
                }
            }
        }
    }
}

/// Deliver here, and in forward mode to every other shard with subscribers.
fn publish<R: Relay>(
    mode: PortMode,
    to: &mut Delivery<'_>,
    relay: &mut R,
    conns: &mut Slab<Conn>,
    channel: &[u8],
    message: &[u8],
) {
    pubsub::deliver_here(to, conns, Kind::Channel, channel, message, None);
    if mode != PortMode::Forward {
        return;
    }
    let me = to.shard;
    for (s, subscribers) in to.subscribers.shards.iter().enumerate() {
        if s != me && subscribers.may_receive(Kind::Channel) {
            relay.message(s, None, Kind::Channel, channel, message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_as_redis_renders_them() {
        let cases = [
            ("", ""),
            ("KEA", "AKE"),
            ("AKEn", "AKE"),
            ("$lshzxetdgmn", "Am"),
            ("Kg$", "g$K"),
            ("Exn", "xnE"),
            ("Kmx", "xKm"),
        ];
        for (value, canonical) in cases {
            assert_eq!(
                parse(value).map(render).as_deref(),
                Some(canonical),
                "{value}"
            );
        }
        assert_eq!(parse("Kq"), None);
    }
}
