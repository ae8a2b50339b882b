//! Unit tests of the row format: the key positions every key shape finds.

use super::*;
use ruvio_resp::OwnedArgs;

fn positions(spec: KeySpec, line: &str) -> Vec<usize> {
    let args: OwnedArgs = line.split(' ').map(str::as_bytes).collect();
    spec.positions(args.args()).into_vec()
}

#[test]
fn every_key_shape_finds_its_keys() {
    let none: Vec<usize> = Vec::new();
    assert_eq!(positions(KeySpec::ONE, "GET k"), [1]);
    assert_eq!(positions(KeySpec::PAIRS, "MSET a 1 b 2"), [1, 3]);
    assert_eq!(positions(KeySpec::ALL_BUT_LAST, "BLPOP a b 0"), [1, 2]);
    assert_eq!(positions(KeySpec::NUMKEYS_AT_1, "LMPOP 2 a b LEFT"), [2, 3]);
    assert_eq!(positions(KeySpec::NUMKEYS_AT_1, "LMPOP 0 a LEFT"), none);
    assert_eq!(positions(KeySpec::NUMKEYS_AT_2, "BLMPOP 0 9 a LEFT"), none);
    let zunionstore = KeySpec(&[
        KeyShape::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        KeyShape::NumKeys { at: 2 },
    ]);
    assert_eq!(
        positions(zunionstore, "ZUNIONSTORE d 2 a b WEIGHTS 1 2"),
        [1, 3, 4]
    );
    let xread = KeySpec(&[KeyShape::KeywordHalf {
        keyword: "STREAMS",
        from: 1,
    }]);
    assert_eq!(positions(xread, "XREAD COUNT 2 streams s1 s2 0 0"), [4, 5]);
    assert_eq!(positions(xread, "XREAD STREAMS s1 s2 0"), none);
    assert!(xread.is_movable() && !KeySpec::ALL_BUT_LAST.is_movable());
    let georadius = KeySpec(&[
        KeyShape::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        KeyShape::Keyword {
            keyword: "STORE",
            from: 6,
        },
        KeyShape::Keyword {
            keyword: "STOREDIST",
            from: 6,
        },
        KeyShape::AfterLastKeyword {
            keywords: &["STORE", "STOREDIST"],
            from: 6,
        },
    ]);
    assert_eq!(positions(georadius, "GEORADIUS k 1 2 3 m"), [1]);
    assert_eq!(positions(georadius, "GEORADIUS k 1 2 3 m STORE d"), [1, 7]);
    assert_eq!(
        positions(georadius, "GEORADIUS k 1 2 3 m storedist d store e"),
        [1, 9, 7]
    );
    assert_eq!(positions(georadius, "GEORADIUS k 1 2 3 m STORE"), [1]);
    assert_eq!(positions(georadius, "GEORADIUS k 1 2 3 store x"), [1]);
    // Redis' specs name d only; the command writes e.
    assert_eq!(
        positions(georadius, "GEORADIUS k 1 2 3 m STORE d STORE e"),
        [1, 7, 9]
    );
    let sort = KeySpec(&[
        KeyShape::Range {
            first: 1,
            last: 1,
            step: 1,
        },
        KeyShape::FromValue,
        KeyShape::OptionKey {
            keyword: "STORE",
            from: 2,
            skips: &[("LIMIT", 2), ("GET", 1), ("BY", 1)],
        },
    ]);
    assert_eq!(positions(sort, "SORT k BY w GET # store d"), [1, 7]);
    assert_eq!(positions(sort, "SORT k STORE d STORE e"), [1, 5]);
    assert_eq!(positions(sort, "SORT k LIMIT STORE d"), [1]);
    assert_eq!(positions(sort, "SORT k STORE limit a b"), [1, 3]);
    assert_eq!(positions(sort, "SORT k STORE"), [1]);
    assert!(sort.is_movable() && sort.reads_keys_from_value());
    assert_eq!(sort.legacy_range(), (1, 1, 1));
    let migrate = KeySpec(&[
        KeyShape::Range {
            first: 3,
            last: 3,
            step: 1,
        },
        KeyShape::KeysReplacing {
            key_at: 3,
            keyword: "KEYS",
            from: 6,
            skips: &[("AUTH", 1), ("AUTH2", 2)],
        },
    ]);
    assert_eq!(positions(migrate, "MIGRATE h 1 k 0 5 COPY"), [3]);
    // Two spaces: an empty key.
    assert_eq!(positions(migrate, "MIGRATE h 1  0 5"), [3]);
    assert_eq!(positions(migrate, "MIGRATE h 1  0 5 COPY KEYS a b"), [8, 9]);
    assert_eq!(positions(migrate, "MIGRATE h 1  0 5 KEYS"), [3]);
    assert_eq!(positions(migrate, "MIGRATE h 1  0 5 KEYS KEYS"), [7]);
    // As Redis' migrateGetKeys: an option's argument is never the keyword.
    assert_eq!(positions(migrate, "MIGRATE h 1 k 0 5 AUTH KEYS a"), [3]);
    assert_eq!(positions(migrate, "MIGRATE h 1 k 0 5 AUTH2 u KEYS a"), [3]);
    assert!(positions(migrate, "MIGRATE h 1 k 0 5 KEYS a b").is_empty());
    assert!(migrate.is_movable());
    assert_eq!(migrate.legacy_range(), (3, 3, 1));
}

/// A spec of one run of keys (a range of step 1, a key count) answers
/// `single_range` exactly as `positions` does, for every argument count and
/// count argument; others answer `None`.
#[test]
fn single_range_is_positions_without_the_list() {
    const TWO_TO_THREE: &[KeyShape] = &[KeySpec::range(2, 3, 1)];
    const ALL_BUT_TWO: &[KeyShape] = &[KeySpec::range(1, -3, 1)];
    const STEP_TWO: &[KeyShape] = &[KeySpec::range(1, -1, 2)];
    let specs = [
        KeySpec::ONE,
        KeySpec::ALL,
        KeySpec::ALL_BUT_LAST,
        KeySpec(TWO_TO_THREE),
        KeySpec(ALL_BUT_TWO),
        KeySpec::NUMKEYS_AT_1,
        KeySpec::NUMKEYS_AT_2,
    ];
    for spec in specs {
        for argc in 1..8 {
            for count in ["0", "1", "2", "5", "-1", "x", "99"] {
                let line = (0..argc)
                    .map(|i| {
                        if i == 1 || i == 2 {
                            count.to_string()
                        } else {
                            format!("a{i}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                let args = ruvio_resp::OwnedArgs::from_iter(line.split(' ').map(str::as_bytes));
                let range: Vec<usize> = spec.single_range(args.args()).unwrap().collect();
                assert_eq!(range, positions(spec, &line), "{spec:?} {line}");
            }
        }
    }
    let args = ruvio_resp::OwnedArgs::from_iter([b"a".as_slice(), b"1", b"2", b"3"]);
    assert!(KeySpec(STEP_TWO).single_range(args.args()).is_none());
}
