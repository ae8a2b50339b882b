//! The engine's command table: every family's rows, chained in one order.
//!
//! It sits on the top floor, with the families: [`Engine`] itself (below) knows no
//! command, so the families can stand on it and still be reachable from it by name.

use crate::command::EngineCommand;
use crate::Engine;

impl Engine {
    /// Every command the engine implements (all families' tables).
    pub fn commands() -> impl Iterator<Item = &'static EngineCommand> {
        crate::strings::COMMANDS
            .iter()
            .chain(crate::keys::COMMANDS.iter())
            .chain(crate::bitmaps::COMMANDS.iter())
            .chain(crate::lists::COMMANDS.iter())
            .chain(crate::hashes::COMMANDS.iter())
            .chain(crate::zsets::COMMANDS.iter())
            .chain(crate::streams::COMMANDS.iter())
            .chain(crate::sets::COMMANDS.iter())
            .chain(crate::fill::COMMANDS.iter())
            .chain(crate::geo::COMMANDS.iter())
            .chain(crate::sort::COMMANDS.iter())
            .chain(crate::hll::COMMANDS.iter())
            .chain(crate::scripting::COMMANDS.iter())
    }

    /// The top-level command named `name` (lower case).
    pub fn command(name: &str) -> Option<&'static EngineCommand> {
        Self::commands().find(|c| c.meta.name == name)
    }

    /// The top-level row named `name`, case-insensitively; a container's subcommand
    /// is then [`resolve`](crate::command::CommandTree::resolve)d from the arguments.
    pub fn find_command(name: &[u8]) -> Option<&'static EngineCommand> {
        Self::commands().find(|c| name.eq_ignore_ascii_case(c.meta.name.as_bytes()))
    }
}
