//! SORT and SORT_RO (Redis's sort.c): sort the elements of a list, set or sorted
//! set by their own value or by weights read from other keys, optionally fetch
//! other keys per element, and reply or STORE the result as a list.
//!
//! One generic core serves both commands (`sortCommandGeneric`), in Redis
//! 7.2's order of steps, because which error wins and which keys get looked up
//! (keyspace hits and misses, lazy expiry) are part of the behaviour:
//!
//! 1. the options, left to right: the first syntax error, non-integer LIMIT or
//!    (cluster mode) BY/GET pattern stops there, before the key is looked up;
//! 2. the key: missing is an empty list, another type WRONGTYPE; a sorted set
//!    becomes a skiplist for good (Redis converts it destructively);
//! 3. the elements, or only the LIMIT range when nothing is sorted (`BY` a
//!    constant) over a list or sorted set, which keep their own order;
//! 4. the weights: every element's number (`strtod`, nothing left over, in
//!    range, not NaN) or, with ALPHA and BY, the weight string; a missing BY key
//!    weighs 0 (or sorts first with ALPHA);
//! 5. the sort (Redis's `sortCompare`), then the range, with GET lookups only
//!    for the elements in it.
//!
//! Ties: numeric ties compare the elements as bytes, so only ALPHA with BY can
//! tie distinct elements. Redis sorts with glibc's `qsort`, a stable merge sort,
//! and Ruvio's sort is stable too, so such ties keep the loading order (Redis's
//! partial quicksort for BY with LIMIT is not stable: there the order of ties is
//! undefined in Redis). ALPHA without STORE collates as the C locale does (byte
//! order up to the first NUL, `strcoll` under `C`/`C.UTF-8`); with STORE it
//! compares whole strings, as Redis does so that replicas agree.
//!
//! STORE is logged as its result (`DEL dst` when it replaced a key, then
//! `RPUSH dst ...` in batches), not as the command: the BY and GET keys may live
//! on other shards, whose data a replay of SORT could not see.

use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, int_arg};
use crate::command::{
    command, flags::*, CmdResult, EngineCommand, ExecCtx, KeyShape, KeySpec, Outcome::Done,
};
use crate::error::CmdError;
use crate::keyspace::{Collection, EntryId};
use crate::lists::{End, ListValue};
use crate::value::{StrRef, ValueRef};
use crate::Engine;

/// SORT's keyspace event (Redis's name).
pub(crate) mod events {
    use crate::command::{Event, EventClass::List};
    pub const SORTSTORE: Event = Event::new(List, "sortstore");
}

/// Elements per RPUSH record when a STORE result is logged, so one record never
/// grows without bound (as SPOP's batched SREMs).
const STORE_LOG_BATCH_MAX: usize = 1024;

/// Options whose arguments the STORE key scan skips (Redis's `sortGetKeys`).
const OPTION_ARGS: &[(&str, usize)] = &[("LIMIT", 2), ("GET", 1), ("BY", 1)];

/// SORT: the sorted key, the pattern keys (read from its elements) and STORE's.
const SORT_KEYS: KeySpec = KeySpec(&[
    KeyShape::Range {
        first: 1,
        last: 1,
        step: 1,
    },
    KeyShape::FromValue,
    KeyShape::OptionKey {
        keyword: "STORE",
        from: 2,
        skips: OPTION_ARGS,
    },
]);

/// SORT_RO: the sorted key and the pattern keys.
const SORT_RO_KEYS: KeySpec = KeySpec(&[
    KeyShape::Range {
        first: 1,
        last: 1,
        step: 1,
    },
    KeyShape::FromValue,
]);

const COMPLEXITY: &str = "O(N+M*log(M)) where N is the number of elements in the list or set \
    to sort, and M the number of returned elements. When the elements are not sorted, \
    complexity is O(N).";

/// SORT and SORT_RO (Redis 7's arity, flags, keys, ACL categories and docs).
#[rustfmt::skip]
pub const COMMANDS: &[EngineCommand] = &[
    command!("sort", -2, WRITE | DENYOOM, SORT_KEYS,
        ["write", "set", "sortedset", "list", "slow", "dangerous"], "generic", "1.0.0",
        "Sort the elements in a list, set or sorted set",
        COMPLEXITY, sort),
    command!("sort_ro", -2, READONLY, SORT_RO_KEYS,
        ["read", "set", "sortedset", "list", "slow", "dangerous"], "generic", "7.0.0",
        "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", COMPLEXITY, sort_ro),
];

/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC]
/// [ALPHA] [STORE destination]`: the sorted elements (or GET values), or with
/// STORE how many were stored.
fn sort(e: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>, r: &mut Reply<'_>) -> CmdResult {
    sort_generic(e, ctx, args, false, r)
}

/// `SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC]
/// [ALPHA]`: SORT without STORE (which is a syntax error here).
fn sort_ro(e: &mut Engine, ctx: &mut ExecCtx, args: Args<'_>, r: &mut Reply<'_>) -> CmdResult {
    sort_generic(e, ctx, args, true, r)
}

// ---- patterns ---------------------------------------------------------------

/// A BY or GET pattern as Redis's `lookupKeyByPattern` reads it. The pattern is
/// searched as a C string (up to its first NUL) but its bytes are used whole, as
/// Redis mixes `strchr` with `sdslen`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pattern<'a> {
    /// `#`: the element itself.
    Element,
    /// No `*`: names no key (GET answers nil, BY does not sort).
    Constant,
    /// The key `prefix` + element + `suffix`, its string value, or with `field`
    /// (`weight_*->field`) that field of the hash there.
    Key {
        prefix: &'a [u8],
        suffix: &'a [u8],
        field: Option<&'a [u8]>,
    },
}

/// The bytes of `s` up to its first NUL (what C's string functions see).
fn c_str(s: &[u8]) -> &[u8] {
    s.iter().position(|&b| b == 0).map_or(s, |end| &s[..end])
}

impl<'a> Pattern<'a> {
    fn parse(pattern: &'a [u8]) -> Pattern<'a> {
        let text = c_str(pattern);
        if text == b"#" {
            return Pattern::Element;
        }
        let Some(star) = text.iter().position(|&b| b == b'*') else {
            return Pattern::Constant;
        };
        // `->` after the star with something after it (not a NUL) names a field.
        let arrow = text[star + 1..]
            .windows(2)
            .position(|w| w == b"->")
            .map(|at| star + 1 + at)
            .filter(|&at| at + 2 < text.len());
        let (suffix_end, field) = match arrow {
            Some(at) => (at, Some(&pattern[at + 2..])),
            None => (pattern.len(), None),
        };
        Pattern::Key {
            prefix: &pattern[..star],
            suffix: &pattern[star + 1..suffix_end],
            field,
        }
    }

    /// The key this pattern names for `elem` into `buf`; false when it names none.
    fn key_into(&self, elem: &[u8], buf: &mut Vec<u8>) -> bool {
        let Pattern::Key { prefix, suffix, .. } = *self else {
            return false;
        };
        buf.clear();
        buf.extend_from_slice(prefix);
        buf.extend_from_slice(elem);
        buf.extend_from_slice(suffix);
        true
    }
}

/// The value pattern `pattern` finds for `elem`: the element itself for `#`, a
/// string key's value, or a hash field's; `None` for a missing key or field, a
/// key of another type, or a constant pattern. The lookup is a read
/// (`lookupKeyRead`: hit and miss statistics, lazy expiry), as in Redis.
fn lookup_pattern<'e>(
    e: &'e mut Engine,
    ctx: &ExecCtx,
    pattern: Pattern<'_>,
    elem: &'e [u8],
    buf: &mut Vec<u8>,
) -> Option<StrRef<'e>> {
    let field = match pattern {
        Pattern::Element => return Some(StrRef::Bytes(elem)),
        Pattern::Constant => return None,
        Pattern::Key { field, .. } => field,
    };
    pattern.key_into(elem, buf);
    let id = e.lookup_read(ctx, buf)?;
    match (e.db(ctx.db).entry(id).value(), field) {
        (ValueRef::Str(s), None) => Some(s),
        (value, Some(field)) => value
            .as_hash()
            .and_then(|h| h.get(field, ctx.now_ms))
            .map(StrRef::Bytes),
        _ => None,
    }
}

// ---- options ----------------------------------------------------------------

/// A parsed SORT, with Redis's defaults.
#[derive(Debug)]
struct Request<'a> {
    desc: bool,
    alpha: bool,
    /// LIMIT's offset and count (`0 -1`: everything).
    limit: (i64, i64),
    store: Option<&'a [u8]>,
    /// The last BY pattern (meaningless once `dont_sort` is set).
    by: Option<Pattern<'a>>,
    /// A BY pattern without `*` was given: keep the elements' own order.
    dont_sort: bool,
    gets: Vec<Pattern<'a>>,
}

impl Request<'_> {
    /// True when running it reads keys named by patterns (forward mode must then
    /// gather them from their shards).
    fn reads_pattern_keys(&self) -> bool {
        let by = !self.dont_sort && matches!(self.by, Some(Pattern::Key { .. }));
        by || self.gets.iter().any(|p| matches!(p, Pattern::Key { .. }))
    }
}

/// Redis's option loop over `args[2..]`. `readonly` (SORT_RO) does not know
/// STORE; `cluster` refuses BY patterns and every GET, as Redis 7.2 Cluster.
fn parse_request(args: Args<'_>, readonly: bool, cluster: bool) -> Result<Request<'_>, CmdError> {
    let mut req = Request {
        desc: false,
        alpha: false,
        limit: (0, -1),
        store: None,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
    };
    let mut j = 2;
    while j < args.len() {
        let opt = args.get(j);
        let left = args.len() - j - 1;
        if eq_ci(opt, "ASC") {
            req.desc = false;
        } else if eq_ci(opt, "DESC") {
            req.desc = true;
        } else if eq_ci(opt, "ALPHA") {
            req.alpha = true;
        } else if eq_ci(opt, "LIMIT") && left >= 2 {
            req.limit = (int_arg(args.get(j + 1))?, int_arg(args.get(j + 2))?);
            j += 2;
        } else if !readonly && eq_ci(opt, "STORE") && left >= 1 {
            req.store = Some(args.get(j + 1));
            j += 1;
        } else if eq_ci(opt, "BY") && left >= 1 {
            let pattern = args.get(j + 1);
            if !c_str(pattern).contains(&b'*') {
                req.dont_sort = true;
            } else if cluster {
                return Err(CmdError::SortByInCluster);
            }
            req.by = Some(Pattern::parse(pattern));
            j += 1;
        } else if eq_ci(opt, "GET") && left >= 1 {
            if cluster {
                return Err(CmdError::SortGetInCluster);
            }
            req.gets.push(Pattern::parse(args.get(j + 1)));
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(req)
}

/// True when SORT or SORT_RO with `args` reads keys its BY or GET patterns name
/// (a BY pattern it sorts by, or a GET pattern other than `#` with a `*`).
/// Arguments that do not parse read none (the command answers an error).
pub fn value_keys_wanted(args: Args<'_>) -> bool {
    let readonly = eq_ci(args.get(0), "sort_ro");
    parse_request(args, readonly, false).is_ok_and(|req| req.reads_pattern_keys())
}

impl Engine {
    /// The keys SORT or SORT_RO with `args` would read through its BY and GET
    /// patterns, given the sorted key as it is in `db` now (no statistics, no
    /// access time: a probe). Forward mode borrows them with the command's own
    /// keys. A superset: every element's keys, whatever LIMIT keeps.
    pub fn value_keys(&self, db: usize, args: Args<'_>, now_ms: u64) -> Vec<Vec<u8>> {
        let readonly = eq_ci(args.get(0), "sort_ro");
        let Ok(req) = parse_request(args, readonly, false) else {
            return Vec::new();
        };
        let by = (!req.dont_sort).then_some(req.by).flatten();
        let patterns: Vec<Pattern<'_>> = by.into_iter().chain(req.gets).collect();
        let Some(id) = self.db(db).find(args.get(1)) else {
            return Vec::new();
        };
        if self.is_expired(db, id, now_ms) {
            return Vec::new();
        }
        let mut keys = Vec::new();
        let mut buf = Vec::new();
        each_elem(self.db(db).entry(id).value(), |elem| {
            for pattern in &patterns {
                if pattern.key_into(elem, &mut buf) {
                    keys.push(buf.clone());
                }
            }
        });
        keys.sort_unstable();
        keys.dedup();
        keys
    }
}

// ---- the vector ---------------------------------------------------------------

/// Byte strings in one buffer: one allocation for all the elements.
#[derive(Debug, Default)]
struct Strings {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Strings {
    fn with_capacity(items: usize) -> Strings {
        Strings {
            bytes: Vec::new(),
            ends: Vec::with_capacity(items),
        }
    }

    /// Add `s`; returns its index.
    fn push(&mut self, s: &[u8]) -> usize {
        self.bytes.extend_from_slice(s);
        self.ends.push(self.bytes.len());
        self.ends.len() - 1
    }

    /// Add a stored string (integers in decimal); returns its index.
    fn push_str(&mut self, s: StrRef<'_>) -> usize {
        self.push(s.bytes(&mut itoa::Buffer::new()))
    }

    fn len(&self) -> usize {
        self.ends.len()
    }

    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    fn iter(&self) -> impl Iterator<Item = &[u8]> + Clone {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// One element to sort (Redis's `redisSortObject`).
#[derive(Clone, Copy, Debug)]
struct Row {
    /// Index of the element in [`Vector::elems`].
    elem: usize,
    /// Its numeric weight (0 when BY finds nothing).
    score: f64,
    /// ALPHA with BY: index of its weight in [`Vector::weights`], `None` when
    /// BY found nothing.
    weight: Option<usize>,
}

/// The elements being sorted and what they are compared by.
#[derive(Debug, Default)]
struct Vector {
    elems: Strings,
    weights: Strings,
    rows: Vec<Row>,
}

impl Vector {
    fn with_capacity(items: usize) -> Vector {
        Vector {
            elems: Strings::with_capacity(items),
            weights: Strings::default(),
            rows: Vec::with_capacity(items),
        }
    }

    fn push(&mut self, elem: &[u8]) {
        let elem = self.elems.push(elem);
        self.rows.push(Row {
            elem,
            score: 0.0,
            weight: None,
        });
    }

    fn elem(&self, row: &Row) -> &[u8] {
        self.elems.get(row.elem)
    }
}

/// The kinds of value SORT takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    List,
    Set,
    ZSet,
}

/// The type of the value at `id` (`None`: a missing key, an empty list).
fn kind_of(e: &Engine, db: usize, id: Option<EntryId>) -> Result<Kind, CmdError> {
    let Some(id) = id else {
        return Ok(Kind::List);
    };
    match e.db(db).entry(id).value() {
        ValueRef::List(_) => Ok(Kind::List),
        ValueRef::Set(_) => Ok(Kind::Set),
        ValueRef::ZSet(_) => Ok(Kind::ZSet),
        _ => Err(CmdError::WrongType),
    }
}

/// Number of elements of the value at `id`.
fn len_of(e: &Engine, db: usize, id: Option<EntryId>) -> usize {
    match id.map(|id| e.db(db).entry(id).value()) {
        Some(ValueRef::List(l)) => l.len(),
        Some(ValueRef::Set(s)) => s.len(),
        Some(ValueRef::ZSet(z)) => z.len(),
        _ => 0,
    }
}

/// Every element of a list, set or sorted set, in its own order.
fn each_elem(value: ValueRef<'_>, mut f: impl FnMut(&[u8])) {
    match value {
        ValueRef::List(l) => l.iter().for_each(f),
        ValueRef::Set(s) => {
            let mut buf = itoa::Buffer::new();
            s.iter().for_each(|m| f(m.bytes(&mut buf)));
        }
        ValueRef::ZSet(z) => z.iter().for_each(|(m, _)| f(m)),
        ValueRef::Str(_) | ValueRef::Hash(_) | ValueRef::Stream(_) => {}
    }
}

/// Redis's LIMIT clamping for `len` elements: the first and last positions of
/// the output (`end < start` when it is empty).
fn limit_range((offset, count): (i64, i64), len: usize) -> (i64, i64) {
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let mut start = offset.max(0).min(len);
    let count = count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// Load the elements of the value at `id` into a vector. A list or sorted set
/// that is not sorted loads only `start..=end` (from the tail with DESC) and the
/// range is rebased to the vector; everything else loads whole.
fn load(
    e: &Engine,
    db: usize,
    id: Option<EntryId>,
    req: &Request<'_>,
    (start, end): (i64, i64),
) -> (Vector, (i64, i64)) {
    let Some(id) = id else {
        return (Vector::default(), (start, end));
    };
    let value = e.db(db).entry(id).value();
    let len = len_of(e, db, Some(id));
    let ordered = matches!(value, ValueRef::List(_) | ValueRef::ZSet(_));
    if req.dont_sort && ordered {
        return (
            load_range(value, len, req.desc, start, end),
            (0, end - start),
        );
    }
    let mut v = Vector::with_capacity(len);
    each_elem(value, |x| v.push(x));
    (v, (start, end))
}

/// The elements `start..=end` of a list or sorted set (counted from the tail
/// with `desc`): Redis's direct load when nothing is sorted.
fn load_range(value: ValueRef<'_>, len: usize, desc: bool, start: i64, end: i64) -> Vector {
    let (Ok(from), Ok(take)) = (usize::try_from(start), usize::try_from(end - start + 1)) else {
        return Vector::default();
    };
    let mut v = Vector::with_capacity(take);
    match value {
        ValueRef::List(list) if desc => {
            let at = len.saturating_sub(from + 1);
            list.iter_rev_from(at).take(take).for_each(|x| v.push(x));
        }
        ValueRef::List(list) => list.iter_from(from).take(take).for_each(|x| v.push(x)),
        ValueRef::ZSet(zset) => zset
            .iter_from(from, desc)
            .take(take)
            .for_each(|(m, _)| v.push(m)),
        _ => {}
    }
    v
}

// ---- weights and order ------------------------------------------------------------

extern "C" {
    fn strtod(s: *const std::ffi::c_char, end: *mut *mut std::ffi::c_char) -> f64;
    fn __errno_location() -> *mut std::ffi::c_int;
}

/// Weights up to this many bytes are NUL-terminated on the stack.
const WEIGHT_INLINE_BYTES: usize = 64;

/// glibc's `ERANGE`.
const ERANGE: std::ffi::c_int = 34;

/// A weight as Redis 7.2's SORT reads it: `strtod` must stop at the end (or an
/// embedded NUL), without `ERANGE` (overflow, or an inexact result below the
/// normal range) and not NaN. Leading blanks, hex floats, `inf` and the empty
/// string (0) pass, as in Redis.
fn parse_weight(s: &[u8]) -> Option<f64> {
    if let Some(n) = crate::args::parse_i64(s) {
        // Exactly the value strtod rounds the same digits to.
        return Some(n as f64);
    }
    let mut buf: smallvec::SmallVec<[u8; WEIGHT_INLINE_BYTES]> = smallvec::SmallVec::from_slice(s);
    buf.push(0);
    let mut end: *mut std::ffi::c_char = std::ptr::null_mut();
    // SAFETY: `buf` is NUL-terminated and outlives the call; strtod writes `end`
    // with a pointer into it. errno is this thread's, cleared first so that only
    // this call can set it.
    let (value, range_error) = unsafe {
        *__errno_location() = 0;
        let value = strtod(buf.as_ptr().cast(), &mut end);
        (value, *__errno_location() == ERANGE)
    };
    let used = (end as usize).saturating_sub(buf.as_ptr() as usize);
    let rest_ok = buf.get(used).is_some_and(|&b| b == 0);
    (rest_ok && !range_error && !value.is_nan()).then_some(value)
}

/// A stored value's weight: an integer as is (Redis casts an int-encoded
/// object), text through [`parse_weight`].
fn weight_of(s: StrRef<'_>) -> Option<f64> {
    match s {
        StrRef::Int(n) => Some(n as f64),
        StrRef::Bytes(b) => parse_weight(b),
    }
}

/// Fill in every row's weight. Every BY key is looked up even after a bad
/// number (as Redis does), then the error is returned.
fn weigh(e: &mut Engine, ctx: &ExecCtx, v: &mut Vector, req: &Request<'_>) -> Result<(), CmdError> {
    let mut bad = false;
    let mut buf = Vec::new();
    let Vector {
        elems,
        weights,
        rows,
    } = v;
    for row in rows.iter_mut() {
        let elem = elems.get(row.elem);
        let found = match req.by {
            Some(by) => lookup_pattern(e, ctx, by, elem, &mut buf),
            None => Some(StrRef::Bytes(elem)),
        };
        let Some(found) = found else { continue };
        if req.alpha {
            if req.by.is_some() {
                row.weight = Some(weights.push_str(found));
            }
        } else {
            match weight_of(found) {
                Some(score) => row.score = score,
                None => bad = true,
            }
        }
    }
    if bad {
        return Err(CmdError::SortScoreNotDouble);
    }
    Ok(())
}

/// `strcoll` in the C locale: byte order of the C strings.
fn collate(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    c_str(a).cmp(c_str(b))
}

/// Sort the rows as Redis's `sortCompare` orders them.
fn sort_rows(v: &mut Vector, req: &Request<'_>) {
    use std::cmp::Ordering;
    let Vector {
        elems,
        weights,
        rows,
    } = v;
    let text = |a: &[u8], b: &[u8]| match req.store {
        Some(_) => a.cmp(b),
        None => collate(a, b),
    };
    let by = req.by.is_some();
    rows.sort_by(|x, y| {
        let order = if !req.alpha {
            match x.score.partial_cmp(&y.score) {
                Some(Ordering::Equal) | None => elems.get(x.elem).cmp(elems.get(y.elem)),
                Some(order) => order,
            }
        } else if by {
            match (x.weight, y.weight) {
                (Some(a), Some(b)) => text(weights.get(a), weights.get(b)),
                (a, b) => a.is_some().cmp(&b.is_some()),
            }
        } else {
            text(elems.get(x.elem), elems.get(y.elem))
        };
        if req.desc {
            order.reverse()
        } else {
            order
        }
    });
}

// ---- the command ----------------------------------------------------------------

/// `sortCommandGeneric`: SORT (`readonly` false) and SORT_RO.
fn sort_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    readonly: bool,
    r: &mut Reply<'_>,
) -> CmdResult {
    let mut req = parse_request(args, readonly, e.config().cluster_enabled)?;
    let id = e.lookup_read(ctx, args.get(1));
    let kind = kind_of(e, ctx.db, id)?;
    if req.dont_sort && kind == Kind::Set && req.store.is_some() {
        // A set's order is its own: what is stored must not depend on it.
        req.dont_sort = false;
        req.alpha = true;
        req.by = None;
    }
    if let (Kind::ZSet, Some(id)) = (kind, id) {
        e.modify_value(ctx.db, id, |v| v.into_zset().map(|z| z.convert_to_tree()));
    }
    let range = limit_range(req.limit, len_of(e, ctx.db, id));
    let (mut v, (start, end)) = load(e, ctx.db, id, &req, range);
    if !req.dont_sort {
        weigh(e, ctx, &mut v, &req)?;
        sort_rows(&mut v, &req);
    }
    let out: &[Row] = match (usize::try_from(start), usize::try_from(end)) {
        (Ok(start), Ok(end)) if end >= start => &v.rows[start..=end],
        _ => &[],
    };
    match req.store {
        None => reply_rows(e, ctx, &v, out, &req.gets, r),
        Some(dst) => store_rows(e, ctx, &v, out, &req.gets, dst, r),
    }
    Ok(Done)
}

/// Reply with the rows, or per row the value of each GET pattern (nil when it
/// finds nothing).
fn reply_rows(
    e: &mut Engine,
    ctx: &ExecCtx,
    v: &Vector,
    rows: &[Row],
    gets: &[Pattern<'_>],
    r: &mut Reply<'_>,
) {
    r.array(rows.len() * gets.len().max(1));
    let mut buf = Vec::new();
    for row in rows {
        let elem = v.elem(row);
        if gets.is_empty() {
            r.bulk(elem);
        }
        for &get in gets {
            match lookup_pattern(e, ctx, get, elem, &mut buf) {
                Some(found) => found.reply(r),
                None => r.null(),
            }
        }
    }
}

/// STORE: the rows (or their GET values, an empty string when nothing is found)
/// become the list at `dst`, replacing whatever was there; an empty result
/// deletes `dst`. Replies with the number of elements.
fn store_rows(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    v: &Vector,
    rows: &[Row],
    gets: &[Pattern<'_>],
    dst: &[u8],
    r: &mut Reply<'_>,
) {
    let mut items = Strings::with_capacity(rows.len() * gets.len().max(1));
    let mut buf = Vec::new();
    for row in rows {
        let elem = v.elem(row);
        if gets.is_empty() {
            items.push(elem);
        }
        for &get in gets {
            let found = lookup_pattern(e, ctx, get, elem, &mut buf);
            items.push_str(found.unwrap_or(StrRef::Bytes(b"")));
        }
    }
    let existing = e.lookup_write(ctx, dst);
    if let Some(id) = existing {
        e.delete(ctx.db, id);
    }
    let stored = items.len();
    if stored > 0 {
        let mut list = ListValue::new();
        list.push_many(End::Tail, items.iter(), e.config().list_shape());
        e.add_collection(ctx, dst, Collection::List(list));
        ctx.changed(dst, events::SORTSTORE, stored as u64);
    } else if existing.is_some() {
        ctx.changed(dst, crate::keys::events::DEL, 1);
    }
    log_store(ctx, dst, existing.is_some(), &items);
    r.int(stored as i64);
}

/// STORE's log records: `DEL dst` when a key was replaced, then the result as
/// `RPUSH dst ...` batches (nothing at all when nothing changed).
fn log_store(ctx: &mut ExecCtx, dst: &[u8], replaced: bool, items: &Strings) {
    if replaced {
        ctx.log_as(&[b"DEL", dst]);
    }
    let mut record: Vec<&[u8]> = Vec::with_capacity(STORE_LOG_BATCH_MAX.min(items.len()) + 2);
    let mut rest = items.iter().peekable();
    while rest.peek().is_some() {
        record.clear();
        record.extend([b"RPUSH".as_slice(), dst]);
        record.extend(rest.by_ref().take(STORE_LOG_BATCH_MAX));
        ctx.log_as(&record);
    }
}
