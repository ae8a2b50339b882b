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

/// Whether a digest argument of IFDEQ/IFDNE names `digest`. Redis 8.4 checks
/// only the length (`-ERR must be exactly 16 hexadecimal characters` otherwise)
/// and compares the text with its own digest's, ignoring case: 16 characters
/// that are not all hex digits are no error, they just never match.
fn digest_matches(arg: &[u8], digest: u64) -> Result<bool, CmdError> {
    if arg.len() != DIGEST_HEX_DIGITS {
        return Err(CmdError::DigestFormat);
    }
    Ok(digest_hex(digest).eq_ignore_ascii_case(arg))
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

    /// Whether `value` meets it; a digest operand that is not 16 characters long
    /// is an error (read only once a value is there to compare).
    pub(crate) fn holds_for(self, value: &[u8]) -> Result<bool, CmdError> {
        Ok(match self {
            Condition::ValueEquals(expected) => value == expected,
            Condition::ValueDiffers(expected) => value != expected,
            Condition::DigestEquals(digest) => digest_matches(digest, value_digest(value))?,
            Condition::DigestDiffers(digest) => !digest_matches(digest, value_digest(value))?,
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
///
/// Redis 8.4's order of checks: the arity (2 or 4 arguments), then a missing key
/// is 0 whatever follows, then a key that is not a string is refused whatever
/// the condition says, then the condition's name, then a digest's length.
pub(crate) fn delex(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let conditional = match args.len() {
        2 => false,
        4 => true,
        _ => return Err(CmdError::WrongArity("delex")),
    };
    let key = args.get(1);
    let Some(id) = engine.lookup_write(ctx, key) else {
        reply.int(0);
        return Ok(Done);
    };
    if conditional {
        let value = engine
            .db(ctx.db)
            .entry(id)
            .value()
            .as_str()
            .ok_or(CmdError::DelexNotString)?;
        let condition = parse_condition(args.get(2), args.get(3))?;
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
    fn digest_arguments_are_sixteen_characters_compared_ignoring_case() {
        let digest = 0xb6ac_b9d8_4a38_ff74;
        assert_eq!(digest_matches(b"B6ACB9D84A38FF74", digest), Ok(true));
        assert_eq!(digest_matches(b"b6acb9d84a38ff74", digest), Ok(true));
        assert_eq!(
            digest_matches(b"00006c38adf31777", 0x6c38_adf3_1777),
            Ok(true)
        );
        // Sixteen characters that are not all hex digits: no error, no match.
        assert_eq!(digest_matches(b"zzzzzzzzzzzzzzzz", digest), Ok(false));
        assert_eq!(digest_matches(b"+6acb9d84a38ff74", digest), Ok(false));
        for bad in [&b""[..], b"6acb9d84a38ff74", b"0b6acb9d84a38ff74"] {
            assert_eq!(digest_matches(bad, digest), Err(CmdError::DigestFormat));
        }
    }
}
