//! A client's Pub/Sub subscriptions: the names it subscribed to, by kind. Part of
//! the connection's state (as its watched keys are), so it sits with the
//! connection; who subscribes to what on every shard, and delivery, are
//! `messaging::pubsub`'s.

use ahash::AHashSet;

/// What a subscription names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// SUBSCRIBE: a channel.
    Channel = 0,
    /// PSUBSCRIBE: a glob pattern of channels.
    Pattern = 1,
    /// SSUBSCRIBE: a shard channel (a channel with a hash slot).
    Shard = 2,
}

impl Kind {
    /// The push message that confirms a subscription.
    pub fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }

    /// The push message that confirms an unsubscription.
    pub fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// One client's subscriptions.
#[derive(Debug, Default)]
pub struct Subscriptions {
    sets: [AHashSet<Vec<u8>>; 3],
}

impl Subscriptions {
    /// The names subscribed to of one kind.
    pub fn of(&self, kind: Kind) -> &AHashSet<Vec<u8>> {
        &self.sets[kind as usize]
    }

    /// Subscribed to anything: Redis' CLIENT_PUBSUB flag.
    pub fn active(&self) -> bool {
        self.sets.iter().any(|s| !s.is_empty())
    }

    /// The count a (un)subscribe confirmation carries: channels and patterns
    /// together, shard channels apart (as Redis counts them).
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Shard => self.sets[2].len(),
            _ => self.sets[0].len() + self.sets[1].len(),
        }
    }

    /// Add `name` of `kind`; false if it was there.
    pub fn insert(&mut self, kind: Kind, name: &[u8]) -> bool {
        self.sets[kind as usize].insert(name.to_vec())
    }

    /// Remove `name` of `kind`; false if it was not there.
    pub fn remove(&mut self, kind: Kind, name: &[u8]) -> bool {
        self.sets[kind as usize].remove(name)
    }

    /// Every name of `kind`, taken out.
    pub fn take(&mut self, kind: Kind) -> AHashSet<Vec<u8>> {
        std::mem::take(&mut self.sets[kind as usize])
    }
}
