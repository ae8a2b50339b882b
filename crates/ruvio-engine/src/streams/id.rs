//! Redis's rules for reading stream entry IDs from arguments
//! (`streamGenericParseIDOrReply`); the ID itself is [`StreamId`], a value type.

use super::errors;
use crate::error::CmdError;
pub(crate) use crate::values::stream::id::StreamId;

/// Redis's `string2ull`: a plain unsigned decimal, no sign, no spaces.
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// What an ID argument said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParsedId {
    /// The ID, with `missing_seq` where the argument gave no sequence.
    pub id: StreamId,
    /// False for `ms` alone and for `ms-*`.
    pub seq_given: bool,
}

/// Longest ID argument Redis reads (`buf[128]`).
const ID_ARG_MAX: usize = 127;

/// `streamGenericParseIDOrReply`: `ms-seq`, `ms` (sequence `missing_seq`), and
/// unless `strict` `-` and `+`; with `seq_star` also `ms-*` (XADD).
pub(crate) fn parse_id(
    arg: &[u8],
    missing_seq: u64,
    strict: bool,
    seq_star: bool,
) -> Result<ParsedId, CmdError> {
    let invalid = CmdError::Stream(errors::INVALID_ID);
    if arg.len() > ID_ARG_MAX {
        return Err(invalid);
    }
    if !strict && arg == b"-" {
        return Ok(ParsedId {
            id: StreamId::MIN,
            seq_given: true,
        });
    }
    if !strict && arg == b"+" {
        return Ok(ParsedId {
            id: StreamId::MAX,
            seq_given: true,
        });
    }
    let Some(dash) = arg.iter().position(|&b| b == b'-') else {
        let ms = parse_u64(arg).ok_or(invalid)?;
        return Ok(ParsedId {
            id: StreamId::new(ms, missing_seq),
            seq_given: true,
        });
    };
    let ms = parse_u64(&arg[..dash]).ok_or(invalid.clone())?;
    let seq_part = &arg[dash + 1..];
    if seq_star && seq_part == b"*" {
        return Ok(ParsedId {
            id: StreamId::new(ms, 0),
            seq_given: false,
        });
    }
    let seq = parse_u64(seq_part).ok_or(invalid)?;
    Ok(ParsedId {
        id: StreamId::new(ms, seq),
        seq_given: true,
    })
}

/// A strict ID (no `-`/`+`), missing sequence 0 (`streamParseStrictIDOrReply`).
pub(crate) fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    parse_id(arg, 0, true, false).map(|p| p.id)
}

/// One end of an XRANGE interval (`streamParseIntervalIDOrReply`): `(id` is
/// exclusive (not with `-`/`+`). Returns the inclusive bound, or `None` when the
/// exclusive bound has no neighbour.
pub(crate) fn interval_id(arg: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if arg.len() > 1 && arg[0] == b'(' {
        let id = parse_id(&arg[1..], missing_seq, true, false)?.id;
        return Ok((id, true));
    }
    Ok((parse_id(arg, missing_seq, false, false)?.id, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_as_redis_reads_them() {
        let p = |s: &str| parse_id(s.as_bytes(), 7, false, true);
        assert_eq!(p("5").unwrap().id, StreamId::new(5, 7));
        assert_eq!(p("5-3").unwrap().id, StreamId::new(5, 3));
        assert!(!p("5-*").unwrap().seq_given);
        assert_eq!(p("-").unwrap().id, StreamId::MIN);
        assert_eq!(p("+").unwrap().id, StreamId::MAX);
        for bad in [
            "",
            "a",
            "-1",
            "5-",
            "5-x",
            "+5",
            "1-2-3",
            "18446744073709551616",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
        assert!(strict_id(b"-").is_err());
        assert_eq!(
            interval_id(b"(5-1", 0).unwrap(),
            (StreamId::new(5, 1), true)
        );
        assert!(interval_id(b"(-", 0).is_err());
        assert_eq!(StreamId::new(1, u64::MAX).next(), Some(StreamId::new(2, 0)));
        assert_eq!(StreamId::MAX.next(), None);
        assert_eq!(StreamId::new(2, 0).prev(), Some(StreamId::new(1, u64::MAX)));
        assert_eq!(StreamId::MIN.prev(), None);
        assert_eq!(StreamId::new(12, 3).format(), b"12-3");
    }
}
