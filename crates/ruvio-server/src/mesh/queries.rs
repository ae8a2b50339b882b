//! The questions every shard answers for its own part of the server, sent over
//! the mesh and gathered ([`super::gather`]): CLIENT LIST, KILL and UNBLOCK of
//! the clients each shard holds, DEBUG DIGEST, DIGEST-VALUE, POPULATE and OBJECT
//! of the keys it holds; a command asked of another shard in forward mode
//! (CLUSTER of the process's node, MIGRATE, a key of a slot in flight:
//! docs/cluster.md). Plain data, defined with the messages that carry them;
//! `cmd::client` builds them from a command's arguments and answers them on each
//! shard (`cmd::client::answer`).

use crate::net::conn::ClientState;

impl AskedCommand {
    /// `args` as `client` sends it.
    pub fn of(client: &ClientState, args: ruvio_resp::Args<'_>) -> AskedCommand {
        AskedCommand {
            args: args.iter().map(<[u8]>::to_vec).collect(),
            proto: client.proto,
            local: client.local.clone(),
            db: client.db,
            asking: client.asking,
            tls: client.tls,
            may_block: !client.in_exec,
        }
    }
}

/// Which clients CLIENT LIST or CLIENT KILL names: every filter given must match.
/// Plain data, so the question can go to the other shards (forward mode).
#[derive(Clone, Debug, Default)]
pub struct ClientFilter {
    /// ID: clients with one of these ids.
    pub ids: Option<Vec<u64>>,
    /// ADDR: the client's address (`ip:port`).
    pub addr: Option<String>,
    /// LADDR: the local address it connected to.
    pub laddr: Option<String>,
    /// USER: clients running as this ACL user.
    pub user: Option<Vec<u8>>,
    /// MAXAGE: connected at least this many milliseconds.
    pub min_age_ms: Option<i64>,
    /// SKIPME yes: the caller, who is not killed.
    pub skip_id: Option<u64>,
    /// TYPE pubsub (true) or normal (false): a client with subscriptions is of
    /// the pubsub class.
    pub pubsub: Option<bool>,
    /// TYPE master (true), or pubsub or normal (false): the primary's link is of
    /// the master class whatever else it is, as Redis's getClientType.
    pub master: Option<bool>,
    /// TYPE replica (true), or any other type (false).
    pub replica: Option<bool>,
}

impl ClientFilter {
    /// Whether client `c` matches every filter given (`now_ms` for MAXAGE).
    pub fn matches(&self, c: &ClientState, now_ms: u64) -> bool {
        self.skip_id != Some(c.id)
            && self.ids.as_ref().is_none_or(|ids| ids.contains(&c.id))
            && self.addr.as_ref().is_none_or(|a| *a == c.peer)
            && self.laddr.as_ref().is_none_or(|a| *a == c.local)
            && self
                .min_age_ms
                .is_none_or(|age| now_ms.saturating_sub(c.created_ms) as i64 >= age)
            && self.pubsub.is_none_or(|p| p == c.subs.active())
            && self
                .user
                .as_ref()
                .is_none_or(|u| u.as_slice() == c.acl.name())
            && self.master.is_none_or(|m| m == c.master)
            && self.replica.is_none_or(|r| r == c.replica.attached)
    }

    /// TYPE `ty` (lowercase): false when Redis knows no such type.
    pub fn client_type(&mut self, ty: &[u8]) -> bool {
        match ty {
            b"normal" => {
                (self.pubsub, self.master, self.replica) = (Some(false), Some(false), Some(false))
            }
            b"pubsub" => {
                (self.pubsub, self.master, self.replica) = (Some(true), Some(false), Some(false))
            }
            b"master" => self.master = Some(true),
            b"replica" | b"slave" => (self.master, self.replica) = (Some(false), Some(true)),
            _ => return false,
        }
        true
    }
}

/// A question every shard answers for its own part of the server: its clients
/// (CLIENT LIST, KILL) or its keys (DEBUG DIGEST, DIGEST-VALUE).
#[derive(Clone, Debug)]
pub enum ClientQuery {
    /// CLIENT LIST: each shard answers a bulk string of its lines.
    List(ClientFilter),
    /// CLIENT KILL: each shard closes its matching clients and answers how many.
    Kill(ClientFilter),
    /// CLIENT UNBLOCK of a command parked on the shard asked: it answers 1 when
    /// it unblocked it (a null array, or `-UNBLOCKED` when `error`), else 0.
    Unblock { client_id: u64, error: bool },
    /// DEBUG DIGEST: each shard answers its databases' parts ([`crate::net::conn::Merge::Digest`]).
    DatasetDigest,
    /// DEBUG DIGEST-VALUE: each shard answers the digest of each key of database
    /// `db` it holds, zeros for the rest ([`crate::net::conn::Merge::Digest`]).
    ValueDigests {
        /// The client's database.
        db: usize,
        /// The keys, in request order.
        keys: Vec<Vec<u8>>,
    },
    /// DEBUG POPULATE: each shard adds the keys it owns in forward mode (all of
    /// them in per-shard mode, as a Redis Cluster node does) and answers `+OK`.
    Populate {
        /// The client's database.
        db: usize,
        /// How many keys.
        count: u64,
        /// The key prefix (`key` by default).
        prefix: Vec<u8>,
        /// The value length (0: the value text as it is).
        value_bytes: usize,
    },
    /// DEBUG OBJECT, LISTPACK, QUICKLIST: the shard holding the key answers, the
    /// others nil ([`crate::net::conn::Merge::FoundOrNoSuchKey`]).
    DebugKey {
        /// The client's database.
        db: usize,
        /// The key.
        key: Vec<u8>,
        /// What is asked.
        report: ruvio_engine::debug_digest::KeyReport,
    },
    /// Forward mode: a command run on the shard asked, answered as to the
    /// client that sent it: CLUSTER of the process's node on shard 0 (which
    /// owns its membership) or on the shard holding a slot's keys; MIGRATE on
    /// the shard holding its keys; a keyed command of a slot in flight on the
    /// shard that knows which of its keys are there (`-ASK`, `-TRYAGAIN`).
    Run(Box<AskedCommand>),
}

/// A command sent to another shard, with what its answer reads of the client
/// that sent it.
#[derive(Clone, Debug)]
pub struct AskedCommand {
    /// The whole command.
    pub args: Vec<Vec<u8>>,
    /// The client's protocol (NODES is a verbatim string in RESP3).
    pub proto: ruvio_resp::Protocol,
    /// The address the client reached the server on (`ip:port`): the node's
    /// own address in NODES, SLOTS and SHARDS when bound to every interface.
    pub local: String,
    /// The client's database.
    pub db: usize,
    /// The client sent ASKING before it.
    pub asking: bool,
    /// The client came in on the TLS port (the ports a redirection or CLUSTER
    /// SLOTS names to it under `tls-cluster yes`).
    pub tls: bool,
    /// A blocking command may park there (not one of EXEC's queue).
    pub may_block: bool,
}
