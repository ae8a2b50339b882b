//! LZF, the compression Redis applies to RDB strings longer than 20 bytes.
//!
//! Written here rather than taken as a crate: the one Rust LZF crate is marked
//! deprecated by its author, and DUMP must produce the *same* bytes as Redis, which
//! needs liblzf's exact match search as Redis builds it (`HLOG` 16, `VERY_FAST`,
//! byte-wise compares). The format (see liblzf's `lzf_c.c`, read, not copied):
//!
//! ```text
//! 000LLLLL <L+1 bytes>          literal run of L+1 bytes
//! LLLooooo oooooooo             back reference of L+2 bytes at distance o+1 (L < 7)
//! 111ooooo LLLLLLLL oooooooo    back reference of L+9 bytes
//! ```
//!
//! Redis leaves liblzf's hash table uninitialized (`INIT_HTAB 0`), so a stale slot
//! can in principle find an extra (still correct) match; this table starts empty,
//! the choice every fresh Redis process makes in practice. The table (64 Ki slots)
//! is kept per thread and invalidated by a generation stamp, so compressing a
//! 64-byte value costs no 256 KiB clear.

use std::cell::RefCell;

const HLOG: u32 = 16;
const HSIZE: usize = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// The hash table: per slot, `generation << 32 | position`.
struct Table {
    slots: Box<[u64]>,
    generation: u32,
}

thread_local! {
    static TABLE: RefCell<Table> = RefCell::new(Table { slots: vec![0; HSIZE].into_boxed_slice(), generation: 0 });
}

fn first(input: &[u8], ip: usize) -> u32 {
    (u32::from(input[ip]) << 8) | u32::from(input[ip + 1])
}

fn next(h: u32, input: &[u8], ip: usize) -> u32 {
    (h << 8) | u32::from(input[ip + 2])
}

/// liblzf's `IDX` under `VERY_FAST`.
fn idx(h: u32) -> usize {
    ((h >> (3 * 8 - HLOG)).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1)
}

/// Compress `input` into at most `out_max` bytes, as `lzf_compress`; `None` when
/// the result would not fit (Redis then stores the string verbatim).
pub fn compress(input: &[u8], out_max: usize) -> Option<Vec<u8>> {
    if input.len() < 3 || out_max == 0 {
        return None;
    }
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        t.generation = t.generation.wrapping_add(1);
        if t.generation == 0 {
            t.slots.fill(0);
            t.generation = 1;
        }
        compress_with(&mut t, input, out_max)
    })
}

fn compress_with(t: &mut Table, input: &[u8], out_max: usize) -> Option<Vec<u8>> {
    let stamp = u64::from(t.generation) << 32;
    let len = input.len();
    // Slack past `out_max`: liblzf checks the bound before each write, but moves
    // the output cursor one past it when it opens a literal run.
    let mut out = vec![0u8; out_max + 4];
    let (mut ip, mut op, mut lit) = (0usize, 1usize, 0usize);
    let mut hval = first(input, 0);
    while ip + 2 < len {
        hval = next(hval, input, ip);
        let slot = idx(hval);
        let previous = t.slots[slot];
        t.slots[slot] = stamp | ip as u64;
        let reference =
            (previous >> 32 == stamp >> 32).then_some((previous & 0xffff_ffff) as usize);
        // A match may start as late as the loop runs (3 bytes before the end):
        // liblzf's length scan always takes a third byte, whatever `maxlen` says
        // (a stream listpack ending `.. 01 06 01 ff` showed Redis matching there).
        match reference
            .filter(|&r| r > 0 && ip - r - 1 < MAX_OFF && input[r..r + 3] == input[ip..ip + 3])
        {
            Some(r) => {
                let off = ip - r - 1;
                let maxlen = (len - ip - 2).min(MAX_REF);
                out[op - lit - 1] = (lit as u8).wrapping_sub(1);
                if lit == 0 {
                    op -= 1;
                }
                if op + 3 + 1 >= out_max {
                    return None;
                }
                let l = match_len(input, r, ip, maxlen) - 2;
                ip += 1;
                if l < 7 {
                    out[op] = ((off >> 8) + (l << 5)) as u8;
                    op += 1;
                } else {
                    out[op] = ((off >> 8) + (7 << 5)) as u8;
                    out[op + 1] = (l - 7) as u8;
                    op += 2;
                }
                out[op] = off as u8;
                op += 2; // the reference's last byte, then a new literal run
                lit = 0;
                ip += l + 1;
                if ip + 2 >= len {
                    break;
                }
                ip -= 2;
                hval = first(input, ip);
                for _ in 0..2 {
                    hval = next(hval, input, ip);
                    t.slots[idx(hval)] = stamp | ip as u64;
                    ip += 1;
                }
            }
            None => {
                if op >= out_max {
                    return None;
                }
                out[op] = input[ip];
                (op, ip, lit) = (op + 1, ip + 1, lit + 1);
                if lit == MAX_LIT {
                    out[op - lit - 1] = (lit - 1) as u8;
                    lit = 0;
                    op += 1;
                }
            }
        }
    }
    if op + 3 > out_max {
        return None;
    }
    while ip < len {
        out[op] = input[ip];
        (op, ip, lit) = (op + 1, ip + 1, lit + 1);
        if lit == MAX_LIT {
            out[op - lit - 1] = (lit - 1) as u8;
            lit = 0;
            op += 1;
        }
    }
    out[op - lit - 1] = (lit as u8).wrapping_sub(1);
    if lit == 0 {
        op -= 1;
    }
    out.truncate(op);
    Some(out)
}

/// Length of the match at `ip` against `r`, with liblzf's 16-step unrolled scan
/// first when `maxlen > 16` (which may run one byte past `maxlen`, as liblzf's).
fn match_len(input: &[u8], r: usize, ip: usize, maxlen: usize) -> usize {
    let mut l = 2;
    if maxlen > 16 {
        for _ in 0..16 {
            l += 1;
            if input[r + l] != input[ip + l] {
                return l;
            }
        }
    }
    loop {
        l += 1;
        if !(l < maxlen && input[r + l] == input[ip + l]) {
            return l;
        }
    }
}

/// Decompress `input`, which must expand to exactly `out_len` bytes; `None` for a
/// corrupt stream (Redis: `Invalid LZF compressed string`).
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(out_len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < 32 {
            let run = input.get(ip..ip + ctrl + 1)?;
            if out.len() + run.len() > out_len {
                return None;
            }
            out.extend_from_slice(run);
            ip += ctrl + 1;
            continue;
        }
        let mut l = ctrl >> 5;
        if l == 7 {
            l += usize::from(*input.get(ip)?);
            ip += 1;
        }
        let back = ((ctrl & 0x1f) << 8) + usize::from(*input.get(ip)?) + 1;
        ip += 1;
        l += 2;
        if back > out.len() || out.len() + l > out_len {
            return None;
        }
        let from = out.len() - back;
        for i in 0..l {
            out.push(out[from + i]);
        }
    }
    (out.len() == out_len).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_repetitive_string_compresses() {
        // The DUMP bytes against redis-server's are compared in tests/dump_restore.rs.
        let packed = compress(&[b'a'; 40], 36).unwrap();
        assert_eq!(decompress(&packed, 40).unwrap(), vec![b'a'; 40]);
        assert!(packed.len() < 12, "{packed:?}");
    }

    /// Matches that start 3 or 4 bytes before the end, as liblzf takes them:
    /// the expected bytes are Redis 7.0's DUMP of these strings.
    #[test]
    fn late_matches_are_redis_bytes() {
        let hex = |h: &str| -> Vec<u8> {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect()
        };
        let cases: [(&[u8], &str); 2] = [
            (
                b"abcabcabcabcabcabcabcabc-xyz-xyz!",
                "0361626361e00b02032d78797a2003017a21",
            ),
            (
                b"aaaaaaaaaaaaaaaaaaaaaaaaa\x01\x06\x01\x1a\x01\x06\x01\xff",
                "016161e00e00030106011a200300ff",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(compress(input, input.len() - 4), Some(hex(want)));
        }
    }

    #[test]
    fn incompressible_input_does_not_fit() {
        let input: Vec<u8> = (0..64u32).map(|i| (i * 97 % 251) as u8).collect();
        assert_eq!(compress(&input, input.len() - 4), None);
    }

    proptest! {
        #[test]
        fn round_trip(input in proptest::collection::vec(prop_oneof![Just(b'x'), any::<u8>()], 0..3000)) {
            if let Some(packed) = compress(&input, input.len() + 64) {
                prop_assert_eq!(decompress(&packed, input.len()), Some(input));
            }
        }

        #[test]
        fn decompress_never_panics(input in proptest::collection::vec(any::<u8>(), 0..200), len in 0usize..400) {
            let _ = decompress(&input, len);
        }
    }
}
