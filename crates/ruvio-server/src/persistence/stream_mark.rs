//! A replica's place in its primary's stream, kept in each shard's log: a
//! replica with a log (`--durability everysec|always`) restarts and asks to
//! continue (`PSYNC <replid> <offset+1>`) from what its logs hold.
//!
//! A mark is a log record of its own, `ruvio:stream-mark <replid> <offset>
//! <db>`, meaning "every command of the stream up to `offset` that this shard
//! runs is before me in this log, none after it": shard 0 appends one to its
//! log once the master client's input of a loop iteration ran (not inside a
//! MULTI, nor while a command waits on other shards), and sends the same mark
//! to every other shard behind the forwarded commands of that input (the
//! channels keep order), which appends it to its own log. The shards' logs
//! fsync independently, so after a crash each shard's last mark may differ, and
//! records after a shard's last mark mean a command beyond it is half known:
//! recovery ([`Found`]) reports each shard's last mark, whether records follow
//! it and since which offset its data did not change, and the replica
//! continues from the smallest last mark ([`common_place`]): when every shard's
//! data is unchanged from its own such offset up to it, as is; otherwise each
//! shard skips the re-sent commands up to its own last mark ([`Place::catch_up`],
//! `shard::replica::catch_up`). A shard with records after its last mark gets
//! a full sync, which replaces every shard's data: correct, only slower
//! (docs/replication.md, "A replica with a log").
//!
//! A snapshot drops the log before its position, marks included, so it
//! carries the mark its shard's data is exactly at, if any, as Redis's
//! replication aux fields (`repl-id`, `repl-offset`, `repl-stream-db`), which
//! recovery reads before the log after it. A full sync's data becomes the
//! shard's snapshot with the sync's place in it: one rename puts the new data
//! and its place on disk together, never the old log under the new data, nor
//! the old data with the new place.

use crate::persistence::wal::Wal;
use std::collections::VecDeque;

/// The record's name: not a command, so no client write is ever logged as one.
pub const RECORD_NAME: &[u8] = b"ruvio:stream-mark";

/// A shard link's mark (a replica on shard links: each shard's log holds
/// its own link's place, in its primary shard's history).
pub const LINK_RECORD_NAME: &[u8] = b"ruvio:link-mark";

/// The snapshot's aux field that says its mark is a shard link's.
const LINK_AUX: &[u8] = b"repl-ruvio-link";

/// Marks appended and not yet covered by an fsync, at most: a replica applies
/// its stream in loop iterations (one mark each), and under `everysec` an
/// fsync covers them every second; older entries are dropped (FACK then lags).
const UNSYNCED_MARKS_MAX: usize = 4096;

/// A place in the primary's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamMark {
    /// The primary's replication ID.
    pub replid: String,
    /// The stream's bytes applied (`slave_repl_offset`).
    pub offset: u64,
    /// The database the stream was in (a partial resync goes on in it).
    pub db: usize,
    /// A shard link's place (its shard's own stream), not the single
    /// stream's: each shard continues its own link from it.
    pub link: bool,
}

impl StreamMark {
    fn append_to(&self, wal: &mut Wal) {
        let offset = self.offset.to_string();
        let db = self.db.to_string();
        let args: [&[u8]; 4] = [
            self.record_name(),
            self.replid.as_bytes(),
            offset.as_bytes(),
            db.as_bytes(),
        ];
        wal.append(0, &mut args.into_iter());
    }

    fn record_name(&self) -> &'static [u8] {
        match self.link {
            true => LINK_RECORD_NAME,
            false => RECORD_NAME,
        }
    }

    /// The mark a log record holds (`None`: not a mark, or a malformed one).
    pub fn parse(args: &[&[u8]]) -> Option<StreamMark> {
        let [name, replid, offset, db] = args else {
            return None;
        };
        let link = match *name {
            LINK_RECORD_NAME => true,
            RECORD_NAME => false,
            _ => return None,
        };
        if replid.len() != 40 {
            return None;
        }
        Some(StreamMark {
            replid: String::from_utf8(replid.to_vec()).ok()?,
            offset: std::str::from_utf8(offset).ok()?.parse().ok()?,
            db: std::str::from_utf8(db).ok()?.parse().ok()?,
            link,
        })
    }

    /// The mark as Redis's replication aux fields of an RDB file (a snapshot
    /// carries its shard's mark: compaction drops the log before it).
    pub fn with_aux<T>(&self, f: impl FnOnce(&[(&[u8], &[u8])]) -> T) -> T {
        let (offset, db) = (self.offset.to_string(), self.db.to_string());
        let aux: [(&[u8], &[u8]); 4] = [
            (b"repl-stream-db", db.as_bytes()),
            (b"repl-id", self.replid.as_bytes()),
            (b"repl-offset", offset.as_bytes()),
            (LINK_AUX, b"1"),
        ];
        f(&aux[..3 + usize::from(self.link)])
    }

    /// The mark a snapshot's aux fields hold (`None`: not all three).
    pub fn from_aux(aux: &[(Vec<u8>, Vec<u8>)]) -> Option<StreamMark> {
        let field = |name: &[u8]| {
            aux.iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| std::str::from_utf8(v).ok())
        };
        let replid = field(b"repl-id").filter(|id| id.len() == 40)?;
        Some(StreamMark {
            replid: replid.to_string(),
            offset: field(b"repl-offset")?.parse().ok()?,
            db: field(b"repl-stream-db")?.parse().ok()?,
            link: field(LINK_AUX) == Some("1"),
        })
    }

    /// A log record is a mark (replay skips it).
    #[inline]
    pub fn is_mark(args: &[&[u8]]) -> bool {
        args.first()
            .is_some_and(|name| *name == RECORD_NAME || *name == LINK_RECORD_NAME)
    }
}

/// What a shard's recovery found of marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Found {
    /// The last mark replayed (after the snapshot's position).
    pub mark: Option<StreamMark>,
    /// Records replayed after it (or after the snapshot, without a mark).
    pub after: u64,
    /// The offset of the first of the marks that end the log with no record
    /// between them: the shard's data is the same at every offset from here to
    /// the last mark (the stream wrote nothing on it meanwhile: a PING, or
    /// writes to other shards).
    pub quiet_from: u64,
}

/// Where a shard's log ended exactly: on `mark`, its data unchanged since
/// stream offset `quiet_from`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exact {
    pub mark: StreamMark,
    pub quiet_from: u64,
}

impl Found {
    /// A record was replayed (`mark`: it is this mark).
    pub fn saw(&mut self, mark: Option<StreamMark>) {
        match mark {
            Some(mark) => {
                let quiet =
                    self.after == 0 && self.mark.as_ref().is_some_and(|m| m.replid == mark.replid);
                if !quiet {
                    self.quiet_from = mark.offset;
                }
                self.mark = Some(mark);
                self.after = 0;
            }
            None => self.after += 1,
        }
    }

    /// Where the shard's data is exactly: the last mark, with nothing after it.
    pub fn exact(&self) -> Option<Exact> {
        let mark = self.mark.as_ref().filter(|_| self.after == 0)?;
        Some(Exact {
            mark: mark.clone(),
            quiet_from: self.quiet_from,
        })
    }
}

/// Where a replica with a log continues the stream after a restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Place {
    /// The smallest last mark: `PSYNC <replid> <offset+1>` from here.
    pub mark: StreamMark,
    /// Per shard, the stream offset up to which its data already holds every
    /// command's effect on it (its last mark), when the shards' data do not
    /// all sit at `mark`: each skips the re-sent commands up to its own
    /// (`None`: every shard's data is the same at `mark`).
    pub catch_up: Option<Vec<u64>>,
}

/// The place every shard's data is at, from where each shard's log ended
/// (`None` for a shard: no mark, or records after its last one), under one
/// replid: the smallest last mark. When every shard's data is unchanged from
/// its own `quiet_from` up to it, continuing there re-sends each shard only
/// commands that wrote nothing on it the first time; otherwise each shard must
/// skip the re-sent commands up to its own last mark ([`Place::catch_up`]).
pub fn common_place(ends: &[Option<Exact>]) -> Result<Place, String> {
    let describe = || {
        let places: Vec<String> = ends
            .iter()
            .map(|e| {
                e.as_ref().map_or("none".to_string(), |e| {
                    format!("{}..{}", e.quiet_from, e.mark.offset)
                })
            })
            .collect();
        format!(
            "the shards' logs end at places of the stream that do not meet ({})",
            places.join(", ")
        )
    };
    let Some(Some(first)) = ends.first() else {
        return Err(describe());
    };
    let mut lowest = &first.mark;
    let mut quiet_from = 0;
    for end in ends {
        let Some(end) = end else {
            return Err(describe());
        };
        if end.mark.replid != first.mark.replid {
            return Err(describe());
        }
        if end.mark.offset < lowest.offset {
            lowest = &end.mark;
        }
        quiet_from = quiet_from.max(end.quiet_from);
    }
    let catch_up = (quiet_from > lowest.offset).then(|| {
        ends.iter()
            .map(|e| e.as_ref().map_or(0, |e| e.mark.offset))
            .collect()
    });
    Ok(Place {
        mark: lowest.clone(),
        catch_up,
    })
}

/// A shard's marks while it runs.
#[derive(Debug, Default)]
pub struct ShardMarks {
    /// The last mark appended (or recovered), while no other record followed it:
    /// `.1` is the log's appended bytes right after it.
    last: Option<(StreamMark, u64)>,
    /// Marks appended, not yet covered by an fsync: (appended bytes after it, offset).
    unsynced: VecDeque<(u64, u64)>,
    /// The offset of the last mark an fsync covered (WAITAOF's FACK).
    pub fsynced: Option<u64>,
}

impl ShardMarks {
    /// The log opened after recovery: its exact mark, if any, stands.
    pub fn recovered(&mut self, found: &Found, wal: &Wal) {
        let exact = found.exact().map(|e| e.mark);
        self.fsynced = exact.as_ref().map(|mark| mark.offset);
        self.last = exact.map(|mark| (mark, wal.appended_bytes()));
    }

    /// Append `mark` to `wal` (the same mark twice in a row is appended once).
    pub fn append(&mut self, wal: &mut Wal, mark: StreamMark) {
        let end = wal.appended_bytes();
        if self
            .last
            .as_ref()
            .is_some_and(|(last, after)| *last == mark && *after == end)
        {
            return;
        }
        mark.append_to(wal);
        let after = wal.appended_bytes();
        if self.unsynced.len() == UNSYNCED_MARKS_MAX {
            self.unsynced.pop_front();
        }
        self.unsynced.push_back((after, mark.offset));
        self.last = Some((mark, after));
    }

    /// The shard's data is exactly at a mark of stream offset `offset` (no
    /// record followed it): a mark there now would say nothing new.
    pub fn stands_at(&self, offset: u64, wal: &Wal) -> bool {
        self.last
            .as_ref()
            .is_some_and(|(last, after)| last.offset == offset && *after == wal.appended_bytes())
    }

    /// `mark` is the last one appended (records may have followed it).
    pub fn is_last(&self, mark: &StreamMark) -> bool {
        self.last.as_ref().is_some_and(|(last, _)| last == mark)
    }

    /// The mark the shard's data is exactly at now (no record after it): a
    /// snapshot beginning now carries it (the log before the snapshot, with
    /// the mark, is dropped once the snapshot is in place).
    pub fn exact(&self, wal: &Wal) -> Option<&StreamMark> {
        let (mark, after) = self.last.as_ref()?;
        (*after == wal.appended_bytes()).then_some(mark)
    }

    /// A full sync's data replaced the shard's, at `mark`: the snapshot about
    /// to be written carries it ([`exact`](Self::exact)).
    pub fn replaced(&mut self, mark: StreamMark, wal: &Wal) {
        self.unsynced.clear();
        self.fsynced = None;
        self.last = Some((mark, wal.appended_bytes()));
    }

    /// The snapshot of a full sync's data is on disk with its mark.
    pub fn snapshot_synced(&mut self) {
        self.fsynced = self.last.as_ref().map(|(mark, _)| mark.offset);
    }

    /// The shard's data no longer matches any mark.
    pub fn forget(&mut self) {
        self.last = None;
        self.unsynced.clear();
        self.fsynced = None;
    }

    /// The marks the log's fsyncs covered so far: the last one's offset.
    pub fn synced(&mut self, wal: &Wal) -> Option<u64> {
        let synced = wal.synced_bytes();
        while let Some(&(after, offset)) = self.unsynced.front() {
            if after > synced {
                break;
            }
            self.fsynced = Some(offset);
            self.unsynced.pop_front();
        }
        self.fsynced
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(offset: u64) -> StreamMark {
        StreamMark {
            replid: "a".repeat(40),
            offset,
            db: 3,
            link: false,
        }
    }

    #[test]
    fn a_mark_parses_back() {
        let m = mark(1234);
        let (offset, db) = (m.offset.to_string(), m.db.to_string());
        let args: [&[u8]; 4] = [
            RECORD_NAME,
            m.replid.as_bytes(),
            offset.as_bytes(),
            db.as_bytes(),
        ];
        assert!(StreamMark::is_mark(&args));
        assert_eq!(StreamMark::parse(&args), Some(m.clone()));
        assert_eq!(
            StreamMark::parse(&[RECORD_NAME, b"short", b"1", b"0"]),
            None
        );
        assert!(!StreamMark::is_mark(&[b"SET", b"k", b"v"]));
        // A shard link's mark has a name of its own.
        let link = StreamMark { link: true, ..m };
        let args: [&[u8]; 4] = [
            LINK_RECORD_NAME,
            link.replid.as_bytes(),
            offset.as_bytes(),
            db.as_bytes(),
        ];
        assert!(StreamMark::is_mark(&args));
        assert_eq!(StreamMark::parse(&args), Some(link));
    }

    #[test]
    fn a_snapshot_keeps_whether_its_mark_is_a_links() {
        for m in [
            mark(77),
            StreamMark {
                link: true,
                ..mark(78)
            },
        ] {
            let aux: Vec<(Vec<u8>, Vec<u8>)> =
                m.with_aux(|aux| aux.iter().map(|(n, v)| (n.to_vec(), v.to_vec())).collect());
            assert_eq!(aux.len(), 3 + usize::from(m.link));
            assert_eq!(StreamMark::from_aux(&aux), Some(m));
        }
    }

    #[test]
    fn only_a_mark_with_nothing_after_it_is_exact() {
        let mut found = Found::default();
        assert_eq!(found.exact(), None);
        found.saw(None);
        found.saw(Some(mark(10)));
        assert_eq!(found.exact().map(|e| e.mark), Some(mark(10)));
        found.saw(None);
        assert_eq!(found.exact(), None);
        found.saw(Some(mark(20)));
        found.saw(Some(mark(30)));
        let exact = found.exact().expect("exact");
        assert_eq!((exact.mark, exact.quiet_from), (mark(30), 20));
    }

    #[test]
    fn shards_continue_where_all_their_data_is() {
        let end = |quiet_from, offset| {
            Some(Exact {
                mark: mark(offset),
                quiet_from,
            })
        };
        let at = |offset, catch_up: Option<Vec<u64>>| {
            Ok(Place {
                mark: mark(offset),
                catch_up,
            })
        };
        // Shard 1 missed the last marks of commands that wrote nothing on it.
        assert_eq!(common_place(&[end(80, 100), end(50, 90)]), at(90, None));
        assert_eq!(common_place(&[end(100, 100), end(100, 100)]), at(100, None));
        // Shard 0 changed after shard 1's last mark: from 90, shard 0 skips
        // the re-sent commands up to 100.
        assert_eq!(
            common_place(&[end(95, 100), end(50, 90)]),
            at(90, Some(vec![100, 90]))
        );
        assert!(common_place(&[end(80, 100), None]).is_err());
        let mut other = end(80, 100).unwrap();
        other.mark.replid = "b".repeat(40);
        assert!(common_place(&[end(80, 100), Some(other)]).is_err());
    }
}
