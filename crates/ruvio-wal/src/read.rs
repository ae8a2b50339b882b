//! Reading a log back: every good record in order, and how the log ended.
//!
//! A crash can leave the last record partly written (its length but not all of its
//! payload, or a payload whose checksum does not match because the write was torn),
//! or zero-filled space after the last record. Those are a torn tail: everything
//! before it is good, and it is cut. A bad record with a good record somewhere after
//! it is different: bytes in the middle of the log changed, and replaying around
//! them would serve wrong data, so the reader reports corruption and the server
//! refuses to start unless told to cut the log there.

use crate::frame::{get_varint, HEADER_BYTES, KIND_COMMAND, KIND_GROUP, PAYLOAD_BYTES_MAX};

/// One command record, borrowing the log's bytes.
#[derive(Debug, PartialEq, Eq)]
pub struct Record<'a> {
    pub db: usize,
    pub args: Vec<&'a [u8]>,
}

/// How a log's bytes ended.
#[derive(Debug, PartialEq, Eq)]
pub enum LogEnd {
    /// After the last record (possibly followed by zero-filled space).
    Clean,
    /// A partly written or torn last record starts at this offset: cut it there.
    TornTail { at: usize },
    /// A bad record at `at` is followed by good records: the log was damaged.
    Corrupt { at: usize, reason: &'static str },
}

/// Call `apply` with every good command record of `log` in order (a group's
/// records one after the other, only once the whole group is known good); returns
/// the offset after the last good record and how the log ended.
pub fn read_log<'a>(log: &'a [u8], mut apply: impl FnMut(Record<'a>)) -> (usize, LogEnd) {
    let mut pos = 0;
    loop {
        match frame_at(log, pos) {
            Ok((Records::One(record), next)) => {
                apply(record);
                pos = next;
            }
            Ok((Records::Group(records), next)) => {
                records.into_iter().for_each(&mut apply);
                pos = next;
            }
            // Nothing more, or zero-filled space (a payload is never empty).
            Err(_) if log[pos..].iter().all(|&b| b == 0) => return (pos, LogEnd::Clean),
            Err(reason) => {
                let end = if good_record_after(log, pos + 1) {
                    LogEnd::Corrupt { at: pos, reason }
                } else {
                    LogEnd::TornTail { at: pos }
                };
                return (pos, end);
            }
        }
    }
}

/// The command records of the frame starting at `pos` (one, or a group's), and
/// where the next frame starts.
fn frame_at(log: &[u8], pos: usize) -> Result<(Records<'_>, usize), &'static str> {
    let (payload, next) = payload_at(log, pos)?;
    let records = match payload.first() {
        Some(&KIND_GROUP) => Records::Group(group_records(&payload[1..])?),
        _ => Records::One(decode_payload(payload).ok_or("malformed record payload")?),
    };
    Ok((records, next))
}

/// A frame's command records.
enum Records<'a> {
    One(Record<'a>),
    Group(Vec<Record<'a>>),
}

/// A group's command bodies; any flaw rejects the whole group.
fn group_records(body: &[u8]) -> Result<Vec<Record<'_>>, &'static str> {
    let mut records = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        records.push(decode_body(body, &mut pos).ok_or("malformed record group")?);
    }
    if records.len() < 2 {
        return Err("malformed record group");
    }
    Ok(records)
}

/// The checked payload of the frame at `pos` and where the next frame starts.
fn payload_at(log: &[u8], pos: usize) -> Result<(&[u8], usize), &'static str> {
    let (payload, crc, next) = unchecked_payload_at(log, pos)?;
    if crc32c::crc32c(payload) != crc {
        return Err("checksum mismatch");
    }
    Ok((payload, next))
}

/// The payload of the frame at `pos`, its recorded checksum (not compared) and
/// where the next frame starts.
fn unchecked_payload_at(log: &[u8], pos: usize) -> Result<(&[u8], u32, usize), &'static str> {
    let header = log
        .get(pos..pos + HEADER_BYTES)
        .ok_or("partial record header")?;
    let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
    if len == 0 || len > PAYLOAD_BYTES_MAX {
        return Err("bad record length");
    }
    let start = pos + HEADER_BYTES;
    let payload = log
        .get(start..start + len)
        .ok_or("partial record payload")?;
    Ok((payload, crc, start + len))
}

fn decode_payload(payload: &[u8]) -> Option<Record<'_>> {
    let (&kind, _) = payload.split_first()?;
    if kind != KIND_COMMAND {
        return None;
    }
    let mut pos = 1;
    let record = decode_body(payload, &mut pos)?;
    (pos == payload.len()).then_some(record)
}

/// The command body at `*pos` of `buf` (database, arguments); `*pos` moves past it.
fn decode_body<'a>(buf: &'a [u8], pos: &mut usize) -> Option<Record<'a>> {
    let mut args = Vec::new();
    let db = walk_body(buf, pos, |count, arg| {
        args.reserve_exact(count);
        args.push(arg)
    })?;
    Some(Record { db, args })
}

/// Walk the command body at `*pos` of `buf`: `arg` gets each argument after the
/// number of arguments still to come; returns the body's database, `*pos` moves
/// past it.
fn walk_body<'a>(
    buf: &'a [u8],
    pos: &mut usize,
    mut arg: impl FnMut(usize, &'a [u8]),
) -> Option<usize> {
    let db = usize::try_from(get_varint(buf, pos)?).ok()?;
    let args = get_varint(buf, pos)?;
    // Each argument takes at least one byte: a count beyond that is damage, and
    // must not size an allocation.
    if args > (buf.len() - *pos) as u64 {
        return None;
    }
    for left in (0..args as usize).rev() {
        let len = usize::try_from(get_varint(buf, pos)?).ok()?;
        let end = pos.checked_add(len)?;
        arg(left + 1, buf.get(*pos..end)?);
        *pos = end;
    }
    Some(db)
}

/// The database and key (the argument after the command's name) of every record
/// of `log`, up to the first frame that does not parse; checksums are not
/// looked at and nothing is allocated. A cheap first pass that says about which
/// keys a replay will create (a hint for sizing, never data: a damaged log is
/// judged by [`read_log`]).
pub fn record_keys<'a>(log: &'a [u8], mut key: impl FnMut(usize, &'a [u8])) {
    let mut pos = 0;
    while let Ok((payload, _, next)) = unchecked_payload_at(log, pos) {
        let (&kind, bodies) = payload.split_first().expect("a payload is never empty");
        let mut at = 0;
        while at < bodies.len() {
            let mut first = None;
            let mut index = 0;
            let walked = walk_body(bodies, &mut at, |_, arg| {
                if index == 1 {
                    first = Some(arg);
                }
                index += 1;
            });
            let Some(db) = walked else { return };
            if let Some(first) = first {
                key(db, first);
            }
            if kind != KIND_GROUP {
                break;
            }
        }
        pos = next;
    }
}

/// Some good record starts somewhere at or after `from` (only looked for once a bad
/// record was found, so the cost is on the error path).
fn good_record_after(log: &[u8], from: usize) -> bool {
    (from..log.len().saturating_sub(HEADER_BYTES)).any(|pos| frame_at(log, pos).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{append_command, Group};
    use proptest::prelude::*;

    /// Records as written: database and arguments.
    type Written = Vec<(usize, Vec<Vec<u8>>)>;

    fn log_of(records: &[(usize, Vec<Vec<u8>>)]) -> (Vec<u8>, Vec<usize>) {
        let mut log = Vec::new();
        let mut ends = Vec::new();
        for (db, args) in records {
            append_command(&mut log, *db, args.iter().map(Vec::as_slice));
            ends.push(log.len());
        }
        (log, ends)
    }

    /// `records` logged in groups of the sizes `sizes` (cycled): the log, and for
    /// each group the records before its end and its end offset.
    fn grouped_log_of(records: &Written, sizes: &[usize]) -> (Vec<u8>, Vec<(usize, usize)>) {
        let mut log = Vec::new();
        let mut ends = Vec::new();
        let mut done = 0;
        for &size in sizes.iter().cycle() {
            if done == records.len() {
                break;
            }
            let take = size.min(records.len() - done);
            let mut group = Group::begin(&mut log);
            for (db, args) in &records[done..done + take] {
                group.append(&mut log, *db, args.iter().map(Vec::as_slice));
            }
            group.end(&mut log);
            done += take;
            ends.push((done, log.len()));
        }
        (log, ends)
    }

    fn read_all(log: &[u8]) -> (Written, usize, LogEnd) {
        let mut got = Vec::new();
        let (pos, end) = read_log(log, |r| {
            got.push((r.db, r.args.iter().map(|a| a.to_vec()).collect()))
        });
        (got, pos, end)
    }

    fn records() -> impl Strategy<Value = Written> {
        proptest::collection::vec(
            (
                0usize..16,
                proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..6),
            ),
            1..12,
        )
    }

    /// What `record_keys` reports of a log: (database, key) in order.
    fn keys_of(log: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let mut keys = Vec::new();
        record_keys(log, |db, key| keys.push((db, key.to_vec())));
        keys
    }

    #[test]
    fn record_keys_names_each_command_and_group_member_until_the_log_ends() {
        let args = |a: &[&str]| a.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>();
        let mut log = Vec::new();
        append_command(
            &mut log,
            0,
            args(&["SET", "a", "1"]).iter().map(Vec::as_slice),
        );
        append_command(&mut log, 3, args(&["FLUSHDB"]).iter().map(Vec::as_slice));
        let mut group = Group::begin(&mut log);
        group.append(
            &mut log,
            1,
            args(&["HSET", "h", "f", "v"]).iter().map(Vec::as_slice),
        );
        group.append(
            &mut log,
            2,
            args(&["DEL", "x", "y"]).iter().map(Vec::as_slice),
        );
        group.end(&mut log);
        let whole = log.len();
        append_command(
            &mut log,
            0,
            args(&["SET", "late", "1"]).iter().map(Vec::as_slice),
        );
        let want = |n| {
            [(0, "a"), (1, "h"), (2, "x"), (0, "late")][..n]
                .iter()
                .map(|(db, k)| (*db, k.as_bytes().to_vec()))
                .collect::<Vec<_>>()
        };
        assert_eq!(keys_of(&log), want(4));
        // Zero-filled space ends the log; so does a torn last record.
        let mut zeroed = log.clone();
        zeroed.extend_from_slice(&[0; 64]);
        assert_eq!(keys_of(&zeroed), want(4));
        assert_eq!(keys_of(&log[..log.len() - 2]), want(3));
        assert_eq!(keys_of(&log[..whole]), want(3));
    }

    proptest! {
        /// `record_keys` names, for a good log (groups included), the database and
        /// second argument of every record `read_log` gives back, and on any
        /// bytes at all it returns without a panic.
        #[test]
        fn record_keys_agrees_with_read_log(
            records in records(),
            sizes in proptest::collection::vec(1usize..5, 1..4),
            noise in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let (log, _) = grouped_log_of(&records, &sizes);
            let want: Vec<(usize, Vec<u8>)> = records
                .iter()
                .filter(|(_, args)| args.len() > 1)
                .map(|(db, args)| (*db, args[1].clone()))
                .collect();
            prop_assert_eq!(keys_of(&log), want);
            keys_of(&noise);
            let mut damaged = log.clone();
            damaged.extend_from_slice(&noise);
            keys_of(&damaged);
        }

        /// Records come back as written, also with zero-filled space after them.
        #[test]
        fn records_round_trip(records in records(), zeros in 0usize..64) {
            let (mut log, _) = log_of(&records);
            let len = log.len();
            log.resize(len + zeros, 0);
            let (got, pos, end) = read_all(&log);
            prop_assert_eq!(got, records);
            prop_assert_eq!(pos, len);
            prop_assert_eq!(end, LogEnd::Clean);
        }

        /// A log cut anywhere gives back every record before the cut, never a
        /// wrong one, and says where the torn tail starts.
        #[test]
        fn a_cut_log_keeps_every_whole_record(records in records(), cut in any::<proptest::sample::Index>()) {
            let (log, ends) = log_of(&records);
            let cut = cut.index(log.len() + 1);
            let whole = ends.iter().filter(|&&e| e <= cut).count();
            let (got, pos, end) = read_all(&log[..cut]);
            prop_assert_eq!(&got[..], &records[..whole]);
            let last_good = if whole == 0 { 0 } else { ends[whole - 1] };
            prop_assert_eq!(pos, last_good);
            if cut == last_good {
                prop_assert_eq!(end, LogEnd::Clean);
            } else {
                prop_assert_eq!(end, LogEnd::TornTail { at: last_good });
            }
        }

        /// Groups (of one to four records) come back as written, and a log cut
        /// anywhere keeps exactly the groups before the cut: never part of one.
        #[test]
        fn groups_replay_whole_or_not_at_all(
            records in records(),
            sizes in proptest::collection::vec(1usize..5, 1..4),
            cut in any::<proptest::sample::Index>(),
        ) {
            let (log, ends) = grouped_log_of(&records, &sizes);
            let (got, pos, end) = read_all(&log);
            prop_assert_eq!(&got, &records);
            prop_assert_eq!((pos, end), (log.len(), LogEnd::Clean));
            let cut = cut.index(log.len() + 1);
            let (whole, last_good) = ends.iter().rev().find(|e| e.1 <= cut).copied().unwrap_or((0, 0));
            let (got, pos, end) = read_all(&log[..cut]);
            prop_assert_eq!(&got[..], &records[..whole]);
            prop_assert_eq!(pos, last_good);
            if cut != last_good {
                prop_assert_eq!(end, LogEnd::TornTail { at: last_good });
            }
        }

        /// A flipped byte in a grouped log never yields a wrong record, nor part of
        /// a group.
        #[test]
        fn a_flipped_byte_in_a_group_is_never_read_as_data(
            records in records(),
            sizes in proptest::collection::vec(1usize..5, 1..4),
            at in any::<proptest::sample::Index>(),
            bit in 0u8..8,
        ) {
            let (mut log, ends) = grouped_log_of(&records, &sizes);
            let at = at.index(log.len());
            log[at] ^= 1 << bit;
            let (got, _, _) = read_all(&log);
            let damaged = ends.iter().position(|e| e.1 > at).unwrap();
            let before = if damaged == 0 { 0 } else { ends[damaged - 1].0 };
            prop_assert_eq!(&got[..], &records[..before]);
        }

        /// A flipped byte never yields a wrong record: what is read is a prefix of
        /// what was written; damage in the middle is reported as corruption.
        #[test]
        fn a_flipped_byte_is_never_read_as_data(records in records(), at in any::<proptest::sample::Index>(), bit in 0u8..8) {
            let (mut log, ends) = log_of(&records);
            let at = at.index(log.len());
            log[at] ^= 1 << bit;
            let (got, pos, end) = read_all(&log);
            prop_assert!(got.len() <= records.len());
            prop_assert_eq!(&got[..], &records[..got.len()]);
            let damaged_record = ends.iter().position(|&e| e > at).unwrap();
            prop_assert_eq!(got.len(), damaged_record);
            if damaged_record + 1 < records.len() {
                let is_corrupt = matches!(end, LogEnd::Corrupt { .. });
                prop_assert!(is_corrupt, "{:?} at {}", end, pos);
            }
        }
    }
}
