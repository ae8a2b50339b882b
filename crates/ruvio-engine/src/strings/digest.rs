//! Redis 8.4's compare-and-delete: DIGEST names a string value by its XXH3 64-bit
//! hash (16 lower-case hex digits), and DELEX deletes a key only when its value, or
//! that hash, is (or is not) what the client saw. The hash comes from the
//! `xxhash-rust` crate rather than a hand-written XXH3: the digest must equal
//! Redis's bit for bit, and a maintained implementation checked against the
//! reference vectors is the safer source of those bits.

use ruvio_resp::{Args, Reply};

use super::string_of;
use crate::args::eq_ci;
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::Engine;

/// Hex digits in a digest: 64 bits, zero-padded (`00006c38adf31777`).
const DIGEST_HEX_DIGITS: usize = 16;

/// The digest of a string value: XXH3-64 with the default seed, as Redis's
/// `DIGEST` computes it over the value's bytes (an integer's decimal text).
pub(crate) fn value_digest(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The digest as DIGEST replies it: 16 lower-case hex digits.
fn digest_hex(digest: u64) -> [u8; DIGEST_HEX_DIGITS] {
    let mut out = [0u8; DIGEST_HEX_DIGITS];
    let text = format!("{digest:016x}");
    out.copy_from_slice(text.as_bytes());
    out
}

/// A digest argument of IFDEQ/IFDNE: exactly 16 hex digits, either case.
fn parse_digest(arg: &[u8]) -> Result<u64, CmdError> {
    if arg.len() != DIGEST_HEX_DIGITS || !arg.iter().all(u8::is_ascii_hexdigit) {
        return Err(CmdError::DigestFormat);
    }
    let text = std::str::from_utf8(arg).map_err(|_| CmdError::DigestFormat)?;
    u64::from_str_radix(text, 16).map_err(|_| CmdError::DigestFormat)
}

/// `DIGEST key`: the XXH3 digest of the string at `key` as 16 hex digits, nil when
/// the key is missing, WRONGTYPE for other types.
pub(crate) fn digest(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let Some(id) = engine.lookup_read(ctx, args.get(1)) else {
        reply.null();
        return Ok(Done);
    };
    let mut buf = itoa::Buffer::new();
    let value = string_of(engine.db(ctx.db).entry(id))?;
    reply.bulk(&digest_hex(value_digest(value.bytes(&mut buf))));
    Ok(Done)
}

/// A condition on a string's current value: DELEX's, and SET's (Redis 8.4).
#[derive(Clone, Copy)]
pub(crate) enum Condition<'a> {
    /// IFEQ: the value equals these bytes.
    ValueEquals(&'a [u8]),
    /// IFNE: the value differs from these bytes.
    ValueDiffers(&'a [u8]),
    /// IFDEQ: the value's digest equals this text (checked once the key is found).
    DigestEquals(&'a [u8]),
    /// IFDNE: the value's digest differs from this text.
    DigestDiffers(&'a [u8]),
}

impl Condition<'_> {
    /// Whether a missing key meets it: only the "differs" forms (SET IFNE/IFDNE
    /// create the key).
    pub(crate) fn holds_for_missing(self) -> bool {
        matches!(
            self,
            Condition::ValueDiffers(_) | Condition::DigestDiffers(_)
        )
    }

    /// Whether `value` meets it; a digest operand that is not 16 hex digits is an
    /// error (read only once a value is there to compare).
    pub(crate) fn holds_for(self, value: &[u8]) -> Result<bool, CmdError> {
        Ok(match self {
            Condition::ValueEquals(expected) => value == expected,
            Condition::ValueDiffers(expected) => value != expected,
            Condition::DigestEquals(digest) => value_digest(value) == parse_digest(digest)?,
            Condition::DigestDiffers(digest) => value_digest(value) != parse_digest(digest)?,
        })
    }
}

/// IFEQ / IFNE / IFDEQ / IFDNE with its operand, or DELEX's invalid-condition error.
pub(crate) fn parse_condition<'a>(
    name: &[u8],
    operand: &'a [u8],
) -> Result<Condition<'a>, CmdError> {
    if eq_ci(name, "IFEQ") {
        Ok(Condition::ValueEquals(operand))
    } else if eq_ci(name, "IFNE") {
        Ok(Condition::ValueDiffers(operand))
    } else if eq_ci(name, "IFDEQ") {
        Ok(Condition::DigestEquals(operand))
    } else if eq_ci(name, "IFDNE") {
        Ok(Condition::DigestDiffers(operand))
    } else {
        Err(CmdError::DelexCondition)
    }
}

/// `DELEX key [IFEQ value | IFNE value | IFDEQ digest | IFDNE digest]`: delete
/// the key (of any type) without a condition; with one, only a string whose value
/// or digest meets it. Replies 1 when deleted, 0 when not; logged as `DEL key`.
pub(crate) fn delex(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let condition = match args.len() {
        2 => None,
        4 => Some(parse_condition(args.get(2), args.get(3))?),
        _ => return Err(CmdError::WrongArity("delex")),
    };
    let key = args.get(1);
    let Some(id) = engine.lookup_write(ctx, key) else {
        reply.int(0);
        return Ok(Done);
    };
    if let Some(condition) = condition {
        let value = engine
            .db(ctx.db)
            .entry(id)
            .value()
            .as_str()
            .ok_or(CmdError::DelexNotString)?;
        let mut buf = itoa::Buffer::new();
        if !condition.holds_for(value.bytes(&mut buf))? {
            reply.int(0);
            return Ok(Done);
        }
    }
    engine.delete(ctx.db, id);
    ctx.changed(key, crate::keys::events::DEL, 1);
    ctx.log_as(&[b"DEL", key]);
    reply.int(1);
    Ok(Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XXH3-64 reference outputs (seed 0) and the values Redis's documentation and
    /// test suite show for DIGEST.
    #[test]
    fn digest_matches_xxh3_reference_and_redis_examples() {
        assert_eq!(value_digest(b""), 0x2d06_8005_38d3_94c2);
        assert_eq!(
            &digest_hex(value_digest(b"Hello world")),
            b"b6acb9d84a38ff74"
        );
        let leading_zeros = b"v8lf0c11xh8ymlqztfd3eeq16kfn4sspw7fqmnuuq3k3t75em5wdizgcdw7uc26nnf961u2jkfzkjytls2kwlj7626sd";
        assert_eq!(
            &digest_hex(value_digest(leading_zeros)),
            b"00006c38adf31777"
        );
    }

    #[test]
    fn digest_arguments_are_sixteen_hex_digits_of_either_case() {
        assert_eq!(parse_digest(b"B6ACB9D84A38FF74"), Ok(0xb6ac_b9d8_4a38_ff74));
        assert_eq!(parse_digest(b"00006c38adf31777"), Ok(0x6c38_adf3_1777));
        for bad in [
            &b""[..],
            b"6acb9d84a38ff74",
            b"0b6acb9d84a38ff74",
            b"b6acb9d84a38ff7g",
            b"+6acb9d84a38ff74",
        ] {
            assert_eq!(parse_digest(bad), Err(CmdError::DigestFormat));
        }
    }
}
