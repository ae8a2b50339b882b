//! CLIENT PAUSE and UNPAUSE: the commands of normal clients wait (WRITE: the ones
//! that write or may replicate; ALL: every one, CLIENT UNPAUSE included, as Redis)
//! until the pause ends at its deadline or by CLIENT UNPAUSE.
//!
//! Every shard keeps its own copy of the pause (set by a broadcast before the
//! client's `+OK`, see [`crate::mesh::gather`]) and checks it before running a command
//! of a connection it owns; a command that must wait is left unread in the
//! connection's input, and the connection is parked here until the pause ends.
//! While nothing is paused the check costs one comparison per command.

use ruvio_engine::command::flags::{MAY_REPLICATE, WRITE};
use ruvio_engine::CommandMeta;

/// This shard's view of the server's pause.
#[derive(Debug, Default)]
pub struct Pause {
    /// When the pause ends (Unix ms); 0 when nothing is paused.
    until_ms: u64,
    /// ALL: every command waits, not only writes.
    all: bool,
    /// Connections `(index, generation)` holding a command that waits.
    waiting: Vec<(u32, u32)>,
}

impl Pause {
    /// True while some pause is in force (it may be past its deadline until the
    /// next tick ends it).
    pub fn is_active(&self) -> bool {
        self.until_ms != 0
    }

    /// Whether a command with `meta` must wait at `now_ms`.
    pub fn holds(&self, meta: &CommandMeta, now_ms: u64) -> bool {
        now_ms < self.until_ms && (self.all || meta.has(WRITE) || meta.has(MAY_REPLICATE))
    }

    /// Pause until `until_ms` (ALL when `all`): a pause already in force keeps the
    /// later deadline and the stronger mode, as Redis does.
    pub fn start(&mut self, until_ms: u64, all: bool) {
        self.until_ms = self.until_ms.max(until_ms);
        self.all |= all;
    }

    /// Connection `who` waits for the end of the pause.
    pub fn park(&mut self, who: (u32, u32)) {
        self.waiting.push(who);
    }

    /// The deadline passed at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.is_active() && now_ms >= self.until_ms
    }

    /// End the pause; returns the connections to run again.
    pub fn end(&mut self) -> Vec<(u32, u32)> {
        self.until_ms = 0;
        self.all = false;
        std::mem::take(&mut self.waiting)
    }
}
