//! Prefetching the keyspace lines of the commands waiting in a connection's input:
//! the first key of up to [`PREFETCH_WINDOW`] commands is found (parsed and looked
//! up once ahead), and its index slot, entry and value are asked of the memory
//! system before the commands run, so their cache misses overlap instead of
//! stalling one command at a time. Used across connections by the loop's batch
//! pass (`conn_io.rs`: each received batch's window) and within one connection's
//! long pipeline by `dispatch::process_input`.

use crate::cmd::registry::{registry, Handler};
use crate::shard::ShardCore;
use ruvio_engine::command::CommandTree;
use ruvio_resp::{Args, Parsed};

/// Commands looked ahead at per prefetch pass: enough to overlap the misses of a
/// typical pipeline (16), few enough that the lines are still cached when used.
pub const PREFETCH_WINDOW: usize = 16;

/// The first keys of up to [`PREFETCH_WINDOW`] commands at the front of an input
/// buffer, as spans of that buffer.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeyWindow {
    keys: [(u32, u32); PREFETCH_WINDOW],
    /// Commands the window covers (with or without a key).
    pub commands: usize,
    /// The keys' hashes, in the order of [`keys`](Self::keys), once the first
    /// pass computed them.
    hashes: [u64; PREFETCH_WINDOW],
}

impl KeyWindow {
    /// Parse up to [`PREFETCH_WINDOW`] whole commands of `input` (the front of the
    /// connection's unread input) and note their first keys. The parser keeps
    /// what it read for the commands' run (`CommandParser::look_ahead`: each
    /// command is read once, not again by dispatch), until the end of the
    /// connection's `dispatch::process_input`, before its input moves.
    pub fn scan(
        core: &ShardCore,
        parser: &mut ruvio_resp::CommandParser,
        input: &[u8],
    ) -> KeyWindow {
        let mut window = KeyWindow::default();
        let mut pos = 0;
        while window.commands < PREFETCH_WINDOW {
            // The front command may be an incomplete multibulk whose progress the
            // parser keeps.
            let parsed = parser.look_ahead(input, pos, &core.limits);
            let Ok(Parsed::Complete { args, consumed }) = parsed else {
                break;
            };
            let (start, end) = first_key_span(args, input).unwrap_or((0, 0));
            window.keys[window.commands] = (start as u32, end as u32);
            pos += consumed;
            window.commands += 1;
        }
        window
    }

    /// The window's keys, a key repeated by the next command once: a pipeline on
    /// one hot key prefetches it once, not sixteen times.
    fn keys<'a>(&'a self, input: &'a [u8]) -> impl Iterator<Item = &'a [u8]> + 'a {
        distinct_keys(&self.keys[..self.commands], input)
    }

    /// First prefetch pass: index slots and entries. Each key's hash is kept
    /// for the second pass.
    pub fn prefetch_entries(&mut self, core: &ShardCore, db: usize, input: &[u8]) {
        let keys = distinct_keys(&self.keys[..self.commands], input);
        for (hash, key) in self.hashes.iter_mut().zip(keys) {
            *hash = core.engine.prefetch(db, key);
        }
    }

    /// Second pass, once the entries are on their way: the values outside them
    /// (the keys not hashed again: a wrong hash, had the connection's database
    /// changed between the passes, only prefetches nothing).
    pub fn prefetch_values(&self, core: &ShardCore, db: usize, input: &[u8]) {
        for (&hash, key) in self.hashes.iter().zip(self.keys(input)) {
            core.engine.prefetch_value(db, key, hash);
        }
    }
}

/// The keys at `spans` of `input`, a key repeated by the next command once.
fn distinct_keys<'a>(
    spans: &'a [(u32, u32)],
    input: &'a [u8],
) -> impl Iterator<Item = &'a [u8]> + 'a {
    let mut previous: &[u8] = &[];
    spans
        .iter()
        .filter(|(start, end)| end > start)
        .map(|&(start, end)| &input[start as usize..end as usize])
        .filter(move |key| {
            let repeated = *key == previous;
            previous = key;
            !repeated
        })
}

/// Prefetch the keyspace lines of the next commands in `input` when more than one
/// command is waiting (a lone command gains nothing). Returns how many commands the
/// pass covered, at least 1.
pub(super) fn prefetch_window(
    core: &ShardCore,
    parser: &mut ruvio_resp::CommandParser,
    input: &[u8],
    db: usize,
) -> usize {
    let mut window = KeyWindow::scan(core, parser, input);
    if window.commands > 1 {
        window.prefetch_entries(core, db, input);
        window.prefetch_values(core, db, input);
    }
    window.commands.max(1)
}

/// Where the first key of a keyspace command lies in `input`, if the command has
/// one there (inline commands' arguments live in the parser's scratch space).
fn first_key_span(args: Args<'_>, input: &[u8]) -> Option<(usize, usize)> {
    if args.is_empty() {
        return None;
    }
    let cmd = registry().lookup(args.get(0))?.resolve(args).ok()?;
    let first = cmd.meta.keys.fixed_first()?;
    if !matches!(cmd.handler, Some(Handler::Engine(_))) || args.len() <= first {
        return None;
    }
    let key = args.get(first);
    let start = (key.as_ptr() as usize).checked_sub(input.as_ptr() as usize)?;
    (start + key.len() <= input.len()).then_some((start, start + key.len()))
}
