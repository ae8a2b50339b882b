//! The command table is data: every command's name, arity, flags, key positions and
//! ACL categories live in one `CommandMeta` value next to its handler. Routing,
//! MOVED/CROSSSLOT, COMMAND INFO/DOCS/COUNT/GETKEYS and (later) the WAL all read it.
//! Each family module exports `pub const COMMANDS: &[EngineCommand]`.

use ruvio_resp::{Args, Reply};

/// Command flags (Redis' `CMD_*`), as a bit set.
pub mod flags {
    /// May modify the dataset.
    pub const WRITE: u32 = 1 << 0;
    /// Only reads data.
    pub const READONLY: u32 = 1 << 1;
    /// May grow memory: refused when out of memory.
    pub const DENYOOM: u32 = 1 << 2;
    /// Administrative command.
    pub const ADMIN: u32 = 1 << 3;
    /// Pub/Sub related.
    pub const PUBSUB: u32 = 1 << 4;
    /// Not allowed in scripts.
    pub const NOSCRIPT: u32 = 1 << 5;
    /// May block the client.
    pub const BLOCKING: u32 = 1 << 6;
    /// Allowed while the dataset loads.
    pub const LOADING: u32 = 1 << 7;
    /// Allowed on a replica with stale data.
    pub const STALE: u32 = 1 << 8;
    /// Not shown to MONITOR.
    pub const SKIP_MONITOR: u32 = 1 << 9;
    /// Not recorded in the slow log.
    pub const SKIP_SLOWLOG: u32 = 1 << 10;
    /// O(1) or O(log N): eligible for the lean dispatch path.
    pub const FAST: u32 = 1 << 11;
    /// Allowed before AUTH.
    pub const NO_AUTH: u32 = 1 << 12;
    /// May produce replication traffic.
    pub const MAY_REPLICATE: u32 = 1 << 13;
    /// Not allowed inside MULTI.
    pub const NO_MULTI: u32 = 1 << 14;
    /// Allowed while a script is busy.
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
    /// Index of the first key (0: no keys).
    pub first: i32,
    /// Index of the last key; negative counts from the end.
    pub last: i32,
    /// Distance between keys.
    pub step: i32,
}

impl KeySpec {
    /// Keys at 1 and 2 (RENAME, COPY, LCS).
    pub const FIRST_TWO: KeySpec = KeySpec {
        first: 1,
        last: 2,
        step: 1,
    };
    /// Every other argument from 1 (MSET's key/value pairs).
    pub const PAIRS: KeySpec = KeySpec {
        first: 1,
        last: -1,
        step: 2,
    };
    /// The key after a subcommand name (OBJECT ENCODING key, MEMORY USAGE key).
    pub const SECOND: KeySpec = KeySpec {
        first: 2,
        last: 2,
        step: 1,
    };
    /// No keys.
    pub const NONE: KeySpec = KeySpec {
        first: 0,
        last: 0,
        step: 0,
    };
    /// One key at index 1.
    pub const ONE: KeySpec = KeySpec {
        first: 1,
        last: 1,
        step: 1,
    };
    /// Every argument after the name is a key.
    pub const ALL: KeySpec = KeySpec {
        first: 1,
        last: -1,
        step: 1,
    };

    /// Indexes of the key arguments of a command with `argc` arguments (including its name).
    pub fn positions(&self, argc: usize) -> impl Iterator<Item = usize> {
        let argc = argc as i32;
        let (first, step) = (self.first, self.step.max(1));
        let last = if self.last < 0 {
            argc + self.last
        } else {
            self.last.min(argc - 1)
        };
        let end = if first == 0 { 0 } else { last + 1 };
        (first.max(1)..end.max(first.max(1)))
            .step_by(step as usize)
            .map(|i| i as usize)
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
    /// Key positions.
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
    /// True when the row has `flag`.
    pub fn has(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }
    /// True when `argc` (name included) satisfies the arity.
    pub fn arity_ok(&self, argc: usize) -> bool {
        arity_fits(self.arity, argc)
    }
}

/// Redis' arity rule: a positive arity is the exact argument count (name included),
/// a negative one the least.
pub fn arity_fits(arity: i32, argc: usize) -> bool {
    let argc = argc.min(i32::MAX as usize) as i32;
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
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
    /// Everything but the handler.
    pub meta: CommandMeta,
    /// The handler.
    pub handler: EngineFn,
}

/// One table row: `command!(name, arity, flags, keys, [acl..], group, since, summary,
/// complexity, handler)`. A macro rather than a `const fn` so rows read like data.
macro_rules! command {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, [$($acl:literal),*], $group:literal,
     $since:literal, $summary:expr, $complexity:expr, $handler:expr) => {
        $crate::command::EngineCommand {
            meta: $crate::command::CommandMeta {
                name: $name,
                arity: $arity,
                flags: $flags,
                keys: $keys,
                acl: &[$($acl),*],
                group: $group,
                summary: $summary,
                since: $since,
                complexity: $complexity,
            },
            handler: $handler,
        }
    };
}
pub(crate) use command;

/// Redis' `addReplyHelp`: header, the lines, then `HELP` and its description, as
/// status replies.
pub fn reply_help(reply: &mut Reply<'_>, container: &[u8], lines: &[&str]) {
    let name = String::from_utf8_lossy(container).to_ascii_uppercase();
    reply.array(lines.len() + 3);
    reply.simple(&format!(
        "{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for line in lines {
        reply.simple(line);
    }
    reply.simple("HELP");
    reply.simple("    Print this help.");
}
