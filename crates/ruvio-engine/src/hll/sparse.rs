//! The sparse representation: the registers as a run-length code after the header,
//! Redis's three opcodes exactly, so a sparse value made by Redis is read and
//! updated here to the same bytes Redis would produce.
//!
//! ```text
//! ZERO   00xxxxxx            1..=64 registers at 0       (xxxxxx + 1)
//! XZERO  01xxxxxx yyyyyyyy   1..=16384 registers at 0    (xxxxxxyyyyyyyy + 1)
//! VAL    1vvvvvxx            1..=4 registers at 1..=32   (vvvvv + 1, xx + 1)
//! ```
//!
//! An empty HLL is one XZERO of 16384. Setting a register splits the opcode that
//! covers it into at most three (XZERO-VAL-XZERO, 5 bytes), then merges equal
//! neighbouring VALs, in Redis's order (`hllSparseSet`): the byte layout after a
//! sequence of adds depends on it. A register above 32, or a value that would grow
//! past `hll-sparse-max-bytes`, promotes the HLL to the dense representation.
//!
//! A stored value may be corrupt (SET can store anything that starts like an HLL):
//! every walk is bounded by the value's length, a truncated XZERO reads its missing
//! second byte as 0 (Redis reads the string's terminating zero), and the run
//! lengths must add up to exactly 16384 registers or the value is refused with
//! `INVALIDOBJ`, where Redis refuses it.

use super::{dense, Histogram, DENSE, DENSE_BYTES, ENCODING_AT, HEADER_BYTES, REGISTERS};
use crate::error::CmdError;

/// Longest run of a ZERO opcode.
const ZERO_LEN_MAX: usize = 64;
/// Longest run of an XZERO opcode.
const XZERO_LEN_MAX: usize = 16384;
/// Largest register value a VAL opcode holds.
const VAL_VALUE_MAX: u8 = 32;
/// Longest run of a VAL opcode.
const VAL_LEN_MAX: usize = 4;
/// Opcodes Redis looks at, from the one before the change, when merging VALs.
const MERGE_SCAN_OPCODES: usize = 5;
/// The longest sequence one split writes: XZERO VAL XZERO.
const SPLIT_BYTES_MAX: usize = 5;

const _: () = assert!(XZERO_LEN_MAX == REGISTERS);

/// One decoded opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `len` registers at 0, one byte (ZERO) or two (XZERO).
    Zeros { len: usize, wide: bool },
    /// `len` registers at `value`.
    Val { value: u8, len: usize },
}

impl Op {
    fn len(self) -> usize {
        match self {
            Op::Zeros { len, .. } | Op::Val { len, .. } => len,
        }
    }

    fn bytes(self) -> usize {
        match self {
            Op::Zeros { wide: true, .. } => 2,
            _ => 1,
        }
    }
}

fn is_val(b: u8) -> bool {
    b & 0x80 != 0
}

fn is_xzero(b: u8) -> bool {
    b & 0xc0 == 0x40
}

fn val_value(b: u8) -> u8 {
    ((b >> 2) & 0x1f) + 1
}

fn val_len(b: u8) -> usize {
    usize::from(b & 0x3) + 1
}

/// The VAL opcode byte for `len` registers at `value` (1..=32, 1..=4).
fn val_byte(value: u8, len: usize) -> u8 {
    debug_assert!((1..=VAL_VALUE_MAX).contains(&value) && (1..=VAL_LEN_MAX).contains(&len));
    0x80 | ((value - 1) << 2) | (len - 1) as u8
}

/// The opcode at `p` (`p < value.len()`).
fn op_at(value: &[u8], p: usize) -> Op {
    let b = value[p];
    if is_val(b) {
        Op::Val {
            value: val_value(b),
            len: val_len(b),
        }
    } else if is_xzero(b) {
        let low = value.get(p + 1).copied().unwrap_or(0);
        Op::Zeros {
            len: ((usize::from(b & 0x3f) << 8) | usize::from(low)) + 1,
            wide: true,
        }
    } else {
        Op::Zeros {
            len: usize::from(b & 0x3f) + 1,
            wide: false,
        }
    }
}

/// The opcodes after the header with their offsets.
fn ops(value: &[u8]) -> impl Iterator<Item = (usize, Op)> + '_ {
    let mut p = HEADER_BYTES;
    std::iter::from_fn(move || {
        (p < value.len()).then(|| {
            let op = op_at(value, p);
            let at = p;
            p += op.bytes();
            (at, op)
        })
    })
}

/// A sequence of opcodes being built (at most one split's worth).
struct Seq {
    bytes: [u8; SPLIT_BYTES_MAX],
    len: usize,
}

impl Seq {
    fn new() -> Seq {
        Seq {
            bytes: [0; SPLIT_BYTES_MAX],
            len: 0,
        }
    }

    fn push(&mut self, b: u8) {
        self.bytes[self.len] = b;
        self.len += 1;
    }

    /// `n` registers at 0: ZERO up to 64, XZERO beyond.
    fn zeros(&mut self, n: usize) {
        debug_assert!((1..=XZERO_LEN_MAX).contains(&n));
        if n > ZERO_LEN_MAX {
            let l = n - 1;
            self.push(0x40 | (l >> 8) as u8);
            self.push((l & 0xff) as u8);
        } else {
            self.push((n - 1) as u8);
        }
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A new, empty HLL (Redis's `createHLLObject`): the header and XZERO 16384.
pub(crate) fn empty() -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_BYTES + 2);
    value.extend_from_slice(&super::new_header(super::SPARSE));
    let mut seq = Seq::new();
    seq.zeros(REGISTERS);
    value.extend_from_slice(seq.as_slice());
    value
}

/// Count the registers of each value into `histogram` (Redis's
/// `hllSparseRegHisto`); `INVALIDOBJ` unless the runs cover exactly 16384 registers.
pub(crate) fn histogram(value: &[u8], histogram: &mut Histogram) -> Result<(), CmdError> {
    let mut registers = 0usize;
    for (_, op) in ops(value) {
        registers += op.len();
        match op {
            Op::Zeros { len, .. } => histogram[0] += len as u64,
            Op::Val { value, len } => histogram[value as usize] += len as u64,
        }
    }
    if registers == REGISTERS {
        Ok(())
    } else {
        Err(CmdError::HllCorrupted)
    }
}

/// Walk the registers in order, calling `visit(first, len, value)` for each VAL
/// run; fails, before visiting it, at a run that would pass register 16384, and
/// unless exactly 16384 registers were covered (Redis 7.2.10's bounds, which
/// refuse what older versions accepted: VALs after the last register).
fn for_each_val(value: &[u8], mut visit: impl FnMut(usize, usize, u8)) -> Result<(), CmdError> {
    let mut index = 0usize;
    for (_, op) in ops(value) {
        if index + op.len() > REGISTERS {
            return Err(CmdError::HllCorrupted);
        }
        if let Op::Val { value, len } = op {
            visit(index, len, value);
        }
        index += op.len();
    }
    if index == REGISTERS {
        Ok(())
    } else {
        Err(CmdError::HllCorrupted)
    }
}

/// Raise each of `max` to the matching register (Redis's `hllMerge`, sparse side).
pub(crate) fn merge_into(value: &[u8], max: &mut [u8; REGISTERS]) -> Result<(), CmdError> {
    for_each_val(value, |first, len, v| {
        for m in &mut max[first..first + len] {
            *m = (*m).max(v);
        }
    })
}

/// The same HLL in the dense representation (Redis's `hllSparseToDense`): the
/// header is kept as it is (magic, unused bytes, cached cardinality) but for the
/// encoding byte.
pub(crate) fn to_dense(value: &[u8]) -> Result<Vec<u8>, CmdError> {
    let mut dense = vec![0u8; DENSE_BYTES];
    dense[..HEADER_BYTES].copy_from_slice(&value[..HEADER_BYTES]);
    dense[ENCODING_AT] = DENSE;
    let registers = &mut dense[HEADER_BYTES..];
    for_each_val(value, |first, len, v| {
        for index in first..first + len {
            dense::set(registers, index, v);
        }
    })?;
    Ok(dense)
}

/// Redis's `hllSparseSet`: raise register `index` to `count` in the sparse
/// `value`; true when it grew. May leave `value` dense (see the module docs);
/// `INVALIDOBJ` when the value is corrupt.
pub(crate) fn set(
    value: &mut Vec<u8>,
    index: usize,
    count: u8,
    sparse_bytes_max: usize,
) -> Result<bool, CmdError> {
    if count > VAL_VALUE_MAX {
        return promote(value, index, count);
    }
    // Step 1: the opcode covering `index`, its first register and the one before.
    let (mut first, mut prev, mut found) = (0usize, None, None);
    for (at, op) in ops(value) {
        if index < first + op.len() {
            found = Some((at, op));
            break;
        }
        prev = Some(at);
        first += op.len();
    }
    let Some((p, op)) = found else {
        return Err(CmdError::HllCorrupted);
    };
    // Step 2: nothing to do, or a change in place, or a split.
    match op {
        Op::Val { value: old, .. } if old >= count => return Ok(false),
        Op::Val { len: 1, .. }
        | Op::Zeros {
            len: 1,
            wide: false,
        } => {
            value[p] = val_byte(count, 1);
        }
        _ => {
            let seq = split(op, first, index, count);
            let delta = seq.len as isize - op.bytes() as isize;
            if delta > 0 && value.len() + delta as usize > sparse_bytes_max {
                return promote(value, index, count);
            }
            replace(value, p, op.bytes(), seq.as_slice());
        }
    }
    merge_vals(value, prev.unwrap_or(HEADER_BYTES));
    super::invalidate_cache(value);
    Ok(true)
}

/// The opcodes replacing `op` (whose first register is `first`) once register
/// `index` is `count`.
fn split(op: Op, first: usize, index: usize, count: u8) -> Seq {
    let last = first + op.len() - 1;
    let mut seq = Seq::new();
    match op {
        Op::Zeros { .. } => {
            if index != first {
                seq.zeros(index - first);
            }
            seq.push(val_byte(count, 1));
            if index != last {
                seq.zeros(last - index);
            }
        }
        Op::Val { value, .. } => {
            if index != first {
                seq.push(val_byte(value, index - first));
            }
            seq.push(val_byte(count, 1));
            if index != last {
                seq.push(val_byte(value, last - index));
            }
        }
    }
    seq
}

/// Put `seq` where the `old` bytes of the opcode at `p` were. Redis moves the
/// rest of the string and changes its length by the difference, so an XZERO cut
/// short at the end of a corrupt value (one byte of two) leaves the value one
/// byte shorter than `seq` would make it; so does this.
fn replace(value: &mut Vec<u8>, p: usize, old: usize, seq: &[u8]) {
    let new_len = value.len() + seq.len() - old;
    if p + old <= value.len() {
        value.splice(p..p + old, seq.iter().copied());
    } else {
        value.truncate(p);
        value.extend_from_slice(seq);
        value.truncate(new_len);
    }
}

/// Redis's step 4: from the opcode at `from`, look at up to five opcodes and merge
/// each VAL with a following VAL of the same value while their runs fit one VAL.
fn merge_vals(value: &mut Vec<u8>, from: usize) {
    let mut p = from;
    for _ in 0..MERGE_SCAN_OPCODES {
        if p >= value.len() {
            break;
        }
        let b = value[p];
        if !is_val(b) {
            p += if is_xzero(b) { 2 } else { 1 };
            continue;
        }
        if let Some(&next) = value.get(p + 1).filter(|&&n| is_val(n)) {
            let len = val_len(b) + val_len(next);
            if val_value(b) == val_value(next) && len <= VAL_LEN_MAX {
                value[p + 1] = val_byte(val_value(b), len);
                value.remove(p);
                continue;
            }
        }
        p += 1;
    }
}

/// Make `value` dense and raise register `index` to `count` there (Redis's
/// `promote:` path, which leaves the cached cardinality as it was).
fn promote(value: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, CmdError> {
    let mut dense = to_dense(value)?;
    dense::raise(&mut dense[HEADER_BYTES..], index, count);
    *value = dense;
    Ok(true)
}

/// PFDEBUG DECODE: the opcodes as `z:len`, `Z:len` and `v:value,len`, space
/// separated (Redis's format).
pub(crate) fn decode(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len().saturating_sub(HEADER_BYTES) * 4);
    for (_, op) in ops(value) {
        let text = match op {
            Op::Zeros { len, wide: false } => format!("z:{len} "),
            Op::Zeros { len, wide: true } => format!("Z:{len} "),
            Op::Val { value, len } => format!("v:{value},{len} "),
        };
        out.extend_from_slice(text.as_bytes());
    }
    out.pop();
    out
}
