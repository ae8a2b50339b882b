//! Unit tests of `Entry`: every layout, integers, value switches, owned lists,
//! byte edits in place (exact then greedy growth, raw strings).

use super::*;

fn s(bytes: &[u8]) -> NewValue<'_> {
    NewValue::Str { bytes, raw: false }
}

#[test]
fn every_layout_round_trips() {
    let long_key = vec![b'k'; 40];
    let long_val = vec![b'v'; 100];
    let cases: [(&[u8], &[u8], u8); 6] = [
        (b"key:000000012345", b"0123456789abcdef", 0),
        (b"k", &[b'x'; 31], 0),
        (b"key:000000012345", &long_val, VALUE_HEAP),
        (&long_key, b"short", KEY_HEAP),
        (&long_key, &long_val, KEY_HEAP | VALUE_HEAP),
        (b"", b"", 0),
    ];
    for (k, v, layout) in cases {
        let e = Entry::new(k, s(v), 7);
        assert_eq!(e.layout, layout, "{e:?}");
        assert_eq!(e.key(), k);
        assert_eq!(e.str_value(), StrRef::Bytes(v));
        assert_eq!(e.clock(), 7);
        let moved = e.rekey(b"other");
        assert_eq!(moved.key(), b"other");
        assert_eq!(moved.str_value(), StrRef::Bytes(v));
    }
}

#[test]
fn integers_are_inline() {
    let e = Entry::new(&[b'k'; 30], NewValue::Int(-42), 0);
    assert_eq!(e.layout, KEY_HEAP);
    assert_eq!(e.str_value(), StrRef::Int(-42));
    assert_eq!(e.encoding(), Encoding::Int);
    assert_eq!(e.refcount(), 1);
    let shared = Entry::new(b"k", NewValue::Int(5), 0);
    assert_eq!(shared.refcount(), SHARED_REFCOUNT);
    assert_eq!(shared.duplicate(b"c", 0).refcount(), 1);
    assert_eq!(shared.heap_bytes(), 0);
}

#[test]
fn set_value_switches_layouts() {
    let mut e = Entry::new(b"key", s(b"small"), 0);
    e.set_value(s(&[b'a'; 200]));
    assert_eq!(e.str_value(), StrRef::Bytes(&[b'a'; 200]));
    assert_eq!(e.encoding(), Encoding::Raw);
    e.set_value(s(&[b'b'; 150]));
    assert_eq!(e.str_value(), StrRef::Bytes(&[b'b'; 150]));
    e.set_value(NewValue::Int(12));
    assert_eq!(e.str_value(), StrRef::Int(12));
    e.set_value(s(b"tiny"));
    assert_eq!(e.str_value(), StrRef::Bytes(b"tiny"));
    assert_eq!(e.encoding(), Encoding::Embstr);
    assert_eq!(e.key(), b"key");
}

#[test]
fn list_entries_own_their_list() {
    use crate::values::list::End;
    let mut list = ListValue::new();
    for i in 0..1000 {
        list.push(
            End::Tail,
            format!("element-{i:04}").as_bytes(),
            crate::values::list::ListShape::with_fill(-2),
        );
    }
    for key in [&b"short"[..], &[b'k'; 40]] {
        let e = Entry::new_collection(key, Collection::List(list.deep_clone()), 3);
        assert_eq!(e.key(), key);
        assert_eq!(e.value().as_list().map(|l| l.len()), Some(1000));
        assert_eq!(e.encoding(), Encoding::Quicklist);
        let list_bytes = e.value().as_list().map_or(0, |l| l.heap_bytes());
        assert!(list_bytes > 0 && e.heap_bytes() >= list_bytes);
        let copy = e.duplicate(b"copy", 0);
        let mut moved = e.rekey(b"moved");
        if let ValueMut::List(l) = moved.value_mut() {
            l.pop(End::Head, crate::values::list::ListShape::with_fill(-2));
        }
        assert_eq!(moved.value().as_list().map(|l| l.len()), Some(999));
        assert_eq!(copy.value().as_list().map(|l| l.len()), Some(1000));
        // A string over a list frees the list (valgrind/ASan check the drop).
        moved.set_value(NewValue::Str {
            bytes: b"now a string",
            raw: false,
        });
        assert_eq!(moved.str_value(), StrRef::Bytes(b"now a string"));
        assert_eq!(moved.key(), b"moved");
    }
}

#[test]
fn edit_bytes_grows_exactly_then_greedily() {
    let mut small = Entry::new(b"k", s(b""), 0);
    small.edit_bytes(2, 1..2, |b| b[1] = 7);
    assert_eq!(small.layout, 0, "inline");
    assert_eq!(small.str_value(), StrRef::Bytes(b"\0\x07"));
    assert_eq!(small.encoding(), Encoding::Raw);
    let mut big = Entry::new(b"k", s(b""), 0);
    big.edit_bytes(128, 127..128, |b| b[127] = 1);
    assert_eq!(big.heap(3).capacity(), 128, "a new bitmap: exact");
    big.edit_bytes(129, 128..129, |b| b[128] = 2);
    assert!(big.heap(3).capacity() >= 256, "growing: greedy");
    assert_eq!(big.str_value().len(), 129);
    let mut n = Entry::new(b"k", NewValue::Int(7), 0);
    assert_eq!(n.edit_bytes(0, 0..0, |b| b.len()), 1);
    assert_eq!(
        (n.str_value(), n.encoding()),
        (StrRef::Bytes(b"7"), Encoding::Raw)
    );
}

#[test]
fn append_and_set_range_make_raw() {
    let mut e = Entry::new(b"key", NewValue::Int(12), 0);
    assert_eq!(e.append(b"34"), 4);
    assert_eq!(e.str_value(), StrRef::Bytes(b"1234"));
    assert_eq!(e.encoding(), Encoding::Raw);
    for _ in 0..20 {
        e.append(b"abcdefgh");
    }
    assert_eq!(e.str_value().len(), 164);
    assert_eq!(e.set_range(170, b"zz"), 172);
    let v = match e.str_value() {
        StrRef::Bytes(b) => b.to_vec(),
        StrRef::Int(_) => unreachable!(),
    };
    assert_eq!(&v[164..172], b"\0\0\0\0\0\0zz");
    let mut f = Entry::new(b"k", s(b"hello"), 0);
    assert_eq!(f.set_range(1, b"EL"), 5);
    assert_eq!(f.str_value(), StrRef::Bytes(b"hELlo"));
    assert_eq!(f.encoding(), Encoding::Raw);
}
