//! DUMP and RESTORE (Redis's cluster.c): a key's value as Redis's serialized
//! payload and back, in the RDB object format of [`crate::rdb`], so values move
//! between Ruvio and Redis in both directions.

use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, int_arg};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::rdb;
use crate::Engine;

/// `DUMP key`: the payload, or nil when the key is missing.
pub(super) fn dump(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    match engine.lookup_read(ctx, args.get(1)) {
        Some(id) => reply.bulk(&rdb::dump_payload(engine.db(ctx.db).entry(id).value())),
        None => reply.null(),
    }
    Ok(Done)
}

/// RESTORE's options after the payload.
#[derive(Default)]
struct RestoreOptions {
    replace: bool,
    absttl: bool,
    idle_seconds: Option<i64>,
    freq: Option<i64>,
}

/// Redis's option loop: IDLETIME and FREQ exclude each other (the second one is
/// a syntax error), and their values are checked as they are met.
fn parse_options(args: Args<'_>) -> Result<RestoreOptions, CmdError> {
    let mut o = RestoreOptions::default();
    let mut j = 4;
    while j < args.len() {
        let more = j + 1 < args.len();
        let arg = args.get(j);
        if eq_ci(arg, "REPLACE") {
            o.replace = true;
        } else if eq_ci(arg, "ABSTTL") {
            o.absttl = true;
        } else if eq_ci(arg, "IDLETIME") && more && o.freq.is_none() {
            let idle = int_arg(args.get(j + 1))?;
            if idle < 0 {
                return Err(CmdError::InvalidIdletime);
            }
            o.idle_seconds = Some(idle);
            j += 1;
        } else if eq_ci(arg, "FREQ") && more && o.idle_seconds.is_none() {
            let freq = int_arg(args.get(j + 1))?;
            if !(0..=255).contains(&freq) {
                return Err(CmdError::InvalidFreq);
            }
            o.freq = Some(freq);
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    Ok(o)
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`
pub(super) fn restore(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let options = parse_options(args)?;
    let key = args.get(1);
    let existing = engine.lookup_write(ctx, key);
    if existing.is_some() && !options.replace {
        return Err(CmdError::BusyKey);
    }
    let ttl = int_arg(args.get(2))?;
    if ttl < 0 {
        return Err(CmdError::InvalidTtlValue);
    }
    let check_crc = !engine.config().skip_checksum_validation;
    let object =
        rdb::verify_payload_with(args.get(3), check_crc).ok_or(CmdError::DumpPayloadInvalid)?;
    let loaded = rdb::load_payload(object).map_err(|_| CmdError::BadDataFormat)?;
    let clock = rdb::build::access_clock(
        engine.config().maxmemory_policy,
        ctx.now_ms,
        options.idle_seconds,
        options.freq,
    );
    let entry = rdb::build::entry(engine.config(), key, loaded, clock)
        .map_err(|_| CmdError::BadDataFormat)?;
    if let Some(id) = existing {
        engine.delete(ctx.db, id);
    }
    let expire_at = match (ttl, options.absttl) {
        (0, _) => None,
        (t, true) => Some(t),
        (t, false) => Some(t.saturating_add(ctx.now_ms as i64)),
    };
    if expire_at.is_some_and(|at| at <= ctx.now_ms as i64) {
        drop(entry);
        if existing.is_some() {
            ctx.changed(key, super::events::DEL, 1);
            ctx.log_as(&[b"DEL", key]);
        }
        reply.ok();
        return Ok(Done);
    }
    let db = engine.db_mut(ctx.db);
    let id = db.insert(entry);
    if let Some(at) = expire_at {
        db.set_expire(id, Some(at as u64));
        if !options.absttl {
            log_absolute(ctx, args, at);
        }
    }
    ctx.changed(key, super::events::RESTORE, 1);
    reply.ok();
    Ok(Done)
}

/// A relative TTL is logged as the absolute time (Redis propagates `RESTORE key
/// when payload ABSTTL ...`), the other options kept.
fn log_absolute(ctx: &mut ExecCtx, args: Args<'_>, at: i64) {
    let when = itoa::Buffer::new().format(at).to_owned();
    let mut argv: Vec<&[u8]> = vec![args.get(0), args.get(1), when.as_bytes(), args.get(3)];
    argv.extend(args.iter().skip(4));
    argv.push(b"ABSTTL");
    ctx.log_as(&argv);
}
