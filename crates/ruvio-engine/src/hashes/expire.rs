//! Hash field expiry (Redis 7.4/8.0): HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT (one
//! core), HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME (one core), HPERSIST, and the
//! multi-field commands of Redis 8.0 that read or write expiry on the way: HGETDEL,
//! HGETEX, HSETEX.
//!
//! Replies per field use Redis's codes: -2 no such field (or already expired), -1 no
//! expiry, 0 an NX/XX/GT/LT condition not met, 1 done, 2 deleted because the new
//! time is not in the future. Relative times are logged as absolute ones
//! (`HPEXPIREAT`, `HSETEX .. PXAT`), and a field deleted by a past time as `HDEL`,
//! as Redis propagates them.

use ruvio_resp::{Args, Reply};

use super::{
    after_lazy_expiry, already_expired, change_hash, delete_if_empty, events, expire_field,
    fields_block, hash_at, limits, parse_expire_time, read_hash, write_hash, HashValue,
};
use crate::args::eq_ci;
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::{Collection, EntryId};
use crate::Engine;

/// HEXPIRE reply: no such field.
const NO_FIELD: i64 = -2;
/// HTTL/HPERSIST reply: the field has no expiry.
const NO_TTL: i64 = -1;
/// HEXPIRE reply: the NX/XX/GT/LT condition failed.
const CONDITION_FAILED: i64 = 0;
/// HEXPIRE/HPERSIST reply: done.
const DONE: i64 = 1;
/// HEXPIRE reply: deleted, the time was not in the future.
const DELETED: i64 = 2;

/// HEXPIRE's optional condition.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Condition {
    Nx,
    Xx,
    Gt,
    Lt,
}

impl Condition {
    fn parse(arg: &[u8]) -> Option<Condition> {
        [
            ("NX", Condition::Nx),
            ("XX", Condition::Xx),
            ("GT", Condition::Gt),
            ("LT", Condition::Lt),
        ]
        .into_iter()
        .find(|(name, _)| eq_ci(arg, name))
        .map(|(_, c)| c)
    }

    /// Redis 8's rule: a field without expiry fails XX and GT (LT and NX pass); one
    /// with an expiry fails NX, GT unless later, LT unless earlier.
    fn allows(self, prev: Option<u64>, at: u64) -> bool {
        match (self, prev) {
            (Condition::Xx | Condition::Gt, None) => false,
            (Condition::Nx | Condition::Lt, None) => true,
            (Condition::Nx, Some(_)) => false,
            (Condition::Xx, Some(_)) => true,
            (Condition::Gt, Some(p)) => at > p,
            (Condition::Lt, Some(p)) => at < p,
        }
    }
}

/// `HEXPIRE key seconds [NX|XX|GT|LT] FIELDS numfields field [field ...]`
pub(super) fn hexpire(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    hexpire_generic(e, ctx, args, r, "hexpire", true, true)
}

/// `HPEXPIRE key milliseconds [NX|XX|GT|LT] FIELDS numfields field [field ...]`
pub(super) fn hpexpire(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    hexpire_generic(e, ctx, args, r, "hpexpire", false, true)
}

/// `HEXPIREAT key unix-time-seconds [NX|XX|GT|LT] FIELDS numfields field [field ...]`
pub(super) fn hexpireat(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    hexpire_generic(e, ctx, args, r, "hexpireat", true, false)
}

/// `HPEXPIREAT key unix-time-milliseconds [NX|XX|GT|LT] FIELDS numfields field [field ...]`
pub(super) fn hpexpireat(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    hexpire_generic(e, ctx, args, r, "hpexpireat", false, false)
}

/// `hexpireGenericCommand`: one reply code per field; logged as `HDEL key field` for
/// each field a past time deleted, then `HPEXPIREAT key ms [cond] FIELDS n ...` with
/// only the fields whose expiry was set.
fn hexpire_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    name: &'static str,
    seconds: bool,
    relative: bool,
) -> CmdResult {
    let key = args.get(1);
    let id = write_hash(e, ctx, key)?;
    let base = if relative { ctx.now_ms } else { 0 };
    let at = parse_expire_time(args.get(2), seconds, base, name)?;
    let condition = Condition::parse(args.get(3));
    let fields_at = if condition.is_some() { 4 } else { 3 };
    let fields = fields_block(args, fields_at, CmdError::NumFieldsParameter)?;
    r.array(fields.len());
    let Some(id) = id else {
        fields.for_each(|_| r.int(NO_FIELD));
        return Ok(Done);
    };
    let past = already_expired(at, ctx);
    let mut updated: Vec<&[u8]> = Vec::new();
    let mut deleted: Vec<&[u8]> = Vec::new();
    change_hash(e, ctx.db, id, |h| {
        h.enable_field_expiry();
        for i in fields {
            let field = args.get(i);
            let code = match h.lookup(field) {
                None => NO_FIELD,
                Some(f) if condition.is_some_and(|c| !c.allows(f.expire_at, at)) => {
                    CONDITION_FAILED
                }
                Some(_) if past => {
                    h.remove(field);
                    deleted.push(field);
                    DELETED
                }
                Some(_) => {
                    h.set_field_expire(field, at);
                    updated.push(field);
                    DONE
                }
            };
            r.int(code);
        }
    })?;
    let changes = (deleted.len() + updated.len()) as u64;
    if changes > 0 {
        let event = if deleted.is_empty() {
            events::HEXPIRE
        } else {
            events::HDEL
        };
        ctx.changed(key, event, changes);
        for field in &deleted {
            ctx.log_as(&[b"HDEL", key, field]);
        }
        if !updated.is_empty() {
            let mut at_text = itoa::Buffer::new();
            let mut n_text = itoa::Buffer::new();
            let mut record: Vec<&[u8]> = vec![b"HPEXPIREAT", key, at_text.format(at).as_bytes()];
            if condition.is_some() {
                record.push(args.get(3));
            }
            record.push(b"FIELDS");
            record.push(n_text.format(updated.len()).as_bytes());
            record.extend_from_slice(&updated);
            ctx.log_as(&record);
        }
    }
    delete_if_empty(e, ctx, key, id);
    Ok(Done)
}

/// What HTTL and its variants report.
#[derive(Clone, Copy)]
enum TtlReply {
    /// Seconds left, rounded up (HTTL).
    Seconds,
    /// Milliseconds left (HPTTL).
    Millis,
    /// Absolute Unix seconds, rounded up (HEXPIRETIME).
    AtSeconds,
    /// Absolute Unix milliseconds (HPEXPIRETIME).
    AtMillis,
}

/// `HTTL key FIELDS numfields field [field ...]`
pub(super) fn httl(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    httl_generic(e, ctx, args, r, TtlReply::Seconds)
}

/// `HPTTL key FIELDS numfields field [field ...]`
pub(super) fn hpttl(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    httl_generic(e, ctx, args, r, TtlReply::Millis)
}

/// `HEXPIRETIME key FIELDS numfields field [field ...]`
pub(super) fn hexpiretime(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    httl_generic(e, ctx, args, r, TtlReply::AtSeconds)
}

/// `HPEXPIRETIME key FIELDS numfields field [field ...]`
pub(super) fn hpexpiretime(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    httl_generic(e, ctx, args, r, TtlReply::AtMillis)
}

/// `httlGenericCommand`: per field -2 (missing or expired), -1 (no expiry) or the
/// time. Read-only: an expired field is reported, not removed.
fn httl_generic(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
    what: TtlReply,
) -> CmdResult {
    let id = read_hash(e, ctx, args.get(1))?;
    let fields = fields_block(args, 2, CmdError::NumFieldsNotPositive)?;
    r.array(fields.len());
    let now = ctx.now_ms;
    let h = match id {
        Some(id) => Some(hash_at(e, ctx.db, id)?),
        None => None,
    };
    for i in fields {
        let stored = h.and_then(|h| h.lookup(args.get(i)));
        let code = match stored.map(|f| f.expire_at) {
            None => NO_FIELD,
            Some(None) => NO_TTL,
            Some(Some(at)) if now > at => NO_FIELD,
            Some(Some(at)) => {
                let at = at as i64;
                let now = now as i64;
                match what {
                    TtlReply::Seconds => (at + 999 - now) / 1000,
                    TtlReply::Millis => at - now,
                    TtlReply::AtSeconds => (at + 999) / 1000,
                    TtlReply::AtMillis => at,
                }
            }
        };
        r.int(code);
    }
    Ok(Done)
}

/// `HPERSIST key FIELDS numfields field [field ...]`: per field -2, -1 or 1.
pub(super) fn hpersist(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let id = write_hash(e, ctx, key)?;
    let fields = fields_block(args, 2, CmdError::NumFieldsNotPositive)?;
    r.array(fields.len());
    let Some(id) = id else {
        fields.for_each(|_| r.int(NO_FIELD));
        return Ok(Done);
    };
    let now = ctx.now_ms;
    let changed = change_hash(e, ctx.db, id, |h| {
        let mut changed = false;
        for i in fields {
            let field = args.get(i);
            let code = match h.lookup(field).map(|f| f.expire_at) {
                None => NO_FIELD,
                Some(None) => NO_TTL,
                // Already expired: as if it were gone (Redis leaves it to expiry).
                Some(Some(at)) if now > at => NO_FIELD,
                Some(Some(_)) => {
                    h.persist_field(field);
                    changed = true;
                    DONE
                }
            };
            r.int(code);
        }
        changed
    })?;
    if changed {
        ctx.changed(key, events::HPERSIST, 1);
    }
    Ok(Done)
}

/// `HGETDEL key FIELDS numfields field [field ...]`: the values (nil for missing or
/// expired fields), each removed; logged as `HDEL key field ...`.
pub(super) fn hgetdel(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let id = write_hash(e, ctx, key)?;
    let fields = fields_block(args, 2, CmdError::NumFieldsNotPositive)?;
    r.array(fields.len());
    let Some(id) = id else {
        fields.for_each(|_| r.null());
        return Ok(Done);
    };
    let (mut expired, mut deleted) = (0, 0);
    for i in fields {
        let field = args.get(i);
        if expire_field(e, ctx, id, field) {
            expired += 1;
            r.null();
            continue;
        }
        let found = change_hash(e, ctx.db, id, |h| {
            let hit = match h.get(field, ctx.now_ms) {
                Some(v) => {
                    r.bulk(v);
                    true
                }
                None => {
                    r.null();
                    false
                }
            };
            hit && h.remove(field)
        })?;
        deleted += usize::from(found);
    }
    after_lazy_expiry(e, ctx, key, id, expired, false);
    if deleted > 0 {
        ctx.changed(key, events::HDEL, deleted as u64);
        let mut record: Vec<&[u8]> = vec![b"HDEL", key];
        record.extend(args.tail(4));
        ctx.log_as(&record);
    }
    delete_if_empty(e, ctx, key, id);
    Ok(Done)
}

/// HGETEX's expiry option.
#[derive(Clone, Copy, PartialEq, Eq)]
enum GetExOption {
    None,
    Persist,
    /// An absolute time in ms, and whether the client gave it as PXAT.
    At(u64, bool),
}

/// `HGETEX key [EX seconds|PX ms|EXAT unix-seconds|PXAT unix-ms|PERSIST] FIELDS
/// numfields field [field ...]`: the values (nil for missing or expired fields),
/// their expiry set or removed; logged as `HPEXPIREAT`/`HPERSIST` (and `HDEL` for
/// fields a past time deleted).
pub(super) fn hgetex(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let id = write_hash(e, ctx, key)?;
    let opt = args.get(2);
    let (option, fields_at) = if eq_ci(opt, "PERSIST") {
        (GetExOption::Persist, 3)
    } else if let Some((seconds, relative, pxat)) = time_option(opt) {
        let base = if relative { ctx.now_ms } else { 0 };
        let at = parse_expire_time(args.get(3), seconds, base, "hgetex")?;
        (GetExOption::At(at, pxat), 4)
    } else {
        (GetExOption::None, 2)
    };
    if fields_at + 1 >= args.len() {
        return Err(CmdError::WrongArity("hgetex"));
    }
    let fields = fields_block(args, fields_at, CmdError::NumFieldsNotPositive)?;
    r.array(fields.len());
    let Some(id) = id else {
        fields.for_each(|_| r.null());
        return Ok(Done);
    };
    if option != GetExOption::None {
        change_hash(e, ctx.db, id, HashValue::enable_field_expiry)?;
    }
    let (mut expired, mut updated) = (0, 0);
    let mut deleted: Vec<&[u8]> = Vec::new();
    for i in fields.clone() {
        let field = args.get(i);
        if expire_field(e, ctx, id, field) {
            expired += 1;
            r.null();
            continue;
        }
        change_hash(e, ctx.db, id, |h| {
            let Some(value) = h.get(field, ctx.now_ms) else {
                r.null();
                return;
            };
            r.bulk(value);
            match option {
                GetExOption::None => {}
                GetExOption::Persist => updated += usize::from(h.persist_field(field)),
                GetExOption::At(at, _) if already_expired(at, ctx) => {
                    h.remove(field);
                    deleted.push(field);
                }
                GetExOption::At(at, _) => {
                    h.set_field_expire(field, at);
                    updated += 1;
                }
            }
        })?;
    }
    after_lazy_expiry(e, ctx, key, id, expired, false);
    let changes = (deleted.len() + updated) as u64;
    if changes > 0 {
        let event = match option {
            _ if updated == 0 => events::HDEL,
            GetExOption::Persist => events::HPERSIST,
            _ => events::HEXPIRE,
        };
        ctx.changed(key, event, changes);
        for field in &deleted {
            ctx.log_as(&[b"HDEL", key, field]);
        }
        if updated > 0 {
            let mut at_text = itoa::Buffer::new();
            let mut record: Vec<&[u8]> = match option {
                GetExOption::At(at, _) => vec![b"HPEXPIREAT", key, at_text.format(at).as_bytes()],
                _ => vec![b"HPERSIST", key],
            };
            record.extend(args.tail(fields_at));
            ctx.log_as(&record);
        }
    }
    delete_if_empty(e, ctx, key, id);
    Ok(Done)
}

/// An EX/PX/EXAT/PXAT token: (in seconds, relative, is PXAT).
fn time_option(arg: &[u8]) -> Option<(bool, bool, bool)> {
    if eq_ci(arg, "EX") {
        Some((true, true, false))
    } else if eq_ci(arg, "PX") {
        Some((false, true, false))
    } else if eq_ci(arg, "EXAT") {
        Some((true, false, false))
    } else if eq_ci(arg, "PXAT") {
        Some((false, false, true))
    } else {
        None
    }
}

/// HSETEX's parsed options.
struct SetExArgs {
    /// FNX (`Some(false)`: no field may exist) or FXX (`Some(true)`: all must).
    must_exist: Option<bool>,
    /// The expiry time (absolute ms), where its value argument is, and whether it
    /// was given as PXAT.
    at: Option<(u64, usize, bool)>,
    keep_ttl: bool,
    /// Index of the first field.
    first_field: usize,
}

/// `hsetexParseArgs`.
fn parse_hsetex(args: Args<'_>, ctx: &ExecCtx) -> Result<SetExArgs, CmdError> {
    let mut o = SetExArgs {
        must_exist: None,
        at: None,
        keep_ttl: false,
        first_field: 0,
    };
    let mut i = 2;
    while i < args.len() {
        let arg = args.get(i);
        if eq_ci(arg, "FIELDS") {
            if i + 3 >= args.len() {
                return Err(CmdError::WrongArity("hsetex"));
            }
            let n = crate::args::parse_i64(args.get(i + 1))
                .filter(|&n| (1..=i64::from(i32::MAX)).contains(&n))
                .ok_or(CmdError::InvalidNumberOfFields)?;
            let remaining = args.len() - i - 2;
            if !remaining.is_multiple_of(2) || n as usize != remaining / 2 {
                return Err(CmdError::WrongArity("hsetex"));
            }
            o.first_field = i + 2;
            return Ok(o);
        } else if let Some((seconds, relative, pxat)) = time_option(arg) {
            if o.at.is_some() || o.keep_ttl {
                return Err(CmdError::OneExpiration);
            }
            if i + 1 >= args.len() {
                return Err(CmdError::MissingExpireTime);
            }
            i += 1;
            let base = if relative { ctx.now_ms } else { 0 };
            let at = parse_expire_time(args.get(i), seconds, base, "hsetex")?;
            o.at = Some((at, i, pxat));
        } else if eq_ci(arg, "KEEPTTL") {
            if o.at.is_some() || o.keep_ttl {
                return Err(CmdError::OneExpiration);
            }
            o.keep_ttl = true;
        } else if eq_ci(arg, "FXX") || eq_ci(arg, "FNX") {
            if o.must_exist.is_some() {
                return Err(CmdError::FnxAndFxx);
            }
            o.must_exist = Some(eq_ci(arg, "FXX"));
        } else {
            let arg = arg.split(|&b| b == 0).next().unwrap_or_default();
            return Err(CmdError::quoted("ERR unknown argument: ", arg, ""));
        }
        i += 1;
    }
    // Unreachable with the command's arity (Redis asserts); answer as a bad count.
    Err(CmdError::WrongArity("hsetex"))
}

/// `HSETEX key [FNX|FXX] [EX seconds|PX ms|EXAT unix-seconds|PXAT unix-ms|KEEPTTL]
/// FIELDS numfields field value [field value ...]`: 1 when the fields were set, 0
/// when FNX/FXX said no. Without an expiry option a set field loses its expiry (as
/// HSET); with KEEPTTL it keeps it.
pub(super) fn hsetex(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let o = parse_hsetex(args, ctx)?;
    let key = args.get(1);
    let id = match write_hash(e, ctx, key)? {
        Some(id) => id,
        None if o.must_exist == Some(true) => {
            r.int(0);
            return Ok(Done);
        }
        None => e.add_collection(ctx, key, Collection::Hash(HashValue::new())),
    };
    let pairs = args.tail(o.first_field);
    let mut expired = 0;
    if let Some(must_exist) = o.must_exist {
        let mut found = 0;
        for i in (0..pairs.len()).step_by(2) {
            let field = pairs.get(i);
            if expire_field(e, ctx, id, field) {
                expired += 1;
            }
            let exists = hash_at(e, ctx.db, id)?.contains(field, ctx.now_ms);
            found += usize::from(exists);
            if exists != must_exist {
                break;
            }
        }
        let all = found == pairs.len() / 2;
        if (must_exist && !all) || (!must_exist && found > 0) {
            r.int(0);
            finish_hsetex(e, ctx, key, id, expired);
            return Ok(Done);
        }
    }
    let limits = limits(e);
    let mut deleted: Vec<&[u8]> = Vec::new();
    let mut updated = 0;
    change_hash(e, ctx.db, id, |h| {
        h.convert_for_args(pairs.iter(), limits);
        if o.at.is_some() {
            h.enable_field_expiry();
        }
        for i in (0..pairs.len()).step_by(2) {
            let (field, value) = (pairs.get(i), pairs.get(i + 1));
            if o.at.is_some() || o.keep_ttl {
                h.set_keep_ttl(field, value, limits);
            } else {
                h.set(field, value, limits);
            }
            match o.at {
                Some((at, _, _)) if already_expired(at, ctx) => {
                    h.remove(field);
                    deleted.push(field);
                }
                Some((at, _, _)) => {
                    h.set_field_expire(field, at);
                    updated += 1;
                }
                None => {}
            }
        }
    })?;
    r.int(1);
    ctx.changed(key, events::HSET, (pairs.len() / 2) as u64);
    if !deleted.is_empty() {
        ctx.changed(key, events::HDEL, 0);
        for field in &deleted {
            ctx.log_as(&[b"HDEL", key, field]);
        }
    } else if updated > 0 {
        ctx.changed(key, events::HEXPIRE, 0);
        if let Some((at, at_index, false)) = o.at {
            let mut at_text = itoa::Buffer::new();
            let at_ms = at_text.format(at).as_bytes();
            let record: Vec<&[u8]> = args
                .iter()
                .enumerate()
                .map(|(j, a)| match j {
                    _ if j + 1 == at_index => b"PXAT",
                    _ if j == at_index => at_ms,
                    _ => a,
                })
                .collect();
            ctx.log_as(&record);
        }
    }
    finish_hsetex(e, ctx, key, id, expired);
    Ok(Done)
}

/// The end of HSETEX: the lazy expiry event, and the key deleted when empty (lazy
/// expiry or a past time may have emptied it).
fn finish_hsetex(e: &mut Engine, ctx: &mut ExecCtx, key: &[u8], id: EntryId, expired: usize) {
    after_lazy_expiry(e, ctx, key, id, expired, false);
    delete_if_empty(e, ctx, key, id);
}
