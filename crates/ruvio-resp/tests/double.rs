//! `format_double_g17` against glibc's `printf("%.17g")`: a table of outputs taken
//! from C, and, where the test runs on glibc, a comparison with the real snprintf
//! over arbitrary bit patterns.

use proptest::prelude::*;
use ruvio_resp::format_double_g17;

fn g17(d: f64) -> String {
    let mut out = Vec::new();
    format_double_g17(d, &mut out);
    String::from_utf8(out).expect("ASCII")
}

#[test]
fn examples_from_the_brief() {
    assert_eq!(g17(3.0), "3");
    assert_eq!(g17(0.1), "0.10000000000000001");
    assert_eq!(g17(1e20), "1e+20");
    assert_eq!(g17(1.5e-7), "1.4999999999999999e-07");
    assert_eq!(g17(10.5), "10.5");
}

#[test]
fn special_values() {
    assert_eq!(g17(f64::INFINITY), "inf");
    assert_eq!(g17(f64::NEG_INFINITY), "-inf");
    assert_eq!(g17(f64::NAN), "nan");
    assert_eq!(g17(-f64::NAN), "-nan");
}

#[test]
fn appends_without_touching_existing_bytes() {
    let mut out = b"x=".to_vec();
    format_double_g17(2.5, &mut out);
    assert_eq!(out, b"x=2.5");
}

/// (bits of the double, what glibc 2.x printed for `%.17g`)
const GLIBC_G17: &[(u64, &str)] = &[
    (0x0000000000000000, "0"),
    (0x8000000000000000, "-0"),
    (0x3ff0000000000000, "1"),
    (0xbff0000000000000, "-1"),
    (0x4008000000000000, "3"),
    (0x4025000000000000, "10.5"),
    (0x3fb999999999999a, "0.10000000000000001"),
    (0x3fc999999999999a, "0.20000000000000001"),
    (0x3fd3333333333334, "0.30000000000000004"),
    (0x3fd5555555555555, "0.33333333333333331"),
    (0x3fe5555555555555, "0.66666666666666663"),
    (0xc004000000000000, "-2.5"),
    (0x4059000000000000, "100"),
    (0x430c6bf526340000, "1000000000000000"),
    (0x4341c37937e08000, "10000000000000000"),
    (0x4376345785d8a000, "1e+17"),
    (0x4415af1d78b58c40, "1e+20"),
    (0x444b1ae4d6e2ef50, "1e+21"),
    (0x4480f0cf064dd592, "1e+22"),
    (0x54b249ad2594c37d, "1e+100"),
    (0x3f1a36e2eb1c432d, "0.0001"),
    (0x3ee4f8b588e368f1, "1.0000000000000001e-05"),
    (0x3e8421f5f40d8376, "1.4999999999999999e-07"),
    (0x3f202c9dedbc309d, "0.00012339999999999999"),
    (0x3ee9e0fcaf9380fc, "1.234e-05"),
    (0x40fe240c9fbe76c9, "123456.789"),
    (0x4340000000000000, "9007199254740992"),
    (0x4340000000000000, "9007199254740992"),
    (0x431ffffffffffffd, "2251799813685247.2"),
    (0x431fffffffffffff, "2251799813685247.8"),
    (0x437b69b4ba630f35, "1.2345678901234568e+17"),
    (0x4376345785d89fff, "99999999999999984"),
    (0x4341c37937e07fff, "9999999999999998"),
    (0x0000000000000001, "4.9406564584124654e-324"),
    (0x0010000000000000, "2.2250738585072014e-308"),
    (0x7fefffffffffffff, "1.7976931348623157e+308"),
    (0xffefffffffffffff, "-1.7976931348623157e+308"),
    (0x400921fb54442d11, "3.14159265358979"),
    (0x4005bf0a8b145769, "2.7182818284590451"),
    (0x01a56e1fc2f8f359, "1e-300"),
    (0x43e56a95319d63e1, "1.2345678901234567e+19"),
    (0x3fe0000000000000, "0.5"),
    (0x3fd0000000000000, "0.25"),
    (0x3fc0000000000000, "0.125"),
    (0x3f50000000000000, "0.0009765625"),
    (0x40934a0000000000, "1234.5"),
    (0x3e7ad7f29abcaf48, "9.9999999999999995e-08"),
    (0xbe7ad7f29abcaf48, "-9.9999999999999995e-08"),
    (0x4011666666666666, "4.3499999999999996"),
    (0x3fd3333333333333, "0.29999999999999999"),
    (0x3ff199999999999a, "1.1000000000000001"),
    (0x40f0000000000000, "65536"),
    (0x44b52d02c7e14af6, "9.9999999999999992e+22"),
    (0x3f164840e1719f80, "8.5000000000000006e-05"),
    (0x3f1a36e2eb1c432c, "9.9999999999999991e-05"),
    (0x3f1a36e2eb1c432d, "0.0001"),
    (0x42d6bcc41e8fffff, "99999999999999.984"),
    (0xdc1b77ae0bf34dad, "-4.9911105725155504e+135"),
    (0x64f0eeb9026e6076, "1.715373926431966e+178"),
    (0x7b07ce91e5906136, "4.4251604027143375e+284"),
    (0x305f050c368dcc74, "1.0715660391465826e-75"),
    (0x2ceb16e0a1c54aec, "2.5973481493288907e-92"),
    (0x97101dce4e7bfb79, "-1.3475090132806154e-197"),
    (0x9ad2e144d6e8f2cf, "-1.8199673040271701e-179"),
    (0xd9aa792e1af470ea, "-8.7501862419475167e+123"),
    (0xddaa4e85b0d6e28b, "-1.603964615428183e+143"),
    (0x8f8ea9d349428d8e, "-9.6439157120605518e-234"),
    (0x08f474ffb8e8ab15, "1.5860846119992697e-265"),
    (0x2ead854756d71f03, "7.5979545248927379e-84"),
    (0x55bc79f8ada711fd, "1.0204796945730538e+105"),
    (0x0e1fc49bd63b809e, "1.1910593176322935e-240"),
    (0xb92199e83f5a101f, "-1.6949339131286959e-33"),
    (0xc5765079fc5d43ff, "-4.3162252145519944e+26"),
    (0x353cfc387dfae6b8, "3.0261999441573203e-52"),
    (0xa32edabf5585bd75, "-3.2386966814916609e-139"),
    (0xfc5639b16b714b4f, "-8.6637258373062409e+290"),
    (0x92fb2dcfc8ae9a19, "-3.0797526843217145e-217"),
    (0x544b0ec76d00616d, "1.15589923121874e+98"),
    (0xbcbb9b7e9a319aef, "-3.8312964673168891e-16"),
    (0x0f1a50d59c0aa21a, "6.4660538264326993e-236"),
    (0x80ae2120826571de, "-2.1452846540129615e-305"),
    (0x0e1ecd02ed7c0cbd, "1.1547975125429853e-240"),
    (0x0d0981e8c1fa7be4, "7.2962671794587506e-246"),
    (0xdc86b3d3cdbdf613, "-5.2803264785067434e+137"),
    (0x6d0844c269e7693f, "1.6732138965686944e+217"),
    (0x3681da7f6993082d, "3.9090767912460248e-46"),
    (0x5b928e2c987d857d, "1.3170664051174186e+133"),
    (0x6c716e1e6ced8137, "2.3471351557786169e+214"),
    (0xccb870213498f7f5, "-3.9270362652067501e+61"),
    (0x9f07b27a78869b5a, "-3.3710794864173703e-159"),
    (0xb0ba91e47f6200ec, "-5.8742290717003852e-74"),
    (0xc72b4c36d0db7fed, "-7.0868910634667276e+34"),
    (0x35f305b0c0fc9252, "8.1347104811121388e-49"),
    (0x7ac78fb373ffbff6, "2.7371952383911999e+283"),
    (0x8e39b81de71b7d09, "-3.8571011713974369e-240"),
    (0x59a69ba126cd29b3, "7.4725527832150123e+123"),
    (0xbfcbffff0cbcbf20, "-0.21874988672197393"),
];

#[test]
fn matches_glibc_table() {
    for &(bits, expected) in GLIBC_G17 {
        let d = f64::from_bits(bits);
        assert_eq!(g17(d), expected, "bits {bits:#018x}");
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod against_libc {
    use super::g17;
    use proptest::prelude::*;
    use std::ffi::{c_char, c_int};

    unsafe extern "C" {
        fn snprintf(buf: *mut c_char, size: usize, format: *const c_char, ...) -> c_int;
    }

    /// glibc's own `%.17g` of `d`.
    fn c_g17(d: f64) -> String {
        let mut buf = [0u8; 64];
        // SAFETY: the buffer is 64 bytes, the format is NUL-terminated and takes one
        // double; snprintf never writes past `size`.
        let written = unsafe { snprintf(buf.as_mut_ptr().cast(), buf.len(), c"%.17g".as_ptr(), d) };
        let len = usize::try_from(written).expect("snprintf failed");
        String::from_utf8(buf[..len].to_vec()).expect("ASCII")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(20_000))]
        #[test]
        fn any_bit_pattern(bits in any::<u64>()) {
            let d = f64::from_bits(bits);
            prop_assert_eq!(g17(d), c_g17(d));
        }

        #[test]
        fn short_decimals(mantissa in -1_000_000i64..1_000_000, exponent in -30i32..30) {
            let d = mantissa as f64 * 10f64.powi(exponent);
            prop_assert_eq!(g17(d), c_g17(d));
        }

        #[test]
        fn integers(n in any::<i64>()) {
            let d = n as f64;
            prop_assert_eq!(g17(d), c_g17(d));
        }
    }
}

proptest! {
    /// Seventeen significant digits always read back as the same double.
    #[test]
    fn round_trips(bits in any::<u64>()) {
        let d = f64::from_bits(bits);
        prop_assume!(d.is_finite());
        let text = g17(d);
        let back: f64 = text.parse().expect("parsable");
        prop_assert_eq!(back.to_bits(), d.to_bits());
    }
}
