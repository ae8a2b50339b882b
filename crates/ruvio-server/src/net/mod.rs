//! The network edge: listening and accepted sockets ([`socket`]), one client
//! connection with its read buffer and client-visible state ([`conn`]; who runs
//! a command and how, as it travels with it: [`caller`]), the reply
//! queue that releases its replies in request order ([`reply_queue`]) with the
//! buffers of the replies parked behind its held slots ([`parked_buffers`]), the slab
//! that indexes a shard's connections ([`slab`]), where the slab is while a script
//! runs ([`lent`]), a client's Pub/Sub subscriptions ([`subscriptions`]), its
//! open transaction's queue as plain data ([`queued`]), and
//! `client-output-buffer-limit` ([`outlimit`]), and TLS
//! between a connection's socket and its plain buffers ([`tls`]).
//!
//! Shaped so because every other subsystem answers a client through a connection's
//! reply queue (a held slot for a forwarded command, a gate for a log group), so the
//! connection sits low: it knows bytes and slots, not what produced them.

pub mod caller;
pub mod conn;
pub mod lent;
pub mod outlimit;
pub mod parked_buffers;
pub mod queued;
pub mod reply_queue;
pub mod slab;
pub mod socket;
pub mod subscriptions;
pub mod tls;
