//! `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`: longest common
//! subsequence by dynamic programming, with Redis 7.0's backtracking order so the
//! IDX ranges come out exactly as Redis lists them.

use ruvio_resp::{Args, Reply};

use crate::args::{eq_ci, int_arg};
use crate::command::{CmdResult, ExecCtx, Outcome::Done};
use crate::error::CmdError;
use crate::keyspace::STRING_BYTES_MAX;
use crate::Engine;

#[derive(Default)]
struct LcsOptions {
    idx: bool,
    len: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn parse_options(args: Args<'_>) -> Result<LcsOptions, CmdError> {
    let mut o = LcsOptions::default();
    let mut j = 3;
    while j < args.len() {
        let opt = args.get(j);
        let more = j + 1 < args.len();
        if eq_ci(opt, "IDX") {
            o.idx = true;
        } else if eq_ci(opt, "LEN") {
            o.len = true;
        } else if eq_ci(opt, "WITHMATCHLEN") {
            o.with_match_len = true;
        } else if eq_ci(opt, "MINMATCHLEN") && more {
            o.min_match_len = int_arg(args.get(j + 1))?.max(0) as u64;
            j += 1;
        } else {
            return Err(CmdError::Syntax);
        }
        j += 1;
    }
    if o.idx && o.len {
        return Err(CmdError::LcsLenAndIdx);
    }
    Ok(o)
}

/// The bytes of `key` for LCS: empty when missing, an error for non-strings.
fn operand(engine: &mut Engine, ctx: &ExecCtx, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let Some(id) = engine.lookup_read(ctx, key) else {
        return Ok(None);
    };
    let mut buf = itoa::Buffer::new();
    let value = engine
        .db(ctx.db)
        .entry(id)
        .value()
        .as_str()
        .ok_or(CmdError::LcsNotStrings)?;
    Ok(Some(value.bytes(&mut buf).to_vec()))
}

/// `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]`
pub(crate) fn lcs(
    engine: &mut Engine,
    ctx: &mut ExecCtx,
    args: Args<'_>,
    reply: &mut Reply<'_>,
) -> CmdResult {
    let a = operand(engine, ctx, args.get(1));
    let b = operand(engine, ctx, args.get(2));
    let (a, b) = (a?.unwrap_or_default(), b?.unwrap_or_default());
    let options = parse_options(args)?;
    let table = Table::build(&a, &b)?;
    write_reply(&table, &a, &b, &options, reply);
    Ok(Done)
}

/// `lcs[i][j]` = LCS length of `a[..i]` and `b[..j]`, row-major, `(alen+1) x (blen+1)`.
struct Table {
    cells: Vec<u32>,
    width: usize,
}

impl Table {
    fn build(a: &[u8], b: &[u8]) -> Result<Table, CmdError> {
        let width = b.len() + 1;
        let cells_count = (a.len() as u64 + 1) * width as u64;
        if cells_count * 4 > STRING_BYTES_MAX as u64 {
            return Err(CmdError::LcsTooBig);
        }
        let mut cells = Vec::new();
        cells
            .try_reserve_exact(cells_count as usize)
            .map_err(|_| CmdError::LcsAllocFailed)?;
        cells.resize(cells_count as usize, 0u32);
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Ok(Table { cells, width })
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }
}

/// One IDX match: ranges in `a` and `b` (inclusive) and its length.
struct Match {
    a: (usize, usize),
    b: (usize, usize),
    len: usize,
}

/// Walk back from the end as Redis does, collecting the common bytes and the ranges.
fn backtrack(table: &Table, a: &[u8], b: &[u8], min_match_len: u64) -> (Vec<u8>, Vec<Match>) {
    let total = table.at(a.len(), b.len()) as usize;
    let mut common = vec![0u8; total];
    let mut matches = Vec::new();
    let (mut i, mut j, mut idx) = (a.len(), b.len(), total);
    let mut range: Option<Match> = None;
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            common[idx - 1] = a[i - 1];
            match &mut range {
                None => {
                    range = Some(Match {
                        a: (i - 1, i - 1),
                        b: (j - 1, j - 1),
                        len: 0,
                    })
                }
                Some(r) if r.a.0 == i && r.b.0 == j => {
                    r.a.0 -= 1;
                    r.b.0 -= 1;
                }
                Some(_) => emit = true,
            }
            if range.as_ref().is_some_and(|r| r.a.0 == 0 || r.b.0 == 0) {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if table.at(i - 1, j) > table.at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            if range.is_some() {
                emit = true;
            }
        }
        if emit {
            if let Some(mut r) = range.take() {
                r.len = r.a.1 - r.a.0 + 1;
                if min_match_len == 0 || r.len as u64 >= min_match_len {
                    matches.push(r);
                }
            }
        }
    }
    (common, matches)
}

fn write_reply(table: &Table, a: &[u8], b: &[u8], o: &LcsOptions, reply: &mut Reply<'_>) {
    let total = table.at(a.len(), b.len());
    if o.len && !o.idx {
        reply.int(total as i64);
        return;
    }
    let (common, matches) = backtrack(table, a, b, o.min_match_len);
    if !o.idx {
        reply.bulk(&common);
        return;
    }
    reply.map(2);
    reply.bulk(b"matches");
    reply.array(matches.len());
    for m in &matches {
        reply.array(if o.with_match_len { 3 } else { 2 });
        reply.array(2);
        reply.int(m.a.0 as i64);
        reply.int(m.a.1 as i64);
        reply.array(2);
        reply.int(m.b.0 as i64);
        reply.int(m.b.1 as i64);
        if o.with_match_len {
            reply.int(m.len as i64);
        }
    }
    reply.bulk(b"len");
    reply.int(total as i64);
}
