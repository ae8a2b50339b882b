//! The one operation INCRBYFLOAT needs from the FPU: an 80-bit add.
//!
//! Redis adds with `value += incr` on two `long double`s, which gcc on x86-64 turns
//! into `fld; fld; faddp; fstp` on the x87 stack. Doing the same instructions here
//! makes the sum identical by construction instead of by emulation. The x87 control
//! word Linux starts every process with (0x037F: 64-bit precision, round to nearest,
//! every exception masked) is the one Redis runs under; nothing in Ruvio changes it.

use super::LongDouble;

/// `a + b` rounded as the x87 rounds it (NaN and infinities as the FPU makes them).
#[cfg(target_arch = "x86_64")]
pub(super) fn add(a: LongDouble, b: LongDouble) -> LongDouble {
    let mut sum = LongDouble::ZERO;
    // SAFETY: `fld`/`fstp tbyte` read and write exactly the 10 bytes `LongDouble`
    // keeps at offset 0 (`repr(C)`: the u64 mantissa, then the u16 sign and
    // exponent), and the pointers come from live references. Two loads and two pops
    // leave the x87 stack empty as the ABI requires; every x87 register is declared
    // clobbered because `fld` rotates the stack through all of them.
    unsafe {
        core::arch::asm!(
            "fld tbyte ptr [{a}]",
            "fld tbyte ptr [{b}]",
            "faddp st(1), st",
            "fstp tbyte ptr [{sum}]",
            a = in(reg) &a,
            b = in(reg) &b,
            sum = in(reg) &mut sum,
            out("st(0)") _, out("st(1)") _, out("st(2)") _, out("st(3)") _,
            out("st(4)") _, out("st(5)") _, out("st(6)") _, out("st(7)") _,
            options(nostack),
        );
    }
    sum
}

/// Other targets have no x87: the exact software emulation gives the same bits.
#[cfg(not(target_arch = "x86_64"))]
pub(super) fn add(a: LongDouble, b: LongDouble) -> LongDouble {
    super::soft::Emulated::from_bits(a)
        .add(super::soft::Emulated::from_bits(b))
        .to_bits()
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The add's rounding rests on the control word the process starts with; Rust
    /// never changes it, and neither may anything Ruvio links.
    #[test]
    fn control_word_is_the_linux_default() {
        let mut cw: u16 = 0;
        // SAFETY: `fnstcw` stores the 2-byte control word at a live u16.
        unsafe {
            core::arch::asm!("fnstcw word ptr [{cw}]", cw = in(reg) &mut cw, options(nostack));
        }
        assert_eq!(cw, 0x037f, "x87 control word: precision/rounding changed");
    }
}
