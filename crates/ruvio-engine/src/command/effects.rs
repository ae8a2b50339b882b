//! What a handler is handed and what it leaves behind besides its reply: the
//! per-call context ([`ExecCtx`]: database, clock, NO-TOUCH, whether it may
//! block), the effects the server consumes after it ran ([`Effects`]: keys
//! read and written, keyspace events, Pub/Sub messages, the log's records),
//! and its [`Outcome`] (done, or parked on a [`Block`]). Apart from the row
//! format (`command.rs`: flags, key positions, `CommandMeta`, `CommandRow`)
//! because the table is static data read by routing and COMMAND, while this is
//! one call's state, made and emptied per command.

use super::{KeyPositions, KeySpec};
use ruvio_resp::Args;

/// Per-call context the server passes to engine handlers.
#[derive(Debug, Default)]
pub struct ExecCtx {
    /// Selected database index.
    pub db: usize,
    /// Wall-clock milliseconds since the Unix epoch, read once per read batch.
    pub now_ms: u64,
    /// CLIENT NO-TOUCH is on: reads don't update the access time.
    pub no_touch: bool,
    /// The command may block (false inside MULTI and scripts, and for a blocked
    /// command run again after its deadline): a blocking handler with nothing to
    /// serve then answers as if its timeout had passed.
    pub may_block: bool,
    /// What the command did (see [`Effects`]).
    pub effects: Effects,
}

impl ExecCtx {
    /// A context for database `db` at `now_ms`, blocking allowed, nothing tracked.
    pub fn new(db: usize, now_ms: u64) -> ExecCtx {
        ExecCtx {
            db,
            now_ms,
            may_block: true,
            ..ExecCtx::default()
        }
    }

    /// Record that `key` (in the client's database) was changed by this command:
    /// counts `changes` towards `dirty`, notes the key (blocked clients, later WATCH
    /// and client tracking) and the keyspace event (later notifications).
    pub fn changed(&mut self, key: &[u8], event: Event, changes: u64) {
        self.changed_in(self.db, key, event, changes);
    }

    /// Record a change to `key` that has no keyspace event (Redis's
    /// `signalModifiedKey` and `server.dirty` without `notifyKeyspaceEvent`: PFCOUNT
    /// storing its cached cardinality, PFDEBUG TODENSE).
    pub fn changed_silently(&mut self, key: &[u8], changes: u64) {
        self.effects.dirty += changes;
        if !self.effects.tracks_changes {
            return;
        }
        if let Some(r) = self.effects.record.as_deref_mut().filter(|r| r.track_keys) {
            r.keys.push(self.db, key);
        }
    }

    /// A script's read-only call read the keys `keys` names in `argv` (kept only
    /// when the server asked: [`Effects::record_reads`]).
    pub fn read(&mut self, keys: &KeySpec, argv: Args<'_>) {
        if let Some(r) = self.effects.record.as_deref_mut().filter(|r| r.track_reads) {
            for p in keys.positions(argv) {
                r.reads.push(self.db, argv.get(p));
            }
        }
    }

    /// [`changed`](Self::changed) for a key of database `db` (MOVE, COPY ... DB).
    pub fn changed_in(&mut self, db: usize, key: &[u8], event: Event, changes: u64) {
        self.effects.dirty += changes;
        if !self.effects.tracks_changes {
            return;
        }
        if let Some(r) = self.effects.record.as_deref_mut() {
            if r.track_keys {
                r.keys.push(db, key);
            }
            if r.track_events {
                r.events.push(event);
                r.event_keys.push(db, key);
            }
        }
    }

    /// Run a command inside this one (a script's `redis.call`) so that the
    /// outer command is logged as the inner writes (Redis' effects replication):
    /// an inner write that was not rewritten is logged as its own arguments, and
    /// the outer command's own arguments are never logged once anything changed.
    pub fn run_inner<R>(&mut self, argv: Args<'_>, run: impl FnOnce(&mut ExecCtx) -> R) -> R {
        let outer_rewritten = std::mem::replace(&mut self.effects.rewritten, false);
        let dirty_before = self.effects.dirty;
        let result = run(self);
        if !self.effects.rewritten && self.effects.dirty > dirty_before {
            self.log_record(argv.iter());
        }
        self.effects.rewritten |= outer_rewritten;
        result
    }

    /// Log this command as `argv` instead of its own arguments (Redis'
    /// `rewriteClientCommandVector`/`alsoPropagate`): relative times become absolute,
    /// random choices their outcome, blocking pops plain pops. Called more than once,
    /// the records are logged in order.
    pub fn log_as(&mut self, argv: &[&[u8]]) {
        self.log_record(argv.iter().copied());
    }

    /// [`log_as`](Self::log_as) of arguments as they come (nothing collected when
    /// no log is kept).
    fn log_record<'a>(&mut self, argv: impl IntoIterator<Item = &'a [u8]>) {
        self.effects.rewritten = true;
        if let Some(r) = self.effects.record.as_deref_mut().filter(|r| r.track_log) {
            r.log.push_record(argv);
        }
    }
}

/// Keyspace event classes (Redis' `NOTIFY_*`), for `notify-keyspace-events`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventClass {
    /// `g`: DEL, EXPIRE, RENAME ...
    Generic,
    /// `$`
    String,
    /// `l`
    List,
    /// `h`
    Hash,
    /// `z`
    ZSet,
    /// `s`
    Set,
    /// `x`: a key expired.
    Expired,
    /// `t`
    Stream,
}

/// One keyspace event: its class and Redis' event name (`lpush`, `hset`, `del` ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// Class, for filtering.
    pub class: EventClass,
    /// Redis' event name.
    pub name: &'static str,
}

impl Event {
    /// An event of `class` named `name`.
    pub const fn new(class: EventClass, name: &'static str) -> Event {
        Event { class, name }
    }
}

/// Byte strings in one flat buffer: no allocation per item once the buffers have
/// grown, which keeps recording effects off the allocator on the hot path.
#[derive(Debug, Default)]
pub struct KeyList {
    bytes: Vec<u8>,
    /// `(db, end offset in bytes)` per item.
    ends: Vec<(usize, usize)>,
}

impl KeyList {
    /// Forget every item, keeping the buffers.
    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Bytes the buffers hold room for.
    fn capacity_bytes(&self) -> usize {
        self.bytes.capacity() + self.ends.capacity() * std::mem::size_of::<(usize, usize)>()
    }

    fn push(&mut self, db: usize, key: &[u8]) {
        self.bytes.extend_from_slice(key);
        self.ends.push((db, self.bytes.len()));
    }

    /// Number of items.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// `(db, bytes)` in the order recorded.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &[u8])> {
        let starts = std::iter::once(0).chain(self.ends.iter().map(|&(_, end)| end));
        self.ends
            .iter()
            .zip(starts)
            .map(|(&(db, end), start)| (db, &self.bytes[start..end]))
    }
}

/// Commands to log, as flat argument lists.
#[derive(Debug, Default)]
pub struct LogRecords {
    args: KeyList,
    /// Number of arguments of each record.
    counts: Vec<usize>,
}

impl LogRecords {
    fn push_record<'a>(&mut self, argv: impl IntoIterator<Item = &'a [u8]>) {
        let before = self.args.len();
        argv.into_iter().for_each(|a| self.args.push(0, a));
        self.counts.push(self.args.len() - before);
    }

    /// Call `visit` with each record's arguments, in order, allocating nothing.
    pub fn visit<'a>(&'a self, visit: &mut impl FnMut(&mut dyn Iterator<Item = &'a [u8]>)) {
        let mut args = self.args.iter().map(|(_, a)| a);
        for &n in &self.counts {
            visit(&mut args.by_ref().take(n));
        }
    }

    /// Each record as its arguments.
    pub fn records(&self) -> Vec<Vec<Vec<u8>>> {
        let mut args = self.args.iter().map(|(_, a)| a.to_vec());
        self.counts
            .iter()
            .map(|&n| args.by_ref().take(n).collect())
            .collect()
    }
}

/// What a command did, recorded while it runs and read by the server afterwards
/// (Redis keeps the same facts in `server.dirty`, `signalModifiedKey`,
/// `notifyKeyspaceEvent` and `alsoPropagate`). The engine never knows who listens:
/// the server says what is worth recording ([`Effects::recording`]); with nothing
/// asked for, the effects are a counter and a flag, so a SET with nobody blocked,
/// watching or logging pays for nothing else (the recorded part is boxed).
#[derive(Debug, Default)]
pub struct Effects {
    /// Changes made (Redis' `dirty`): INFO persistence, and "log this command" when
    /// nonzero and not rewritten.
    pub dirty: u64,
    /// The command asked to be logged as something else ([`ExecCtx::log_as`]).
    pub rewritten: bool,
    /// The record takes each changed key or its event: false when it is made
    /// for the log's records alone (a primary feeding replicas), so a write's
    /// every change is a test, not a call into the record (callgrind, one
    /// shard, SET with a replica: 20 instructions and 1.8 L1i misses a SET).
    /// A bool beside `rewritten`: the struct is no larger.
    tracks_changes: bool,
    /// What is recorded, when the server asked for anything.
    pub record: Option<Box<Recorded>>,
    /// Messages a script published (PUBLISH / SPUBLISH from `redis.call`), in
    /// order: the server delivers them after the command, as it delivers keyspace
    /// events (docs/scripting.md).
    pub published: Vec<Published>,
}

/// A message a script published: the server delivers it once the script is over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// SPUBLISH (a shard channel) rather than PUBLISH.
    pub shard_channel: bool,
    /// The channel (or shard channel).
    pub channel: Vec<u8>,
    /// The message.
    pub message: Vec<u8>,
}

/// The recorded effects of one command.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Record modified keys in [`keys`](Self::keys).
    pub track_keys: bool,
    /// Record keyspace events in [`events`](Self::events).
    pub track_events: bool,
    /// Record rewritten log records in [`log`](Self::log).
    pub track_log: bool,
    /// Record the keys a script's read-only calls read in [`reads`](Self::reads)
    /// (the server's CLIENT TRACKING remembers them for the script's caller).
    pub track_reads: bool,
    /// Keys modified, in order (possibly repeated).
    pub keys: KeyList,
    /// Keyspace events in order; the key of event i is item i of `event_keys`.
    pub events: Vec<Event>,
    /// The key of each event.
    pub event_keys: KeyList,
    /// The rewritten records (when `track_log`).
    pub log: LogRecords,
    /// Keys read by a script's read-only calls (when `track_reads`).
    pub reads: KeyList,
}

/// Recorded effects' buffers grown past this are freed rather than kept for the
/// next command (a script's thousand writes do not pin their memory).
const RECORD_KEEP_BYTES: usize = 64 * 1024;

impl Recorded {
    /// Empty, tracking as asked, with the buffers of earlier commands.
    fn reset(&mut self, keys: bool, events: bool, log: bool) {
        if self.capacity_bytes() > RECORD_KEEP_BYTES {
            *self = Recorded::default();
        }
        self.track_keys = keys;
        self.track_events = events;
        self.track_log = log;
        self.track_reads = false;
        self.reads.clear();
        self.keys.clear();
        self.events.clear();
        self.event_keys.clear();
        self.log.args.clear();
        self.log.counts.clear();
    }

    /// Bytes the buffers hold room for.
    fn capacity_bytes(&self) -> usize {
        self.keys.capacity_bytes()
            + self.events.capacity() * std::mem::size_of::<Event>()
            + self.event_keys.capacity_bytes()
            + self.log.args.capacity_bytes()
            + self.log.counts.capacity() * std::mem::size_of::<usize>()
            + self.reads.capacity_bytes()
    }
}

impl Effects {
    /// Effects that record modified keys, keyspace events and log records as asked,
    /// in `spare` (an earlier command's record, see [`take_record`](Self::take_record))
    /// when there is one: a shard's commands reuse one record's buffers.
    pub fn recording(spare: Option<Box<Recorded>>, keys: bool, events: bool, log: bool) -> Effects {
        let record = (keys || events || log).then(|| {
            let mut record = spare.unwrap_or_default();
            record.reset(keys, events, log);
            record
        });
        Effects {
            record,
            tracks_changes: keys || events,
            ..Effects::default()
        }
    }

    /// Also record the keys a script's read-only calls read ([`read_keys`](Self::read_keys)).
    pub fn record_reads(&mut self) {
        self.record.get_or_insert_with(Default::default).track_reads = true;
    }

    /// The keys a script's read-only calls read, `(db, key)` in order (none
    /// unless [`record_reads`](Self::record_reads) asked).
    pub fn read_keys(&self) -> impl Iterator<Item = (usize, &[u8])> {
        self.record.iter().flat_map(|r| r.reads.iter())
    }

    /// The record, once the server has read it, for the next command's
    /// [`recording`](Self::recording).
    pub fn take_record(&mut self) -> Option<Box<Recorded>> {
        self.record.take()
    }

    /// The keys modified, `(db, key)` in order (none unless recorded).
    pub fn modified_keys(&self) -> impl Iterator<Item = (usize, &[u8])> {
        self.record.iter().flat_map(|r| r.keys.iter())
    }

    /// The keyspace events, with their `(db, key)` (none unless recorded).
    pub fn events(&self) -> impl Iterator<Item = (Event, usize, &[u8])> {
        self.record
            .iter()
            .flat_map(|r| r.events.iter().zip(r.event_keys.iter()))
            .map(|(&event, (db, key))| (event, db, key))
    }

    /// [`log_records`](Self::log_records) without copying: `visit` gets each
    /// record's arguments in order (the log appends them straight to its buffer).
    pub fn visit_log_records<'a>(
        &'a self,
        argv: Args<'a>,
        mut visit: impl FnMut(&mut dyn Iterator<Item = &'a [u8]>),
    ) {
        if self.rewritten {
            if let Some(r) = &self.record {
                r.log.visit(&mut visit);
            }
        } else if let Some(argv) = self.plain_record(argv) {
            visit(&mut argv.iter());
        }
    }

    /// The command is its own one record (it wrote and was not rewritten):
    /// its arguments, which the replication stream may copy as sent.
    pub fn plain_record<'a>(&self, argv: Args<'a>) -> Option<Args<'a>> {
        (!self.rewritten && self.dirty > 0).then_some(argv)
    }

    /// What the write-ahead log must hold for this command, given its arguments:
    /// nothing for a no-op, the rewritten records, or the command itself.
    pub fn log_records(&self, argv: Args<'_>) -> Vec<Vec<Vec<u8>>> {
        if self.rewritten {
            self.record
                .as_ref()
                .map(|r| r.log.records())
                .unwrap_or_default()
        } else if self.dirty > 0 {
            vec![argv.iter().map(<[u8]>::to_vec).collect()]
        } else {
            Vec::new()
        }
    }
}

/// A handler's answer besides the reply it wrote.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The command ran; its reply is written.
    Done,
    /// Nothing to serve yet: park the client on these keys until one of them is
    /// written or the deadline passes, then run the command again. Nothing was
    /// written to the reply. On timeout the client gets a null array (Redis'
    /// `replyToBlockedClientTimedOut` for lists, sorted sets and streams).
    Block(Block),
}

/// Where and until when a command blocks.
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    /// Argument indexes of the keys to wait on (BLMOVE waits on its source only).
    pub keys: KeyPositions,
    /// Absolute Unix ms after which the client times out; `None` waits forever.
    pub deadline_ms: Option<u64>,
    /// Arguments to replace in the parked command (index, new bytes): XREAD's `$`
    /// becomes the stream's last ID at the time it blocked.
    pub rewrite: Vec<(usize, Vec<u8>)>,
}
