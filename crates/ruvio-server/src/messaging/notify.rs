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
use crate::messaging::pubsub::{self, Kind};
use crate::net::conn::Conn;
use crate::net::slab::Slab;
use crate::shard::ShardCore;
use ruvio_engine::command::{Effects, EventClass};
use ruvio_engine::{KeyNote, KeyNoteKind};

/// True when the setting asks for any channel: commands then record their events.
pub fn wanted(core: &ShardCore) -> bool {
    core.cfg.notify_keyspace_events & (KEYSPACE | KEYEVENT) != 0
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

/// Queue the keys the engine expired (lazily in a command, or by active expiry).
pub fn queue_expired_keys(core: &mut ShardCore, expired: Vec<(usize, Vec<u8>)>) {
    for (db, key) in expired {
        queue(core, EXPIRED, "expired", db, &key);
    }
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
    /// Messages scripts published (see `script_host`).
    pub published: Vec<ruvio_engine::command::Published>,
}

/// Queue a command's recorded events that the setting selects, each key it added
/// (`new`) or missed (`keymiss`) announced just before the event that followed.
pub fn queue_effects(core: &mut ShardCore, effects: &Effects) {
    let flags = core.cfg.notify_keyspace_events;
    let notes = core.engine.take_key_notes();
    let mut notes = notes.into_iter().peekable();
    for (i, (event, db, key)) in effects.events().enumerate() {
        while let Some(note) = notes.next_if(|k| k.before <= i) {
            queue_note(core, &note);
        }
        let flag = class_flag(event.class);
        if flags & flag != 0 {
            core.notifications
                .events
                .push((flag, event.name, db, key.to_vec()));
        }
    }
    for note in notes {
        queue_note(core, &note);
    }
}

fn queue_note(core: &mut ShardCore, note: &KeyNote) {
    match note.kind {
        KeyNoteKind::New => queue(core, NEW, "new", note.db, &note.key),
        KeyNoteKind::Miss => queue(core, KEY_MISS, "keymiss", note.db, &note.key),
    }
}

/// Queue one event the server itself raises (an eviction, an expiry).
pub fn queue(core: &mut ShardCore, flag: u32, event: &'static str, db: usize, key: &[u8]) {
    let flags = core.cfg.notify_keyspace_events;
    core.notifications.queue(flags, flag, event, db, key);
}

impl Pending {
    /// Queue one event when the setting's `flags` select it.
    pub fn queue(&mut self, flags: u32, flag: u32, event: &'static str, db: usize, key: &[u8]) {
        if flags & (KEYSPACE | KEYEVENT) != 0 && flags & flag != 0 {
            self.events.push((flag, event, db, key.to_vec()));
        }
    }
}

/// Publish the queued events (once per loop iteration), after what scripts
/// published.
pub fn deliver_pending(core: &mut ShardCore, conns: &mut Slab<Conn>) {
    crate::scripting::host::deliver(core, conns, None);
    if core.notifications.events.is_empty() {
        return;
    }
    let events = std::mem::take(&mut core.notifications.events);
    let flags = core.cfg.notify_keyspace_events;
    for (_, event, db, key) in &events {
        if flags & KEYSPACE != 0 {
            let mut channel = format!("__keyspace@{db}__:").into_bytes();
            channel.extend_from_slice(key);
            publish(core, conns, &channel, event.as_bytes());
        }
        if flags & KEYEVENT != 0 {
            let channel = format!("__keyevent@{db}__:{event}").into_bytes();
            publish(core, conns, &channel, key);
        }
    }
}

/// Deliver here, and in forward mode to every other shard with subscribers.
fn publish(core: &mut ShardCore, conns: &mut Slab<Conn>, channel: &[u8], message: &[u8]) {
    pubsub::deliver_here(core, conns, Kind::Channel, channel, message, None);
    if core.topo.mode != PortMode::Forward {
        return;
    }
    let me = core.id;
    let shards = core.shared.pubsub.shards.len();
    for to in (0..shards).filter(|&s| s != me) {
        if core.shared.pubsub.shards[to].may_receive(Kind::Channel) {
            core.outbox
                .message(to, None, Kind::Channel, channel, message);
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
