//! Barrier records: the order of a cross-shard group against its keys'
//! owner on a Ruvio replica's shard links (docs/replication.md, "Ruvio to
//! Ruvio shard by shard").
//!
//! A transaction or script that primary shard i runs on keys borrowed from
//! shard j is recorded in i's stream only, while the owner's writes to those
//! keys before the loan and after it are in j's: a replica's two links apply
//! the streams each at its own pace, so without an order between them the
//! group may land after the owner's later write (or before its earlier one).
//! So both sides record where the other stood, in the shard links' streams
//! only (a redis-server replica of the server's one stream never sees them):
//!
//! - the owner j hands its records to its history before its keys leave it
//!   (every message leaves a shard after its records: `ship_outbox`); when
//!   they arrive, i records `RUVIO BARRIER j X_j`, X_j the end of j's
//!   history then, before the group's records;
//! - i hands its records (the group's) to its history before the keys go
//!   home; when they arrive, j records `RUVIO BARRIER i X_i` before its next
//!   record, and after it the state of each of its keys the group changed
//!   (they travel home with the keys): a full sync of i's link, whose RDB
//!   holds i's keys only, cannot lose them.
//!
//! The offset read is the history's end when the group runs or the keys
//! arrive, at least the one when they left: a barrier may wait for a little
//! more than it needs (records of other keys), never for less. Every offset
//! a barrier names was in its history before the barrier itself was, so the
//! waits never form a cycle.
//!
//! On the replica, the link's master client stops before a barrier until its
//! sibling link has *applied* the offset ([`super::shard_links::LinkBook::applied`]:
//! every command up to it ran, the parts it forwarded to other shards
//! answered). Only the master client waits, never the shard's loop: the
//! forwarded writes it waits for run meanwhile. A barrier whose sibling
//! loaded data cut after its offset makes the link leave the group's writes
//! to that sibling's keys alone (`shard::replica::skipped_by_barrier`).
//!
//! **Server offset marks** (`RUVIO OFFSET <offset>`, [`offset_record`]) are
//! the links' other record: one history per shard has no one offset, but a
//! tool (Sentinel, FAILOVER, a test waiting for a replica) compares the
//! replica's offset with the primary's `master_repl_offset`. A primary
//! shard appends its records to its own history before the server's, so at
//! any moment every record of shard i at a server offset up to the server's
//! end is already in i's history: a mark of that end, appended to i's
//! history, says "every record of this shard up to server offset S is
//! before this point". The replica's offset is the least mark its links
//! applied ([`super::shard_links::ShardLinks::server_offset`]): the
//! primary's `master_repl_offset` once every link applied what it was sent.
//!
//! **Function libraries** (`RUVIO FUNCTIONS <payload>`, [`functions_record`]):
//! a FUNCTION LOAD (DELETE, FLUSH, RESTORE) runs on the client's shard, is
//! recorded in that shard's stream, and the resulting set goes to every other
//! shard (`cmd::functions`). Each of those records the set it took, as a
//! FUNCTION DUMP payload, in its own history only. So every link's stream
//! carries its shard's libraries as they changed, after its RDB's cut as its
//! keys do, and each replica shard takes its libraries from its own link
//! alone (a link's FUNCTION command changes its shard only): a full sync of
//! one link, cut before a change another link already applied, cannot put
//! the older set back for good, and no shard's set runs ahead of its stream
//! (a FUNCTION LOAD arriving on a link whose shard already had the library
//! from another would fail).

use super::shard_links::ShardLinks;

/// The record's command and subcommand: Ruvio's own, only in a shard link's
/// stream (a redis-server would answer it with an unknown command).
const COMMAND: &[u8] = b"RUVIO";
const SUBCOMMAND: &[u8] = b"BARRIER";
const OFFSET_SUBCOMMAND: &[u8] = b"OFFSET";
const FUNCTIONS_SUBCOMMAND: &[u8] = b"FUNCTIONS";

/// `RUVIO BARRIER <shard> <offset>` as a RESP array.
pub fn record(shard: usize, offset: u64) -> Vec<u8> {
    let (mut shard_digits, mut offset_digits) = (itoa::Buffer::new(), itoa::Buffer::new());
    let args: [&[u8]; 4] = [
        COMMAND,
        SUBCOMMAND,
        shard_digits.format(shard).as_bytes(),
        offset_digits.format(offset).as_bytes(),
    ];
    let mut out = Vec::with_capacity(64);
    super::feed::encode(&mut out, &args);
    out
}

/// `RUVIO OFFSET <server offset>` as a RESP array (see the module's docs).
pub fn offset_record(server_offset: u64) -> Vec<u8> {
    let mut digits = itoa::Buffer::new();
    let args: [&[u8]; 3] = [
        COMMAND,
        OFFSET_SUBCOMMAND,
        digits.format(server_offset).as_bytes(),
    ];
    let mut out = Vec::with_capacity(48);
    super::feed::encode(&mut out, &args);
    out
}

/// `RUVIO FUNCTIONS <payload>` as a RESP array: the shard's function
/// libraries, `payload` a FUNCTION DUMP of them (see the module's docs).
pub fn functions_record(payload: &[u8]) -> Vec<u8> {
    let args: [&[u8]; 3] = [COMMAND, FUNCTIONS_SUBCOMMAND, payload];
    let mut out = Vec::with_capacity(payload.len() + 48);
    super::feed::encode(&mut out, &args);
    out
}

/// A command of a shard link's stream, as one of the links' `RUVIO` records.
#[derive(Debug, PartialEq, Eq)]
pub enum Barrier<'a> {
    /// Not a barrier: it runs as any command of the stream.
    NotOne,
    /// Wait until link `shard` applied `offset`.
    Until { shard: usize, offset: u64 },
    /// A server offset mark: every record of this shard up to the
    /// primary's server offset is before it. Never waits, never runs.
    ServerOffset(u64),
    /// The shard's function libraries from here on (a FUNCTION DUMP
    /// payload). Never waits; replaces the shard's set.
    Functions(&'a [u8]),
    /// `RUVIO ...` of another form: skipped (a newer primary's record this
    /// replica does not know), never run as a command.
    Unknown,
}

/// What `args` is. One length test for nearly every command.
#[inline]
pub fn parse(args: ruvio_resp::Args<'_>) -> Barrier<'_> {
    if !is_record(args) {
        return Barrier::NotOne;
    }
    parse_barrier(args)
}

/// `args` is a `RUVIO ...` record (a barrier, a mark, or one this replica
/// does not know), not a command of the stream.
#[inline]
pub fn is_record(args: ruvio_resp::Args<'_>) -> bool {
    let name = args.get(0);
    name.len() == COMMAND.len() && name.eq_ignore_ascii_case(COMMAND)
}

#[cold]
fn parse_barrier(args: ruvio_resp::Args<'_>) -> Barrier<'_> {
    let number = |i: usize| -> Option<u64> { std::str::from_utf8(args.get(i)).ok()?.parse().ok() };
    if args.len() == 3 && args.get(1).eq_ignore_ascii_case(FUNCTIONS_SUBCOMMAND) {
        return Barrier::Functions(args.get(2));
    }
    if args.len() == 3 && args.get(1).eq_ignore_ascii_case(OFFSET_SUBCOMMAND) {
        return number(2).map_or(Barrier::Unknown, Barrier::ServerOffset);
    }
    if args.len() != 4 || !args.get(1).eq_ignore_ascii_case(SUBCOMMAND) {
        return Barrier::Unknown;
    }
    match (number(2), number(3)) {
        (Some(shard), Some(offset)) => Barrier::Until {
            shard: shard as usize,
            offset,
        },
        _ => Barrier::Unknown,
    }
}

/// A shard link's master client stopped before a barrier.
#[derive(Debug)]
pub struct Wait {
    /// The master client's connection (slab index, generation).
    pub conn: (u32, u32),
    /// The sibling link and the offset it must have applied.
    pub shard: usize,
    pub offset: u64,
    /// The sibling's replid when it was first known: another one is another
    /// history, whose offsets say nothing of this barrier's.
    replid: Option<String>,
}

impl Wait {
    pub fn new(conn: (u32, u32), shard: usize, offset: u64) -> Wait {
        Wait {
            conn,
            shard,
            offset,
            replid: None,
        }
    }

    /// The barrier is passed: the sibling applied the offset, or it follows
    /// another history now (a new full sync under another replid: logged,
    /// as the primary's own barrier given up is). `me` is rung when the
    /// sibling's applied offset next moves.
    pub fn passed(&mut self, links: &ShardLinks, me: usize) -> bool {
        let Some(book) = links.books().get(self.shard) else {
            return true;
        };
        if book.applied() >= self.offset {
            return true;
        }
        let replid = book.replid();
        if !replid.is_empty() {
            match &self.replid {
                None => self.replid = Some(replid),
                Some(known) if *known != replid => {
                    crate::serverlog::log(
                        crate::serverlog::Level::Warning,
                        &format!(
                            "shard {me}: a barrier on link {} at offset {} given up: that link follows another history now",
                            self.shard, self.offset
                        ),
                    );
                    return true;
                }
                Some(_) => {}
            }
        }
        book.ring_when_applied(me);
        // Applied meanwhile: the ring may have been missed.
        book.applied() >= self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `record` parses as `want`.
    fn parses_as(record: &[u8], want: Barrier<'_>) {
        let mut parser = ruvio_resp::CommandParser::new();
        match parser.parse(record, &ruvio_resp::Limits::default()) {
            Ok(ruvio_resp::Parsed::Complete { args, .. }) => assert_eq!(parse(args), want),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_record_reads_back() {
        let record = record(3, 12_345);
        assert_eq!(
            record,
            b"*4\r\n$5\r\nRUVIO\r\n$7\r\nBARRIER\r\n$1\r\n3\r\n$5\r\n12345\r\n"
        );
        parses_as(
            &record,
            Barrier::Until {
                shard: 3,
                offset: 12_345,
            },
        );
        parses_as(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", Barrier::NotOne);
        parses_as(b"*2\r\n$5\r\nruvio\r\n$4\r\nmore\r\n", Barrier::Unknown);
        let bad = b"*4\r\n$5\r\nRUVIO\r\n$7\r\nBARRIER\r\n$1\r\nx\r\n$1\r\n1\r\n";
        parses_as(bad, Barrier::Unknown);
        let mark = offset_record(987_654);
        assert_eq!(
            mark,
            b"*3\r\n$5\r\nRUVIO\r\n$6\r\nOFFSET\r\n$6\r\n987654\r\n"
        );
        parses_as(&mark, Barrier::ServerOffset(987_654));
        let bad = b"*3\r\n$5\r\nRUVIO\r\n$6\r\nOFFSET\r\n$2\r\n-1\r\n";
        parses_as(bad, Barrier::Unknown);
        let libraries = functions_record(b"a\r\nb\x00");
        assert_eq!(
            libraries,
            b"*3\r\n$5\r\nRUVIO\r\n$9\r\nFUNCTIONS\r\n$5\r\na\r\nb\x00\r\n"
        );
        parses_as(&libraries, Barrier::Functions(b"a\r\nb\x00"));
    }

    #[test]
    fn a_wait_passes_once_the_sibling_applied_the_offset() {
        let links = ShardLinks::new(2);
        links.book(1).full_sync(&"a".repeat(40), 100);
        let mut wait = Wait::new((0, 0), 1, 150);
        assert!(!wait.passed(&links, 0));
        links.book(1).processed(60, 0);
        assert!(!wait.passed(&links, 0), "dispatched, not yet answered");
        links.book(1).settle();
        assert!(wait.passed(&links, 0));
        // Another history on the sibling: its offsets are not this barrier's.
        let mut wait = Wait::new((0, 0), 1, 1_000);
        assert!(!wait.passed(&links, 0));
        links.book(1).full_sync(&"b".repeat(40), 5);
        assert!(wait.passed(&links, 0));
        // A shard this replica does not have (a bad record): nothing to wait for.
        assert!(Wait::new((0, 0), 99, 5).passed(&links, 0));
    }
}
