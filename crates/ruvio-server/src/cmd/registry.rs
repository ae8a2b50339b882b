//! The command table the server dispatches from: the engine's families plus the
//! server's own (connection, client, cluster, server administration).
//!
//! Built once from the families' `COMMANDS` tables, which share one row format
//! ([`CommandRow`]); nothing else lists command names. Lookup lower-cases the name
//! into a stack buffer, so dispatch allocates nothing. A container's subcommand is
//! resolved from the arguments ([`CommandTree::resolve`], Redis' `lookupCommand`)
//! once the container is admitted, and the subcommand's own arity, key positions
//! and handler are what dispatch checks, routes and runs.

use crate::cmd::ServerFn;
use crate::net::conn::Merge;
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
        let command = Command {
            id,
            stat: *stats - 1,
            meta: &row.meta,
            handler: row.handler.map(handler),
            merge: row.meta.merge.map(merge_of),
            subcommands: row
                .subcommands
                .iter()
                .map(|sub| Command::new(id, sub, handler, stats))
                .collect(),
        };
        assert!(
            command.handler.is_some() || (!command.subcommands.is_empty() && row.meta.arity <= -2),
            "{}: a row without a handler must be a container called only with a subcommand",
            row.meta.name
        );
        command
    }
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
    buckets: Vec<Vec<(&'static [u8], usize)>>,
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
        for row in crate::cmd::commands() {
            let id = commands.len();
            commands.push(Command::new(id, row, Handler::Server, &mut stat_slots));
        }
        let mut buckets = vec![Vec::new(); (COMMAND_NAME_BYTES_MAX + 1) * BUCKETS_PER_LENGTH];
        for command in &commands {
            let name = command.meta.name.as_bytes();
            assert!(!name.is_empty() && name.len() <= COMMAND_NAME_BYTES_MAX);
            let bucket = &mut buckets[name_bucket(name)];
            let taken = bucket.iter().any(|&(other, _)| other == name);
            assert!(!taken, "command {} registered twice", command.meta.name);
            bucket.push((name, command.id));
        }
        let acl = acl_catalog(&commands, stat_slots);
        Registry {
            commands,
            stat_slots,
            buckets,
            acl,
        }
    }

    /// Every command and subcommand row, containers first.
    pub fn all_rows(&self) -> impl Iterator<Item = &Command> {
        self.commands
            .iter()
            .flat_map(|c| std::iter::once(c).chain(c.subcommands.iter()))
    }

    /// Find a top-level command by name, ignoring ASCII case.
    pub fn lookup(&self, name: &[u8]) -> Option<&Command> {
        if name.is_empty() || name.len() > COMMAND_NAME_BYTES_MAX {
            return None;
        }
        // A pipeline mostly repeats one command: try this thread's last hit first.
        thread_local! {
            static LAST: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
        }
        let last = LAST.with(|l| l.get());
        if let Some(c) = self.commands.get(last) {
            if name.eq_ignore_ascii_case(c.meta.name.as_bytes()) {
                return Some(c);
            }
        }
        // Names sit in the bucket itself: no pointer chasing through the rows.
        let (_, id) = self.buckets[name_bucket(name)]
            .iter()
            .find(|(candidate, _)| name.eq_ignore_ascii_case(candidate))?;
        LAST.with(|l| l.set(*id));
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

    #[test]
    fn lookup_ignores_case_and_rejects_long_names() {
        let reg = registry();
        assert_eq!(reg.lookup(b"PiNg").map(|c| c.meta.name), Some("ping"));
        assert!(reg.lookup(&[b'a'; 100]).is_none());
        assert!(reg.lookup(b"").is_none());
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
}
