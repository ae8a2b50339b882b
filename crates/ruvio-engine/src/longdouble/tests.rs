//! The chosen path (Rust conversions, x87 add) against two oracles: glibc itself
//! (`libc`, the functions Redis calls) and the exact software emulation (`soft`).

use proptest::prelude::*;

use super::soft::Emulated;
use super::*;

/// Bits of every parse: chosen, glibc, software.
fn parses(text: &str) -> [Option<LongDouble>; 3] {
    let s = text.as_bytes();
    [
        LongDouble::parse(s),
        libc::parse(s),
        Emulated::parse(s).map(Emulated::to_bits),
    ]
}

/// INCRBYFLOAT's result text (or None for NaN/inf) by the chosen path and glibc,
/// and the software sum's bits.
fn sums(a: LongDouble, b: LongDouble) -> (Option<FloatText>, Option<FloatText>, LongDouble) {
    let chosen = incr_by_float(a, b).ok();
    let sum = libc::add(a, b);
    let glibc = sum.is_finite().then(|| libc::format_human(sum));
    assert_eq!(a.add(b), sum, "x87 add vs C add of {a:?} + {b:?}");
    let soft = Emulated::from_bits(a).add(Emulated::from_bits(b)).to_bits();
    (chosen, glibc, soft)
}

fn text(t: &Option<FloatText>) -> String {
    t.as_ref()
        .map(|t| String::from_utf8_lossy(t.as_bytes()).into_owned())
        .unwrap_or_else(|| "<nan or inf>".into())
}

/// Decimal texts from short to 45+30 digits, exponents from none to far past the
/// range (so over- and underflow), with optional sign and leading zeros.
fn decimal() -> impl Strategy<Value = String> {
    let exponent = prop_oneof![0u32..40, 0u32..6000, Just(4931), Just(4951)];
    (
        prop_oneof![Just(""), Just("+"), Just("-")],
        "0{0,3}[0-9]{0,45}",
        proptest::option::of("[0-9]{0,30}"),
        proptest::option::of((
            prop_oneof![Just("e"), Just("E")],
            prop_oneof![Just(""), Just("+"), Just("-")],
            exponent,
        )),
    )
        .prop_map(|(sign, int, frac, exp)| {
            let mut s = format!("{sign}{int}");
            if let Some(frac) = frac {
                s.push('.');
                s.push_str(&frac);
            }
            if let Some((e, esign, n)) = exp {
                s.push_str(&format!("{e}{esign}{n}"));
            }
            s
        })
}

/// Every other shape `strtold` knows or almost knows: hex floats, inf and nan
/// spellings, surrounding spaces, junk.
fn other() -> impl Strategy<Value = String> {
    prop_oneof![
        "[-+]?0[xX][0-9a-fA-F]{0,20}(\\.[0-9a-fA-F]{0,20})?([pP][-+]?[0-9]{1,5})?",
        "[-+]?(inf|INF|Inf|infinity|Infinity|infinit|nan|NaN|nan\\(12\\)|nanx)",
        "[ \t\n\x0b]?[-+]?[0-9]{1,5}(\\.[0-9]{0,5})?[ \t\n]?",
        "[-+.eE0-9xp ]{0,12}",
    ]
}

fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![3 => decimal(), 1 => other()]
}

/// Any finite x87 value, subnormals and the extremes included.
fn finite_bits() -> impl Strategy<Value = LongDouble> {
    let biased = prop_oneof![0u16..0x7fff, 16383u16 - 130..16383 + 130];
    (any::<bool>(), biased, any::<u64>()).prop_map(|(negative, biased, mantissa)| {
        // Normal values carry the integer bit; subnormals must not.
        let mantissa = if biased == 0 {
            mantissa >> 1
        } else {
            mantissa | 1 << 63
        };
        LongDouble::from_parts(negative, biased, mantissa)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// Parsing agrees with glibc's strtold as Redis' string2ld filters it, and with
    /// the software parser, bit for bit (rejections included).
    #[test]
    fn parse_matches_glibc_and_reference(t in any_text()) {
        let [chosen, glibc, soft] = parses(&t);
        prop_assert_eq!(chosen, glibc, "glibc on {:?}", t);
        prop_assert_eq!(chosen, soft, "reference on {:?}", t);
    }

    /// Sums and their text agree with glibc (C add, printf) and the reference.
    #[test]
    fn incr_matches_glibc_and_reference(a in any_text(), b in any_text()) {
        if let (Some(x), Some(y)) = (LongDouble::parse(a.as_bytes()), LongDouble::parse(b.as_bytes())) {
            let (chosen, glibc, soft) = sums(x, y);
            prop_assert_eq!(text(&chosen), text(&glibc), "{} + {}", a, b);
            prop_assert_eq!(x.add(y), soft, "{} + {}", a, b);
            if let Some(chosen) = chosen {
                let reference = Emulated::from_bits(soft).to_human_string();
                prop_assert_eq!(chosen.as_bytes(), reference.as_bytes(), "{} + {}", a, b);
            }
        }
    }

    /// Printing any finite value (not only those decimal texts reach) is glibc's.
    #[test]
    fn format_matches_glibc(v in finite_bits()) {
        prop_assert_eq!(text(&Some(v.to_human())), text(&Some(libc::format_human(v))), "{:?}", v);
    }

    /// Decimal texts exactly halfway between two adjacent 80-bit values (and one
    /// last digit either side) round to even, as strtold rounds them.
    #[test]
    fn parse_ties_match_glibc(m in (1u64 << 63).., e in -20i32..40, nudge in -1i8..=1, neg: bool) {
        let text = exact_decimal(neg, (m as u128) << 1 | 1, e - 1, nudge);
        let [chosen, glibc, soft] = parses(&text);
        prop_assert!(glibc.is_some());
        prop_assert_eq!(chosen, glibc, "glibc on {}", text);
        prop_assert_eq!(chosen, soft, "reference on {}", text);
    }

    /// Values whose %.17Lf is exactly halfway between two 17th fraction digits
    /// round to even, as glibc's printf rounds them.
    #[test]
    fn format_ties_match_glibc(m in 1u64..1 << 24, k in 18u16..70, neg: bool) {
        let lz = m.leading_zeros() as u16;
        // m * 2^-k with the mantissa normalised: biased exponent = -k + 63 - lz + bias.
        let v = LongDouble::from_parts(neg, 16383 + 63 - lz - k, m << lz);
        prop_assert_eq!(text(&Some(v.to_human())), text(&Some(libc::format_human(v))), "{} * 2^-{}", m, k);
    }

    /// The former fast path's property, kept on the chosen path: small decimals
    /// sum as the exact reference sums them.
    #[test]
    fn small_decimals_match_reference(
        a_int in 0u32..20, a_frac in 0u64..100_000_000_000_000_000, a_digits in 0usize..18, a_neg: bool,
        b_int in 0u32..20, b_frac in 0u64..100_000_000_000_000_000, b_digits in 0usize..18, b_neg: bool,
    ) {
        let text = |int: u32, frac: u64, digits: usize, neg: bool| {
            let frac = format!("{frac:017}");
            let sign = if neg { "-" } else { "" };
            if digits == 0 { format!("{sign}{int}") } else { format!("{sign}{int}.{}", &frac[..digits]) }
        };
        let (a, b) = (text(a_int, a_frac, a_digits, a_neg), text(b_int, b_frac, b_digits, b_neg));
        let chosen = incr_by_float(LongDouble::parse(a.as_bytes()).unwrap(), LongDouble::parse(b.as_bytes()).unwrap()).unwrap();
        let exact = Emulated::parse(a.as_bytes()).unwrap().add(Emulated::parse(b.as_bytes()).unwrap());
        let exact = exact.to_human_string();
        prop_assert_eq!(chosen.as_bytes(), exact.as_bytes(), "{} + {}", a, b);
    }
}

/// The exact decimal text of `n * 2^exp2` (`exp2` >= -27), plus `nudge` units in
/// its last digit.
fn exact_decimal(negative: bool, n: u128, exp2: i32, nudge: i8) -> String {
    let (digits, fraction_digits) = if exp2 >= 0 {
        (n << exp2, 0)
    } else {
        // n * 2^-k = n * 5^k / 10^k, and n * 5^27 still fits a u128 for n < 2^66.
        let k = (-exp2) as u32;
        (n * 5u128.pow(k), k as usize)
    };
    let digits = digits
        .checked_add_signed(nudge as i128)
        .unwrap()
        .to_string();
    let digits = format!("{digits:0>width$}", width = fraction_digits + 1);
    let (int, frac) = digits.split_at(digits.len() - fraction_digits);
    let sign = if negative { "-" } else { "" };
    if frac.is_empty() {
        format!("{sign}{int}")
    } else {
        format!("{sign}{int}.{frac}")
    }
}

/// INCRBYFLOAT run as a counter: each sum's text is the next stored value, so the
/// texts the command itself writes are parsed back (long fractions, growing values).
#[test]
fn counters_match_glibc() {
    let runs = [
        ("10000000.5", "1.5"),
        ("3.0e15", "1e-5"),
        ("0", "1e-5"),
        ("10000000", "0.1"),
        ("-3.3", "0.7"),
        ("1e30", "123456.789"),
        ("0.1", "-0.000003"),
        ("1e-300", "1e-310"),
    ];
    for (start, incr) in runs {
        let (mut chosen, mut glibc) = (start.as_bytes().to_vec(), start.as_bytes().to_vec());
        let step = LongDouble::parse(incr.as_bytes()).unwrap();
        for i in 0..2000 {
            let x = LongDouble::parse(&chosen).unwrap();
            chosen = incr_by_float(x, step).unwrap().as_bytes().to_vec();
            let y = libc::parse(&glibc).unwrap();
            glibc = libc::format_human(libc::add(y, step)).as_bytes().to_vec();
            assert_eq!(chosen, glibc, "{start} += {incr}, step {i}");
        }
    }
}

fn incr(a: &str, b: &str) -> Result<String, CmdError> {
    let parse = |s: &str| LongDouble::parse(s.as_bytes()).ok_or(CmdError::NotFloat);
    let text = incr_by_float(parse(a)?, parse(b)?)?;
    Ok(String::from_utf8(text.as_bytes().to_vec()).unwrap())
}

/// Answers of Redis 7.0.15 itself (`SET k a`, `INCRBYFLOAT k b`).
#[test]
fn answers_what_redis_answers() {
    let ok =
        |a: &str, b: &str, want: &str| assert_eq!(incr(a, b).as_deref(), Ok(want), "{a} + {b}");
    ok("10.50", "0.1", "10.6");
    ok("0.1", "0.2", "0.3");
    ok("5.0e3", "2.0e2", "5200");
    ok("0", "0x1p3", "8");
    ok("0", "0x1.8p1", "3");
    ok("0", "-0", "0");
    ok("-0", "0", "0");
    ok("0", "-0.0", "0");
    ok("0", "0e5000", "0");
    ok("0", "1e-4950", "0");
    ok("0", "3.6e-4951", "0");
    ok("0", "0x1p-16445", "0");
    ok("0", "-1e-30", "0");
    ok("0", "+.5", "0.5");
    ok("5", "-5", "0");
    ok("10000000.5", "1.5", "10000002");
    ok("3.0e15", "1e-5", "3000000000000000");
    ok("123456789", "0.000000001", "123456789.00000000099680619");
    ok("7", "0.3333333333333333333333", "7.33333333333333333");
    ok("9223372036854775807", "1", "9223372036854775808");
    ok("18446744073709551617", "0", "18446744073709551616");
    // The largest finite value prints all 4933 digits (the middle is elided here).
    let max = incr("0", "1.18973149535723176502e+4932").unwrap();
    assert_eq!(max.len(), 4933);
    assert!(max.starts_with("118973149535723176502126385303097020516906332229462420044032"));
    assert!(max.ends_with("60031762345960769508849149662444156604419552086811989770240"));
    let err = |a: &str, b: &str, want: CmdError| assert_eq!(incr(a, b), Err(want), "{a} + {b}");
    err("0", "inf", CmdError::NanOrInfinity);
    err("0", "-inf", CmdError::NanOrInfinity);
    err("0", "infinity", CmdError::NanOrInfinity);
    err(
        "1.18973149535723176502e+4932",
        "1e4932",
        CmdError::NanOrInfinity,
    );
    for bad in [
        "",
        " 1",
        "1 ",
        "\t1",
        "abc",
        "1e",
        "1e+",
        ".",
        "nan",
        "NaN",
        "nan(123)",
        "1e5000",
        "-1e5000",
        "1e-5000",
        "1e-4951",
        "0x",
        "--1",
        "0x1p",
        "1..2",
        "1.19e4932",
        "0x1p16384",
        "1\u{0}",
        "infin",
    ] {
        err("0", bad, CmdError::NotFloat);
        assert_eq!(libc::parse(bad.as_bytes()), None, "glibc accepts {bad:?}");
    }
}

#[test]
fn integers_convert_exactly() {
    for n in [0, 1, -1, 7, i64::MAX, i64::MIN, 1 << 53, -(1 << 62) - 1] {
        let text = n.to_string();
        assert_eq!(
            LongDouble::from_i64(n),
            LongDouble::parse(text.as_bytes()).unwrap()
        );
        assert_eq!(
            LongDouble::from_i64(n).to_human().as_bytes(),
            text.as_bytes()
        );
    }
}
