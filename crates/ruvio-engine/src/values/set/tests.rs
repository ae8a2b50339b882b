//! Property tests of the set encodings against a model.
//!
//! The model is a `BTreeSet` for the contents plus a direct, unoptimised
//! transcription of Redis 7.2's t_set.c encoding decisions (`setTypeCreate`,
//! `setTypeMaybeConvert`, `setTypeAddAux`, `maybeConvertIntset`,
//! `maybeConvertToIntset`). Why both: the encoding is visible (OBJECT ENCODING)
//! and decides reply order, so the value must convert exactly where Redis does,
//! and a bug in the packed code would show as wrong contents long before it
//! shows in a differential run. Thresholds are drawn small so that both paths
//! out of an intset (to a listpack and to a hash table) and the listpack's own
//! conversion happen in most cases.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::value::int_member;
use super::{SetEncoding, SetLimits, SetValue};
use crate::memsize::malloc_chunk_bytes;

/// Bytes of an intset's header (length and width), as Redis's `intset` struct.
const INTSET_HEADER_BYTES: usize = 8;

/// One operation on a set, as the commands drive `SetValue`.
#[derive(Clone, Debug)]
enum Op {
    /// SADD with these members (the size hint is their number).
    Add(Vec<Vec<u8>>),
    /// SREM of one member.
    Remove(Vec<u8>),
    /// SISMEMBER.
    Contains(Vec<u8>),
    /// SPOP picking this position (reduced modulo the length).
    Pop(usize),
    /// SRANDMEMBER picking this position (reduced modulo the length).
    Random(usize),
    /// SSCAN's way of reaching members: every position through `get`.
    Scan,
    /// A STORE result being offered the intset (`maybeConvertToIntset`).
    ToIntset,
}

/// The model: contents, and the encoding Redis 7.2 would have.
struct Model {
    members: BTreeSet<Vec<u8>>,
    /// Listpack order (insertion order, as Redis appends); meaningful while the
    /// encoding is `Listpack`.
    order: Vec<Vec<u8>>,
    encoding: SetEncoding,
    /// An intset's element width: it grows with the values inserted and never
    /// shrinks (Redis's `intsetUpgradeAndAdd`, no downgrade on removal).
    width: usize,
}

fn width_of(v: i64) -> usize {
    if i16::try_from(v).is_ok() {
        2
    } else if i32::try_from(v).is_ok() {
        4
    } else {
        8
    }
}

impl Model {
    /// `setTypeCreate`.
    fn create(first: &[u8], hint: usize, l: &SetLimits) -> Model {
        let encoding = if int_member(first).is_some() && hint <= l.intset_entries {
            SetEncoding::Intset
        } else if hint <= l.listpack_entries {
            SetEncoding::Listpack
        } else {
            SetEncoding::Hashtable
        };
        Model {
            members: BTreeSet::new(),
            order: Vec::new(),
            encoding,
            width: 2,
        }
    }

    /// `setTypeMaybeConvert`.
    fn maybe_convert(&mut self, hint: usize, l: &SetLimits) {
        let over = match self.encoding {
            SetEncoding::Listpack => hint > l.listpack_entries,
            SetEncoding::Intset => hint > l.intset_entries,
            SetEncoding::Hashtable => false,
        };
        if over {
            self.encoding = SetEncoding::Hashtable;
        }
    }

    /// `setTypeAddAux`, thresholds only (the 1 GiB safety size is never near).
    fn add(&mut self, m: &[u8], l: &SetLimits) -> bool {
        if self.members.contains(m) {
            return false;
        }
        let n = self.members.len();
        match self.encoding {
            SetEncoding::Hashtable => {}
            SetEncoding::Listpack => {
                if n < l.listpack_entries && m.len() <= l.listpack_value {
                    self.order.push(m.to_vec());
                } else {
                    self.encoding = SetEncoding::Hashtable;
                }
            }
            SetEncoding::Intset => {
                if let Some(v) = int_member(m) {
                    self.width = self.width.max(width_of(v));
                    if n + 1 > l.intset_entries {
                        self.encoding = SetEncoding::Hashtable;
                    }
                } else {
                    let longest = self
                        .ints()
                        .iter()
                        .map(|v| v.to_string().len())
                        .max()
                        .unwrap_or(0);
                    // Redis's strict `<` on both lengths here.
                    if n < l.listpack_entries
                        && m.len() < l.listpack_value
                        && longest < l.listpack_value
                    {
                        self.encoding = SetEncoding::Listpack;
                        self.order = self.ints().iter().map(|v| v.to_string().into()).collect();
                        self.order.push(m.to_vec());
                    } else {
                        self.encoding = SetEncoding::Hashtable;
                    }
                }
            }
        }
        self.members.insert(m.to_vec());
        true
    }

    fn remove(&mut self, m: &[u8]) -> bool {
        self.order.retain(|o| o != m);
        self.members.remove(m)
    }

    /// The members as integers, ascending (an intset's order).
    fn ints(&self) -> Vec<i64> {
        let mut v: Vec<i64> = self.members.iter().filter_map(|m| int_member(m)).collect();
        v.sort_unstable();
        v
    }

    /// `maybeConvertToIntset`, for an all-integer set.
    fn maybe_convert_to_intset(&mut self, l: &SetLimits) {
        let all_ints = self.members.iter().all(|m| int_member(m).is_some());
        if self.encoding == SetEncoding::Intset
            || !all_ints
            || self.members.len() > l.intset_entries
        {
            return;
        }
        self.encoding = SetEncoding::Intset;
        self.width = self.ints().into_iter().map(width_of).max().unwrap_or(2);
    }
}

fn bytes_of(set: &SetValue) -> Vec<Vec<u8>> {
    let mut digits = itoa::Buffer::new();
    set.iter().map(|m| m.bytes(&mut digits).to_vec()).collect()
}

fn member_at(set: &SetValue, i: usize) -> Option<Vec<u8>> {
    let mut digits = itoa::Buffer::new();
    set.get(i).map(|m| m.bytes(&mut digits).to_vec())
}

/// Everything the value must agree with the model on, after every operation.
fn check(set: &SetValue, model: &Model) {
    assert_eq!(set.len(), model.members.len());
    assert_eq!(set.is_empty(), model.members.is_empty());
    assert_eq!(set.encoding(), model.encoding, "{set:?}");
    let got = bytes_of(set);
    let as_set: BTreeSet<Vec<u8>> = got.iter().cloned().collect();
    assert_eq!(as_set.len(), got.len(), "no member twice: {set:?}");
    assert_eq!(as_set, model.members);
    match model.encoding {
        SetEncoding::Intset => {
            let want: Vec<Vec<u8>> = model.ints().iter().map(|v| v.to_string().into()).collect();
            assert_eq!(got, want, "an intset iterates ascending");
            assert_eq!(
                set.heap_bytes(),
                malloc_chunk_bytes(INTSET_HEADER_BYTES + model.width * model.members.len()),
                "an intset is one block of header and fixed-width values"
            );
        }
        SetEncoding::Listpack => {
            assert_eq!(got, model.order, "a listpack keeps insertion order");
            assert!(set.heap_bytes() > 0);
        }
        SetEncoding::Hashtable => {
            let member_bytes: usize = model.members.iter().map(Vec::len).sum();
            assert!(set.heap_bytes() >= member_bytes);
        }
    }
    assert!(member_at(set, set.len()).is_none());
}

fn member() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (-40i64..40).prop_map(|v| v.to_string().into_bytes()),
        2 => prop_oneof![
            Just(i64::MIN), Just(i64::MAX), Just(i16::MAX as i64 + 1),
            Just(i32::MIN as i64 - 1), Just(123_456_789_012i64), Just(-70_000i64),
        ]
        .prop_map(|v| v.to_string().into_bytes()),
        1 => prop_oneof![Just(b"-0".to_vec()), Just(b"01".to_vec()), Just(b"+1".to_vec()),
            Just(b" 1".to_vec()), Just(b"9223372036854775808".to_vec())],
        3 => proptest::collection::vec(prop_oneof![Just(b'a'), Just(b'b'), Just(b'7'), any::<u8>()], 0..12),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => proptest::collection::vec(member(), 1..6).prop_map(Op::Add),
        3 => member().prop_map(Op::Remove),
        2 => member().prop_map(Op::Contains),
        2 => any::<usize>().prop_map(Op::Pop),
        1 => any::<usize>().prop_map(Op::Random),
        1 => Just(Op::Scan),
        1 => Just(Op::ToIntset),
    ]
}

fn limits() -> impl Strategy<Value = SetLimits> {
    (0usize..10, 0usize..10, 0usize..12).prop_map(|(i, e, v)| SetLimits {
        intset_entries: i,
        listpack_entries: e,
        listpack_value: v,
    })
}

/// Apply `op` to both; `None` is a deleted (empty) key, as the keyspace keeps it.
fn apply(set: &mut Option<SetValue>, model: &mut Option<Model>, op: &Op, l: &SetLimits) {
    match op {
        Op::Add(ms) => {
            if let (Some(s), Some(m)) = (set.as_mut(), model.as_mut()) {
                s.maybe_convert(ms.len(), l);
                m.maybe_convert(ms.len(), l);
            } else {
                *set = Some(SetValue::create(&ms[0], ms.len(), l));
                *model = Some(Model::create(&ms[0], ms.len(), l));
            }
            let (s, m) = (set.as_mut().unwrap(), model.as_mut().unwrap());
            for x in ms {
                assert_eq!(s.add(x, l), m.add(x, l), "adding {x:?}");
            }
        }
        Op::Remove(x) => {
            if let (Some(s), Some(m)) = (set.as_mut(), model.as_mut()) {
                assert_eq!(s.remove(x), m.remove(x));
            }
        }
        Op::Contains(x) => {
            let want = model.as_ref().is_some_and(|m| m.members.contains(x));
            assert_eq!(set.as_ref().is_some_and(|s| s.contains(x)), want);
        }
        Op::Pop(i) => {
            if let (Some(s), Some(m)) = (set.as_mut(), model.as_mut()) {
                let at = i % s.len();
                let expected = match m.encoding {
                    SetEncoding::Listpack => Some(m.order[at].clone()),
                    SetEncoding::Intset => Some(m.ints()[at].to_string().into_bytes()),
                    SetEncoding::Hashtable => None,
                };
                let got = s.remove_index(at).expect("a position below len").to_vec();
                if let Some(e) = expected {
                    assert_eq!(got, e, "remove_index follows iteration order");
                }
                assert!(m.remove(&got), "popped a member: {got:?}");
            }
        }
        Op::Random(i) => {
            if let (Some(s), Some(m)) = (set.as_ref(), model.as_ref()) {
                let got = member_at(s, i % s.len()).expect("a position below len");
                assert!(m.members.contains(&got));
            }
        }
        Op::Scan => {
            if let Some(s) = set.as_ref() {
                let by_position: Vec<Vec<u8>> =
                    (0..s.len()).map(|i| member_at(s, i).unwrap()).collect();
                assert_eq!(by_position, bytes_of(s), "get(i) is iteration order");
            }
        }
        Op::ToIntset => {
            if let (Some(s), Some(m)) = (set.as_mut(), model.as_mut()) {
                if s.iter()
                    .all(|x| int_member(x.bytes(&mut itoa::Buffer::new())).is_some())
                {
                    s.maybe_convert_to_intset(l);
                    m.maybe_convert_to_intset(l);
                }
            }
        }
    }
    if model.as_ref().is_some_and(|m| m.members.is_empty()) {
        assert!(set.as_ref().unwrap().is_empty());
        *set = None;
        *model = None;
    }
    if let (Some(s), Some(m)) = (set.as_ref(), model.as_ref()) {
        check(s, m);
        let copy = s.deep_clone();
        assert_eq!(copy.encoding(), s.encoding());
        assert_eq!(bytes_of(&copy), bytes_of(s));
    }
}

#[test]
fn intset_converts_to_listpack_then_hashtable() {
    let l = SetLimits {
        intset_entries: 4,
        listpack_entries: 3,
        listpack_value: 8,
    };
    let mut s = SetValue::create(b"1", 1, &l);
    assert!(s.add(b"1", &l) && s.add(b"2", &l));
    assert_eq!(s.encoding(), SetEncoding::Intset);
    assert!(s.add(b"x", &l));
    assert_eq!(s.encoding(), SetEncoding::Listpack);
    assert_eq!(bytes_of(&s), [b"1".to_vec(), b"2".to_vec(), b"x".to_vec()]);
    assert!(s.add(b"y", &l));
    assert_eq!(s.encoding(), SetEncoding::Hashtable);
    assert!(s.remove(b"x") && s.remove(b"y"));
    assert_eq!(s.encoding(), SetEncoding::Hashtable, "never converts back");
}

#[test]
fn intset_converts_to_hashtable_when_full() {
    let l = SetLimits {
        intset_entries: 2,
        listpack_entries: 128,
        listpack_value: 64,
    };
    let mut s = SetValue::create(b"1", 1, &l);
    for m in [b"1", b"2", b"3"] {
        s.add(m, &l);
    }
    assert_eq!(s.encoding(), SetEncoding::Hashtable);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random operations keep contents, length, order, heap size and encoding
    /// where the model says, and encodings only ever move up.
    #[test]
    fn set_value_follows_the_model(l in limits(), ops in proptest::collection::vec(op(), 1..60)) {
        let (mut set, mut model) = (None, None);
        let rank = |e: SetEncoding| match e {
            SetEncoding::Intset => 0,
            SetEncoding::Listpack => 1,
            SetEncoding::Hashtable => 2,
        };
        for op in &ops {
            let before = set.as_ref().map(SetValue::encoding);
            apply(&mut set, &mut model, op, &l);
            let after = set.as_ref().map(SetValue::encoding);
            if let (Some(b), Some(a), false) = (before, after, matches!(op, Op::ToIntset)) {
                prop_assert!(rank(a) >= rank(b), "{b:?} -> {a:?} by {op:?}");
            }
        }
    }
}
