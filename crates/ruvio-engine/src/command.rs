//! The command table is data: every command's name, arity, flags, key positions,
//! ACL categories and cross-shard merge rule live in one `CommandMeta` value next to
//! its handler and, for a container (CLIENT, OBJECT ...), its subcommand rows.
//! Routing, MOVED/CROSSSLOT, COMMAND INFO/DOCS/COUNT/GETKEYS and (later) the WAL all
//! read it. Each family module exports `pub const COMMANDS: &[EngineCommand]`; the
//! server's families write their rows in the same [`CommandRow`] format with the same
//! [`command!`] macro, only with a handler type of their own. What one call is
//! handed and leaves behind ([`ExecCtx`], [`Effects`], [`Outcome`]) is
//! `command/effects.rs`, re-exported here.

use crate::error::CmdError;
use ruvio_resp::{Args, Reply};

mod effects;
pub use effects::{
    Block, Effects, Event, EventClass, ExecCtx, KeyList, LogRecords, Outcome, Published, Recorded,
};

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

    /// Ruvio: a `DB index` option names the database of the command's last key
    /// (COPY ... DB n); borrowing across shards fetches that key there.
    pub const DB_OPTION: u32 = 1 << 18;
    /// Redis' `no_mandatory_keys`: the key arguments may be absent (EVAL with 0 keys).
    pub const NO_MANDATORY_KEYS: u32 = 1 << 19;
    /// Redis' `no_async_loading`: refused while a replica loads asynchronously
    /// (SAVE); listed for COMMAND INFO.
    pub const NO_ASYNC_LOADING: u32 = 1 << 20;
    /// Ruvio's own: a container whose subcommands Redis' command table does not list
    /// (DEBUG): an unknown subcommand and a wrong argument count both answer Redis'
    /// `addReplySubcommandSyntaxError`, as the container's one handler does there.
    pub const SUBCOMMANDS_UNLISTED: u32 = 1 << 21;
    /// Redis' `asking`: served on a slot this node imports as if ASKING came
    /// first (RESTORE-ASKING, which a migrating node's MIGRATE sends).
    pub const ASKING: u32 = 1 << 22;

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
        (ASKING, "asking"),
        (FAST, "fast"),
        (NO_AUTH, "no_auth"),
        (MAY_REPLICATE, "may_replicate"),
        (NO_MANDATORY_KEYS, "no_mandatory_keys"),
        (NO_ASYNC_LOADING, "no_async_loading"),
        (NO_MULTI, "no_multi"),
        (ALLOW_BUSY, "allow_busy"),
    ];
}

/// One way a command names its keys (Redis' key specs, reduced to what routing needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyShape {
    /// Redis' legacy `(first, last, step)`: `last = -1` is the last argument, `-2` the
    /// one before it (BLPOP's keys before the timeout).
    Range {
        /// Index of the first key.
        first: i32,
        /// Index of the last key; negative counts from the end.
        last: i32,
        /// Distance between keys.
        step: i32,
    },
    /// A key count at index `at`, then that many keys (LMPOP at 1, BLMPOP and EVAL
    /// at 2, ZUNIONSTORE's sources at 2).
    NumKeys {
        /// Index of the `numkeys` argument.
        at: usize,
    },
    /// A pair count at index `at`, then that many key/value pairs: the keys are
    /// every other argument after it (MSETEX; Redis' keynum spec with `keystep 2`).
    NumKeyPairs {
        /// Index of the `numkeys` argument.
        at: usize,
    },
    /// Keys introduced by a keyword, searched from index `from`: the first half of
    /// the arguments after it are keys, the second half their values (XREAD ...
    /// STREAMS k1 k2 id1 id2; Redis' keyword spec with `lastkey -1, limit 2`).
    KeywordHalf {
        /// The keyword, matched without case.
        keyword: &'static str,
        /// First index searched.
        from: usize,
    },
    /// The argument after the first `keyword` at or after index `from`, the last
    /// argument excluded (Redis' keyword key spec with `lastkey 0`: GEORADIUS ...
    /// STORE key).
    Keyword {
        /// The keyword, matched without case.
        keyword: &'static str,
        /// First index searched.
        from: usize,
    },
    /// The argument after the last of these keywords at or after index `from`,
    /// unless an earlier shape listed it: the key a command with repeated options
    /// really writes (GEORADIUS ... STORE a STORE b writes b, which Redis' key
    /// specs do not name).
    AfterLastKeyword {
        /// The keywords, matched without case.
        keywords: &'static [&'static str],
        /// First index searched.
        from: usize,
    },
    /// The argument after the last `keyword` among options scanned from index
    /// `from`, where each option named in `skips` takes that many arguments (SORT
    /// ... STORE dst: Redis' `sortGetKeys`, quirks included: the scan goes on at
    /// the key itself, so `STORE limit a b` skips two).
    OptionKey {
        /// The keyword naming the key (`STORE`), matched without case.
        keyword: &'static str,
        /// First index scanned.
        from: usize,
        /// Options whose arguments are skipped, and how many each takes.
        skips: &'static [(&'static str, usize)],
    },
    /// The keys after `keyword`, in place of the key at `key_at`, when the
    /// option scan from `from` (each option in `skips` taking that many
    /// arguments) meets it: MIGRATE host port "" db timeout ... KEYS k1 k2
    /// (Redis' `migrateGetKeys`). The key at `key_at` must then be empty, else
    /// the call names no key (the handler answers Redis' error); without the
    /// keyword the shapes before this one stand. The legacy range Redis shows
    /// for such a command is the one before it.
    KeysReplacing {
        /// Index of the key the list replaces.
        key_at: usize,
        /// The keyword, matched without case.
        keyword: &'static str,
        /// First index scanned.
        from: usize,
        /// Options whose arguments are skipped, and how many each takes.
        skips: &'static [(&'static str, usize)],
    },
    /// Keys that no argument names: they are read from a value (SORT's BY and GET
    /// patterns build key names from the sorted elements; Redis' `unknown` key
    /// spec). Yields no position; it makes the command `movablekeys`, and tells
    /// forward mode to ask the engine for them (`Engine::value_keys`).
    FromValue,
}

/// Where a command's keys are: a list of [`KeyShape`]s read in order (ZUNIONSTORE:
/// the destination range, then the numkeys sources). Routing, CROSSSLOT, prefetch,
/// COMMAND GETKEYS/INFO and the blocking machinery all read this one description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec(pub &'static [KeyShape]);

/// Most keys a spec yields before the rest of the routing code must allocate.
pub type KeyPositions = smallvec::SmallVec<[usize; 8]>;

impl KeySpec {
    const fn range(first: i32, last: i32, step: i32) -> KeyShape {
        KeyShape::Range { first, last, step }
    }
    /// Keys at 1 and 2 (RENAME, COPY, LCS, LMOVE).
    pub const FIRST_TWO: KeySpec = KeySpec(&[Self::range(1, 2, 1)]);
    /// Every other argument from 1 (MSET's key/value pairs).
    pub const PAIRS: KeySpec = KeySpec(&[Self::range(1, -1, 2)]);
    /// The key after a subcommand name (OBJECT ENCODING key, MEMORY USAGE key).
    pub const SECOND: KeySpec = KeySpec(&[Self::range(2, 2, 1)]);
    /// No keys.
    pub const NONE: KeySpec = KeySpec(&[]);
    /// One key at index 1.
    pub const ONE: KeySpec = KeySpec(&[Self::range(1, 1, 1)]);
    /// Every argument after the name is a key.
    pub const ALL: KeySpec = KeySpec(&[Self::range(1, -1, 1)]);
    /// Every argument but the last (BLPOP k1 k2 timeout).
    pub const ALL_BUT_LAST: KeySpec = KeySpec(&[Self::range(1, -2, 1)]);
    /// `numkeys` at 1, keys after it (LMPOP).
    pub const NUMKEYS_AT_1: KeySpec = KeySpec(&[KeyShape::NumKeys { at: 1 }]);
    /// `numkeys` at 2, keys after it (BLMPOP, EVAL).
    pub const NUMKEYS_AT_2: KeySpec = KeySpec(&[KeyShape::NumKeys { at: 2 }]);

    /// True when the command takes no keys at all.
    pub fn is_none(&self) -> bool {
        self.0.is_empty()
    }

    /// True when some of the command's keys are read from a value rather than
    /// named by its arguments ([`KeyShape::FromValue`]).
    pub fn reads_keys_from_value(&self) -> bool {
        self.0.contains(&KeyShape::FromValue)
    }

    /// True when where the keys are depends on the arguments (COMMAND INFO's
    /// `movablekeys`).
    pub fn is_movable(&self) -> bool {
        self.0.iter().any(|s| !matches!(s, KeyShape::Range { .. }))
    }

    /// Redis' legacy `(first, last, step)` triple for COMMAND INFO: the leading range
    /// spec, `(0, 0, 0)` when the keys move.
    pub fn legacy_range(&self) -> (i32, i32, i32) {
        match self.0.first() {
            Some(&KeyShape::Range { first, last, step }) => (first, last, step),
            _ => (0, 0, 0),
        }
    }

    /// The key positions of a spec that is one run of consecutive keys: a range
    /// of step 1 (GET, MGET, DEL: most commands) or a key count then its keys
    /// (EVAL, EVALSHA, FCALL, LMPOP), without building
    /// [`positions`](Self::positions)' list: for callers on the request path.
    /// `None` for any other spec.
    #[inline]
    pub fn single_range(&self, args: ruvio_resp::Args<'_>) -> Option<std::ops::Range<usize>> {
        match self.0 {
            [KeyShape::Range {
                first,
                last,
                step: 1,
            }] => {
                // `range_positions` with step 1, as a plain range.
                let argc = args.len().min(i32::MAX as usize) as i32;
                let last = if *last < 0 {
                    argc + last
                } else {
                    (*last).min(argc - 1)
                };
                let begin = (*first).max(1);
                let end = if *first == 0 { 0 } else { last + 1 };
                Some(begin as usize..end.max(begin) as usize)
            }
            // As `positions` counts them: a count that is not a whole number
            // in 1..argc - at names no key.
            [KeyShape::NumKeys { at }] => {
                let (at, argc) = (*at, args.len());
                let count = (at < argc)
                    .then(|| crate::args::parse_i64(args.get(at)))
                    .flatten()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n > 0 && n < argc - at)
                    .unwrap_or(0);
                Some(at + 1..at + 1 + count)
            }
            _ => None,
        }
    }

    /// The index of the one key of a spec that names exactly one (a single
    /// range from `i` to `i`: GET's, SET's), when `argc` arguments reach it:
    /// the routing of nearly every request, without building
    /// [`positions`](Self::positions) (some 130 instructions a GET).
    #[inline]
    pub fn only_key(&self, argc: usize) -> Option<usize> {
        match *self.0 {
            [KeyShape::Range { first, last, .. }] if first == last && first > 0 => {
                Some(first as usize).filter(|&at| at < argc)
            }
            _ => None,
        }
    }

    /// Index of the first key when it does not depend on the arguments (the
    /// prefetch pass only looks there).
    pub fn fixed_first(&self) -> Option<usize> {
        match self.0.first() {
            Some(&KeyShape::Range { first, .. }) if first > 0 => Some(first as usize),
            _ => None,
        }
    }

    /// The key arguments themselves, in argument order ([`KeySpec::positions`]
    /// read from `args`): what routing, tracking and transactions look at.
    pub fn keys<'a>(&self, args: ruvio_resp::Args<'a>) -> impl Iterator<Item = &'a [u8]> {
        self.positions(args).into_iter().map(move |p| args.get(p))
    }

    /// Indexes of the key arguments in `args` (name at 0), in argument order. A
    /// numkeys argument that is not a count within the arguments yields no keys from
    /// that shape (the handler then answers Redis' error).
    pub fn positions(&self, args: ruvio_resp::Args<'_>) -> KeyPositions {
        let argc = args.len();
        let mut out = KeyPositions::new();
        for shape in self.0 {
            match *shape {
                KeyShape::Range { first, last, step } => {
                    out.extend(range_positions(first, last, step, argc))
                }
                KeyShape::NumKeys { at } => {
                    let count = (at < argc)
                        .then(|| crate::args::parse_i64(args.get(at)))
                        .flatten()
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|&n| n > 0 && n < argc - at);
                    if let Some(n) = count {
                        out.extend(at + 1..at + 1 + n);
                    }
                }
                KeyShape::NumKeyPairs { at } => {
                    let pairs = (at < argc)
                        .then(|| crate::args::parse_i64(args.get(at)))
                        .flatten()
                        .and_then(|n| usize::try_from(n).ok())
                        .filter(|&n| n > 0 && n <= (argc - at - 1) / 2);
                    if let Some(n) = pairs {
                        out.extend((0..n).map(|i| at + 1 + 2 * i));
                    }
                }
                KeyShape::KeywordHalf { keyword, from } => {
                    let found = (from..argc)
                        .find(|&i| args.get(i).eq_ignore_ascii_case(keyword.as_bytes()));
                    if let Some(k) = found {
                        let rest = argc - k - 1;
                        // An odd remainder has no well-formed keys (the handler errors).
                        if rest > 0 && rest.is_multiple_of(2) {
                            out.extend(k + 1..k + 1 + rest / 2);
                        }
                    }
                }
                KeyShape::Keyword { keyword, from } => {
                    let found = (from..argc.saturating_sub(1))
                        .find(|&i| args.get(i).eq_ignore_ascii_case(keyword.as_bytes()));
                    out.extend(found.map(|i| i + 1));
                }
                KeyShape::AfterLastKeyword { keywords, from } => {
                    let mut found = None;
                    let mut i = from;
                    while i + 1 < argc {
                        let arg = args.get(i);
                        if keywords
                            .iter()
                            .any(|k| arg.eq_ignore_ascii_case(k.as_bytes()))
                        {
                            found = Some(i + 1);
                            i += 1;
                        }
                        i += 1;
                    }
                    out.extend(found.filter(|k| !out.contains(k)));
                }
                KeyShape::OptionKey {
                    keyword,
                    from,
                    skips,
                } => out.extend(option_key(args, keyword, from, skips)),
                KeyShape::KeysReplacing {
                    key_at,
                    keyword,
                    from,
                    skips,
                } => {
                    if let Some(list) = keyword_scan(args, keyword, from, skips) {
                        out.retain(|p| *p != key_at);
                        if key_at < argc && args.get(key_at).is_empty() {
                            out.extend(list..argc);
                        }
                    }
                }
                KeyShape::FromValue => {}
            }
        }
        out
    }
}

/// [`KeyShape::OptionKey`]'s scan: the index after the last `keyword` that has an
/// argument after it, skipping the arguments of the options in `skips`.
fn option_key(
    args: ruvio_resp::Args<'_>,
    keyword: &str,
    from: usize,
    skips: &[(&str, usize)],
) -> Option<usize> {
    let mut found = None;
    let mut i = from;
    while i < args.len() {
        let arg = args.get(i);
        let skip = skips
            .iter()
            .find(|(name, _)| arg.eq_ignore_ascii_case(name.as_bytes()));
        match skip {
            Some(&(_, n)) => i = i.saturating_add(n),
            None if arg.eq_ignore_ascii_case(keyword.as_bytes()) && i + 1 < args.len() => {
                found = Some(i + 1)
            }
            None => {}
        }
        i = i.saturating_add(1);
    }
    found
}

/// [`KeyShape::KeysReplacing`]'s scan: the index after the first `keyword`
/// that is not the last argument, skipping the arguments of the options in
/// `skips` (a trailing KEYS introduces no list, as in Redis).
fn keyword_scan(
    args: ruvio_resp::Args<'_>,
    keyword: &str,
    from: usize,
    skips: &[(&str, usize)],
) -> Option<usize> {
    let mut i = from;
    while i + 1 < args.len() {
        let arg = args.get(i);
        if arg.eq_ignore_ascii_case(keyword.as_bytes()) {
            return Some(i + 1);
        }
        if let Some(&(_, n)) = skips
            .iter()
            .find(|(name, _)| arg.eq_ignore_ascii_case(name.as_bytes()))
        {
            i = i.saturating_add(n);
        }
        i = i.saturating_add(1);
    }
    None
}

/// The positions of one legacy range in a command of `argc` arguments.
fn range_positions(first: i32, last: i32, step: i32, argc: usize) -> impl Iterator<Item = usize> {
    let argc = argc.min(i32::MAX as usize) as i32;
    let step = step.max(1);
    let last = if last < 0 {
        argc + last
    } else {
        last.min(argc - 1)
    };
    let begin = first.max(1);
    let end = if first == 0 { 0 } else { last + 1 };
    (begin..end.max(begin))
        .step_by(step as usize)
        .map(|i| i as usize)
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
    /// How the replies of the shards combine when the command runs on several
    /// ([`flags::SPLITTABLE`] and [`flags::ALL_SHARDS`] rows); `None` for the rest.
    pub merge: Option<MergeRule>,
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
    /// A subcommand's own name, after the `|` (`list` for `client|list`).
    pub fn subcommand_name(&self) -> &'static str {
        self.name.split_once('|').map_or(self.name, |(_, sub)| sub)
    }
}

/// How the partial replies of a command that spans shards (forward mode) become
/// one reply. A field of the command's row, so a command's merge cannot drift from
/// the command; the server maps it to its reply merger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeRule {
    /// The integers add up (DEL, EXISTS, DBSIZE ...).
    SumInts,
    /// Each shard answered for some keys: the elements go back in argument order (MGET).
    Scatter,
    /// `+OK` once every shard said OK (MSET, FLUSHALL ...).
    AllOk,
    /// The arrays are concatenated (KEYS).
    ConcatArrays,
    /// The first reply that is not null (RANDOMKEY).
    FirstNonNull,
    /// SCAN: one shard at a time, named by the cursor's high bits.
    Scan,
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

/// What every engine handler returns: an [`Outcome`], or an error the caller writes
/// once, from the type (so statistics count failures from the type, never from
/// reply bytes). A handler that returns an error has written nothing.
pub type CmdResult = Result<Outcome, CmdError>;

/// A command handler running on the shard that owns its keys.
pub type EngineFn = fn(&mut crate::Engine, &mut ExecCtx, Args<'_>, &mut Reply<'_>) -> CmdResult;

/// One row of a command table: what the table knows about the command, what runs
/// it, and a container's subcommands. Generic over the handler so that the engine's
/// families (`H` = [`EngineFn`]) and the server's (a handler that needs the
/// connection) share one row format, one macro and one subcommand resolution
/// ([`CommandTree::resolve`]), while the handler types stay apart: engine handlers
/// are pure keyspace work that may run on another shard, server handlers cannot.
#[derive(Debug)]
pub struct CommandRow<H: 'static> {
    /// Everything but the handler.
    pub meta: CommandMeta,
    /// The handler; `None` for a container every call of which names a subcommand
    /// (its arity is at most -2), as Redis' CONFIG or OBJECT have no proc of their own.
    pub handler: Option<H>,
    /// A container's subcommands (`object|encoding` ...) with their own arity,
    /// flags and key positions; empty for other commands.
    pub subcommands: &'static [CommandRow<H>],
}

/// One row of an engine family's command table.
pub type EngineCommand = CommandRow<EngineFn>;

/// A table row that may be a container. The engine's rows and the server's registry
/// resolve `CONTAINER sub ...` through the one [`resolve`](Self::resolve), so a
/// subcommand is found, and its arity checked, the same way everywhere.
pub trait CommandTree: Sized {
    /// The row's metadata.
    fn meta(&self) -> &CommandMeta;
    /// The row's subcommands (empty unless it is a container).
    fn subcommands(&self) -> &[Self];

    /// Redis' `lookupCommand` below the name: the subcommand row named by `args[1]`
    /// when this row is a container called with one, its arity checked (`unknown
    /// subcommand`, or `wrong number of arguments` naming the subcommand,
    /// `'config|get'`); else this row. The caller has checked this row's own arity
    /// (the dispatcher does, before authentication), so a container without a
    /// handler, whose arity is at most -2, always resolves to a subcommand.
    fn resolve(&self, args: Args<'_>) -> Result<&Self, CmdError> {
        let subs = self.subcommands();
        if args.len() < 2 || subs.is_empty() {
            return Ok(self);
        }
        let name = args.get(1);
        let unlisted = self.meta().has(flags::SUBCOMMANDS_UNLISTED);
        let sub = subs
            .iter()
            .find(|s| name.eq_ignore_ascii_case(s.meta().subcommand_name().as_bytes()));
        match sub {
            Some(sub) if sub.meta().arity_ok(args.len()) => Ok(sub),
            _ if unlisted => Err(CmdError::subcommand_syntax(name, self.meta().name)),
            Some(sub) => Err(CmdError::WrongArity(sub.meta().name)),
            None => Err(CmdError::unknown_subcommand(name, self.meta().name)),
        }
    }
}

impl<H> CommandTree for CommandRow<H> {
    fn meta(&self) -> &CommandMeta {
        &self.meta
    }
    fn subcommands(&self) -> &[Self] {
        self.subcommands
    }
}

/// One table row:
///
/// ```text
/// command!(name, arity, flags, keys, [acl..], group, since, summary, complexity, handler)
/// command!(.., handler, merge = MergeRule::SumInts)      // spans shards
/// command!(.., subcommands = TABLE)                      // a container, no handler
/// command!(.., handler, subcommands = TABLE)             // a container that runs bare
/// ```
///
/// A macro rather than a `const fn` so rows read like data. The handler type comes
/// from the table the row is in ([`EngineCommand`] or the server's rows).
#[doc(hidden)]
#[macro_export]
macro_rules! __command_row {
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, [$($acl:literal),*], $group:literal,
     $since:literal, $summary:expr, $complexity:expr, subcommands = $subs:expr) => {
        $crate::__command_row!(@row $name, $arity, $flags, $keys, [$($acl),*], $group, $since,
            $summary, $complexity, None, None, $subs)
    };
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, [$($acl:literal),*], $group:literal,
     $since:literal, $summary:expr, $complexity:expr, $handler:expr, subcommands = $subs:expr) => {
        $crate::__command_row!(@row $name, $arity, $flags, $keys, [$($acl),*], $group, $since,
            $summary, $complexity, Some($handler), None, $subs)
    };
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, [$($acl:literal),*], $group:literal,
     $since:literal, $summary:expr, $complexity:expr, $handler:expr, merge = $merge:expr) => {
        $crate::__command_row!(@row $name, $arity, $flags, $keys, [$($acl),*], $group, $since,
            $summary, $complexity, Some($handler), Some($merge), &[])
    };
    ($name:literal, $arity:expr, $flags:expr, $keys:expr, [$($acl:literal),*], $group:literal,
     $since:literal, $summary:expr, $complexity:expr, $handler:expr) => {
        $crate::__command_row!(@row $name, $arity, $flags, $keys, [$($acl),*], $group, $since,
            $summary, $complexity, Some($handler), None, &[])
    };
    (@row $name:literal, $arity:expr, $flags:expr, $keys:expr, [$($acl:literal),*], $group:literal,
     $since:literal, $summary:expr, $complexity:expr, $handler:expr, $merge:expr, $subs:expr) => {
        $crate::command::CommandRow {
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
                merge: $merge,
            },
            handler: $handler,
            subcommands: $subs,
        }
    };
}
#[doc(inline)]
pub use __command_row as command;

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

pub mod docs;

#[cfg(test)]
mod tests;
