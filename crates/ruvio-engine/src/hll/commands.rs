//! The HyperLogLog commands: thin handlers over the representations in the parent
//! module, in Redis's order of checks and with its side effects (which lookups
//! count as hits, when the value becomes `raw`, what is dirty).
//!
//! Redis's `dbUnshareStringValue` makes every HLL it writes, or whose single-key
//! count it reads, a private `raw` string; OBJECT ENCODING shows it, so the same
//! commands mark the value raw here ([`Entry::str_bytes_mut`]).

use ruvio_resp::{Args, Reply};

use super::{
    add, cached_card, count, count_registers, dense, events, hash, invalidate_cache, merge_into,
    parse, raise, sparse, store_card, Repr, DENSE_BYTES, HEADER_BYTES, REGISTERS, REGISTER_MAX,
};
use crate::args::eq_ci;
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::{Entry, EntryId, NewValue};
use crate::Engine;

/// PFSELFTEST's register round-trips (Redis's `HLL_TEST_CYCLES`).
const SELFTEST_CYCLES: usize = 1000;
/// PFSELFTEST's elements: the estimate is checked at every power of ten up to it.
const SELFTEST_ELEMENTS: u64 = 10_000_000;

/// The HLL bytes of entry `id` and their representation (Redis's
/// `isHLLObjectOrReply`: WRONGTYPE for other types and for strings that are not HLLs).
fn hll_at(e: &Engine, db: usize, id: EntryId) -> Result<(&[u8], Repr), CmdError> {
    parse(crate::strings::string_of(e.db(db).entry(id))?)
}

/// A valid HLL's bytes, for changing in place; the value becomes `raw`.
fn bytes_mut(entry: &mut Entry) -> &mut [u8] {
    // A value `hll_at` accepted is a byte string: never `None` here.
    entry.str_bytes_mut().unwrap_or_default()
}

/// Replace the value of entry `id` with `value` (raw, its TTL kept).
fn store(e: &mut Engine, db: usize, id: EntryId, value: &[u8]) {
    e.db_mut(db).modify(id, |entry| {
        entry.set_value(NewValue::Str {
            bytes: value,
            raw: true,
        })
    });
}

/// `PFADD key [element ...]`: 1 when a register changed (or the key was created),
/// else 0.
pub(super) fn pfadd(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let key = args.get(1);
    let elements = args.tail(2);
    let updated = match e.lookup_write(ctx, key) {
        None => add_to_new(e, ctx, key, elements)?,
        Some(id) => match hll_at(e, ctx.db, id)?.1 {
            Repr::Dense => add_to_dense(e, ctx.db, id, elements),
            Repr::Sparse => add_to_sparse(e, ctx.db, id, elements)?,
        },
    };
    if updated > 0 {
        ctx.changed(key, events::PFADD, updated);
    }
    r.int(i64::from(updated > 0));
    Ok(Done)
}

/// PFADD creating `key`: the changes made (the key counts as one, as in Redis).
fn add_to_new(
    e: &mut Engine,
    ctx: &ExecCtx,
    key: &[u8],
    elements: Args<'_>,
) -> Result<u64, CmdError> {
    let sparse_max = e.config().hll_sparse_max_bytes;
    // Built in the engine's scratch buffer: only the stored block is allocated,
    // so thousands of small HLLs pack tightly (memory_shapes.py).
    let mut value = std::mem::take(&mut e.scratch);
    value.clear();
    value.extend_from_slice(&sparse::empty());
    let mut updated = 1;
    let mut result = Ok(());
    for element in elements.iter() {
        // A fresh value cannot be corrupt, but the error is passed on all the same.
        match add(&mut value, element, sparse_max) {
            Ok(grew) => updated += u64::from(grew),
            Err(err) => {
                result = Err(err);
                break;
            }
        }
    }
    if result.is_ok() {
        invalidate_cache(&mut value);
        let new = NewValue::Str {
            bytes: &value,
            raw: true,
        };
        e.set_key(ctx, key, None, new, false);
    }
    e.give_back_scratch(value);
    result.map(|()| updated)
}

/// PFADD into a dense HLL: each element writes at most one register, in place.
fn add_to_dense(e: &mut Engine, db: usize, id: EntryId, elements: Args<'_>) -> u64 {
    e.db_mut(db).modify(id, |entry| {
        let value = bytes_mut(entry);
        let mut updated = 0;
        for element in elements.iter() {
            let (index, count) = hash::pattern(element);
            updated += u64::from(dense::raise(&mut value[HEADER_BYTES..], index, count));
        }
        if updated > 0 {
            invalidate_cache(value);
        }
        updated
    })
}

/// PFADD into a sparse HLL: rebuilt in a scratch copy (it may grow or turn
/// dense) and stored back at its exact size.
fn add_to_sparse(
    e: &mut Engine,
    db: usize,
    id: EntryId,
    elements: Args<'_>,
) -> Result<u64, CmdError> {
    let sparse_max = e.config().hll_sparse_max_bytes;
    let mut value = std::mem::take(&mut e.scratch);
    value.clear();
    match hll_at(e, db, id) {
        Ok((bytes, _)) => value.extend_from_slice(bytes),
        Err(err) => {
            e.give_back_scratch(value);
            return Err(err);
        }
    }
    let mut updated = 0;
    let mut failed = None;
    for element in elements.iter() {
        match add(&mut value, element, sparse_max) {
            Ok(grew) => updated += u64::from(grew),
            Err(err) => {
                failed = Some(err);
                break;
            }
        }
    }
    // Redis changes the value in place: what was added before a corrupt part
    // was found stays, without a dirty count.
    if failed.is_none() && updated > 0 {
        invalidate_cache(&mut value);
    }
    store(e, db, id, &value);
    e.give_back_scratch(value);
    match failed {
        Some(err) => Err(err),
        None => Ok(updated),
    }
}

/// `PFCOUNT key [key ...]`: the estimated cardinality of one HLL (cached in its
/// header, recomputed and stored when stale) or of the union of several.
pub(super) fn pfcount(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let card = if args.len() > 2 {
        union_count(e, ctx, args.tail(1))?
    } else {
        single_count(e, ctx, args.get(1))?
    };
    r.int(card as i64);
    Ok(Done)
}

/// PFCOUNT of one key. Storing a recomputed count changes the value (Redis
/// signals the key and counts it dirty, without a keyspace event); a replay of
/// the command stores the same bytes, so it is logged as it is.
fn single_count(e: &mut Engine, ctx: &mut ExecCtx, key: &[u8]) -> Result<u64, CmdError> {
    let Some(id) = e.lookup_read(ctx, key) else {
        return Ok(0);
    };
    let result = {
        let (bytes, repr) = hll_at(e, ctx.db, id)?;
        match cached_card(bytes) {
            Some(card) => Ok((card, false)),
            None => count(bytes, repr).map(|card| (card, true)),
        }
    };
    e.db_mut(ctx.db).modify(id, |entry| {
        let value = bytes_mut(entry);
        if let Ok((card, true)) = result {
            store_card(value, card);
        }
    });
    let (card, computed) = result?;
    if computed {
        ctx.changed_silently(key, 1);
    }
    Ok(card)
}

/// The registers of every HLL among `keys`, each the maximum over the keys
/// (Redis's `hllMerge` loop); missing keys count as empty. Also says whether any
/// of them was dense.
fn union_registers(
    e: &mut Engine,
    ctx: &ExecCtx,
    keys: Args<'_>,
) -> Result<(Box<[u8; REGISTERS]>, bool), CmdError> {
    let mut max = Box::new([0u8; REGISTERS]);
    let mut any_dense = false;
    for key in keys.iter() {
        let Some(id) = e.lookup_read(ctx, key) else {
            continue;
        };
        let (bytes, repr) = hll_at(e, ctx.db, id)?;
        any_dense |= repr == Repr::Dense;
        merge_into(bytes, repr, &mut max)?;
    }
    Ok((max, any_dense))
}

/// PFCOUNT of several keys: the cardinality of their union (nothing is stored).
fn union_count(e: &mut Engine, ctx: &ExecCtx, keys: Args<'_>) -> Result<u64, CmdError> {
    let (max, _) = union_registers(e, ctx, keys)?;
    Ok(count_registers(&max))
}

/// `PFMERGE destkey [sourcekey ...]`: the destination (itself included) becomes
/// the union of all; dense when any input was, else sparse until it outgrows it.
pub(super) fn pfmerge(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (max, any_dense) = union_registers(e, ctx, args.tail(1))?;
    let key = args.get(1);
    let sparse_max = e.config().hll_sparse_max_bytes;
    let existing = e.lookup_write(ctx, key);
    let dense_in_place = match existing {
        Some(id) => hll_at(e, ctx.db, id)?.1 == Repr::Dense,
        None => false,
    };
    match existing {
        Some(id) if dense_in_place => e.db_mut(ctx.db).modify(id, |entry| {
            let value = bytes_mut(entry);
            for (index, &count) in max.iter().enumerate().filter(|(_, &c)| c != 0) {
                dense::raise(&mut value[HEADER_BYTES..], index, count);
            }
            invalidate_cache(value);
        }),
        _ => {
            let mut value = match existing {
                Some(id) => hll_at(e, ctx.db, id)?.0.to_vec(),
                None => sparse::empty(),
            };
            if any_dense {
                value = sparse::to_dense(&value)?;
            }
            for (index, &count) in max.iter().enumerate().filter(|(_, &c)| c != 0) {
                // Redis ignores a failure here: the sources were read whole
                // already, and the destination was one of them.
                let _ = raise(&mut value, index, count, sparse_max);
            }
            invalidate_cache(&mut value);
            match existing {
                Some(id) => store(e, ctx.db, id, &value),
                None => {
                    let new = NewValue::Str {
                        bytes: &value,
                        raw: true,
                    };
                    e.set_key(ctx, key, None, new, false);
                }
            }
        }
    }
    ctx.changed(key, events::PFADD, 1);
    r.ok();
    Ok(Done)
}

/// `PFSELFTEST`: Redis's self test. First, random values written to every dense
/// register read back the same; then ten million distinct elements go into a
/// dense and a sparse HLL, which must agree, stay sparse while small, and
/// estimate within six standard errors at every power of ten.
pub(super) fn pfselftest(
    e: &mut Engine,
    _ctx: &mut ExecCtx,
    _args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    selftest_registers(e)?;
    selftest_estimates(e)?;
    r.ok();
    Ok(Done)
}

/// PFSELFTEST's failure line (`ERR TESTFAILED ...`).
fn test_failed(what: &str) -> CmdError {
    CmdError::quoted("ERR TESTFAILED ", what.as_bytes(), "")
}

fn selftest_registers(e: &mut Engine) -> Result<(), CmdError> {
    let mut registers = vec![0u8; dense::REGISTER_BYTES];
    let mut expected = vec![0u8; REGISTERS];
    for _ in 0..SELFTEST_CYCLES {
        for (index, want) in expected.iter_mut().enumerate() {
            *want = (e.next_random() as u8) & REGISTER_MAX;
            dense::set(&mut registers, index, *want);
        }
        for (index, &want) in expected.iter().enumerate() {
            let got = dense::get(&registers, index);
            if got != want {
                let text = format!("Register {index} should be {want} but is {got}");
                return Err(test_failed(&text));
            }
        }
    }
    Ok(())
}

fn selftest_estimates(e: &mut Engine) -> Result<(), CmdError> {
    let sparse_max = e.config().hll_sparse_max_bytes;
    let mut dense_value = vec![0u8; DENSE_BYTES];
    dense_value[..HEADER_BYTES].copy_from_slice(&super::new_header(super::DENSE));
    let mut sparse_value = sparse::empty();
    let relative_error = 1.04 / (REGISTERS as f64).sqrt();
    let seed = e.next_random();
    let mut checkpoint = 1u64;
    for j in 1..=SELFTEST_ELEMENTS {
        let element = (j ^ seed).to_le_bytes();
        let (index, rank) = hash::pattern(&element);
        dense::raise(&mut dense_value[HEADER_BYTES..], index, rank);
        add(&mut sparse_value, &element, sparse_max)?;
        if j != checkpoint {
            continue;
        }
        let sparse_repr = super::repr_of(&sparse_value);
        if j < (sparse_max / 2) as u64 && sparse_repr != Repr::Sparse {
            return Err(test_failed("sparse encoding not used"));
        }
        let dense_card = count(&dense_value, Repr::Dense)?;
        if dense_card != count(&sparse_value, sparse_repr)? {
            return Err(test_failed("dense/sparse disagree"));
        }
        let error = checkpoint.abs_diff(dense_card);
        let allowed = if j == 10 {
            1
        } else {
            (relative_error * 6.0 * checkpoint as f64).ceil() as u64
        };
        if error > allowed {
            return Err(test_failed(&format!(
                "Too big error. card:{checkpoint} abserr:{error}"
            )));
        }
        checkpoint *= 10;
    }
    Ok(())
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`: Redis's debugging views. GETREG
/// and TODENSE make a sparse value dense (counted dirty, no keyspace event).
pub(super) fn pfdebug(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    r: &mut Reply<'_>,
) -> CmdResult {
    let (sub, key) = (args.get(1), args.get(2));
    let Some(id) = e.lookup_write(ctx, key) else {
        return Err(CmdError::PfdebugNoKey);
    };
    let repr = hll_at(e, ctx.db, id)?.1;
    e.db_mut(ctx.db).modify(id, |entry| {
        bytes_mut(entry);
    });
    if eq_ci(sub, "getreg") {
        make_dense(e, ctx, id, key, repr)?;
        let (bytes, _) = hll_at(e, ctx.db, id)?;
        r.array(REGISTERS);
        for index in 0..REGISTERS {
            r.int(i64::from(dense::get(&bytes[HEADER_BYTES..], index)));
        }
    } else if eq_ci(sub, "decode") {
        if repr != Repr::Sparse {
            return Err(CmdError::HllNotSparse);
        }
        r.bulk(&sparse::decode(hll_at(e, ctx.db, id)?.0));
    } else if eq_ci(sub, "encoding") {
        r.simple(if repr == Repr::Dense {
            "dense"
        } else {
            "sparse"
        });
    } else if eq_ci(sub, "todense") {
        r.int(i64::from(make_dense(e, ctx, id, key, repr)?));
    } else {
        let sub = sub.split(|&b| b == 0).next().unwrap_or_default();
        return Err(CmdError::quoted(
            "ERR Unknown PFDEBUG subcommand '",
            sub,
            "'",
        ));
    }
    Ok(Done)
}

/// Make a sparse value dense in place of the key; true when it was sparse.
fn make_dense(
    e: &mut Engine,
    ctx: &mut ExecCtx,
    id: EntryId,
    key: &[u8],
    repr: Repr,
) -> Result<bool, CmdError> {
    if repr == Repr::Dense {
        return Ok(false);
    }
    let dense = sparse::to_dense(hll_at(e, ctx.db, id)?.0)?;
    store(e, ctx.db, id, &dense);
    ctx.changed_silently(key, 1);
    Ok(true)
}
