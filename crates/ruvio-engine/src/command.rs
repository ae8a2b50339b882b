//! The command table is data: every command's name, arity, flags, key positions and
//! ACL categories live in one `CommandMeta` value next to its handler. Routing,
//! MOVED/CROSSSLOT, COMMAND INFO/DOCS/COUNT/GETKEYS and (later) the WAL all read it.
//! Each family module exports `pub const COMMANDS: &[EngineCommand]`.

use ruvio_resp::{Args, Reply};

/// Command flags (Redis' `CMD_*`), as a bit set.
pub mod flags {
    pub const WRITE: u32 = 1 << 0;
    pub const READONLY: u32 = 1 << 1;
    pub const DENYOOM: u32 = 1 << 2;
    pub const ADMIN: u32 = 1 << 3;
    pub const PUBSUB: u32 = 1 << 4;
    pub const NOSCRIPT: u32 = 1 << 5;
    pub const BLOCKING: u32 = 1 << 6;
    pub const LOADING: u32 = 1 << 7;
    pub const STALE: u32 = 1 << 8;
    pub const SKIP_MONITOR: u32 = 1 << 9;
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    pub const FAST: u32 = 1 << 11;
    pub const NO_AUTH: u32 = 1 << 12;
    pub const MAY_REPLICATE: u32 = 1 << 13;
    pub const NO_MULTI: u32 = 1 << 14;
    pub const ALLOW_BUSY: u32 = 1 << 15;
    /// Ruvio: a multi-key command whose keys may be split across shards and the
    /// replies merged (MGET, MSET, DEL, UNLINK, EXISTS, TOUCH).
    pub const SPLITTABLE: u32 = 1 << 16;
    /// Ruvio: the command touches the whole keyspace of every shard (KEYS, DBSIZE,
    /// FLUSHALL, SCAN, RANDOMKEY ...); in forward mode it runs on all shards.
    pub const ALL_SHARDS: u32 = 1 << 17;

    /// Redis' flag names, in the order COMMAND INFO lists them.
    pub const NAMES: &[(u32, &str)] = &[
        (WRITE, "write"),
        (READONLY, "readonly"),
        (DENYOOM, "denyoom"),
        (ADMIN, "admin"),
        (PUBSUB, "pubsub"),
        (NOSCRIPT, "noscript"),
        (BLOCKING, "blocking"),
        (LOADING, "loading"),
        (STALE, "stale"),
        (SKIP_MONITOR, "skip_monitor"),
        (SKIP_SLOWLOG, "skip_slowlog"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// Key positions with Redis' (first, last, step) convention: `last = -1` means the
/// last argument, `-2` the one before it; `first = 0` means the command takes no keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    pub first: i32,
    pub last: i32,
    pub step: i32,
}

impl KeySpec {
    pub const NONE: KeySpec = KeySpec { first: 0, last: 0, step: 0 };
    pub const ONE: KeySpec = KeySpec { first: 1, last: 1, step: 1 };
    pub const ALL: KeySpec = KeySpec { first: 1, last: -1, step: 1 };

    /// Indexes of the key arguments of a command with `argc` arguments (including its name).
    pub fn positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let argc = argc as i32;
        let (first, step) = (self.first, self.step.max(1));
        let last = if self.last < 0 { argc + self.last } else { self.last.min(argc - 1) };
        let end = if first == 0 { 0 } else { last + 1 };
        (first.max(1)..end.max(first.max(1))).step_by(step as usize).map(|i| i as usize)
    }
}

/// Everything the table knows about a command apart from its handler.
#[derive(Debug)]
pub struct CommandMeta {
    /// Lower-case name as COMMAND reports it.
    pub name: &'static str,
    /// Redis' arity: positive = exact argument count (name included), negative = at least |arity|.
    pub arity: i32,
    /// Bit set of [`flags`].
    pub flags: u32,
    pub keys: KeySpec,
    /// ACL categories without the `@` (e.g. `["string", "fast"]`); `keyspace`,
    /// `read`/`write` etc. as Redis lists them.
    pub acl: &'static [&'static str],
    /// COMMAND DOCS: group (`string`, `generic`, `server`, `connection`, `cluster` ...).
    pub group: &'static str,
    /// COMMAND DOCS: one-line summary as Redis' docs.
    pub summary: &'static str,
    /// COMMAND DOCS: the Redis version that introduced it.
    pub since: &'static str,
    /// COMMAND DOCS: complexity text.
    pub complexity: &'static str,
}

impl CommandMeta {
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
    /// True when `argc` (name included) satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i32;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }
}

/// Per-call context the server passes to engine handlers.
#[derive(Debug)]
pub struct ExecCtx {
    /// Selected database index.
    pub db: usize,
    /// Wall-clock milliseconds since the Unix epoch, read once per read batch.
    pub now_ms: u64,
    /// CLIENT NO-TOUCH is on: reads don't update the access time.
    pub no_touch: bool,
}

/// A command handler running on the shard that owns its keys.
pub type EngineFn = fn(&mut crate::Engine, &mut ExecCtx, Args<'_>, &mut Reply<'_>);

/// One row of an engine family's command table.
#[derive(Debug)]
pub struct EngineCommand {
    pub meta: CommandMeta,
    pub handler: EngineFn,
}
