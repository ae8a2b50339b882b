//! Streams in RDB: `RDB_TYPE_STREAM_LISTPACKS_2` (19, Redis 7.0's) written,
//! types 15 (5.0-6.2), 19 and 21 (7.2+) read.
//!
//! The object: the node count, then per node its master ID (16 bytes, big-endian
//! ms and seq, as Redis's radix-tree key) and its listpack; the length, last ID,
//! first ID, max-deleted-entry ID and entries-added (19+); then the groups, each
//! with its last ID, entries-read (19+), its PEL (16-byte ID, delivery ms,
//! delivery count) and its consumers (name, seen ms, and with 21 active ms,
//! then the IDs they own). Type 19 has no active ms: written, a consumer's
//! active time is lost and read back as its seen time, as Redis reads a type
//! below 21.
//!
//! Ruvio's nodes are Redis's nodes (same boundaries, deleted entries kept and
//! flagged), so a node's listpack is built as Redis's `streamAppendItem` left it:
//! master entry (live count, deleted count, field names, 0), then per entry its
//! flags, ID deltas, fields (left out when they are the master's) and element
//! count. A stream's DUMP therefore equals Redis 7.0's byte for byte, and a
//! loaded stream keeps Redis's nodes, deleted entries included.

use super::decode::{LoadError, Reader};
use super::encode::{write_len, write_string};
use super::listpack::{read_listpack, Elem, ListpackWriter};
use super::types;
use crate::values::stream::groups::ENTRIES_READ_UNKNOWN;
use crate::values::stream::id::StreamId;
use crate::values::stream::value::NodeEntry;
use crate::values::stream::StreamValue;

/// `STREAM_ITEM_FLAG_DELETED`.
const FLAG_DELETED: i64 = 1;
/// `STREAM_ITEM_FLAG_SAMEFIELDS`.
const FLAG_SAMEFIELDS: i64 = 2;

/// Redis's radix-tree key of an ID: ms then seq, big-endian.
fn id_key(id: StreamId) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.ms.to_be_bytes());
    k[8..].copy_from_slice(&id.seq.to_be_bytes());
    k
}

fn key_id(k: &[u8]) -> Result<StreamId, LoadError> {
    if k.len() != 16 {
        return Err(LoadError::Corrupt);
    }
    let ms = u64::from_be_bytes(k[..8].try_into().expect("8 bytes"));
    let seq = u64::from_be_bytes(k[8..].try_into().expect("8 bytes"));
    Ok(StreamId::new(ms, seq))
}

/// Append the stream as type 19.
pub fn write_stream(out: &mut Vec<u8>, s: &StreamValue) {
    out.push(types::STREAM_LISTPACKS_2);
    write_len(out, s.node_count() as u64);
    for (master, entries) in s.nodes() {
        write_string(out, &id_key(master));
        write_string(out, &node_listpack(master, &entries));
    }
    write_len(out, s.len());
    write_id(out, s.last_id());
    write_id(out, s.recorded_first_id());
    write_id(out, s.max_deleted_id());
    write_len(out, s.entries_added());
    write_len(out, s.groups().len() as u64);
    for (name, g) in s.groups().iter() {
        write_string(out, name);
        write_id(out, g.last_id);
        write_len(out, g.entries_read as u64);
        write_len(out, g.pel.len() as u64);
        for (id, nack) in &g.pel {
            out.extend_from_slice(&id_key(*id));
            out.extend_from_slice(&nack.delivery_ms.to_le_bytes());
            write_len(out, nack.delivery_count);
        }
        write_len(out, g.consumers.len() as u64);
        for (cname, c) in &g.consumers {
            write_string(out, cname);
            out.extend_from_slice(&c.seen_ms.to_le_bytes());
            write_len(out, c.pel.len() as u64);
            for id in &c.pel {
                out.extend_from_slice(&id_key(*id));
            }
        }
    }
}

fn write_id(out: &mut Vec<u8>, id: StreamId) {
    write_len(out, id.ms);
    write_len(out, id.seq);
}

/// One node's listpack, as Redis's appends built it.
fn node_listpack(master: StreamId, entries: &[NodeEntry<'_>]) -> Vec<u8> {
    let mut lp = ListpackWriter::new();
    let deleted = entries.iter().filter(|e| e.deleted).count();
    let master_fields: Vec<&[u8]> = entries
        .first()
        .map(|e| e.fields.iter().step_by(2).copied().collect())
        .unwrap_or_default();
    lp.push_int((entries.len() - deleted) as i64);
    lp.push_int(deleted as i64);
    lp.push_int(master_fields.len() as i64);
    master_fields.iter().for_each(|f| lp.push(f));
    lp.push_int(0);
    for e in entries {
        let pairs = e.fields.len() / 2;
        let same =
            pairs == master_fields.len() && e.fields.iter().step_by(2).eq(master_fields.iter());
        let mut flags = 0;
        if e.deleted {
            flags |= FLAG_DELETED;
        }
        if same {
            flags |= FLAG_SAMEFIELDS;
        }
        lp.push_int(flags);
        lp.push_int(e.id.ms.wrapping_sub(master.ms) as i64);
        lp.push_int(e.id.seq.wrapping_sub(master.seq) as i64);
        if same {
            e.fields.iter().skip(1).step_by(2).for_each(|v| lp.push(v));
            lp.push_int(pairs as i64 + 3);
        } else {
            lp.push_int(pairs as i64);
            e.fields.iter().for_each(|f| lp.push(f));
            lp.push_int(2 * pairs as i64 + 4);
        }
    }
    lp.finish()
}

/// One loaded entry: ID, deleted or not, fields and values.
pub type LoadedEntry = (StreamId, bool, Vec<Vec<u8>>);

/// A decoded stream, before it is checked and built.
#[derive(Debug, PartialEq, Default)]
pub struct LoadedStream {
    /// Each node's master ID and entries.
    pub nodes: Vec<(StreamId, Vec<LoadedEntry>)>,
    /// The stored length.
    pub len: u64,
    /// Last ID.
    pub last_id: StreamId,
    /// Max deleted entry ID.
    pub max_deleted_id: StreamId,
    /// Entries ever added (`None` before type 19: Redis then takes the length).
    pub entries_added: Option<u64>,
    /// The groups.
    pub groups: Vec<LoadedGroup>,
}

/// A decoded consumer group.
#[derive(Debug, PartialEq, Default)]
pub struct LoadedGroup {
    /// Name.
    pub name: Vec<u8>,
    /// Last delivered ID.
    pub last_id: StreamId,
    /// Entries read (`None` before type 19: estimated from the stream).
    pub entries_read: Option<i64>,
    /// The PEL: ID, delivery ms, delivery count.
    pub pel: Vec<(StreamId, i64, u64)>,
    /// Consumers: name, seen ms, active ms (type 21; before it, Redis takes
    /// the seen ms), the IDs they own.
    pub consumers: Vec<(Vec<u8>, i64, i64, Vec<StreamId>)>,
}

fn read_id(r: &mut Reader<'_>) -> Result<StreamId, LoadError> {
    Ok(StreamId::new(r.len()?, r.len()?))
}

fn raw_id(r: &mut Reader<'_>) -> Result<StreamId, LoadError> {
    key_id(r.take(16)?)
}

/// Read a stream object of type `kind` (15, 19 or 21).
pub fn read_stream(r: &mut Reader<'_>, kind: u8) -> Result<LoadedStream, LoadError> {
    let v2 = kind >= types::STREAM_LISTPACKS_2;
    let mut s = LoadedStream::default();
    let nodes = r.len()?;
    for _ in 0..nodes {
        let master = key_id(&r.string()?)?;
        let blob = r.string()?;
        s.nodes.push((master, node_entries(master, &blob)?));
    }
    s.len = r.len()?;
    s.last_id = read_id(r)?;
    if v2 {
        read_id(r)?; // the first ID: Ruvio finds it from the entries
        s.max_deleted_id = read_id(r)?;
        s.entries_added = Some(r.len()?);
    }
    let groups = r.len()?;
    for _ in 0..groups {
        let mut g = LoadedGroup {
            name: r.string()?.into_owned(),
            last_id: read_id(r)?,
            ..LoadedGroup::default()
        };
        if v2 {
            g.entries_read = Some(r.len()? as i64);
        }
        let pel = r.len()?;
        for _ in 0..pel {
            let id = raw_id(r)?;
            let ms = r.u64_le()? as i64;
            g.pel.push((id, ms, r.len()?));
        }
        let consumers = r.len()?;
        for _ in 0..consumers {
            let name = r.string()?.into_owned();
            let seen = r.u64_le()? as i64;
            let active = match kind {
                types::STREAM_LISTPACKS_3 => r.u64_le()? as i64,
                _ => seen,
            };
            let owned = r.len()?;
            let ids = (0..owned).map(|_| raw_id(r)).collect::<Result<_, _>>()?;
            g.consumers.push((name, seen, active, ids));
        }
        s.groups.push(g);
    }
    Ok(s)
}

fn elem_int(e: Option<&Elem<'_>>) -> Result<i64, LoadError> {
    match e {
        Some(Elem::Int(v)) => Ok(*v),
        Some(Elem::Str(s)) => crate::args::parse_i64(s).ok_or(LoadError::Corrupt),
        None => Err(LoadError::Corrupt),
    }
}

fn elem_bytes(e: Option<&Elem<'_>>) -> Result<Vec<u8>, LoadError> {
    e.map(|e| e.bytes().into_owned()).ok_or(LoadError::Corrupt)
}

/// The entries of one node's listpack (`streamValidateListpackIntegrity`'s walk).
fn node_entries(master: StreamId, blob: &[u8]) -> Result<Vec<LoadedEntry>, LoadError> {
    let elems = read_listpack(blob)?;
    let mut it = elems.iter();
    let live = elem_int(it.next())?;
    let deleted = elem_int(it.next())?;
    let master_count = usize::try_from(elem_int(it.next())?).map_err(|_| LoadError::Corrupt)?;
    if master_count > elems.len() {
        return Err(LoadError::Corrupt);
    }
    let master_fields: Vec<Vec<u8>> = (0..master_count)
        .map(|_| elem_bytes(it.next()))
        .collect::<Result<_, _>>()?;
    if elem_int(it.next())? != 0 {
        return Err(LoadError::Corrupt);
    }
    let mut entries = Vec::new();
    while let Some(flags) = it.next() {
        let flags = elem_int(Some(flags))?;
        let ms = master.ms.wrapping_add(elem_int(it.next())? as u64);
        let seq = master.seq.wrapping_add(elem_int(it.next())? as u64);
        let mut fields = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            for name in &master_fields {
                fields.push(name.clone());
                fields.push(elem_bytes(it.next())?);
            }
        } else {
            let pairs = usize::try_from(elem_int(it.next())?).map_err(|_| LoadError::Corrupt)?;
            if pairs > elems.len() {
                return Err(LoadError::Corrupt);
            }
            for _ in 0..pairs * 2 {
                fields.push(elem_bytes(it.next())?);
            }
        }
        elem_int(it.next())?; // the entry's element count, for backward walks
        entries.push((StreamId::new(ms, seq), flags & FLAG_DELETED != 0, fields));
    }
    let dead = entries.iter().filter(|e| e.1).count() as i64;
    if entries.is_empty() || dead != deleted || entries.len() as i64 - dead != live {
        return Err(LoadError::Corrupt);
    }
    Ok(entries)
}

/// Build the stream, checking what Redis's loader checks: nodes in order with
/// no duplicate, the stored length, groups and consumers unique, every PEL entry
/// owned by exactly one consumer; and what Ruvio's value relies on: live entries
/// ascending, none above the last ID.
pub fn build_stream(loaded: LoadedStream) -> Result<StreamValue, LoadError> {
    let mut s = StreamValue::new();
    let mut prev: Option<StreamId> = None;
    for (master, entries) in &loaded.nodes {
        if prev.is_some_and(|p| p >= *master) {
            return Err(LoadError::Corrupt);
        }
        prev = Some(*master);
        let fields: Vec<(StreamId, bool, Vec<&[u8]>)> = entries
            .iter()
            .map(|(id, deleted, f)| (*id, *deleted, f.iter().map(Vec::as_slice).collect()))
            .collect();
        s.push_loaded_node(*master, &fields);
    }
    if s.len() != loaded.len {
        return Err(LoadError::Corrupt);
    }
    // Appends and ranges rely on live entries ascending up to the last ID (a
    // deleted entry may sit above later ones after XSETID, as in Redis).
    let live: Vec<StreamId> = s
        .range(StreamId::MIN, StreamId::MAX)
        .map(|e| e.id)
        .collect();
    if live.windows(2).any(|w| w[0] >= w[1]) || live.last().is_some_and(|&l| l > loaded.last_id) {
        return Err(LoadError::Corrupt);
    }
    let added = loaded.entries_added.unwrap_or(loaded.len);
    s.set_last_id(loaded.last_id, Some(added), Some(loaded.max_deleted_id));
    for g in loaded.groups {
        let read = match g.entries_read {
            Some(n) if n >= ENTRIES_READ_UNKNOWN => n,
            Some(_) => return Err(LoadError::Corrupt),
            None => s.entries_read_at(g.last_id),
        };
        if !s.groups_mut().create(&g.name, g.last_id, read) {
            return Err(LoadError::Corrupt);
        }
        let mut owners: Vec<Option<usize>> = vec![None; g.pel.len()];
        let pel_index = |id: StreamId| g.pel.binary_search_by(|p| p.0.cmp(&id)).ok();
        if g.pel.windows(2).any(|w| w[0].0 >= w[1].0) {
            return Err(LoadError::Corrupt);
        }
        for (n, (name, seen, active, ids)) in g.consumers.iter().enumerate() {
            if !s.groups_mut().create_consumer(&g.name, name, *seen) {
                return Err(LoadError::Corrupt);
            }
            s.groups_mut().mark_active(&g.name, name, *active);
            for &id in ids {
                let at = pel_index(id).ok_or(LoadError::Corrupt)?;
                if owners[at].replace(n).is_some() {
                    return Err(LoadError::Corrupt);
                }
            }
        }
        for (at, &(id, ms, count)) in g.pel.iter().enumerate() {
            let owner = owners[at].ok_or(LoadError::Corrupt)?;
            let consumer = &g.consumers[owner].0;
            s.groups_mut()
                .restore_pending(&g.name, consumer, id, ms, count);
        }
    }
    Ok(s)
}
