//! Option (b): glibc's `strtold` and `printf("%.17Lf")` through a small C file
//! (`libc_ld.c`, built by build.rs), exactly the calls Redis makes.

use super::{FloatText, LongDouble};

/// Output buffer size the C side writes into (Redis' `MAX_LONG_DOUBLE_CHARS`).
const FORMAT_BYTES_MAX: usize = 5 * 1024;

extern "C" {
    fn ruvio_ld_parse(s: *const u8, len: usize, out: *mut u8) -> i32;
    fn ruvio_ld_add(a: *const u8, b: *const u8, out: *mut u8);
    fn ruvio_ld_format_human(v: *const u8, buf: *mut u8) -> i32;
}

/// Redis' `string2ld`.
pub(crate) fn parse(s: &[u8]) -> Option<LongDouble> {
    let mut v = LongDouble::ZERO;
    // SAFETY: the C side reads `len` bytes of `s` and writes 10 bytes at the start
    // of `v`, a repr(C) struct of 16 bytes whose first 10 are the x87 value.
    let ok = unsafe { ruvio_ld_parse(s.as_ptr(), s.len(), &mut v as *mut LongDouble as *mut u8) };
    (ok == 1).then_some(v)
}

/// `a + b` by the C compiler's `long double` add.
pub(crate) fn add(a: LongDouble, b: LongDouble) -> LongDouble {
    let mut sum = LongDouble::ZERO;
    // SAFETY: 10 bytes read from each operand, 10 written to `sum` (see `parse`).
    unsafe {
        ruvio_ld_add(
            &a as *const LongDouble as *const u8,
            &b as *const LongDouble as *const u8,
            &mut sum as *mut LongDouble as *mut u8,
        )
    };
    sum
}

/// Redis' `ld2string(.., LD_STR_HUMAN)` of a finite value.
pub(crate) fn format_human(v: LongDouble) -> FloatText {
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); FORMAT_BYTES_MAX];
    // SAFETY: the C side writes at most FORMAT_BYTES_MAX bytes into `buf` and
    // returns how many of them it wrote (a finite value always fits).
    let len = unsafe {
        ruvio_ld_format_human(
            &v as *const LongDouble as *const u8,
            buf.as_mut_ptr() as *mut u8,
        )
    };
    assert!(
        len > 0,
        "a finite long double fits {FORMAT_BYTES_MAX} bytes"
    );
    // SAFETY: the first `len` bytes were written by snprintf.
    let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, len as usize) };
    let mut out = FloatText::default();
    out.push(bytes);
    out
}
