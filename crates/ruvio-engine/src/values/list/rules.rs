//! Redis 7.2's size rules for lists, as plain functions.
//!
//! Why this exists: OBJECT ENCODING must flip between `listpack` and `quicklist` at
//! the very command where Redis 7.2 flips it, and Redis decides with *its own*
//! listpack byte sizes (`lpBytes`), not with anything a different layout would
//! measure. So Ruvio keeps, next to its own compact blocks, a running count of the
//! bytes Redis's listpack would use, computed with the functions below, and feeds it
//! to the same limit checks Redis uses (`quicklistNodeLimit`,
//! `quicklistNodeExceedsLimit`, `_quicklistNodeAllowInsert`,
//! `_quicklistNodeAllowMerge` and `listTypeTryConvertQuicklist`).
//!
//! `fill` is the `list-max-listpack-size` setting: `>= 0` limits a node by element
//! count (0 counts as 1, and [`SIZE_SAFETY_LIMIT_BYTES`] still caps its bytes),
//! `-1..=-5` by bytes ([`OPTIMIZATION_LEVEL_BYTES`]), lower values act as -5.

/// The settings a list change reads: `list-max-listpack-size` (`fill`, see the
/// module doc) and `list-compress-depth` (plain nodes kept at each end of a
/// quicklist, the inner ones compressed; 0 compresses nothing). A quicklist keeps
/// both from its creation, as Redis's `quicklist->fill` and `->compress`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListShape {
    pub fill: i32,
    pub compress_depth: u16,
}

impl ListShape {
    /// Redis's defaults: `-2` (8 KiB nodes), no compression.
    pub const DEFAULT: ListShape = ListShape::with_fill(-2);

    /// `fill` without compression.
    pub const fn with_fill(fill: i32) -> ListShape {
        ListShape {
            fill,
            compress_depth: 0,
        }
    }
}

/// Bytes of an empty Redis listpack: the 6-byte header (total bytes `u32`, element
/// count `u16`) and the 1-byte end marker (`LP_HDR_SIZE + 1`).
pub const LP_EMPTY_BYTES: usize = 7;

/// Node size limits for `fill` -1..=-5 (`optimization_level`).
pub const OPTIMIZATION_LEVEL_BYTES: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// Byte cap of a multi-element node when `fill` limits by count (`SIZE_SAFETY_LIMIT`).
pub const SIZE_SAFETY_LIMIT_BYTES: usize = 8192;

/// What `_quicklistNodeAllowInsert` adds to a node's size on top of the new
/// element's raw length, to over-estimate its encoding (`SIZE_ESTIMATE_OVERHEAD`).
pub const SIZE_ESTIMATE_OVERHEAD_BYTES: usize = 8;

/// Largest fill a quicklist stores (`FILL_MAX` in `quicklistSetFill`: the field
/// has 16 bits, one of them the sign).
pub const QUICKLIST_FILL_MAX: i32 = (1 << 15) - 1;

/// Smallest fill a quicklist stores (`quicklistSetFill` clamps lower values).
pub const QUICKLIST_FILL_MIN: i32 = -5;

/// Longest text `lpStringToInt64` may read as an integer (`LONG_STR_SIZE - 1`).
const INT_TEXT_BYTES_MAX: usize = 20;

/// Backlen thresholds of `lpEncodeBacklen` (note the asymmetry: `<= 127`, then
/// strict `<` against one less than the next power of 128).
const BACKLEN_1_MAX: usize = 127;
const BACKLEN_2_BELOW: usize = 16383;
const BACKLEN_3_BELOW: usize = 2_097_151;
const BACKLEN_4_BELOW: usize = 268_435_455;

/// A node limit: by bytes (negative fill) or by element count (fill >= 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeLimit {
    /// At most this many Redis listpack bytes.
    Bytes(usize),
    /// At most this many elements (and [`SIZE_SAFETY_LIMIT_BYTES`] bytes).
    Count(u32),
}

/// Redis's `quicklistNodeLimit(fill)`.
pub fn node_limit(fill: i32) -> NodeLimit {
    if fill >= 0 {
        // "Ensure that one node have at least one entry."
        NodeLimit::Count(fill.max(1) as u32)
    } else {
        let level = (fill.unsigned_abs() as usize - 1).min(OPTIMIZATION_LEVEL_BYTES.len() - 1);
        NodeLimit::Bytes(OPTIMIZATION_LEVEL_BYTES[level])
    }
}

/// Redis's `quicklistNodeExceedsLimit(fill, new_sz, new_count)`: would a node (or a
/// listpack-encoded list) of `new_bytes` Redis bytes and `new_count` elements be over
/// the limit?
pub fn exceeds_limit(fill: i32, new_bytes: usize, new_count: usize) -> bool {
    match node_limit(fill) {
        NodeLimit::Bytes(limit) => new_bytes > limit,
        NodeLimit::Count(limit) => {
            new_bytes > SIZE_SAFETY_LIMIT_BYTES || new_count as u64 > u64::from(limit)
        }
    }
}

/// Redis's `listTypeTryConvertQuicklist` with `shrinking = 1`: may a quicklist whose
/// only node is packed, holds `node_bytes` Redis bytes and `count` elements become a
/// listpack again? Only below half the limits, so a list hovering at the limit does
/// not flip back and forth.
pub fn may_shrink_to_listpack(fill: i32, node_bytes: usize, count: usize) -> bool {
    let (bytes_max, count_max) = match node_limit(fill) {
        NodeLimit::Bytes(limit) => (limit / 2, u32::MAX / 2),
        NodeLimit::Count(limit) => (usize::MAX / 2, limit / 2),
    };
    node_bytes <= bytes_max && count as u64 <= u64::from(count_max)
}

/// Redis's `quicklistSetFill`: the fill a new quicklist keeps for its node decisions
/// (later CONFIG SETs do not change an existing quicklist's fill).
pub fn quicklist_fill(fill: i32) -> i16 {
    fill.clamp(QUICKLIST_FILL_MIN, QUICKLIST_FILL_MAX) as i16
}

/// Redis's `_quicklistNodeAllowInsert` for a packed node: may an element of
/// `elem_len` raw bytes join a node of `node_bytes` Redis bytes and `node_count`
/// elements? (Elements below 1 GiB are never "large" in Redis 7.2, and Ruvio stores
/// at most 512 MiB, so the plain-node branch never applies.)
pub fn node_allows_insert(
    fill: i32,
    node_bytes: usize,
    node_count: usize,
    elem_len: usize,
) -> bool {
    !exceeds_limit(
        fill,
        node_bytes + elem_len + SIZE_ESTIMATE_OVERHEAD_BYTES,
        node_count + 1,
    )
}

/// Redis's `_quicklistNodeAllowMerge`: may two packed nodes merge? Their merged size
/// is estimated as the sum minus one listpack header and end byte.
pub fn nodes_allow_merge(fill: i32, a: (usize, usize), b: (usize, usize)) -> bool {
    let (a_bytes, a_count) = a;
    let (b_bytes, b_count) = b;
    // Redis computes this in `unsigned int`; nodes are far below 4 GiB here.
    let merged = (a_bytes + b_bytes).saturating_sub(LP_EMPTY_BYTES);
    !exceeds_limit(fill, merged, a_count + b_count)
}

/// `lpStringToInt64`: the value when Redis's listpack stores `elem` as an integer
/// (canonical decimal: optional `-`, no leading zeros, no `-0`, at most 20
/// characters, fits an `i64`).
pub fn listpack_int(elem: &[u8]) -> Option<i64> {
    // Cheap rejection first: most list elements are not numbers.
    match elem.first() {
        Some(b'-' | b'0'..=b'9') if elem.len() <= INT_TEXT_BYTES_MAX => ruvio_resp::string2ll(elem),
        _ => None,
    }
}

/// Bytes of the integer encoding Redis picks for `v` (`lpEncodeIntegerGetType`):
/// 7-bit unsigned, 13-, 16-, 24-, 32- or 64-bit signed, each with its tag.
pub fn int_encoding_bytes(v: i64) -> usize {
    match v {
        0..=127 => 1,
        -4096..=4095 => 2,
        -32768..=32767 => 3,
        -8_388_608..=8_388_607 => 4,
        -2_147_483_648..=2_147_483_647 => 5,
        _ => 9,
    }
}

/// Bytes of the string encoding header plus the data for `len` bytes
/// (`lpEncodeGetType`: 6-bit, 12-bit or 32-bit length).
pub fn str_encoding_bytes(len: usize) -> usize {
    if len < 64 {
        1 + len
    } else if len < 4096 {
        2 + len
    } else {
        5 + len
    }
}

/// Bytes of the backlen that follows an entry whose encoding and data take
/// `encoded` bytes (`lpEncodeBacklen`).
pub fn backlen_bytes(encoded: usize) -> usize {
    if encoded <= BACKLEN_1_MAX {
        1
    } else if encoded < BACKLEN_2_BELOW {
        2
    } else if encoded < BACKLEN_3_BELOW {
        3
    } else if encoded < BACKLEN_4_BELOW {
        4
    } else {
        5
    }
}

/// Bytes one element adds to a Redis listpack: encoding, data and backlen.
pub fn entry_bytes(elem: &[u8]) -> usize {
    let encoded = match listpack_int(elem) {
        Some(v) => int_encoding_bytes(v),
        None => str_encoding_bytes(elem.len()),
    };
    encoded + backlen_bytes(encoded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_sizes_follow_listpack_c() {
        assert_eq!(entry_bytes(b"aaaaaaaaaaaaaaaa"), 1 + 16 + 1);
        assert_eq!(entry_bytes(b"100"), 1 + 1);
        assert_eq!(entry_bytes(b"1000"), 2 + 1);
        assert_eq!(entry_bytes(b"127"), 2);
        assert_eq!(entry_bytes(b"128"), 3);
        assert_eq!(entry_bytes(b"-4096"), 3);
        assert_eq!(entry_bytes(b"-4097"), 4);
        assert_eq!(entry_bytes(b"32767"), 4);
        assert_eq!(entry_bytes(b"32768"), 5);
        assert_eq!(entry_bytes(b"8388607"), 5);
        assert_eq!(entry_bytes(b"8388608"), 6);
        assert_eq!(entry_bytes(b"2147483647"), 6);
        assert_eq!(entry_bytes(b"2147483648"), 10);
        assert_eq!(entry_bytes(b"-9223372036854775808"), 10);
        // Not canonical integers: strings.
        assert_eq!(entry_bytes(b"9223372036854775808"), 1 + 19 + 1);
        assert_eq!(entry_bytes(b"007"), 1 + 3 + 1);
        assert_eq!(entry_bytes(b"-0"), 1 + 2 + 1);
        assert_eq!(entry_bytes(b"+1"), 1 + 2 + 1);
        assert_eq!(entry_bytes(b" 1"), 1 + 2 + 1);
        assert_eq!(entry_bytes(b""), 1 + 1);
        assert_eq!(entry_bytes(b"-"), 1 + 1 + 1);
        // String header and backlen steps.
        assert_eq!(entry_bytes(&[b'x'; 63]), 1 + 63 + 1);
        assert_eq!(entry_bytes(&[b'x'; 64]), 2 + 64 + 1);
        assert_eq!(entry_bytes(&[b'x'; 125]), 2 + 125 + 1);
        assert_eq!(entry_bytes(&[b'x'; 126]), 2 + 126 + 2);
        assert_eq!(entry_bytes(&[b'x'; 4095]), 2 + 4095 + 2);
        assert_eq!(entry_bytes(&[b'x'; 4096]), 5 + 4096 + 2);
        assert_eq!(backlen_bytes(16382), 2);
        assert_eq!(backlen_bytes(16383), 3);
        assert_eq!(backlen_bytes(2_097_150), 3);
        assert_eq!(backlen_bytes(2_097_151), 4);
        assert_eq!(backlen_bytes(268_435_454), 4);
        assert_eq!(backlen_bytes(268_435_455), 5);
        // An empty listpack, then one 16-byte element.
        assert_eq!(LP_EMPTY_BYTES + entry_bytes(b"aaaaaaaaaaaaaaaa"), 25);
    }

    #[test]
    fn limits_follow_quicklist_c() {
        assert_eq!(node_limit(-1), NodeLimit::Bytes(4096));
        assert_eq!(node_limit(-2), NodeLimit::Bytes(8192));
        assert_eq!(node_limit(-5), NodeLimit::Bytes(65536));
        assert_eq!(node_limit(-100), NodeLimit::Bytes(65536));
        assert_eq!(node_limit(i32::MIN), NodeLimit::Bytes(65536));
        assert_eq!(node_limit(0), NodeLimit::Count(1));
        assert_eq!(node_limit(1), NodeLimit::Count(1));
        assert_eq!(node_limit(128), NodeLimit::Count(128));

        assert!(!exceeds_limit(-2, 8192, 100_000));
        assert!(exceeds_limit(-2, 8193, 1));
        assert!(!exceeds_limit(5, 8192, 5));
        assert!(exceeds_limit(5, 8193, 1));
        assert!(exceeds_limit(5, 100, 6));
        assert!(exceeds_limit(0, 10, 2));

        // Shrinking: half the limits, and a count-limited fill of 0 or 1 never shrinks.
        assert!(may_shrink_to_listpack(-2, 4096, 1_000_000));
        assert!(!may_shrink_to_listpack(-2, 4097, 1));
        assert!(may_shrink_to_listpack(10, 1 << 40, 5));
        assert!(!may_shrink_to_listpack(10, 10, 6));
        assert!(!may_shrink_to_listpack(1, 10, 1));
        assert!(!may_shrink_to_listpack(0, 10, 1));

        assert_eq!(quicklist_fill(-9), -5);
        assert_eq!(quicklist_fill(100_000), 32767);
        assert_eq!(quicklist_fill(-2), -2);

        // A node of 8000 bytes takes no 200-byte element at fill -2 (8000+200+8 > 8192).
        assert!(!node_allows_insert(-2, 8000, 10, 200));
        assert!(node_allows_insert(-2, 8000, 10, 184));
        assert!(nodes_allow_merge(-2, (4000, 1), (4199, 1)));
        assert!(!nodes_allow_merge(-2, (4000, 1), (4200, 1)));
    }
}
