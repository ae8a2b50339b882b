//! The command table the server dispatches from: the engine's families plus the
//! server's own (connection, client, cluster, server administration).
//!
//! Built once from the families' `COMMANDS` tables, which share one row format
//! ([`CommandRow`]); nothing else lists command names. Lookup compares a name
//! folded to lower case as one number (up to 16 bytes), so dispatch neither
//! allocates nor lowers byte by byte. A container's subcommand is
//! resolved from the arguments ([`CommandTree::resolve`], Redis' `lookupCommand`)
//! once the container is admitted, and the subcommand's own arity, key positions
//! and handler are what dispatch checks, routes and runs.

use crate::cmd::ServerFn;
use crate::net::conn::Merge;
use ruvio_engine::command::flags::{MAY_REPLICATE, WRITE};
use ruvio_engine::command::{CommandRow, CommandTree};
use ruvio_engine::{CommandMeta, EngineFn, MergeRule};
use std::sync::OnceLock;

/// What runs a command.
#[derive(Clone, Copy, Debug)]
pub enum Handler {
    /// Pure keyspace work: runs on the shard that owns the keys (may be forwarded).
    Engine(EngineFn),
    /// Needs the connection or the server: always runs on the client's shard.
    Server(ServerFn),
}

/// Where a row runs, from its handler and flags: worked out once when the table
/// is built, so routing reads one field per request (`shard::route`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A server command that touches no keys it writes: on the client's shard.
    Here,
    /// An engine command: where its keys live (forwarded, split, borrowed).
    ByKeys,
    /// A server command that writes keys (MIGRATE, which talks to another
    /// instance itself): its keys are checked as any keyed command's, but it
    /// runs only on the client's shard, never forwarded (`cmd::migrate`), and
    /// answers under `always` once its write is durable, as an engine write.
    KeysHere,
}

impl Placement {
    fn of(handler: Option<Handler>, meta: &CommandMeta) -> Placement {
        match handler {
            Some(Handler::Engine(_)) => Placement::ByKeys,
            Some(Handler::Server(_)) if meta.has(WRITE) && !meta.keys.is_none() => {
                Placement::KeysHere
            }
            // A container without a handler never runs as itself.
            Some(Handler::Server(_)) | None => Placement::Here,
        }
    }
}

/// A row dispatch runs itself, with the connection's reply queue, rather than
/// through its handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InDispatch {
    /// Every other row: routed and run by its handler.
    No,
    /// EXEC runs the queue (`shard::multi::exec`).
    Exec,
    /// WATCH remembers keys, maybe of other shards (`shard::multi::watch_keys`).
    Watch,
    /// SORT and SORT_RO: a restricted user's check of the keys its BY and GET
    /// patterns read comes first (`acl::check::sort_refusal`).
    Sort,
}

impl InDispatch {
    fn of(name: &str) -> InDispatch {
        match name {
            "exec" => InDispatch::Exec,
            "watch" => InDispatch::Watch,
            "sort" | "sort_ro" => InDispatch::Sort,
            _ => InDispatch::No,
        }
    }
}

/// One row of the table, or one subcommand of a container row.
#[derive(Debug)]
pub struct Command {
    /// Index in [`Registry::commands`] (a subcommand: its container's).
    pub id: usize,
    /// Slot in the per-command statistics (INFO commandstats reports each
    /// subcommand on its own, `cmdstat_config|get`, as Redis 7 does).
    pub stat: usize,
    pub meta: &'static CommandMeta,
    /// `None` only for a container whose every call names a subcommand:
    /// [`CommandTree::resolve`] never returns such a row (checked when the table is
    /// built).
    pub handler: Option<Handler>,
    /// How partial replies combine when the command spans shards (forward mode).
    pub merge: Option<Merge>,
    /// A container's subcommands.
    pub subcommands: Vec<Command>,
    /// What a restricted user's check reads of this row, worked out here once
    /// ([`crate::acl::check::check_row`]).
    pub acl: crate::acl::check::CheckRow,
    /// EVAL, EVALSHA, FCALL and their read-only forms, or EXEC: a restricted
    /// client that may run it is noted as a script caller (dispatch's
    /// `acl_refusal`) before its first such call, without the name tests.
    pub notes_script_caller: bool,
    /// Where it runs ([`Placement`]).
    pub placement: Placement,
    /// EVAL, EVALSHA, FCALL and their read-only forms: the script sees whether
    /// the server was over `maxmemory` when it started.
    pub script_call: bool,
    /// Its refusals are checked on every call, even when no client, shard or
    /// server state asks for them (dispatch's gate): a script call (its
    /// `maxmemory` flag), EXEC (`-BUSY` and `EXECABORT` outside MULTI too).
    pub always_checked: bool,
    /// It may write (flagged `write` or `may_replicate`, or a script call):
    /// a later WAIT waits for the replicas to have it (`ClientState::wrote`).
    pub may_write: bool,
    /// Whether dispatch runs it itself ([`InDispatch`]).
    pub in_dispatch: InDispatch,
}

impl CommandTree for Command {
    fn meta(&self) -> &CommandMeta {
        self.meta
    }
    fn subcommands(&self) -> &[Self] {
        &self.subcommands
    }
}

impl Command {
    /// The registry's entry for `row` (and its subcommands); statistics slots are
    /// taken from `stats`, the next free one.
    fn new<H: Copy>(
        id: usize,
        row: &'static CommandRow<H>,
        handler: fn(H) -> Handler,
        stats: &mut usize,
    ) -> Command {
        *stats += 1;
        let stat = *stats - 1;
        let runs = row.handler.map(handler);
        let command = Command {
            id,
            stat,
            meta: &row.meta,
            handler: runs,
            merge: row.meta.merge.map(merge_of),
            subcommands: row
                .subcommands
                .iter()
                .map(|sub| Command::new(id, sub, handler, stats))
                .collect(),
            // The row's statistics slot is its catalog bit (`Registry::acl`).
            acl: crate::acl::check::CheckRow::new(&row.meta, stat),
            notes_script_caller: crate::mesh::script_lock::is_script(&row.meta)
                || row.meta.name == "exec",
            placement: Placement::of(runs, &row.meta),
            script_call: is_script_call(row.meta.name),
            always_checked: is_script_call(row.meta.name) || row.meta.name == "exec",
            may_write: row.meta.flags & (WRITE | MAY_REPLICATE) != 0
                || is_script_call(row.meta.name),
            in_dispatch: InDispatch::of(row.meta.name),
        };
        assert!(
            command.handler.is_some() || (!command.subcommands.is_empty() && row.meta.arity <= -2),
            "{}: a row without a handler must be a container called only with a subcommand",
            row.meta.name
        );
        command
    }
}

/// EVAL, EVALSHA, FCALL and their read-only forms.
fn is_script_call(name: &str) -> bool {
    matches!(
        name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    )
}

/// The server's reply merger for a row's merge rule.
fn merge_of(rule: MergeRule) -> Merge {
    match rule {
        MergeRule::SumInts => Merge::SumInts,
        MergeRule::Scatter => Merge::Scatter,
        MergeRule::AllOk => Merge::AllOk,
        MergeRule::ConcatArrays => Merge::ConcatArrays,
        MergeRule::FirstNonNull => Merge::FirstNonNull,
        // Where the cursor points is filled in per call (dispatch's `Route::Scan`).
        MergeRule::Scan => Merge::Scan { shard: 0 },
    }
}

/// Every command Ruvio knows.
#[derive(Debug)]
pub struct Registry {
    pub commands: Vec<Command>,
    /// Statistics slots: one per command and subcommand.
    pub stat_slots: usize,
    /// Command ids by the shape of their name (see [`name_bucket`]): a lookup
    /// compares a few names case-insensitively instead of copying and hashing
    /// (it runs twice per request, once for the prefetch pass).
    /// A name of up to [`FOLDED_NAME_BYTES_MAX`] bytes is compared by its
    /// [`folded`] form, a longer one byte by byte.
    buckets: Vec<Vec<(&'static [u8], u128, usize)>>,
    /// Each row by its statistics slot: its container's id and, for a
    /// subcommand, its index among the container's subcommands ([`Registry::row`]).
    by_stat: Vec<(u32, Option<u32>)>,
    /// The rows as ACL rules see them: one bit per row, the row's [`Command::stat`].
    pub acl: crate::acl::catalog::Catalog,
}

/// Buckets per name length: names are told apart by length and the low five bits
/// of their first letter (the same for both cases of an ASCII letter); a bucket
/// holds a handful of names at most (HGET, HSET, HDEL, HLEN ...).
const BUCKETS_PER_LENGTH: usize = 32;

/// The bucket of a name of at most [`COMMAND_NAME_BYTES_MAX`] bytes (not empty).
fn name_bucket(name: &[u8]) -> usize {
    name.len() * BUCKETS_PER_LENGTH + (name[0] & 0x1f) as usize
}

/// Longest command name; a longer name cannot be a command.
const COMMAND_NAME_BYTES_MAX: usize = 32;

/// Longest name compared as one number ([`folded`]); longer names (a few
/// GEO and cluster commands) are compared byte by byte.
const FOLDED_NAME_BYTES_MAX: usize = 16;

/// `name` (at most [`FOLDED_NAME_BYTES_MAX`] bytes) in ASCII lower case as one
/// little-endian number, zero-padded: equal for two names of one length
/// exactly when they are equal ignoring ASCII case. Lowered eight bytes at a
/// time, the second eight only for a name longer than that (a byte-wise
/// `eq_ignore_ascii_case` cost some 12 instructions a byte, and a name is
/// looked up twice per request).
#[inline(always)]
fn folded(name: &[u8]) -> u128 {
    let n = name.len();
    let (head, tail) = name.split_at(n.min(8));
    let low = fold_word(load_le(head));
    match tail.is_empty() {
        true => u128::from(low),
        false => u128::from(low) | u128::from(fold_word(load_le(tail))) << 64,
    }
}

/// Eight bytes with the ASCII capitals among them lowered.
#[inline(always)]
fn fold_word(word: u64) -> u64 {
    const ONES: u64 = u64::MAX / 0xff;
    // Per byte, on its low seven bits (no carry crosses a byte): the high bit
    // of `low + 0x3f` is set from 'A' (0x41) up, that of `low + 0x25` above
    // 'Z' (0x5a); a byte with its own high bit set is no letter.
    let low = word & (ONES * 0x7f);
    let from_a = low + ONES * 0x3f;
    let past_z = low + ONES * 0x25;
    let upper = from_a & !past_z & !word & (ONES * 0x80);
    word | (upper >> 2)
}

/// At most eight bytes as a little-endian number, zero-padded: two loads that
/// may overlap (the bytes they share land in the same place), rather than a
/// copy of a variable length (a `memcpy` call).
#[inline(always)]
fn load_le(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    match n {
        0 => 0,
        1..=3 => {
            let (first, middle, last) = (bytes[0], bytes[n / 2], bytes[n - 1]);
            u64::from(first) | u64::from(middle) << (8 * (n / 2)) | u64::from(last) << (8 * (n - 1))
        }
        4..=7 => {
            let word = |at: usize| {
                u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
            };
            u64::from(word(0)) | u64::from(word(n - 4)) << (8 * (n - 4))
        }
        _ => {
            let mut word = [0u8; 8];
            word.copy_from_slice(&bytes[..8]);
            u64::from_le_bytes(word)
        }
    }
}

thread_local! {
    /// This thread's last hit of [`Registry::lookup`]: its folded name, its
    /// length, its id.
    static LAST_HIT: std::cell::Cell<(u128, usize, usize)> =
        const { std::cell::Cell::new((0, 0, 0)) };
}

/// A table name's [`folded`] form, 0 for one too long for it (compared byte by
/// byte instead).
fn folded_if_short(name: &[u8]) -> u128 {
    match name.len() <= FOLDED_NAME_BYTES_MAX {
        true => folded(name),
        false => 0,
    }
}

impl Registry {
    fn build() -> Registry {
        let mut commands = Vec::new();
        let mut stat_slots = 0;
        for row in ruvio_engine::Engine::commands() {
            let id = commands.len();
            commands.push(Command::new(id, row, Handler::Engine, &mut stat_slots));
        }
        for (container, rows) in crate::cmd::engine_container_additions() {
            let Some(command) = commands.iter_mut().find(|c| c.meta.name == container) else {
                panic!("no engine container {container}");
            };
            let id = command.id;
            for row in rows {
                let sub = Command::new(id, row, Handler::Server, &mut stat_slots);
                command.subcommands.push(sub);
            }
        }
        for row in crate::cmd::commands().chain(crate::cmd::migrate::COMMANDS) {
            let id = commands.len();
            commands.push(Command::new(id, row, Handler::Server, &mut stat_slots));
        }
        let mut buckets = vec![Vec::new(); (COMMAND_NAME_BYTES_MAX + 1) * BUCKETS_PER_LENGTH];
        for command in &commands {
            let name = command.meta.name.as_bytes();
            assert!(!name.is_empty() && name.len() <= COMMAND_NAME_BYTES_MAX);
            let bucket = &mut buckets[name_bucket(name)];
            let taken = bucket.iter().any(|&(other, _, _)| other == name);
            assert!(!taken, "command {} registered twice", command.meta.name);
            bucket.push((name, folded_if_short(name), command.id));
        }
        let acl = acl_catalog(&commands, stat_slots);
        let mut by_stat = vec![(0, None); stat_slots];
        for command in &commands {
            by_stat[command.stat] = (command.id as u32, None);
            for (i, sub) in command.subcommands.iter().enumerate() {
                by_stat[sub.stat] = (command.id as u32, Some(i as u32));
            }
        }
        Registry {
            commands,
            stat_slots,
            buckets,
            by_stat,
            acl,
        }
    }

    /// Every command and subcommand row, containers first.
    pub fn all_rows(&self) -> impl Iterator<Item = &Command> {
        self.commands
            .iter()
            .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
    }

    /// The row (command or subcommand) whose statistics slot is `stat`
    /// ([`Command::stat`]): how a forwarded command's owner finds the row its
    /// origin resolved (`Tag::row`) without looking the name up again.
    #[inline]
    pub fn row(&self, stat: usize) -> Option<&Command> {
        let &(id, sub) = self.by_stat.get(stat)?;
        let command = self.commands.get(id as usize)?;
        match sub {
            None => Some(command),
            Some(i) => command.subcommands.get(i as usize),
        }
    }

    /// Find a top-level command by name, ignoring ASCII case. Inlined into its
    /// two callers on the request path (the prefetch pass and dispatch) for the
    /// usual answer, this thread's last hit (a pipeline mostly repeats one
    /// command); the buckets are searched out of line.
    #[inline(always)]
    pub fn lookup(&self, name: &[u8]) -> Option<&Command> {
        if name.is_empty() || name.len() > FOLDED_NAME_BYTES_MAX {
            return self.lookup_long(name);
        }
        let key = folded(name);
        let (last_key, last_len, last) = LAST_HIT.with(|l| l.get());
        if key == last_key && name.len() == last_len {
            return self.commands.get(last);
        }
        self.lookup_folded(name.len(), key)
    }

    /// [`Registry::lookup`] of a name of up to [`FOLDED_NAME_BYTES_MAX`] bytes
    /// (`len`), folded to `key`, not the last hit. Names sit in the bucket itself
    /// (one length each): no pointer chasing through the rows.
    #[inline(never)]
    fn lookup_folded(&self, len: usize, key: u128) -> Option<&Command> {
        let first = (key & 0x1f) as u8;
        let bucket = &self.buckets[len * BUCKETS_PER_LENGTH + first as usize];
        let (_, _, id) = bucket.iter().find(|(_, candidate, _)| *candidate == key)?;
        LAST_HIT.with(|l| l.set((key, len, *id)));
        Some(&self.commands[*id])
    }

    /// [`Registry::lookup`] of an empty name or one longer than
    /// [`FOLDED_NAME_BYTES_MAX`] bytes, compared byte by byte.
    #[cold]
    #[inline(never)]
    fn lookup_long(&self, name: &[u8]) -> Option<&Command> {
        if name.is_empty() || name.len() > COMMAND_NAME_BYTES_MAX {
            return None;
        }
        let bucket = &self.buckets[name_bucket(name)];
        let (_, _, id) = bucket
            .iter()
            .find(|(candidate, _, _)| name.eq_ignore_ascii_case(candidate))?;
        Some(&self.commands[*id])
    }
}

/// The ACL view of `commands`: each row's categories by its statistics slot.
fn acl_catalog(commands: &[Command], slots: usize) -> crate::acl::catalog::Catalog {
    use crate::acl::catalog::{category_bit, CatalogRow};
    let categories = |c: &Command| {
        c.meta
            .acl
            .iter()
            .filter_map(|name| category_bit(name.as_bytes()))
            .fold(0, |all, bit| all | bit)
    };
    let mut rows: Vec<Option<CatalogRow>> = (0..slots).map(|_| None).collect();
    for c in commands {
        rows[c.stat] = Some(CatalogRow {
            name: c.meta.name,
            categories: categories(c),
            parent: None,
            subs: c.subcommands.iter().map(|s| s.stat).collect(),
        });
        for s in &c.subcommands {
            rows[s.stat] = Some(CatalogRow {
                name: s.meta.name,
                categories: categories(s),
                parent: Some(c.stat),
                subs: Vec::new(),
            });
        }
    }
    let rows = rows
        .into_iter()
        .map(|r| r.expect("every statistics slot is a row"));
    crate::acl::catalog::Catalog::new(rows.collect())
}

/// The process-wide table (immutable after the first call).
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::build)
}

/// The keyspace handler of logged command line `args`, for the log's replay
/// (`persistence::recovery`, handed this at start); `None` for a line that names
/// no keyspace command (only engine commands are ever logged).
pub fn logged_handler(args: ruvio_resp::Args<'_>) -> Option<EngineFn> {
    let command = registry().lookup(args.get(0))?.resolve(args).ok()?;
    match command.handler {
        Some(Handler::Engine(handler)) => Some(handler),
        _ => None,
    }
}

/// The row a script's call of a server command resolves to (the engine asks for
/// commands its own table lacks: see `ruvio_engine::scripting::set_server_commands`).
pub fn script_row(
    args: ruvio_resp::Args<'_>,
) -> Option<Result<&'static CommandMeta, ruvio_engine::CmdError>> {
    let cmd = registry().lookup(args.get(0))?;
    Some(cmd.resolve(args).map(|row| row.meta))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ruvio_engine::command::flags::{ALL_SHARDS, SPLITTABLE};
    use ruvio_engine::CmdError;
    use ruvio_resp::OwnedArgs;

    /// A forwarded command's owner finds the row its origin resolved by its
    /// statistics slot (`Tag::row`): every row, subcommands included, and only it.
    #[test]
    fn every_row_is_found_by_its_statistics_slot() {
        let reg = registry();
        let mut rows = 0;
        for row in reg.all_rows() {
            let found = reg.row(row.stat).expect("a row for every slot");
            assert!(std::ptr::eq(found, row), "{}", row.meta.name);
            rows += 1;
        }
        assert_eq!(rows, reg.stat_slots);
        assert!(reg.row(reg.stat_slots).is_none());
        let get = reg.lookup(b"config").and_then(|c| c.subcommands.first());
        let get = get.expect("CONFIG has subcommands");
        assert!(std::ptr::eq(reg.row(get.stat).unwrap(), get));
        assert!(
            u16::try_from(reg.stat_slots + 1).is_ok(),
            "Tag::row holds a slot"
        );
    }

    #[test]
    fn lookup_ignores_case_and_rejects_long_names() {
        let reg = registry();
        assert_eq!(reg.lookup(b"PiNg").map(|c| c.meta.name), Some("ping"));
        assert!(reg.lookup(&[b'a'; 100]).is_none());
        assert!(reg.lookup(b"").is_none());
    }

    /// Every name is found in any case, after any other lookup (the last hit
    /// is tried first), and nothing that differs from it in more than the
    /// case of an ASCII letter is: a NUL padding it, a byte with the high bit
    /// or the case bit set that is no letter's other case.
    #[test]
    fn lookup_finds_exactly_each_name_in_any_case() {
        let reg = registry();
        for c in &reg.commands {
            let name = c.meta.name.as_bytes();
            let upper = name.to_ascii_uppercase();
            for probe in [name, upper.as_slice()] {
                assert_eq!(
                    reg.lookup(probe).map(|f| f.id),
                    Some(c.id),
                    "{}",
                    c.meta.name
                );
                // Twice: the second one is the last hit.
                assert_eq!(
                    reg.lookup(probe).map(|f| f.id),
                    Some(c.id),
                    "{}",
                    c.meta.name
                );
            }
            let mut padded = name.to_vec();
            padded.push(0);
            assert!(reg.lookup(&padded).is_none_or(|f| f.id != c.id));
            for i in 0..name.len() {
                for flip in [0x20u8, 0x80] {
                    let mut other = name.to_vec();
                    other[i] ^= flip;
                    if name[i].is_ascii_alphabetic() && flip == 0x20 {
                        continue;
                    }
                    let found = reg.lookup(&other).map(|f| f.meta.name);
                    assert!(found.is_none_or(|f| f.as_bytes() != name), "{other:?}");
                }
            }
        }
        assert!(reg.lookup(b"get\0").is_none());
        assert_eq!(reg.lookup(b"GET").map(|c| c.meta.name), Some("get"));
        assert!(reg.lookup(b"GE").is_none());
    }

    #[test]
    fn names_load_as_zero_padded_little_endian_numbers() {
        let bytes: Vec<u8> = (1..=FOLDED_NAME_BYTES_MAX as u8).collect();
        for len in 0..=8 {
            let mut padded = [0u8; 8];
            padded[..len].copy_from_slice(&bytes[..len]);
            assert_eq!(load_le(&bytes[..len]), u64::from_le_bytes(padded), "{len}");
        }
        for len in 0..=FOLDED_NAME_BYTES_MAX {
            let mut padded = [0u8; FOLDED_NAME_BYTES_MAX];
            padded[..len].copy_from_slice(&bytes[..len]);
            assert_eq!(folded(&bytes[..len]), u128::from_le_bytes(padded), "{len}");
        }
    }

    #[test]
    fn folding_lowers_exactly_the_ascii_capitals() {
        for byte in 0..=255u8 {
            for at in [0, 7, 8, 15] {
                let mut name = [b'x'; FOLDED_NAME_BYTES_MAX];
                name[at] = byte;
                let mut lowered = name;
                lowered[at] = byte.to_ascii_lowercase();
                assert_eq!(
                    folded(&name),
                    u128::from_le_bytes(lowered),
                    "{byte} at {at}"
                );
            }
        }
    }

    #[test]
    fn readme_coverage_table_lists_every_command() {
        let readme = include_str!("../../../../README.md");
        let missing: Vec<&str> = registry()
            .commands
            .iter()
            .map(|c| c.meta.name)
            .filter(|name| !readme.contains(&format!("| {} |", name.to_ascii_uppercase())))
            .collect();
        assert!(
            missing.is_empty(),
            "README coverage table misses: {missing:?}"
        );
    }

    /// Routing reads each row's placement: engine rows go where their keys are,
    /// MIGRATE (a server command writing keys) only here with its keys checked,
    /// every other server command here.
    #[test]
    fn placement_follows_the_handler_and_the_written_keys() {
        let placement = |name: &[u8]| registry().lookup(name).map(|c| c.placement);
        assert_eq!(placement(b"get"), Some(Placement::ByKeys));
        assert_eq!(placement(b"set"), Some(Placement::ByKeys));
        assert_eq!(placement(b"migrate"), Some(Placement::KeysHere));
        assert_eq!(placement(b"ping"), Some(Placement::Here));
        assert_eq!(placement(b"publish"), Some(Placement::Here));
        for row in registry().all_rows() {
            let keyed_server_write = matches!(row.handler, Some(Handler::Server(_)))
                && row.meta.has(WRITE)
                && !row.meta.keys.is_none();
            assert_eq!(
                row.placement == Placement::KeysHere,
                keyed_server_write,
                "{}",
                row.meta.name
            );
        }
    }

    /// The script calls dispatch marks are the ones the script lock knows.
    #[test]
    fn script_calls_are_the_script_lock_s_scripts() {
        let mut calls = 0;
        for row in registry().all_rows() {
            let is_script = crate::mesh::script_lock::is_script(row.meta);
            assert_eq!(row.script_call, is_script, "{}", row.meta.name);
            assert_eq!(
                row.always_checked,
                is_script || row.meta.name == "exec",
                "{}",
                row.meta.name
            );
            calls += usize::from(row.script_call);
        }
        assert_eq!(calls, 6);
        let exec = registry().lookup(b"EXEC").map(|c| c.in_dispatch);
        assert_eq!(exec, Some(InDispatch::Exec));
        let sort_ro = registry().lookup(b"sort_ro").map(|c| c.in_dispatch);
        assert_eq!(sort_ro, Some(InDispatch::Sort));
        let get = registry().lookup(b"get").map(|c| c.in_dispatch);
        assert_eq!(get, Some(InDispatch::No));
    }

    /// Exactly the commands that may span shards say how their replies merge.
    #[test]
    fn commands_spanning_shards_have_a_merge_rule() {
        for c in &registry().commands {
            assert_eq!(
                c.merge.is_some(),
                c.meta.has(SPLITTABLE | ALL_SHARDS),
                "{}",
                c.meta.name
            );
        }
    }

    fn resolve(line: &[&str]) -> Result<(&'static str, usize), CmdError> {
        let args: OwnedArgs = line.iter().map(|a| a.as_bytes()).collect();
        let cmd = registry().lookup(line[0].as_bytes()).expect("a command");
        cmd.resolve(args.args()).map(|row| (row.meta.name, row.id))
    }

    #[test]
    fn subcommands_resolve_with_redis_errors() {
        let client = registry().lookup(b"client").unwrap().id;
        assert_eq!(resolve(&["CLIENT", "List"]), Ok(("client|list", client)));
        assert_eq!(
            resolve(&["client", "setname"]),
            Err(CmdError::WrongArity("client|setname"))
        );
        assert_eq!(
            resolve(&["client", "nope"]),
            Err(CmdError::unknown_subcommand(b"nope", "client"))
        );
        // COMMAND alone runs its own handler; with an argument, a subcommand's.
        assert!(matches!(resolve(&["command"]), Ok(("command", _))));
        assert!(matches!(
            resolve(&["command", "count"]),
            Ok(("command|count", _))
        ));
        // Engine containers resolve the same way, to rows with their own keys.
        assert!(matches!(
            resolve(&["object", "encoding", "k"]),
            Ok(("object|encoding", _))
        ));
        // A plain command is its own row (its arity is the dispatcher's check).
        assert!(matches!(resolve(&["get", "k"]), Ok(("get", _))));
    }

    /// Users whose rules take each way of the check: the fast path's (one
    /// selector, short prefixes, another glob, no keys, every key) and the
    /// general one's (`%R~`, selectors, first arguments, a denied row).
    fn check_users() -> Vec<crate::acl::rules::User> {
        let catalog = &registry().acl;
        let rule_sets: [&[&str]; 10] = [
            &["~app:*", "+@read", "+@write", "-@dangerous", "+evalsha"],
            &["~app:*", "~b:*", "+@all"],
            &["~a*b", "~app:k?y*", "+@all"],
            &["~short", "~app:1", "+@all", "-flushall"],
            &["resetkeys", "+@all"],
            &["allkeys", "+get", "+mget", "+@pubsub"],
            &["%R~app:*", "%W~b:*", "+@all"],
            &["~app:*", "+@read", "(~b:* +@write)", "(%W~app:* +set)"],
            &[
                "~app:*",
                "+@read",
                "-select",
                "+select|0",
                "+client|setname",
            ],
            &["allkeys", "allchannels", "+@all", "-@write"],
        ];
        rule_sets
            .iter()
            .map(|rules| {
                let mut user = crate::acl::rules::User::new(catalog, b"u", 1, false);
                for rule in *rules {
                    user.apply(catalog, rule.as_bytes(), false)
                        .unwrap_or_else(|e| panic!("{rule}: {e:?}"));
                }
                user
            })
            .collect()
    }

    /// `check_row`'s short way answers every row exactly as the general check:
    /// every command and subcommand of the table, with arguments of each
    /// shape (keys in and out of the patterns, short and long, key counts
    /// that are and are not counts), for each kind of user.
    #[test]
    fn fast_path_answers_as_the_general_check() {
        use crate::acl::check::{check, check_row};
        let users = check_users();
        let words = [
            "app:1234567",
            "app:1",
            "b:12345678",
            "zzzzzzzzzzzz",
            "short",
            "1",
            "2",
            "3",
            "0",
            "-1",
            "x",
            "aXb",
            "app:key:1",
            "STORE",
            "streams",
            "app:",
            "",
        ];
        let mut rows: Vec<&Command> = Vec::new();
        for command in &registry().commands {
            rows.push(command);
            rows.extend(command.subcommands.iter());
        }
        let mut compared = 0;
        for row in rows {
            let name: Vec<&str> = row.meta.name.split('|').collect();
            for extra in 0..6 {
                for start in 0..words.len() {
                    let mut line: Vec<&[u8]> = name.iter().map(|n| n.as_bytes()).collect();
                    // Each word at each position, at several strides.
                    for i in 0..extra {
                        line.push(words[(start + i * (1 + start % 3)) % words.len()].as_bytes());
                    }
                    let args: OwnedArgs = line.into_iter().collect();
                    for user in &users {
                        assert_eq!(
                            check_row(user, &row.acl, row.meta, args.args()),
                            check(user, row.stat, row.meta, args.args()),
                            "{} {:?}",
                            row.meta.name,
                            args.args()
                                .iter()
                                .map(String::from_utf8_lossy)
                                .collect::<Vec<_>>()
                        );
                        compared += 1;
                    }
                }
            }
        }
        assert!(compared > 100_000, "{compared}");
    }

    /// What the fast path must refuse, named: a key out of the pattern (the
    /// first such, MGET's third), a denied command, a script's second key.
    #[test]
    fn fast_path_refuses_what_it_must() {
        use crate::acl::check::{check_row, Denied};
        let users = check_users();
        let user = &users[0];
        let run = |line: &[&str]| {
            let args: OwnedArgs = line.iter().map(|a| a.as_bytes()).collect();
            let top = registry().lookup(args.args().get(0)).unwrap();
            let row = top.resolve(args.args()).unwrap();
            check_row(user, &row.acl, row.meta, args.args())
        };
        assert_eq!(run(&["get", "app:12345678"]), Ok(()));
        assert_eq!(run(&["get", "app:1"]), Ok(()));
        assert_eq!(run(&["get", "other:12345678"]), Err(Denied::Key(1)));
        assert_eq!(run(&["get", "ap"]), Err(Denied::Key(1)));
        assert_eq!(
            run(&["mget", "app:1", "app:2", "nope:1234567"]),
            Err(Denied::Key(3))
        );
        assert_eq!(
            run(&["mset", "app:1", "x", "nope:12345678", "y"]),
            Err(Denied::Key(3))
        );
        assert_eq!(run(&["mset", "app:1", "nope:12345678"]), Ok(()));
        assert_eq!(run(&["hset", "app:h:1", "f", "v"]), Ok(()));
        assert_eq!(run(&["flushall"]), Err(Denied::Command));
        assert_eq!(run(&["eval", "return 1", "0"]), Err(Denied::Command));
        assert_eq!(
            run(&["evalsha", "abc", "2", "app:1", "bad:12345678"]),
            Err(Denied::Key(4))
        );
        assert_eq!(
            run(&["evalsha", "abc", "1", "app:1", "bad:12345678"]),
            Ok(())
        );
        assert_eq!(run(&["evalsha", "abc", "12", "bad:1"]), Ok(()));
        // Not a count as Redis's string2ll reads it: no key.
        assert_eq!(run(&["evalsha", "abc", "01", "bad:1"]), Ok(()));
        assert_eq!(
            run(&["lmpop", "2", "app:1", "bad:1", "left"]),
            Err(Denied::Key(3))
        );
        assert_eq!(
            run(&["zunionstore", "app:d", "2", "app:1", "bad:1"]),
            Err(Denied::Key(4))
        );
    }
}
