//! One shard's share of the replication stream between two flushes: the records
//! its writes were logged as (the same ones the write-ahead log takes,
//! docs/durability.md: relative times absolute, random outcomes as results,
//! blocking pops as plain pops), as RESP commands, with the `SELECT`s their
//! databases need and a group of several records (a script, an EXEC, a command
//! rewritten into two) wrapped in `MULTI`/`EXEC` as Redis 7 propagates them.
//!
//! Why per shard: commands run on their keys' shard, so the stream is made where
//! they run, into a buffer only that shard touches; once per loop iteration the
//! shard hands the buffer to the server's backlog in one lock
//! ([`super::primary::Primary::flush`]), which puts a `SELECT` in front when the
//! stream was left in another database. Nothing is recorded while no replica
//! and no backlog exists ([`Feed::on`]): the request path pays one branch.

/// A shard's records since the last flush.
#[derive(Debug, Default)]
pub struct Feed {
    on: bool,
    bytes: Vec<u8>,
    /// The database the first record ran in (`None`: nothing recorded).
    first_db: Option<usize>,
    /// The database of the last record.
    db: usize,
    /// Open groups (nested: the outermost wraps).
    depth: u32,
    group_start: usize,
    group_records: usize,
}

/// What a flush takes: the bytes, the database they start in and the one they
/// leave the stream in.
#[derive(Clone, Debug)]
pub struct Flushed {
    pub bytes: Vec<u8>,
    pub first_db: usize,
    pub last_db: usize,
}

/// The most room a flushed feed leaves for the next iteration's records: a
/// loop iteration of small writes at full speed takes a few KiB, and a huge
/// write once must not make every later iteration allocate its size.
const FEED_ROOM_MAX_BYTES: usize = 64 * 1024;

const MULTI: &[u8] = b"*1\r\n$5\r\nMULTI\r\n";
const EXEC: &[u8] = b"*1\r\n$4\r\nEXEC\r\n";

impl Feed {
    /// True while the server keeps a backlog: writes must be recorded.
    #[inline]
    pub fn on(&self) -> bool {
        self.on
    }

    /// Start or stop recording (the shard copies the server's flag once per loop
    /// iteration). Stopping drops what was not flushed.
    pub fn set_on(&mut self, on: bool) {
        if self.on && !on {
            *self = Feed::default();
        }
        self.on = on;
    }

    /// Nothing waits to be flushed.
    pub fn is_empty(&self) -> bool {
        self.first_db.is_none()
    }

    /// Records up to [`end_group`](Self::end_group) replicate as one transaction
    /// when there are two or more.
    pub fn begin_group(&mut self) {
        if !self.on {
            return;
        }
        if self.depth == 0 {
            self.group_start = self.bytes.len();
            self.group_records = 0;
        }
        self.depth += 1;
    }

    pub fn end_group(&mut self) {
        if !self.on || self.depth == 0 {
            return;
        }
        self.depth -= 1;
        if self.depth == 0 && self.group_records > 1 {
            self.bytes
                .splice(self.group_start..self.group_start, MULTI.iter().copied());
            self.bytes.extend_from_slice(EXEC);
        }
    }

    /// Record one command that ran in database `db`. The arguments go straight
    /// behind a one-digit count that is mended once they are counted (a record
    /// of ten or more arguments, rare, moves its bytes once): no scratch copy
    /// and no formatting machinery per write.
    pub fn record(&mut self, db: usize, args: &mut dyn Iterator<Item = &[u8]>) {
        if !self.on {
            return;
        }
        let mark = self.bytes.len();
        let selects = self.first_db.is_some() && self.db != db;
        if selects {
            let mut digits = itoa::Buffer::new();
            encode(&mut self.bytes, &[b"SELECT", digits.format(db).as_bytes()]);
        }
        let header_at = self.bytes.len();
        self.bytes.extend_from_slice(b"*0\r\n");
        let mut argc = 0usize;
        for arg in args {
            bulk(&mut self.bytes, arg);
            argc += 1;
        }
        match argc {
            0 => {
                self.bytes.truncate(mark);
                return;
            }
            1..=9 => self.bytes[header_at + 1] = b'0' + argc as u8,
            _ => {
                let mut header = Vec::with_capacity(24);
                array_header(&mut header, argc);
                self.bytes
                    .splice(header_at..header_at + 4, header.iter().copied());
            }
        }
        self.first_db.get_or_insert(db);
        self.db = db;
        if self.depth > 0 {
            self.group_records += 1;
        }
    }

    /// Hand over what was recorded (never half a group).
    pub fn take(&mut self) -> Option<Flushed> {
        if self.depth > 0 {
            return None;
        }
        let first_db = self.first_db.take()?;
        // The next iteration's records start with room for as many bytes as
        // these took (one allocation, not a run of doublings), within reason.
        let room = Vec::with_capacity(self.bytes.capacity().min(FEED_ROOM_MAX_BYTES));
        Some(Flushed {
            bytes: std::mem::replace(&mut self.bytes, room),
            first_db,
            last_db: self.db,
        })
    }
}

/// `args` as a RESP array of bulk strings.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    array_header(out, args.len());
    for arg in args {
        bulk(out, arg);
    }
}

fn array_header(out: &mut Vec<u8>, n: usize) {
    let mut digits = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(digits.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, arg: &[u8]) {
    let mut digits = itoa::Buffer::new();
    out.push(b'$');
    out.extend_from_slice(digits.format(arg.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(arg);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(feed: &mut Feed, db: usize, args: &[&[u8]]) {
        feed.record(db, &mut args.iter().copied());
    }

    #[test]
    fn off_records_nothing() {
        let mut feed = Feed::default();
        rec(&mut feed, 0, &[b"SET", b"k", b"v"]);
        assert!(feed.take().is_none());
    }

    #[test]
    fn databases_and_groups() {
        let mut feed = Feed::default();
        feed.set_on(true);
        rec(&mut feed, 2, &[b"SET", b"k", b"v"]);
        feed.begin_group();
        rec(&mut feed, 2, &[b"INCR", b"a"]);
        feed.begin_group();
        rec(&mut feed, 3, &[b"DEL", b"b"]);
        feed.end_group();
        assert!(feed.take().is_none(), "never half a group");
        feed.end_group();
        feed.begin_group();
        rec(&mut feed, 3, &[b"DEL", b"c"]);
        feed.end_group();
        let flushed = feed.take().unwrap();
        assert_eq!((flushed.first_db, flushed.last_db), (2, 3));
        let text = String::from_utf8(flushed.bytes)
            .unwrap()
            .replace("\r\n", " ");
        assert_eq!(
            text,
            "*3 $3 SET $1 k $1 v *1 $5 MULTI *2 $4 INCR $1 a *2 $6 SELECT $1 3 \
             *2 $3 DEL $1 b *1 $4 EXEC *2 $3 DEL $1 c "
        );
        assert!(feed.is_empty());
    }
}
