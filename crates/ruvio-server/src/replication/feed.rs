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
    /// Marks recorded before the open group began: they stay before its
    /// `MULTI` (a barrier's bytes are not in `bytes`, so the one recorded
    /// last before a group stands where the group starts).
    group_marks: usize,
    /// The database the stream was in where the open group began (`None`:
    /// nothing recorded before it in this flush).
    group_db: Option<usize>,
    /// FLUSHALL, FLUSHDB and SWAPDB are barriers, not records (a forward-mode
    /// server of several shards: every shard runs them, and the server's stream
    /// takes them once, [`super::primary::Primary`]'s barriers).
    barriers: bool,
    marks: Vec<Mark>,
    /// The next record selects its database itself (it follows a mark).
    reselect: bool,
    /// The engine's count of FLUSHALL, FLUSHDB and SWAPDB run when the last
    /// mark was made (`Engine::every_shard_writes`): a mark's number.
    seq: u64,
    /// The backlog whose barriers this shard joined (`Primary::generation`).
    pub joined: u64,
    /// A client whose writes are not recorded: a promoted replica's old
    /// master client, whose commands are in the backlog as the stream's bytes.
    /// (Client id 0 is the server's own: a FLUSHDB a transaction runs on the
    /// other shards, a migrated slot's keys deleted. Those are recorded.)
    skipped_client: Option<u64>,
    /// Records for this shard's own history only (a Ruvio replica's shard
    /// link), never the server's: `RUVIO BARRIER` ([`super::link_barrier`]).
    link_only: Vec<LinkOnly>,
}

/// A record only a shard's own history takes (its Ruvio replica's link
/// reads it; a redis-server replica of the server would not know it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkOnly {
    /// Where it stands in the bytes: they end before it.
    pub at: usize,
    /// Its place among the flush's marks and link-only records (those
    /// recorded before it): of two at one place, the earlier goes first.
    pub nth: usize,
    /// The command, as a RESP array.
    pub record: Vec<u8>,
    /// The database it runs in, and the one the records before it left the
    /// stream in (`None`: the flush's first, whatever the first record's is):
    /// selected before it and again after it. `None`: it names no database.
    pub db: Option<(usize, Option<usize>)>,
}

/// A barrier in a shard's records: the command every shard ran (FLUSHALL,
/// FLUSHDB, SWAPDB), recorded once for the server by whichever shard passes it
/// last, between every shard's records before it and after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// Where it stands in the bytes: they end before it.
    pub at: usize,
    /// Its place among the flush's marks and link-only records (as
    /// [`LinkOnly::nth`]).
    pub nth: usize,
    /// Which of the shard's FLUSHALL, FLUSHDB and SWAPDB it is (the engine's
    /// count once it ran): every shard runs each, so the n-th is the same
    /// command on every shard.
    pub seq: u64,
    /// The database it ran in (FLUSHDB's).
    pub db: usize,
    /// The command, as a RESP array.
    pub record: Vec<u8>,
    /// The transaction it ran in, when its records began before it: where
    /// the group's `MULTI` stands and the database the stream was in there.
    /// The server's history takes the `MULTI` and the group's records before
    /// the barrier with the barrier's command ([`Flushed::split_first`]), so
    /// no other shard's records land inside the transaction. A group's
    /// later barrier opens the next part of it the same way
    /// (`Feed::split_group_at`).
    pub group: Option<(usize, usize)>,
}

/// What a flush takes: the bytes, the database they start in and the one they
/// leave the stream in.
#[derive(Clone, Debug)]
pub struct Flushed {
    pub bytes: Vec<u8>,
    pub first_db: usize,
    pub last_db: usize,
    /// Barriers among the bytes, in order (the bytes after one begin with a
    /// `SELECT`).
    pub marks: Vec<Mark>,
    /// Records for the shard's own history only, in order; the server's
    /// history never takes them (`shard::primary::flush_records` drops them).
    pub link_only: Vec<LinkOnly>,
}

impl Flushed {
    /// Plain records (no barrier).
    pub fn plain(bytes: Vec<u8>, first_db: usize, last_db: usize) -> Flushed {
        Flushed {
            bytes,
            first_db,
            last_db,
            marks: Vec::new(),
            link_only: Vec::new(),
        }
    }

    /// The records with each barrier's command in its place, and the
    /// records for a shard's own history only (a shard's own history, which
    /// takes every record of the shard, its FLUSHALLs too).
    pub fn inlined(&self) -> Flushed {
        if self.marks.is_empty() && self.link_only.is_empty() {
            return self.clone();
        }
        let extra = 64 * (self.marks.len() + self.link_only.len());
        let mut bytes = Vec::with_capacity(self.bytes.len() + extra);
        // In the order of their places; at one place in the order they were
        // recorded (a key's state that came home after a FLUSHALL must not
        // go before it).
        let links = self
            .link_only
            .iter()
            .map(|l| (l.at, l.nth, 0, &l.record[..], l.db));
        let marks = self
            .marks
            .iter()
            .map(|m| (m.at, m.nth, 1, &m.record[..], Some((m.db, None))));
        let mut inserts: Vec<_> = links.chain(marks).collect();
        inserts.sort_by_key(|&(at, nth, _, _, _)| (at, nth));
        let mut from = 0;
        // A barrier with no record after it leaves the stream in its own
        // database (it selected it): the next flush's records must select
        // theirs (without, a FLUSHDB in database 3 as a shard's last record
        // left its link's next writes of database 0 in database 3).
        let mut last_db = self.last_db;
        let select = |bytes: &mut Vec<u8>, db: usize| {
            let mut digits = itoa::Buffer::new();
            encode(bytes, &[b"SELECT", digits.format(db).as_bytes()]);
        };
        for (at, _, kind, record, db) in inserts {
            bytes.extend_from_slice(&self.bytes[from..at]);
            match (kind, db) {
                // A barrier: what follows it selects its own database.
                (1, Some((db, _))) => {
                    select(&mut bytes, db);
                    if at == self.bytes.len() {
                        last_db = db;
                    }
                }
                (_, Some((db, back))) => {
                    let back = back.unwrap_or(self.first_db);
                    if db != back {
                        select(&mut bytes, db);
                        bytes.extend_from_slice(record);
                        select(&mut bytes, back);
                        from = at;
                        continue;
                    }
                }
                _ => {}
            }
            bytes.extend_from_slice(record);
            from = at;
        }
        bytes.extend_from_slice(&self.bytes[from..]);
        Flushed::plain(bytes, self.first_db, last_db)
    }

    /// The bytes before the first barrier, the barrier, and what follows it
    /// (starting in the database the barrier left it: its bytes select their
    /// own). A barrier inside a transaction takes the transaction's start
    /// with it ([`Mark::group`]): its record becomes the `MULTI`, the
    /// group's records before it and its command, each in its database.
    pub fn split_first(mut self) -> (Vec<u8>, Option<(Mark, Flushed)>) {
        if self.marks.is_empty() {
            return (self.bytes, None);
        }
        let mut mark = self.marks.remove(0);
        let rest_bytes = self.bytes.split_off(mark.at);
        for m in &mut self.marks {
            m.at -= mark.at;
            if let Some((at, _)) = &mut m.group {
                *at -= mark.at;
            }
        }
        if let Some((at, db)) = mark.group {
            let started = self.bytes.split_off(at);
            let mut record = Vec::with_capacity(started.len() + mark.record.len() + 32);
            let mut digits = itoa::Buffer::new();
            encode(&mut record, &[b"SELECT", digits.format(db).as_bytes()]);
            record.extend_from_slice(&started);
            encode(&mut record, &[b"SELECT", digits.format(mark.db).as_bytes()]);
            record.extend_from_slice(&mark.record);
            mark.record = record;
        }
        let rest = Flushed {
            bytes: rest_bytes,
            first_db: mark.db,
            last_db: self.last_db,
            marks: self.marks,
            link_only: Vec::new(),
        };
        (self.bytes, Some((mark, rest)))
    }

    /// `later` after these records (both held behind a barrier).
    pub fn extend(&mut self, later: Flushed) {
        // The database these leave the stream in is unknown after a barrier:
        // the later records select theirs.
        if !later.bytes.is_empty() {
            let mut digits = itoa::Buffer::new();
            encode(
                &mut self.bytes,
                &[b"SELECT", digits.format(later.first_db).as_bytes()],
            );
        }
        let shift = self.bytes.len();
        self.bytes.extend_from_slice(&later.bytes);
        self.marks.extend(later.marks.into_iter().map(|m| Mark {
            at: m.at + shift,
            group: m.group.map(|(at, db)| (at + shift, db)),
            ..m
        }));
        self.last_db = later.last_db;
    }
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

    /// Records of client `id`'s commands are not made (0: every client's are).
    pub fn skip_client(&mut self, id: u64) {
        self.skipped_client = (id != 0).then_some(id);
    }

    /// True while the server keeps a backlog and client `id`'s writes belong
    /// in it (see [`skip_client`](Self::skip_client)).
    #[inline]
    pub fn records_for(&self, id: u64) -> bool {
        self.on && self.skipped_client != Some(id)
    }

    /// Record FLUSHALL, FLUSHDB and SWAPDB as barriers (forward mode, several
    /// shards, the server's history active) or as plain records.
    pub fn set_barriers(&mut self, barriers: bool) {
        self.barriers = barriers;
    }

    /// The engine has run `run` FLUSHALL, FLUSHDB and SWAPDB: the next mark
    /// is the one after (once per loop iteration: one that ran while marks
    /// were off is not waited for).
    pub fn sync_seq(&mut self, run: u64) {
        self.seq = run;
    }

    /// Nothing waits to be flushed.
    pub fn is_empty(&self) -> bool {
        self.first_db.is_none() && self.marks.is_empty() && self.link_only.is_empty()
    }

    /// A barrier waits among the records.
    pub fn has_marks(&self) -> bool {
        !self.marks.is_empty()
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
            self.group_marks = self.marks.len();
            self.group_db = self.first_db.map(|_| self.db);
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
            // The group's own marks only: one recorded just before it stands
            // at its start too (without, a FLUSHDB followed by a transaction
            // went inside the transaction's MULTI, where a replica on links
            // ran it on every shard at the EXEC).
            let group = (
                self.group_start,
                self.group_db.or(self.first_db).unwrap_or(self.db),
            );
            for (i, mark) in self.marks[self.group_marks..].iter_mut().enumerate() {
                mark.at += MULTI.len();
                if i == 0 {
                    mark.group = Some(group);
                }
            }
            let link_only = self.link_only.iter_mut();
            for link in link_only.filter(|l| l.at > self.group_start) {
                link.at += MULTI.len();
            }
            for later in self.group_marks + 1..self.marks.len() {
                self.split_group_at(later);
            }
        }
    }

    /// A group's later barrier (`marks[i]`) ends the transaction's part
    /// before it and begins the next with itself: other shards' records
    /// between the group's barriers belong between them (each shard runs its
    /// part of a barrier when asked, its own clients' commands meanwhile), so
    /// in the server's stream they land between the two parts, never inside
    /// one (a `MULTI` of theirs there: `MULTI calls can not be nested` on a
    /// replica). Each part is whole; the transaction as a whole is no more
    /// isolated on a replica than its barriers are on the primary.
    fn split_group_at(&mut self, i: usize) {
        let at = self.marks[i].at;
        self.bytes.splice(at..at, EXEC.iter().chain(MULTI).copied());
        let grown = EXEC.len() + MULTI.len();
        let mark = &mut self.marks[i];
        // It opens the next part as the first barrier opened the group.
        mark.group = Some((at + EXEC.len(), mark.db));
        let nth = mark.nth;
        for later in &mut self.marks[i..] {
            later.at += grown;
        }
        let moved = |l: &&mut LinkOnly| l.at > at || (l.at == at && l.nth > nth);
        for link in self.link_only.iter_mut().filter(moved) {
            link.at += grown;
        }
    }

    /// Record one command that ran in database `db`. The arguments go straight
    /// behind a one-digit count that is mended once they are counted (a record
    /// of ten or more arguments, rare, moves its bytes once): no scratch copy
    /// and no formatting machinery per write. Out of line: the common write is
    /// copied whole ([`record_request`](Self::record_request)), and this
    /// code inlined there crowded the request path out of the instruction
    /// cache.
    #[inline(never)]
    pub fn record(&mut self, db: usize, args: &mut dyn Iterator<Item = &[u8]>) {
        if !self.on {
            return;
        }
        let mark = self.bytes.len();
        self.select_for(db);
        let header_at = self.bytes.len();
        self.bytes.extend_from_slice(b"*0\r\n");
        let mut argc = 0usize;
        let mut barrier = false;
        for arg in args {
            if argc == 0 && self.barriers {
                // FLUSHALL [ASYNC|SYNC], FLUSHDB [..], SWAPDB a b: at most 3.
                barrier = is_barrier(arg);
            }
            ruvio_resp::put_bulk(&mut self.bytes, arg);
            argc += 1;
        }
        if barrier && argc <= 9 {
            // Not in these records: the server's stream takes it once, where
            // every shard's records before it are in and none after it is.
            let mut record = self.bytes.split_off(header_at);
            self.bytes.truncate(mark);
            record[1] = b'0' + argc as u8;
            self.seq += 1;
            self.marks.push(Mark {
                at: mark,
                nth: self.marks.len() + self.link_only.len(),
                seq: self.seq,
                db,
                record,
                group: None,
            });
            self.reselect = true;
            if self.depth > 0 {
                self.group_records += 1;
            }
            return;
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
        self.recorded(db);
    }

    /// Record a command that ran as its client sent it: the request's own
    /// bytes when it came as a canonical multibulk (`Args::as_multibulk`), one
    /// copy instead of an encoding per argument (what a replica costs the
    /// request path); else, and for FLUSHALL, FLUSHDB and SWAPDB while they are
    /// barriers, as [`record`](Self::record).
    pub fn record_request(&mut self, db: usize, args: ruvio_resp::Args<'_>) {
        if !self.on {
            return;
        }
        match args.as_multibulk() {
            Some(request) if !(self.barriers && is_barrier(args.get(0))) => {
                self.select_for(db);
                self.bytes.extend_from_slice(request);
                self.recorded(db);
            }
            _ => self.record(db, &mut args.iter()),
        }
    }

    /// A `SELECT` first when the stream is left in another database (or a mark
    /// left it unknown).
    fn select_for(&mut self, db: usize) {
        if (self.first_db.is_some() && self.db != db) || self.reselect {
            self.select(db);
        }
    }

    /// The `SELECT` itself: rare (a client changed databases), kept off the
    /// request path's code.
    #[cold]
    fn select(&mut self, db: usize) {
        let mut digits = itoa::Buffer::new();
        encode(&mut self.bytes, &[b"SELECT", digits.format(db).as_bytes()]);
    }

    /// A record of database `db` is in.
    fn recorded(&mut self, db: usize) {
        self.first_db.get_or_insert(db);
        self.db = db;
        self.reselect = false;
        if self.depth > 0 {
            self.group_records += 1;
        }
    }

    /// Hand over what was recorded (never half a group).
    pub fn take(&mut self) -> Option<Flushed> {
        if self.depth > 0 {
            return None;
        }
        if self.is_empty() {
            return None;
        }
        let first_db = self.first_db.take().unwrap_or(self.db);
        self.reselect = false;
        // The next iteration's records start with room for as many bytes as
        // these took (one allocation, not a run of doublings), within reason.
        let room = Vec::with_capacity(self.bytes.capacity().min(FEED_ROOM_MAX_BYTES));
        Some(Flushed {
            bytes: std::mem::replace(&mut self.bytes, room),
            first_db,
            last_db: self.db,
            marks: std::mem::take(&mut self.marks),
            link_only: std::mem::take(&mut self.link_only),
        })
    }

    /// Record `record` (a RESP array) for this shard's own history only, in
    /// its place among the records (`RUVIO BARRIER`, a Ruvio replica's
    /// shard link's: [`super::link_barrier`]). No `SELECT`: it names no
    /// database.
    pub fn record_link_only(&mut self, record: Vec<u8>) {
        if !self.on {
            return;
        }
        let at = self.bytes.len();
        self.link_only.push(LinkOnly {
            at,
            nth: self.marks.len() + self.link_only.len(),
            record,
            db: None,
        });
    }

    /// Record `args`, a command of database `db`, for this shard's own
    /// history only (a key's state that a Ruvio replica's link for this
    /// shard applies again: `shard::lending::take_back`). Its `SELECT`s come
    /// with it, and the stream is left in the database it was in.
    pub fn record_link_only_in(&mut self, db: usize, args: &[Vec<u8>]) {
        if !self.on {
            return;
        }
        let mut record = Vec::new();
        array_header(&mut record, args.len());
        for arg in args {
            ruvio_resp::put_bulk(&mut record, arg);
        }
        // After a barrier the stream is in the barrier's database (it
        // selected it), not the last record's.
        let back = match self.reselect {
            true => self.marks.last().map(|m| m.db),
            false => self.first_db.map(|_| self.db),
        };
        let at = self.bytes.len();
        self.link_only.push(LinkOnly {
            at,
            nth: self.marks.len() + self.link_only.len(),
            record,
            db: Some((db, back)),
        });
    }
}

/// FLUSHALL, FLUSHDB or SWAPDB: every shard of a forward-mode server runs it.
fn is_barrier(name: &[u8]) -> bool {
    matches!(name.len(), 6..=8)
        && (name.eq_ignore_ascii_case(b"flushall")
            || name.eq_ignore_ascii_case(b"flushdb")
            || name.eq_ignore_ascii_case(b"swapdb"))
}

/// `args` as a RESP array of bulk strings.
pub fn encode(out: &mut Vec<u8>, args: &[&[u8]]) {
    array_header(out, args.len());
    for arg in args {
        ruvio_resp::put_bulk(out, arg);
    }
}

fn array_header(out: &mut Vec<u8>, n: usize) {
    let mut digits = itoa::Buffer::new();
    out.push(b'*');
    out.extend_from_slice(digits.format(n).as_bytes());
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records as text, a space for each CRLF.
    fn text(bytes: &[u8]) -> String {
        String::from_utf8(bytes.to_vec())
            .unwrap()
            .replace("\r\n", " ")
    }

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

    /// A request recorded from its own bytes gives the stream `record` gives,
    /// for a plain write, an inline one (encoded), and a barrier (a mark).
    #[test]
    fn a_request_copied_whole_reads_as_one_encoded() {
        let requests: [&[u8]; 4] = [
            b"*3\r\n$3\r\nset\r\n$1\r\na\r\n$11\r\nvalue\r\n\0\xff*$\r\n",
            b"SET b 2\r\n",
            b"*1\r\n$8\r\nFLUSHALL\r\n",
            b"*3\r\n$4\r\nINCR\r\n$1\r\nc\r\n",
        ];
        let (mut copied, mut encoded) = (Feed::default(), Feed::default());
        for feed in [&mut copied, &mut encoded] {
            feed.set_on(true);
            feed.set_barriers(true);
        }
        let mut parser = ruvio_resp::CommandParser::new();
        for (db, request) in requests.into_iter().enumerate() {
            let parsed = parser.parse(request, &ruvio_resp::Limits::default());
            let Ok(ruvio_resp::Parsed::Complete { args, .. }) = parsed else {
                continue; // the last one is cut short: nothing to record
            };
            copied.record_request(db, args);
            encoded.record(db, &mut args.iter());
        }
        let (copied, encoded) = (copied.take().unwrap(), encoded.take().unwrap());
        assert_eq!(copied.bytes, encoded.bytes);
        assert_eq!(copied.marks, encoded.marks);
        assert_eq!(copied.marks.len(), 1);
        assert!(copied
            .bytes
            .starts_with(b"*3\r\n$3\r\nset\r\n$1\r\na\r\n$11\r\n"));
    }

    /// A shard's link stream whose flush ends with a barrier of another
    /// database is left in that database.
    #[test]
    fn a_barrier_last_leaves_the_link_stream_in_its_database() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        rec(&mut feed, 0, &[b"SET", b"k", b"v"]);
        rec(&mut feed, 3, &[b"FLUSHDB"]);
        let inlined = feed.take().unwrap().inlined();
        assert_eq!((inlined.first_db, inlined.last_db), (0, 3));
        let text = String::from_utf8(inlined.bytes)
            .unwrap()
            .replace("\r\n", " ");
        assert!(text.ends_with("*2 $6 SELECT $1 3 *1 $7 FLUSHDB "), "{text}");
        // A record after it selects its own database: the stream ends there.
        rec(&mut feed, 3, &[b"FLUSHDB"]);
        rec(&mut feed, 0, &[b"SET", b"k", b"w"]);
        let inlined = feed.take().unwrap().inlined();
        assert_eq!(inlined.last_db, 0);
    }

    #[test]
    fn barriers_are_marks_not_records() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        rec(&mut feed, 1, &[b"SET", b"a", b"1"]);
        feed.begin_group();
        rec(&mut feed, 1, &[b"flushdb"]);
        feed.end_group();
        rec(&mut feed, 1, &[b"SET", b"b", b"2"]);
        let flushed = feed.take().unwrap();
        assert_eq!(flushed.marks.len(), 1);
        let mark = &flushed.marks[0];
        assert_eq!(
            (mark.db, &mark.record[..]),
            (1, &b"*1\r\n$7\r\nflushdb\r\n"[..])
        );
        let (before, rest) = flushed.clone().split_first();
        assert_eq!(text(&before), "*3 $3 SET $1 a $1 1 ");
        let (_, rest) = rest.unwrap();
        // What follows a barrier selects its database itself.
        assert_eq!(text(&rest.bytes), "*2 $6 SELECT $1 1 *3 $3 SET $1 b $1 2 ");
        assert_eq!(
            text(&flushed.inlined().bytes),
            "*3 $3 SET $1 a $1 1 *2 $6 SELECT $1 1 *1 $7 flushdb \
             *2 $6 SELECT $1 1 *3 $3 SET $1 b $1 2 "
        );
        // Without barriers (one shard, per-shard mode) it is a record.
        feed.set_barriers(false);
        rec(&mut feed, 0, &[b"FLUSHALL"]);
        assert!(feed.take().unwrap().marks.is_empty());
    }

    /// A shard link's barrier record stays in its place, before a group's
    /// MULTI, and before a FLUSHALL's mark recorded after it at the same
    /// place; the server's records (the bytes and marks) never hold it.
    #[test]
    fn link_only_records_keep_their_place() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        rec(&mut feed, 0, &[b"SET", b"a", b"1"]);
        feed.record_link_only(b"*1\r\n$1\r\nL\r\n".to_vec());
        feed.begin_group();
        rec(&mut feed, 0, &[b"INCR", b"a"]);
        rec(&mut feed, 0, &[b"INCR", b"b"]);
        feed.end_group();
        feed.record_link_only(b"*1\r\n$1\r\nM\r\n".to_vec());
        rec(&mut feed, 0, &[b"FLUSHALL"]);
        let flushed = feed.take().unwrap();
        assert_eq!(
            text(&flushed.bytes),
            "*3 $3 SET $1 a $1 1 *1 $5 MULTI *2 $4 INCR $1 a *2 $4 INCR $1 b *1 $4 EXEC "
        );
        assert_eq!(
            text(&flushed.inlined().bytes),
            "*3 $3 SET $1 a $1 1 *1 $1 L *1 $5 MULTI *2 $4 INCR $1 a *2 $4 INCR $1 b \
             *1 $4 EXEC *1 $1 M *2 $6 SELECT $1 0 *1 $8 FLUSHALL "
        );
        // A link's record alone is something to flush.
        feed.record_link_only(b"*1\r\n$1\r\nL\r\n".to_vec());
        assert!(!feed.is_empty());
        assert_eq!(feed.take().unwrap().link_only.len(), 1);
        // A key's state for the link in another database: selected, and the
        // stream put back where the records before it left it.
        rec(&mut feed, 2, &[b"SET", b"a", b"1"]);
        feed.record_link_only_in(5, &[b"DEL".to_vec(), b"k".to_vec()]);
        rec(&mut feed, 2, &[b"SET", b"b", b"2"]);
        feed.record_link_only_in(2, &[b"DEL".to_vec(), b"j".to_vec()]);
        let flushed = feed.take().unwrap();
        assert_eq!(
            text(&flushed.inlined().bytes),
            "*3 $3 SET $1 a $1 1 *2 $6 SELECT $1 5 *2 $3 DEL $1 k *2 $6 SELECT $1 2 \
             *3 $3 SET $1 b $1 2 *2 $3 DEL $1 j "
        );
        assert_eq!(
            text(&flushed.bytes),
            "*3 $3 SET $1 a $1 1 *3 $3 SET $1 b $1 2 "
        );
    }

    /// The server's own commands (client id 0: a FLUSHDB a transaction ran
    /// on the other shards) are recorded unless a client is skipped and it is
    /// that one (before, none were: a replica on links kept the keys).
    #[test]
    fn the_servers_own_commands_are_recorded() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.skip_client(0);
        assert!(feed.records_for(0) && feed.records_for(7));
        feed.skip_client(7);
        assert!(feed.records_for(0) && !feed.records_for(7));
    }

    /// A barrier recorded right before a group stands where the group
    /// starts: it stays before the group's MULTI (it went inside it, and a
    /// replica on links ran the FLUSHDB at the EXEC, on every shard).
    #[test]
    fn a_barrier_just_before_a_transaction_stays_before_it() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        rec(&mut feed, 0, &[b"SET", b"a", b"1"]);
        rec(&mut feed, 3, &[b"FLUSHDB"]);
        feed.begin_group();
        rec(&mut feed, 0, &[b"RPUSH", b"l", b"1"]);
        rec(&mut feed, 0, &[b"HSET", b"h", b"f", b"1"]);
        feed.end_group();
        let flushed = feed.take().unwrap();
        assert_eq!(
            text(&flushed.inlined().bytes),
            "*3 $3 SET $1 a $1 1 *2 $6 SELECT $1 3 *1 $7 FLUSHDB *1 $5 MULTI \
             *2 $6 SELECT $1 0 *3 $5 RPUSH $1 l $1 1 *4 $4 HSET $1 h $1 f $1 1 *1 $4 EXEC "
        );
        // The server's history: the transaction whole, after the barrier.
        let (before, rest) = flushed.split_first();
        assert_eq!(text(&before), "*3 $3 SET $1 a $1 1 ");
        let (mark, rest) = rest.unwrap();
        assert_eq!(
            (mark.db, text(&mark.record).as_str()),
            (3, "*1 $7 FLUSHDB ")
        );
        assert!(
            text(&rest.bytes).starts_with("*1 $5 MULTI "),
            "{}",
            text(&rest.bytes)
        );
    }

    /// A key's state recorded for the links after a barrier, with nothing
    /// between them, goes after it (a key home after a FLUSHALL is not
    /// flushed by it) and in its own database (the barrier left the stream
    /// in the barrier's).
    #[test]
    fn a_link_record_after_a_barrier_follows_it() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        rec(&mut feed, 0, &[b"SET", b"a", b"1"]);
        rec(&mut feed, 3, &[b"FLUSHALL"]);
        feed.record_link_only(b"*1\r\n$1\r\nL\r\n".to_vec());
        feed.record_link_only_in(0, &[b"SET".to_vec(), b"k".to_vec(), b"v".to_vec()]);
        rec(&mut feed, 3, &[b"SET", b"b", b"2"]);
        assert_eq!(
            text(&feed.take().unwrap().inlined().bytes),
            "*3 $3 SET $1 a $1 1 *2 $6 SELECT $1 3 *1 $8 FLUSHALL *1 $1 L \
             *2 $6 SELECT $1 0 *3 $3 SET $1 k $1 v *2 $6 SELECT $1 3 \
             *2 $6 SELECT $1 3 *3 $3 SET $1 b $1 2 "
        );
    }

    #[test]
    fn a_barrier_inside_a_transaction_keeps_its_place() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        feed.begin_group();
        rec(&mut feed, 0, &[b"SET", b"a", b"1"]);
        rec(&mut feed, 0, &[b"SWAPDB", b"0", b"1"]);
        feed.end_group();
        let flushed = feed.take().unwrap();
        assert_eq!(
            text(&flushed.inlined().bytes),
            "*1 $5 MULTI *3 $3 SET $1 a $1 1 *2 $6 SELECT $1 0 *3 $6 SWAPDB $1 0 $1 1 \
             *1 $4 EXEC "
        );
        // The server's history: the transaction's start goes with the
        // barrier (other shards' records before it go in first), the rest
        // after it.
        let (before, rest) = flushed.split_first();
        assert!(before.is_empty());
        let (mark, rest) = rest.unwrap();
        assert_eq!(mark.group, Some((0, 0)));
        assert_eq!(
            text(&mark.record),
            "*2 $6 SELECT $1 0 *1 $5 MULTI *3 $3 SET $1 a $1 1 *2 $6 SELECT $1 0 \
             *3 $6 SWAPDB $1 0 $1 1 "
        );
        assert_eq!(rest.bytes, EXEC);
    }

    #[test]
    fn a_later_barrier_in_a_transaction_begins_its_next_part() {
        let mut feed = Feed::default();
        feed.set_on(true);
        feed.set_barriers(true);
        feed.begin_group();
        rec(&mut feed, 0, &[b"SET", b"x", b"1"]);
        rec(&mut feed, 0, &[b"FLUSHDB"]);
        rec(&mut feed, 0, &[b"SET", b"f", b"1"]);
        rec(&mut feed, 0, &[b"SWAPDB", b"0", b"1"]);
        rec(&mut feed, 0, &[b"SWAPDB", b"0", b"1"]);
        rec(&mut feed, 0, &[b"SET", b"g", b"1"]);
        feed.end_group();
        let flushed = feed.take().unwrap();
        let select = "*2 $6 SELECT $1 0 ";
        let (multi, exec) = ("*1 $5 MULTI ", "*1 $4 EXEC ");
        let (x, f, g) = (
            "*3 $3 SET $1 x $1 1 ",
            "*3 $3 SET $1 f $1 1 ",
            "*3 $3 SET $1 g $1 1 ",
        );
        let (flushdb, swapdb) = ("*1 $7 FLUSHDB ", "*3 $6 SWAPDB $1 0 $1 1 ");
        // A shard link's stream: three parts, each whole.
        assert_eq!(
            text(&flushed.inlined().bytes),
            [
                multi, x, select, flushdb, select, f, exec, multi, select, swapdb, exec, multi,
                select, swapdb, select, g, exec
            ]
            .concat()
        );
        // The server's history: each barrier carries its part's start.
        let (before, rest) = flushed.split_first();
        assert!(before.is_empty());
        let (first, rest) = rest.unwrap();
        assert_eq!(
            text(&first.record),
            [select, multi, x, select, flushdb].concat()
        );
        let (before, rest) = rest.split_first();
        assert_eq!(text(&before), [select, f, exec].concat());
        let (second, rest) = rest.unwrap();
        assert_eq!(
            text(&second.record),
            [select, multi, select, swapdb].concat()
        );
        let (before, rest) = rest.split_first();
        assert_eq!(text(&before), exec);
        let (third, rest) = rest.unwrap();
        assert_eq!(
            text(&third.record),
            [select, multi, select, swapdb].concat()
        );
        assert_eq!(text(&rest.bytes), [select, g, exec].concat());
    }
}
