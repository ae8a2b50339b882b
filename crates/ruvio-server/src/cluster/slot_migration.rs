//! Whole-slot migration (Valkey 9's atomic slot migration: CLUSTER
//! MIGRATESLOTS, GETSLOTMIGRATIONS, CANCELSLOTMIGRATIONS): the jobs a node
//! runs or ran, and the source's connection to the target.
//!
//! How a job goes (docs/cluster.md, "Whole-slot migration"): the source opens
//! a connection to the target's client port and sends `CLUSTER SYNCSLOTS
//! START`; then every key of the slots as `RESTORE ... REPLACE ABSTTL` (its
//! DUMP payload), slot after slot, while the writes made meanwhile to keys
//! already sent follow as the commands' log records, in one ordered stream;
//! once every key is sent and little is left unacknowledged, the source
//! sends `CLUSTER SYNCSLOTS FINISH` and holds the writes to those slots
//! until it is answered, the target takes the slots under a new config
//! epoch, and the source gives them up (the held writes and every later
//! command of those slots get `-MOVED`) and deletes its copies. No slot is ever MIGRATING or IMPORTING in CLUSTER
//! NODES' sense: clients see no `-ASK` nor `-TRYAGAIN`.
//!
//! Why one stream of commands rather than a snapshot then a log: without a
//! fork there is no point-in-time copy, so a key is sent as it is when its
//! turn comes, and only writes to keys already sent are forwarded (a write
//! to a key not sent yet is in the value sent later). A write that names a
//! key not sent yet, or that a script made, sends the state of the keys it
//! wrote instead of its records: a record replayed over a key the target
//! does not have yet would be wrong.
//!
//! Here: the jobs' table and the connection (sans engine); the shard drives
//! them (`shard/slot_export.rs`), the commands are `cmd/cluster_slot_migration.rs`.

use super::bus::message::NodeName;
use ruvio_engine::slot::SLOT_COUNT;
use ruvio_resp::{scan_reply, Protocol, Reply};
use std::collections::{HashSet, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Finished jobs kept for CLUSTER GETSLOTMIGRATIONS (Valkey's
/// `cluster-slot-migration-log-max-len` default); active ones always show.
pub const FINISHED_JOBS_KEPT_MAX: usize = 1000;

/// Bytes queued for the target past which the source stops reading keys
/// until the socket takes them: the stream's memory stays bounded whatever
/// the slots hold.
pub const QUEUED_BYTES_MAX: usize = 8 << 20;

/// Unacknowledged commands below which the source holds its clients for the
/// handover: the target applies that many in well under a millisecond each.
pub const HANDOVER_REPLIES_MAX: u64 = 1000;

/// How long the handover may hold writes to the slots: the target applies
/// the rest and answers FINISH within it, else the job fails and the source
/// keeps its slots.
pub const HANDOVER_TIMEOUT_MS: u64 = 5_000;

/// A target that acknowledges nothing for this long while commands wait
/// fails the job.
pub const SILENT_TARGET_MS_MAX: u64 = 15_000;

/// Bytes read from the target at a time.
const READ_CHUNK_BYTES: usize = 16 * 1024;

/// Where a job is (GETSLOTMIGRATIONS' `state`; `success`, `failed` and
/// `cancelled` are Valkey's words, the active ones Ruvio's stages).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// The source is connecting to the target.
    Connecting,
    /// Keys are being sent (and writes to sent keys forwarded).
    Snapshotting,
    /// Every key is sent; the forwarded writes drain before the handover.
    Streaming,
    /// FINISH is sent; writes to the slots wait for the target's answer.
    HandingOver,
    /// The target receives (its side of a job).
    Importing,
    Success,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn name(self) -> &'static str {
        match self {
            JobState::Connecting => "connecting",
            JobState::Snapshotting => "snapshotting",
            JobState::Streaming => "streaming",
            JobState::HandingOver => "handing-over",
            JobState::Importing => "importing",
            JobState::Success => "success",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Still running.
    pub fn active(self) -> bool {
        !matches!(
            self,
            JobState::Success | JobState::Failed | JobState::Cancelled
        )
    }
}

/// One job as GETSLOTMIGRATIONS lists it, on the source (`EXPORT`) or the
/// target (`IMPORT`).
pub struct Job {
    /// 40 hex characters, the same on both nodes.
    pub name: String,
    pub export: bool,
    /// Inclusive ranges, in the order given.
    pub ranges: Vec<(u16, u16)>,
    pub source: NodeName,
    pub target: NodeName,
    pub created_s: u64,
    pub updated_s: u64,
    pub acked_s: u64,
    pub state: JobState,
    /// Why it failed.
    pub message: String,
    /// The source's run while it is active.
    pub run: Option<Box<Export>>,
    /// The target's: the id of the source's connection while importing.
    pub importer: Option<u64>,
    /// The source's keys of the slots still to delete after a success.
    pub deleting: Vec<u16>,
}

impl Job {
    /// Every slot of the job, in the ranges' order.
    pub fn slots(&self) -> Vec<u16> {
        self.ranges.iter().flat_map(|&(a, b)| a..=b).collect()
    }

    /// The job covers `slot`.
    pub fn covers(&self, slot: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
    }

    /// A state change at Unix second `now_s`.
    pub fn set_state(&mut self, state: JobState, message: &str, now_s: u64) {
        self.state = state;
        self.message = message.to_string();
        self.updated_s = now_s;
        if !state.active() {
            self.run = None;
            self.importer = None;
        }
    }

    /// GETSLOTMIGRATIONS' entry: Valkey 9.1's fields, in its order (a map
    /// in RESP3, a flat array in RESP2).
    pub fn render(&self, reply: &mut Reply<'_>) {
        let ranges: Vec<String> = self
            .ranges
            .iter()
            .map(|(a, b)| format!("{a}-{b}"))
            .collect();
        let backlog = self.run.as_ref().map_or(0, |r| r.link.unsent_bytes());
        reply.map(12);
        reply.bulk(b"name");
        reply.bulk(self.name.as_bytes());
        reply.bulk(b"operation");
        reply.bulk(if self.export { b"EXPORT" } else { b"IMPORT" });
        reply.bulk(b"slot_ranges");
        reply.bulk(ranges.join(" ").as_bytes());
        reply.bulk(b"target_node");
        reply.bulk(&self.target);
        reply.bulk(b"source_node");
        reply.bulk(&self.source);
        reply.bulk(b"create_time");
        reply.int(self.created_s as i64);
        reply.bulk(b"last_update_time");
        reply.int(self.updated_s as i64);
        reply.bulk(b"last_ack_time");
        reply.int(self.acked_s as i64);
        reply.bulk(b"state");
        reply.bulk(self.state.name().as_bytes());
        reply.bulk(b"message");
        reply.bulk(self.message.as_bytes());
        // No fork, so no copy-on-write.
        reply.bulk(b"cow_size");
        reply.int(0);
        reply.bulk(b"remaining_repl_size");
        reply.int(backlog as i64);
    }
}

/// A node's jobs, newest first.
#[derive(Default)]
pub struct SlotMigrations {
    pub jobs: VecDeque<Job>,
    /// Some job may have a run (set when one starts, recounted on the
    /// tick): read on every write command, so not a walk of the jobs.
    exporting: bool,
    /// Some export is handing over: writes to its slots wait (read on every
    /// command while it lasts, a few ms).
    holding: bool,
    /// Some finished job has keys left to delete (recounted on the tick).
    deleting: bool,
    /// Connections `(index, generation)` holding a write that waits for a
    /// handover's end.
    pub held: Vec<(u32, u32)>,
    /// The share of the shard's time the jobs' work may take.
    pub pace: super::slot_pace::Pace,
    /// The slice the source's connection's input runs in now (the
    /// target's side: when it began, how long), whether it was cut short,
    /// and the connections `(index, generation)` waiting for a slice.
    pub import_slice: Option<(std::time::Instant, std::time::Duration)>,
    /// When the source's connection last began to run (the target's side).
    pub import_ran_at: Option<std::time::Instant>,
    pub import_cut: bool,
    pub import_waiting: Vec<(u32, u32)>,
}

impl SlotMigrations {
    /// Some export is sending keys or writes: the shard records its writes
    /// to the job's slots (one branch per write command otherwise).
    #[inline]
    pub fn exporting(&self) -> bool {
        self.exporting
    }

    /// An export's run started.
    pub fn export_started(&mut self) {
        self.exporting = true;
    }

    /// Recount [`Self::exporting`], [`Self::holding`] and what
    /// [`Self::working`] reads (on the shard's tick, and after a slice).
    pub fn recount(&mut self) {
        self.exporting = self.jobs.iter().any(|j| j.run.is_some());
        self.holding = self.jobs.iter().any(|j| j.state == JobState::HandingOver);
        self.deleting = self.jobs.iter().any(|j| !j.deleting.is_empty());
    }

    /// Some job has work for the loop's turns (keys or writes to send, a
    /// handover, copies to delete, an import's input): read on every turn,
    /// so not a walk.
    #[inline]
    pub fn working(&self) -> bool {
        self.exports_or_deletes() || !self.import_waiting.is_empty()
    }

    /// Some export runs or some job has copies to delete: the work the
    /// shard's own slices do (an import's runs in its connection's).
    #[inline]
    pub fn exports_or_deletes(&self) -> bool {
        self.exporting || self.deleting
    }

    /// Some export is handing over its slots.
    #[inline]
    pub fn holding(&self) -> bool {
        self.holding
    }

    /// An export's handover started.
    pub fn hold(&mut self) {
        self.holding = true;
    }

    /// A job handing over `slot` holds its writes.
    pub fn holds_slot(&self, slot: u16) -> bool {
        self.jobs
            .iter()
            .any(|j| j.state == JobState::HandingOver && j.covers(slot))
    }

    /// Some job needs the shard's tick (sending, deleting, importing).
    pub fn busy(&self) -> bool {
        self.jobs
            .iter()
            .any(|j| j.state.active() || !j.deleting.is_empty())
    }

    /// An active job (either way) covers `slot`.
    pub fn active_covers(&self, slot: u16) -> bool {
        self.jobs.iter().any(|j| j.state.active() && j.covers(slot))
    }

    /// A new job, listed first; the oldest finished ones beyond the limit go.
    /// Its slots leave every finished job's keys to delete: a failed
    /// import's deletion walks slots this node does not serve, which are
    /// exactly a new import's, so it would delete the keys the new job
    /// brings (an import's START drops what an earlier one left itself;
    /// an export's slots are served here, so nothing was to delete).
    pub fn add(&mut self, job: Job) {
        for earlier in self.jobs.iter_mut() {
            earlier.deleting.retain(|&slot| !job.covers(slot));
        }
        self.jobs.push_front(job);
        while self.jobs.len() > FINISHED_JOBS_KEPT_MAX {
            match self.jobs.iter().rposition(|j| !j.state.active()) {
                Some(oldest) => drop(self.jobs.remove(oldest)),
                None => break,
            }
        }
    }

    /// The job named `name`.
    pub fn named(&mut self, name: &[u8]) -> Option<&mut Job> {
        self.jobs.iter_mut().find(|j| j.name.as_bytes() == name)
    }
}

/// Where a slot of an export stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not a slot of the job.
    Outside,
    /// Its keys are not sent yet: writes to it need not be forwarded.
    Waiting,
    /// Its keys are being sent: a write to a key not sent yet is not
    /// forwarded, one to a key sent (or new) is.
    Current,
    /// Its keys are sent: every write is forwarded.
    Sent,
}

/// The source's side of an active job: the connection and how far the keys
/// got.
pub struct Export {
    pub link: Link,
    phases: Box<[Phase]>,
    /// The job's slots in order, and the index of the next to start.
    slots: Vec<u16>,
    next: usize,
    current: Option<u16>,
    /// The current slot's keys not sent yet, in the order they will be.
    pending_order: VecDeque<Vec<u8>>,
    pending: HashSet<Vec<u8>>,
    /// Unix ms FINISH was queued at (0: not yet).
    pub handover_at_ms: u64,
}

impl Export {
    pub fn new(link: Link, slots: Vec<u16>) -> Export {
        let mut phases = vec![Phase::Outside; usize::from(SLOT_COUNT)].into_boxed_slice();
        for &slot in &slots {
            phases[usize::from(slot)] = Phase::Waiting;
        }
        Export {
            link,
            phases,
            slots,
            next: 0,
            current: None,
            pending_order: VecDeque::new(),
            pending: HashSet::new(),
            handover_at_ms: 0,
        }
    }

    pub fn phase(&self, slot: u16) -> Phase {
        self.phases[usize::from(slot) % self.phases.len()]
    }

    /// Every key is sent.
    pub fn all_sent(&self) -> bool {
        self.current.is_none() && self.next == self.slots.len()
    }

    /// The slot whose keys are to be read next, when the current one is done.
    pub fn slot_to_start(&self) -> Option<u16> {
        match self.current {
            Some(_) => None,
            None => self.slots.get(self.next).copied(),
        }
    }

    /// Slot `slot` (from [`Self::slot_to_start`]) starts with its keys now.
    pub fn start_slot(&mut self, slot: u16, keys: Vec<Vec<u8>>) {
        self.next += 1;
        self.current = Some(slot);
        self.phases[usize::from(slot)] = Phase::Current;
        self.pending = keys.iter().cloned().collect();
        self.pending_order = keys.into();
    }

    /// The next key of the current slot to send; `None` when the slot is done
    /// (it is then [`Phase::Sent`]).
    pub fn next_key(&mut self) -> Option<Vec<u8>> {
        while let Some(key) = self.pending_order.pop_front() {
            if self.pending.remove(&key) {
                return Some(key);
            }
        }
        if let Some(slot) = self.current.take() {
            self.phases[usize::from(slot)] = Phase::Sent;
        }
        None
    }

    /// `key` of the current slot is not sent yet.
    pub fn is_pending(&self, key: &[u8]) -> bool {
        !self.pending.is_empty() && self.pending.contains(key)
    }

    /// `key` is sent now, out of turn (its state after a write).
    pub fn take_pending(&mut self, key: &[u8]) {
        self.pending.remove(key);
    }
}

/// The source's connection to the target: one ordered stream of commands,
/// written without blocking the shard's loop, and their replies counted.
pub struct Link {
    stream: TcpStream,
    /// Commands queued; `out[written..]` is not on the socket yet.
    out: Vec<u8>,
    written: usize,
    input: Vec<u8>,
    /// Commands sent or queued whose reply has not come.
    pub replies_owed: u64,
    /// Unix ms of the last reply (or of the start).
    pub last_reply_ms: u64,
}

impl Link {
    /// Connect to the target at `ip:port` within `timeout`.
    pub fn connect(ip: &str, port: u16, timeout: Duration, now_ms: u64) -> std::io::Result<Link> {
        let addr = std::net::ToSocketAddrs::to_socket_addrs(&(ip, port))?
            .next()
            .ok_or_else(|| std::io::Error::new(ErrorKind::NotFound, "no address"))?;
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        Ok(Link {
            stream,
            out: Vec::new(),
            written: 0,
            input: Vec::new(),
            replies_owed: 0,
            last_reply_ms: now_ms,
        })
    }

    /// One command at the end of the stream.
    pub fn queue<'a>(&mut self, args: impl ExactSizeIterator<Item = &'a [u8]>) {
        let mut reply = Reply::new(&mut self.out, Protocol::Resp2);
        reply.array(args.len());
        for arg in args {
            reply.bulk(arg);
        }
        self.replies_owed += 1;
    }

    /// Bytes queued and not on the socket yet.
    pub fn unsent_bytes(&self) -> usize {
        self.out.len() - self.written
    }

    /// Write what the socket takes now.
    pub fn flush(&mut self) -> Result<(), String> {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err("the target closed the connection".into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("writing to the target: {e}")),
            }
        }
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        } else if self.written > self.out.len() / 2 {
            self.out.drain(..self.written);
            self.written = 0;
        }
        Ok(())
    }

    /// Read the replies that came; the first error the target answered fails
    /// the job. `last` gets the last reply read (FINISH's, at the handover).
    pub fn read_replies(&mut self, now_ms: u64, last: &mut Vec<u8>) -> Result<(), String> {
        let mut chunk = [0u8; READ_CHUNK_BYTES];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("the target closed the connection".into()),
                Ok(n) => self.input.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("reading from the target: {e}")),
            }
            if self.input.len() >= READ_CHUNK_BYTES * 4 {
                break;
            }
        }
        let mut at = 0;
        while let Some(len) = scan_reply(&self.input[at..])
            .map_err(|_| "the target's reply is not RESP".to_string())?
        {
            let reply = &self.input[at..at + len];
            if reply.first() == Some(&b'-') {
                let text = String::from_utf8_lossy(&reply[1..len - 2]);
                return Err(format!("the target answered: {text}"));
            }
            self.replies_owed = self.replies_owed.saturating_sub(1);
            self.last_reply_ms = now_ms;
            last.clear();
            last.extend_from_slice(reply);
            at += len;
        }
        self.input.drain(..at);
        Ok(())
    }
}

/// A job name: 40 hex characters from `seed`.
pub fn job_name(seed: u64) -> String {
    String::from_utf8_lossy(&super::node::random_name(seed)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> (Link, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let link = Link::connect("127.0.0.1", port, Duration::from_secs(1), 0).unwrap();
        let (peer, _) = listener.accept().unwrap();
        (link, peer)
    }

    #[test]
    fn keys_of_a_slot_are_sent_once_and_a_written_key_out_of_turn() {
        let (link, _peer) = link();
        let mut export = Export::new(link, vec![7, 9]);
        assert_eq!(export.phase(7), Phase::Waiting);
        assert_eq!(export.phase(8), Phase::Outside);
        assert_eq!(export.slot_to_start(), Some(7));
        export.start_slot(7, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(export.phase(7), Phase::Current);
        assert_eq!(export.next_key().as_deref(), Some(&b"a"[..]));
        assert!(export.is_pending(b"c") && !export.is_pending(b"a"));
        export.take_pending(b"c");
        assert_eq!(export.next_key().as_deref(), Some(&b"b"[..]));
        assert_eq!(export.next_key(), None);
        assert_eq!(export.phase(7), Phase::Sent);
        assert_eq!(export.slot_to_start(), Some(9));
        export.start_slot(9, Vec::new());
        assert_eq!(export.next_key(), None);
        assert!(export.all_sent());
    }

    fn job(ranges: Vec<(u16, u16)>, state: JobState) -> Job {
        Job {
            name: job_name(1),
            export: false,
            ranges,
            source: [b'a'; 40],
            target: [b'b'; 40],
            created_s: 0,
            updated_s: 0,
            acked_s: 0,
            state,
            message: String::new(),
            run: None,
            importer: None,
            deleting: Vec::new(),
        }
    }

    /// A cancelled import's slots still to empty when a new import of some
    /// of them starts: those are the new job's now (seen under load in
    /// tests/cluster_slot_migration.rs: the old job's deletion took 96 of
    /// the 2,000 keys the next job imported).
    #[test]
    fn a_new_job_takes_its_slots_from_an_earlier_jobs_deletion() {
        let mut migrations = SlotMigrations::default();
        let mut cancelled = job(vec![(0, 99)], JobState::Cancelled);
        cancelled.deleting = cancelled.slots();
        migrations.add(cancelled);
        migrations.add(job(vec![(50, 149)], JobState::Importing));
        let left: Vec<u16> = (0..50).collect();
        assert_eq!(migrations.jobs[1].deleting, left);
        assert!(migrations.jobs[0].deleting.is_empty());
    }

    #[test]
    fn replies_are_counted_and_an_error_fails() {
        let (mut link, mut peer) = link();
        link.queue([&b"PING"[..]].into_iter());
        link.queue([&b"SET"[..], b"k", b"v"].into_iter());
        link.flush().unwrap();
        assert_eq!(link.replies_owed, 2);
        let mut got = vec![0u8; 64];
        let n = peer.read(&mut got).unwrap();
        assert!(got[..n].starts_with(b"*1\r\n$4\r\nPING\r\n"));
        peer.write_all(b"+PONG\r\n$2\r\nok").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut last = Vec::new();
        link.read_replies(5, &mut last).unwrap();
        assert_eq!((link.replies_owed, last.as_slice()), (1, &b"+PONG\r\n"[..]));
        peer.write_all(b"\r\n-ERR no\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let failed = link.read_replies(6, &mut last).unwrap_err();
        assert_eq!(failed, "the target answered: ERR no");
        assert_eq!(link.replies_owed, 0);
    }
}
