//! Round trips of every type and encoding through the payload format, byte
//! layouts checked against Redis's, and bad payloads (random, truncated, bit
//! flips) that must be refused without a panic.

use proptest::prelude::*;

use super::decode::{LoadError, Loaded};
use super::*;
use crate::engine::EngineConfig;
use crate::keyspace::Entry;
use crate::values::rdb::listpack;

/// Build `loaded` as Ruvio stores it, DUMP it, and decode the payload again.
fn round_trip(loaded: Loaded) -> (Loaded, Vec<u8>) {
    let config = EngineConfig::default();
    let entry: Entry = build::entry(&config, b"k", loaded, 0).expect("builds");
    let payload = dump_payload(entry.value());
    let object = verify_payload(&payload).expect("verifies");
    (load_payload(object).expect("loads"), payload)
}

fn bytes(items: &[&str]) -> Vec<Vec<u8>> {
    items.iter().map(|s| s.as_bytes().to_vec()).collect()
}

#[test]
fn small_values_dump_as_redis_7_0_does() {
    // Payloads from redis-server 7.0's DUMP (SET k 1 / SET k hello / RPUSH k a b).
    let (_, p) = round_trip(Loaded::Str(b"1".to_vec()));
    assert_eq!(&p[..4], &[0x00, 0xc0, 0x01, 0x0a]);
    let (_, p) = round_trip(Loaded::Str(b"hello".to_vec()));
    assert_eq!(&p[..7], b"\x00\x05hello");
    let (_, p) = round_trip(Loaded::List(bytes(&["a", "b"])));
    assert_eq!(
        &p[..17],
        b"\x12\x01\x02\x0d\x0d\x00\x00\x00\x02\x00\x81a\x02\x81b\x02\xff"
    );
}

#[test]
fn every_type_round_trips() {
    let big: Vec<Vec<u8>> = (0..1000)
        .map(|i| format!("element-{i}").into_bytes())
        .collect();
    let cases = vec![
        Loaded::Str(b"12345678901234567890123".to_vec()),
        Loaded::Str(vec![b'z'; 500]),
        Loaded::Str(b"-9223372036854775808".to_vec()),
        Loaded::List(bytes(&["1", "x", "-70000", "9999999999"])),
        Loaded::List(big.clone()),
        Loaded::Set(bytes(&["1", "2", "70000", "-5000000000"])),
        Loaded::Set(bytes(&["a", "b"])),
        Loaded::Set(big.clone()),
        Loaded::ZSet(vec![
            (b"a".to_vec(), 1.5),
            (b"b".to_vec(), 2.0),
            (b"c".to_vec(), f64::INFINITY),
        ]),
        Loaded::ZSet(
            big.iter()
                .enumerate()
                .map(|(i, m)| (m.clone(), i as f64 / 3.0))
                .collect(),
        ),
        Loaded::Hash(vec![
            (b"f".to_vec(), b"v".to_vec(), 0),
            (b"n".to_vec(), b"12".to_vec(), 0),
        ]),
        Loaded::Hash(big.iter().map(|m| (m.clone(), m.clone(), 0)).collect()),
        Loaded::Hash(vec![
            (b"f".to_vec(), b"v".to_vec(), 4_000_000_000_000),
            (b"g".to_vec(), b"w".to_vec(), 0),
        ]),
    ];
    for case in cases {
        let (back, _) = round_trip(case_clone(&case));
        assert_eq!(normalized(back), normalized(case));
    }
}

fn case_clone(l: &Loaded) -> Loaded {
    match l {
        Loaded::Str(s) => Loaded::Str(s.clone()),
        Loaded::List(v) => Loaded::List(v.clone()),
        Loaded::Set(v) => Loaded::Set(v.clone()),
        Loaded::ZSet(v) => Loaded::ZSet(v.clone()),
        Loaded::Hash(v) => Loaded::Hash(v.clone()),
        Loaded::Stream(_) => unreachable!("no stream case here"),
    }
}

/// Sets and hashes compare as sorted contents (their order is the encoding's).
fn normalized(l: Loaded) -> Loaded {
    match l {
        Loaded::Set(mut v) => {
            v.sort();
            Loaded::Set(v)
        }
        Loaded::Hash(mut v) => {
            v.sort();
            Loaded::Hash(v)
        }
        Loaded::ZSet(mut v) => {
            v.sort_by(|a, b| a.0.cmp(&b.0));
            Loaded::ZSet(v)
        }
        other => other,
    }
}

#[test]
fn old_encodings_load() {
    // RDB 6 ziplist list [a, 5]: zlbytes 15, tail 11, len 2, entries, end.
    let zl = [15, 0, 0, 0, 11, 0, 0, 0, 2, 0, 0, 1, b'a', 3, 0xf6, 0xff];
    let mut object = vec![types::LIST_ZIPLIST, zl.len() as u8];
    object.extend_from_slice(&zl);
    // A ziplist's zlbytes covers the whole blob (16 bytes here).
    object[2] = 16;
    assert_eq!(load_payload(&object), Ok(Loaded::List(bytes(&["a", "5"]))));
    // RDB 1-7 sorted set with text scores.
    let object = [types::ZSET, 1, 1, b'm', 3, b'2', b'.', b'5'];
    assert_eq!(
        load_payload(&object),
        Ok(Loaded::ZSet(vec![(b"m".to_vec(), 2.5)]))
    );
    // Zipmap {f: v}.
    let object = [types::HASH_ZIPMAP, 7, 1, 1, b'f', 1, 0, b'v', 0xff];
    assert_eq!(
        load_payload(&object).map(normalized),
        Ok(Loaded::Hash(vec![(b"f".to_vec(), b"v".to_vec(), 0)]))
    );
}

/// A ziplist (Redis < 7.0) of short strings and small integers.
fn ziplist(items: &[&str]) -> Vec<u8> {
    let mut entries = Vec::new();
    let mut prev = 0usize;
    for item in items {
        let start = entries.len();
        entries.push(prev as u8);
        match item.parse::<i64>() {
            Ok(v @ 0..=12) => entries.push(0xf1 + v as u8),
            Ok(v) if i8::try_from(v).is_ok() => entries.extend_from_slice(&[0xfe, v as u8]),
            Ok(v) => {
                entries.push(0xc0);
                entries.extend_from_slice(&(v as i16).to_le_bytes());
            }
            Err(_) => {
                entries.push(item.len() as u8);
                entries.extend_from_slice(item.as_bytes());
            }
        }
        prev = entries.len() - start;
    }
    let total = 10 + entries.len() + 1;
    let mut zl = (total as u32).to_le_bytes().to_vec();
    zl.extend_from_slice(&((total - 1 - prev) as u32).to_le_bytes());
    zl.extend_from_slice(&(items.len() as u16).to_le_bytes());
    zl.extend_from_slice(&entries);
    zl.push(0xff);
    zl
}

/// The object bytes of type `kind` holding one blob.
fn blob_object(kind: u8, blob: &[u8]) -> Vec<u8> {
    let mut object = vec![kind];
    encode::write_len(&mut object, blob.len() as u64);
    object.extend_from_slice(blob);
    object
}

#[test]
fn ziplist_encodings_of_redis_6_load() {
    let zl = ziplist(&["a", "7", "-100", "3000"]);
    let want = Loaded::List(bytes(&["a", "7", "-100", "3000"]));
    assert_eq!(
        load_payload(&blob_object(types::LIST_ZIPLIST, &zl)),
        Ok(want)
    );
    let zl = ziplist(&["m", "1.5", "n", "2"]);
    assert_eq!(
        load_payload(&blob_object(types::ZSET_ZIPLIST, &zl)),
        Ok(Loaded::ZSet(vec![
            (b"m".to_vec(), 1.5),
            (b"n".to_vec(), 2.0)
        ]))
    );
    let zl = ziplist(&["f", "v"]);
    assert_eq!(
        load_payload(&blob_object(types::HASH_ZIPLIST, &zl)),
        Ok(Loaded::Hash(vec![(b"f".to_vec(), b"v".to_vec(), 0)]))
    );
    // A quicklist (RDB 7-9) of two ziplist nodes.
    let mut object = vec![types::LIST_QUICKLIST, 2];
    for node in [ziplist(&["a", "b"]), ziplist(&["5"])] {
        encode::write_len(&mut object, node.len() as u64);
        object.extend_from_slice(&node);
    }
    assert_eq!(
        load_payload(&object),
        Ok(Loaded::List(bytes(&["a", "b", "5"])))
    );
    // An odd ziplist where pairs are expected is corrupt.
    let zl = ziplist(&["f", "v", "g"]);
    assert_eq!(
        load_payload(&blob_object(types::HASH_ZIPLIST, &zl)),
        Err(LoadError::Corrupt)
    );
}

#[test]
fn lzf_strings_and_plain_quicklist_nodes_load() {
    let text = "abcabcabcabcabcabcabcabcabcabcabcabc".repeat(3);
    let mut object = vec![types::STRING];
    encode::write_string(&mut object, text.as_bytes());
    assert_eq!(object[1], 0xc3, "compressed");
    assert_eq!(
        load_payload(&object),
        Ok(Loaded::Str(text.clone().into_bytes()))
    );
    // QUICKLIST_2 with one plain node (container 1) and one packed node.
    let mut object = vec![types::LIST_QUICKLIST_2, 2, 1];
    encode::write_string(&mut object, text.as_bytes());
    object.push(2);
    let mut lp = listpack::ListpackWriter::new();
    lp.push(b"tail");
    encode::write_string(&mut object, &lp.finish());
    assert_eq!(
        load_payload(&object),
        Ok(Loaded::List(vec![text.into_bytes(), b"tail".to_vec()]))
    );
}

#[test]
fn duplicates_nan_and_empty_collections_are_corrupt() {
    let config = EngineConfig::default();
    let bad = [
        Loaded::Set(bytes(&["a", "a"])),
        Loaded::Hash(vec![
            (b"f".to_vec(), b"1".to_vec(), 0),
            (b"f".to_vec(), b"2".to_vec(), 0),
        ]),
        Loaded::ZSet(vec![(b"m".to_vec(), 1.0), (b"m".to_vec(), 2.0)]),
        Loaded::ZSet(vec![(b"m".to_vec(), f64::NAN)]),
        Loaded::List(Vec::new()),
        Loaded::Set(Vec::new()),
        Loaded::Hash(vec![(b"f".to_vec(), b"v".to_vec(), u64::MAX - 1)]),
    ];
    for loaded in bad {
        assert!(build::entry(&config, b"k", loaded, 0).is_err());
    }
}

#[test]
fn modules_are_refused_by_name_and_a_cut_stream_is_corrupt() {
    assert_eq!(load_payload(&[types::MODULE_2, 0]), Err(LoadError::Module));
    assert_eq!(
        load_payload(&[types::STREAM_LISTPACKS_2, 0]),
        Err(LoadError::Corrupt)
    );
}

/// A stream with deleted entries, several nodes and a group with pending
/// entries loads back to the same stream: its DUMP is the same bytes; every cut
/// of the payload and every flipped byte loads or is refused, never panics.
#[test]
fn streams_round_trip_with_their_groups() {
    use crate::streams::id::StreamId;
    use crate::streams::StreamValue;
    let mut s = StreamValue::new();
    for i in 1..=250u64 {
        let v = i.to_string();
        let fields: Vec<&[u8]> = match i % 5 {
            0 => vec![b"other", v.as_bytes()],
            _ => vec![b"event", b"done", b"n", v.as_bytes()],
        };
        s.append(StreamId::new(i, i % 3), &fields, Default::default());
    }
    s.delete(StreamId::new(3, 0));
    s.delete(StreamId::new(120, 0));
    s.groups_mut().create(b"g", StreamId::new(10, 1), 10);
    s.groups_mut().create(b"late", StreamId::MIN, -1);
    s.groups_mut()
        .create_consumer(b"g", b"alice", 1_700_000_000_000);
    s.groups_mut()
        .create_consumer(b"g", b"bob", 1_700_000_000_001);
    s.groups_mut()
        .deliver(b"g", b"alice", StreamId::new(1, 1), 1_700_000_000_002);
    s.groups_mut()
        .deliver(b"g", b"bob", StreamId::new(2, 2), 1_700_000_000_003);
    let payload = dump_payload(crate::value::ValueRef::Stream(&s));
    let object = verify_payload(&payload).expect("valid");
    let Loaded::Stream(loaded) = load_payload(object).expect("loads") else {
        panic!("not a stream")
    };
    let back = super::stream::build_stream(*loaded).expect("builds");
    assert_eq!(back.len(), 248);
    let again = dump_payload(crate::value::ValueRef::Stream(&back));
    assert_eq!(again, payload);
    let load_and_build = |bytes: &[u8]| {
        let _ = load_payload(bytes).map(|l| match l {
            Loaded::Stream(l) => super::stream::build_stream(*l).map(|_| ()),
            _ => Ok(()),
        });
    };
    for cut in 0..object.len() {
        load_and_build(&object[..cut]);
    }
    for at in 1..object.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut bad = object.to_vec();
            bad[at] ^= flip;
            load_and_build(&bad);
        }
    }
}

#[test]
fn bad_footers_are_refused() {
    let mut p = dump_payload(crate::value::ValueRef::Str(crate::value::StrRef::Bytes(
        b"v",
    )));
    assert!(verify_payload(&p).is_some());
    let last = p.len() - 1;
    p[last] ^= 1;
    assert!(verify_payload(&p).is_none());
    assert!(verify_payload(&p[..9]).is_none());
}

proptest! {
    #[test]
    fn random_objects_never_panic(object in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = load_payload(&object);
    }

    #[test]
    fn truncated_and_flipped_payloads_never_panic(cut in 0usize..2000, flip in 0usize..2000, bit in 0u8..8) {
        let big: Vec<Vec<u8>> = (0..200).map(|i| format!("e{i}").into_bytes()).collect();
        for loaded in [Loaded::List(big.clone()), Loaded::Set(big.clone()),
                       Loaded::Hash(big.iter().map(|m| (m.clone(), m.clone(), 0)).collect()),
                       Loaded::ZSet(big.iter().map(|m| (m.clone(), 1.0)).collect())] {
            let (_, payload) = round_trip(loaded);
            let body = &payload[..payload.len() - 10];
            let _ = load_payload(&body[..cut.min(body.len())]);
            let mut flipped = body.to_vec();
            let i = flip % flipped.len();
            flipped[i] ^= 1 << bit;
            if let Ok(l) = load_payload(&flipped) {
                let _ = build::entry(&EngineConfig::default(), b"k", l, 0);
            }
        }
    }
}

/// Redis 5.0-6.2's type 15 (no first ID, max-deleted ID, entries-added or
/// entries-read) and 7.2's type 21 (consumers' active time) load into the same
/// stream as type 19, made here by editing a type-19 object whose counters are
/// all one byte: entries-added is the length then, and a group at the last ID
/// has read them all, as Redis's loader estimates.
#[test]
fn streams_load_from_types_15_and_21() {
    use crate::streams::id::StreamId;
    use crate::streams::StreamValue;
    let build = |groups: bool| {
        let mut s = StreamValue::new();
        for i in 1..=5u64 {
            s.append(StreamId::new(i, 1), &[b"f", b"v"], Default::default());
        }
        if groups {
            s.groups_mut().create(b"g", StreamId::new(5, 1), 5);
            s.groups_mut()
                .create_consumer(b"g", b"alice", 1_700_000_000_000);
            s.groups_mut()
                .deliver(b"g", b"alice", StreamId::new(2, 1), 1_700_000_000_001);
        }
        let mut object = Vec::new();
        encode::write_object(&mut object, crate::value::ValueRef::Stream(&s));
        object
    };
    let (plain, with_group) = (build(false), build(true));
    // The tail after the nodes without groups: length, last ID, first ID,
    // max-deleted ID, entries-added, group count (one byte each).
    let nodes_end = plain.len() - 9;
    let tail = &with_group[nodes_end..];
    assert_eq!(&tail[..9], &[5, 5, 1, 1, 1, 0, 0, 5, 1]);
    let group = &tail[9..];
    // Group: name (2 bytes), last ID (2), entries-read (1), then the rest.
    let mut v15 = vec![types::STREAM_LISTPACKS];
    v15.extend_from_slice(&with_group[1..nodes_end]);
    v15.extend_from_slice(&tail[..3]);
    v15.push(1);
    v15.extend_from_slice(&group[..4]);
    v15.extend_from_slice(&group[5..]);
    let mut v21 = with_group.clone();
    v21[0] = types::STREAM_LISTPACKS_3;
    let seen = v21
        .windows(6)
        .position(|w| w == b"\x05alice")
        .expect("consumer")
        + 6
        + 8;
    v21.splice(seen..seen, 1_700_000_000_005i64.to_le_bytes());
    for (kind, object) in [(15, v15), (21, v21)] {
        let Loaded::Stream(loaded) = load_payload(&object).expect("loads") else {
            panic!("type {kind} is not a stream")
        };
        let s = super::stream::build_stream(*loaded).expect("builds");
        let mut again = Vec::new();
        encode::write_object(&mut again, crate::value::ValueRef::Stream(&s));
        assert_eq!(again, with_group, "type {kind}");
    }
}
