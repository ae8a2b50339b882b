//! The command table the server dispatches from: the engine's families plus the
//! server's own (connection, client, cluster, server administration).
//!
//! Built once from the families' `COMMANDS` tables; nothing else lists command
//! names. Lookup lower-cases the name into a stack buffer, so dispatch allocates
//! nothing.

use crate::cmd::ServerFn;
use crate::conn::Merge;
use ahash::AHashMap;
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

/// One row of the table.
#[derive(Debug)]
pub struct Command {
    /// Index in [`Registry::commands`], used for per-command statistics.
    pub id: usize,
    pub meta: &'static CommandMeta,
    pub handler: Handler,
    /// How partial replies combine when the command spans shards (forward mode).
    pub merge: Option<Merge>,
}

/// Every command Ruvio knows.
#[derive(Debug)]
pub struct Registry {
    pub commands: Vec<Command>,
    by_name: AHashMap<&'static [u8], usize>,
}

/// Longest command name; a longer name cannot be a command.
const COMMAND_NAME_BYTES_MAX: usize = 32;

impl Registry {
    fn build() -> Registry {
        let engine =
            ruvio_engine::Engine::commands().map(|c| (&c.meta, Handler::Engine(c.handler)));
        let server = crate::cmd::commands().map(|c| (&c.meta, Handler::Server(c.handler)));
        let mut commands = Vec::new();
        let mut by_name = AHashMap::new();
        for (id, (meta, handler)) in engine.chain(server).enumerate() {
            let previous = by_name.insert(meta.name.as_bytes(), id);
            assert!(previous.is_none(), "command {} registered twice", meta.name);
            commands.push(Command {
                id,
                meta,
                handler,
                merge: meta.merge.map(merge_of),
            });
        }
        Registry { commands, by_name }
    }

    /// Find a command by name, ignoring ASCII case.
    pub fn lookup(&self, name: &[u8]) -> Option<&Command> {
        if name.len() > COMMAND_NAME_BYTES_MAX {
            return None;
        }
        let mut lower = [0u8; COMMAND_NAME_BYTES_MAX];
        let lower = &mut lower[..name.len()];
        lower.copy_from_slice(name);
        lower.make_ascii_lowercase();
        self.by_name.get(&*lower).map(|&id| &self.commands[id])
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
        MergeRule::Scan => Merge::Scan {
            shard: 0,
            shards: 0,
        },
    }
}

/// The process-wide table (immutable after the first call).
pub fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::build)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_ignores_case_and_rejects_long_names() {
        let reg = registry();
        assert_eq!(reg.lookup(b"PiNg").map(|c| c.meta.name), Some("ping"));
        assert!(reg.lookup(&[b'a'; 100]).is_none());
        assert!(reg.lookup(b"").is_none());
    }

    #[test]
    fn readme_coverage_table_lists_every_command() {
        let readme = include_str!("../../../README.md");
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
        use ruvio_engine::command::flags::{ALL_SHARDS, SPLITTABLE};
        for c in &registry().commands {
            assert_eq!(
                c.merge.is_some(),
                c.meta.has(SPLITTABLE | ALL_SHARDS),
                "{}",
                c.meta.name
            );
        }
    }
}
