//! `Entry`: one key, its value, its expiry and its access clock in 48 bytes.
//!
//! ```text
//!  0        8                      16                                   48
//!  +--------+----------------------+------------------------------------+
//!  | expire | layout kind flags    |  area: 32 bytes                    |
//!  | at ms  | klen vlen clock(24b) |  W0      W1      W2      W3         |
//!  +--------+----------------------+------------------------------------+
//! ```
//!
//! The 32-byte area holds the key and the value, each either inline or as a thin
//! [`HeapStr`] pointer in a fixed word:
//!
//! | layout | key                  | value                         | fits when            |
//! |--------|----------------------|-------------------------------|----------------------|
//! | L0     | `area[0..klen]`      | `area[klen..klen+vlen]`       | klen + vlen <= 32    |
//! | L1     | `area[0..klen]`      | pointer in W3                 | klen <= 24           |
//! | L2     | pointer in W3        | `area[0..vlen]`               | vlen <= 24           |
//! | L3     | pointer in W2        | pointer in W3                 | always               |
//!
//! Integers are 8 inline bytes, so an int value never needs a heap block. A
//! `key:000000012345` key with a 16-byte value is L0: no heap allocation at all.
//! `expire_at_ms == 0` means "no TTL" (Redis deletes any key whose expiry is in the
//! past before storing it, so 0 never needs to be stored). A vacant slab slot keeps
//! the next free slot's index in `expire_at_ms`.
//!
//! Pointers live in `MaybeUninit<u8>` storage so moving an `Entry` copies their
//! provenance along with their bytes.

use std::mem::MaybeUninit;

use smallvec::SmallVec;

mod undo;
pub(crate) use undo::FlatCopy;

use super::heapstr::{greedy_capacity, HeapStr};
use crate::clock::CLOCK_MASK;
use crate::memsize::malloc_chunk_bytes;
use crate::value::{
    Encoding, StrRef, ValueMut, ValueRef, EMBSTR_BYTES_MAX, SHARED_INTEGERS, SHARED_REFCOUNT,
};
use crate::values::hash::{HashEncoding, HashValue};
use crate::values::list::{ListEncoding, ListValue};
use crate::values::set::{SetEncoding, SetValue};
use crate::values::stream::StreamValue;
use crate::values::zset::{ZSetEncoding, ZSetValue};

const _: () = assert!(std::mem::size_of::<HeapStr>() == WORD_BYTES);
const _: () = assert!(std::mem::size_of::<ListValue>() == WORD_BYTES);
const _: () = assert!(std::mem::size_of::<HashValue>() == WORD_BYTES);
const _: () = assert!(std::mem::size_of::<ZSetValue>() == WORD_BYTES);
const _: () = assert!(std::mem::size_of::<SetValue>() == WORD_BYTES);
const _: () = assert!(std::mem::size_of::<StreamValue>() == WORD_BYTES);

/// Size of an entry; asserted below.
pub const ENTRY_BYTES: usize = 48;
/// Bytes shared by the inline key and value.
const AREA_BYTES: usize = 32;
const WORD_BYTES: usize = 8;
/// Longest inline key when the value takes the last word (L1) and longest inline
/// value when the key does (L2).
const INLINE_BESIDE_WORD_MAX: usize = AREA_BYTES - WORD_BYTES;
/// Inline lengths are stored in a byte.
const _: () = assert!(AREA_BYTES <= u8::MAX as usize);

// `layout` bits.
const KEY_HEAP: u8 = 1;
const VALUE_HEAP: u8 = 2;
const VACANT: u8 = 0x80;

/// What the value is. Collections always live behind the pointer in W3 (with the
/// `VALUE_HEAP` layout bit), as one-word owned handles; every match over kinds is
/// exhaustive, so a new kind is a compile error wherever it must be handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Kind {
    /// String bytes, inline or a [`HeapStr`].
    Str,
    /// An `i64`, always inline.
    Int,
    /// A [`ListValue`] in W3.
    List,
    /// A [`HashValue`] in W3.
    Hash,
    /// A [`ZSetValue`] in W3.
    ZSet,
    /// A [`SetValue`] in W3.
    Set,
    /// A [`StreamValue`] in W3.
    Stream,
}

/// What word 3 owns when the value is on the heap. [`Entry::write_heap_value`] and
/// [`Entry::take_heap_value`] are the only conversions between it and the raw word.
pub(crate) enum HeapValue {
    /// A string too long to sit inline.
    Str(HeapStr),
    /// A list.
    List(ListValue),
    /// A hash.
    Hash(HashValue),
    /// A sorted set.
    ZSet(ZSetValue),
    /// A set.
    Set(SetValue),
    /// A stream.
    Stream(StreamValue),
}

impl HeapValue {
    fn kind(&self) -> Kind {
        match self {
            HeapValue::Str(_) => Kind::Str,
            HeapValue::List(_) => Kind::List,
            HeapValue::Hash(_) => Kind::Hash,
            HeapValue::ZSet(_) => Kind::ZSet,
            HeapValue::Set(_) => Kind::Set,
            HeapValue::Stream(_) => Kind::Stream,
        }
    }
}

/// A collection about to be stored under a key.
#[cfg_attr(not(test), allow(dead_code))] // until the list commands land
pub enum Collection {
    /// A list.
    List(ListValue),
    /// A hash.
    Hash(HashValue),
    /// A sorted set.
    ZSet(ZSetValue),
    /// A set.
    Set(SetValue),
    /// A stream.
    Stream(StreamValue),
}

// `flags` bits.
/// The string was modified in place (APPEND/SETRANGE): Redis reports `raw`.
const FLAG_RAW: u8 = 1;
/// An integer that is a private object in Redis (created by COPY): refcount 1.
const FLAG_PRIVATE_INT: u8 = 2;

/// One keyspace entry (or a vacant slab slot).
#[repr(C, align(8))]
pub struct Entry {
    expire_at_ms: u64,
    layout: u8,
    kind: Kind,
    flags: u8,
    klen: u8,
    vlen: u8,
    clock: [u8; 3],
    area: [MaybeUninit<u8>; AREA_BYTES],
}

const _: () = assert!(std::mem::size_of::<Entry>() == ENTRY_BYTES);

// SAFETY: an Entry uniquely owns its heap blocks, like a Box.
unsafe impl Send for Entry {}

/// A value about to be stored.
#[derive(Clone, Copy, Debug)]
pub enum NewValue<'a> {
    /// String bytes; `raw` marks strings modified in place (OBJECT ENCODING `raw`).
    Str { bytes: &'a [u8], raw: bool },
    /// An integer (OBJECT ENCODING `int`).
    Int(i64),
}

/// The key part while assembling an entry.
enum KeyPart<'a> {
    Bytes(&'a [u8]),
    Heap(HeapStr),
}

/// The value part while assembling an entry.
enum ValuePart<'a> {
    Inline(&'a [u8]),
    Heap(HeapValue),
}

/// An entry taken apart (RENAME/MOVE rebuild it around another key).
struct Parts {
    key_inline: [u8; AREA_BYTES],
    key_heap: Option<HeapStr>,
    klen: usize,
    value_inline: [u8; AREA_BYTES],
    value_heap: Option<HeapValue>,
    vlen: usize,
    kind: Kind,
    flags: u8,
    clock: u32,
    expire_at_ms: u64,
}

impl Entry {
    /// A vacant slab slot pointing at the next free slot.
    pub fn vacant(next_free: u32) -> Entry {
        Entry {
            expire_at_ms: next_free as u64,
            layout: VACANT,
            kind: Kind::Str,
            flags: 0,
            klen: 0,
            vlen: 0,
            clock: [0; 3],
            area: [MaybeUninit::uninit(); AREA_BYTES],
        }
    }

    /// True for a vacant slab slot.
    pub fn is_vacant(&self) -> bool {
        self.layout == VACANT
    }

    /// The next free slot of a vacant slot.
    pub fn next_free(&self) -> u32 {
        debug_assert!(self.is_vacant());
        self.expire_at_ms as u32
    }

    /// A new entry with no expiry.
    pub fn new(key: &[u8], value: NewValue<'_>, clock: u32) -> Entry {
        let (kind, flags, int_bytes);
        let part = match value {
            NewValue::Str { bytes, raw } => {
                kind = Kind::Str;
                flags = if raw { FLAG_RAW } else { 0 };
                ValuePart::Inline(bytes)
            }
            NewValue::Int(n) => {
                kind = Kind::Int;
                flags = 0;
                int_bytes = n.to_ne_bytes();
                ValuePart::Inline(&int_bytes)
            }
        };
        Self::assemble(KeyPart::Bytes(key), part, kind, flags, clock, 0)
    }

    /// A new entry holding a collection, with no expiry.
    #[cfg_attr(not(test), allow(dead_code))] // until the list commands land
    pub fn new_collection(key: &[u8], value: Collection, clock: u32) -> Entry {
        let value = match value {
            Collection::List(list) => HeapValue::List(list),
            Collection::Hash(hash) => HeapValue::Hash(hash),
            Collection::ZSet(zset) => HeapValue::ZSet(zset),
            Collection::Set(set) => HeapValue::Set(set),
            Collection::Stream(stream) => HeapValue::Stream(stream),
        };
        let kind = value.kind();
        Self::assemble(
            KeyPart::Bytes(key),
            ValuePart::Heap(value),
            kind,
            0,
            clock,
            0,
        )
    }

    /// Lay out `key` and `value` (see the module table).
    fn assemble(
        key: KeyPart<'_>,
        value: ValuePart<'_>,
        kind: Kind,
        flags: u8,
        clock: u32,
        expire_at_ms: u64,
    ) -> Entry {
        let mut e = Entry {
            expire_at_ms,
            layout: 0,
            kind,
            flags,
            klen: 0,
            vlen: 0,
            clock: [0; 3],
            area: [MaybeUninit::uninit(); AREA_BYTES],
        };
        e.set_clock(clock);
        let key = match key {
            KeyPart::Bytes(k) if k.len() <= INLINE_BESIDE_WORD_MAX || fits_l0(k, &value) => k,
            KeyPart::Bytes(k) => return e.with_heap_key(HeapStr::from_slice(k), value),
            KeyPart::Heap(h) => return e.with_heap_key(h, value),
        };
        e.klen = key.len() as u8;
        e.write_inline(0, key);
        match value {
            ValuePart::Inline(v) if key.len() + v.len() <= AREA_BYTES => {
                e.vlen = v.len() as u8;
                e.write_inline(key.len(), v);
            }
            ValuePart::Inline(v) => {
                debug_assert_eq!(kind, Kind::Str, "integers always fit inline");
                e.layout = VALUE_HEAP;
                e.write_heap_value(HeapValue::Str(HeapStr::from_slice(v)));
            }
            ValuePart::Heap(h) => {
                e.layout = VALUE_HEAP;
                e.write_heap_value(h);
            }
        }
        e
    }

    /// L2 or L3: the key is on the heap.
    fn with_heap_key(mut self, key: HeapStr, value: ValuePart<'_>) -> Entry {
        match value {
            ValuePart::Inline(v) if v.len() <= INLINE_BESIDE_WORD_MAX => {
                self.layout = KEY_HEAP;
                self.vlen = v.len() as u8;
                self.write_inline(0, v);
                self.write_heap(3, key);
            }
            ValuePart::Inline(v) => {
                self.layout = KEY_HEAP | VALUE_HEAP;
                self.write_heap(2, key);
                self.write_heap_value(HeapValue::Str(HeapStr::from_slice(v)));
            }
            ValuePart::Heap(h) => {
                self.layout = KEY_HEAP | VALUE_HEAP;
                self.write_heap(2, key);
                self.write_heap_value(h);
            }
        }
        self
    }

    fn write_inline(&mut self, at: usize, bytes: &[u8]) {
        assert!(at + bytes.len() <= AREA_BYTES);
        // SAFETY: bounds checked above; u8 -> MaybeUninit<u8> has the same layout.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.area.as_mut_ptr().add(at) as *mut u8,
                bytes.len(),
            );
        }
    }

    fn inline(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= AREA_BYTES);
        // SAFETY: in bounds, and every layout initialises the inline bytes it reads.
        unsafe { std::slice::from_raw_parts(self.area.as_ptr().add(at) as *const u8, len) }
    }

    fn write_heap(&mut self, word: usize, s: HeapStr) {
        // SAFETY: word 2 or 3 is 8-aligned inside the 8-aligned entry (area starts at
        // offset 16) and 8 bytes long; HeapStr is a single pointer.
        unsafe {
            std::ptr::write(
                self.area.as_mut_ptr().add(word * WORD_BYTES) as *mut HeapStr,
                s,
            )
        }
    }

    /// Store the owned value in word 3 and set the kind to match. One half of the
    /// raw-conversion pair: everything that puts a heap value into an entry goes
    /// through here.
    fn write_heap_value(&mut self, value: HeapValue) {
        self.kind = value.kind();
        let at = self.area.as_mut_ptr().wrapping_add(3 * WORD_BYTES);
        // SAFETY: word 3 is 8-aligned inside the 8-aligned entry and 8 bytes long;
        // every heap value type is one pointer-sized word (asserted below).
        unsafe {
            match value {
                HeapValue::Str(s) => std::ptr::write(at as *mut HeapStr, s),
                HeapValue::List(l) => std::ptr::write(at as *mut ListValue, l),
                HeapValue::Hash(h) => std::ptr::write(at as *mut HashValue, h),
                HeapValue::ZSet(z) => std::ptr::write(at as *mut ZSetValue, z),
                HeapValue::Set(v) => std::ptr::write(at as *mut SetValue, v),
                HeapValue::Stream(v) => std::ptr::write(at as *mut StreamValue, v),
            }
        }
    }

    /// Move the owned value out of word 3 (by kind). The other half of the pair:
    /// the caller clears `VALUE_HEAP` (or drops the entry's layout) so it is not
    /// read again.
    fn take_heap_value(&mut self) -> HeapValue {
        debug_assert!(self.layout & VALUE_HEAP != 0);
        let at = self.area.as_ptr().wrapping_add(3 * WORD_BYTES);
        // SAFETY: with VALUE_HEAP set, word 3 holds the value `kind` names, written
        // by `write_heap_value`.
        unsafe {
            match self.kind {
                Kind::Str | Kind::Int => HeapValue::Str(std::ptr::read(at as *const HeapStr)),
                Kind::List => HeapValue::List(std::ptr::read(at as *const ListValue)),
                Kind::Hash => HeapValue::Hash(std::ptr::read(at as *const HashValue)),
                Kind::ZSet => HeapValue::ZSet(std::ptr::read(at as *const ZSetValue)),
                Kind::Set => HeapValue::Set(std::ptr::read(at as *const SetValue)),
                Kind::Stream => HeapValue::Stream(std::ptr::read(at as *const StreamValue)),
            }
        }
    }

    fn heap_list(&self) -> &ListValue {
        debug_assert!(self.kind == Kind::List && self.layout & VALUE_HEAP != 0);
        // SAFETY: a list entry keeps its ListValue in word 3 (see write_heap_value).
        unsafe { &*(self.area.as_ptr().add(3 * WORD_BYTES) as *const ListValue) }
    }

    fn heap_list_mut(&mut self) -> &mut ListValue {
        debug_assert!(self.kind == Kind::List && self.layout & VALUE_HEAP != 0);
        // SAFETY: as in `heap_list`; `&mut self` makes the access unique.
        unsafe { &mut *(self.area.as_mut_ptr().add(3 * WORD_BYTES) as *mut ListValue) }
    }

    fn heap_hash(&self) -> &HashValue {
        debug_assert!(self.kind == Kind::Hash && self.layout & VALUE_HEAP != 0);
        // SAFETY: a hash entry keeps its HashValue in word 3 (see write_heap_value).
        unsafe { &*(self.area.as_ptr().add(3 * WORD_BYTES) as *const HashValue) }
    }

    fn heap_hash_mut(&mut self) -> &mut HashValue {
        debug_assert!(self.kind == Kind::Hash && self.layout & VALUE_HEAP != 0);
        // SAFETY: as in `heap_hash`; `&mut self` makes the access unique.
        unsafe { &mut *(self.area.as_mut_ptr().add(3 * WORD_BYTES) as *mut HashValue) }
    }

    /// True for a hash with at least one field expiry time (expired or not), so the
    /// keyspace can find the hashes active field expiry must visit.
    pub fn has_field_ttls(&self) -> bool {
        self.kind == Kind::Hash && self.heap_hash().next_expire_at().is_some()
    }

    fn heap_zset(&self) -> &ZSetValue {
        debug_assert!(self.kind == Kind::ZSet && self.layout & VALUE_HEAP != 0);
        // SAFETY: a sorted-set entry keeps its ZSetValue in word 3 (see
        // write_heap_value).
        unsafe { &*(self.area.as_ptr().add(3 * WORD_BYTES) as *const ZSetValue) }
    }

    fn heap_zset_mut(&mut self) -> &mut ZSetValue {
        debug_assert!(self.kind == Kind::ZSet && self.layout & VALUE_HEAP != 0);
        // SAFETY: as in `heap_zset`; `&mut self` makes the access unique.
        unsafe { &mut *(self.area.as_mut_ptr().add(3 * WORD_BYTES) as *mut ZSetValue) }
    }

    fn heap_set(&self) -> &SetValue {
        debug_assert!(self.kind == Kind::Set && self.layout & VALUE_HEAP != 0);
        // SAFETY: a set entry keeps its SetValue in word 3 (see write_heap_value).
        unsafe { &*(self.area.as_ptr().add(3 * WORD_BYTES) as *const SetValue) }
    }

    fn heap_set_mut(&mut self) -> &mut SetValue {
        debug_assert!(self.kind == Kind::Set && self.layout & VALUE_HEAP != 0);
        // SAFETY: as in `heap_set`; `&mut self` makes the access unique.
        unsafe { &mut *(self.area.as_mut_ptr().add(3 * WORD_BYTES) as *mut SetValue) }
    }

    fn heap_stream(&self) -> &StreamValue {
        debug_assert!(self.kind == Kind::Stream && self.layout & VALUE_HEAP != 0);
        // SAFETY: a stream entry keeps its StreamValue in word 3 (see
        // write_heap_value).
        unsafe { &*(self.area.as_ptr().add(3 * WORD_BYTES) as *const StreamValue) }
    }

    fn heap_stream_mut(&mut self) -> &mut StreamValue {
        debug_assert!(self.kind == Kind::Stream && self.layout & VALUE_HEAP != 0);
        // SAFETY: as in `heap_stream`; `&mut self` makes the access unique.
        unsafe { &mut *(self.area.as_mut_ptr().add(3 * WORD_BYTES) as *mut StreamValue) }
    }

    fn heap(&self, word: usize) -> &HeapStr {
        // SAFETY: only called for words the layout says hold a HeapStr.
        unsafe { &*(self.area.as_ptr().add(word * WORD_BYTES) as *const HeapStr) }
    }

    fn heap_mut(&mut self, word: usize) -> &mut HeapStr {
        // SAFETY: as in `heap`, and `&mut self` makes the access unique.
        unsafe { &mut *(self.area.as_mut_ptr().add(word * WORD_BYTES) as *mut HeapStr) }
    }

    fn take_heap(&mut self, word: usize) -> HeapStr {
        // SAFETY: as in `heap`; the caller clears the layout bit so it is not read again.
        unsafe { std::ptr::read(self.area.as_ptr().add(word * WORD_BYTES) as *const HeapStr) }
    }

    fn key_word(&self) -> usize {
        if self.layout & VALUE_HEAP != 0 {
            2
        } else {
            3
        }
    }

    fn value_at(&self) -> usize {
        if self.layout & KEY_HEAP != 0 {
            0
        } else {
            self.klen as usize
        }
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        debug_assert!(!self.is_vacant());
        if self.layout & KEY_HEAP != 0 {
            self.heap(self.key_word()).as_slice()
        } else {
            self.inline(0, self.klen as usize)
        }
    }

    /// The string bytes (for KIND_STR) or the 8 integer bytes (for KIND_INT).
    /// The start of a string value's heap block, if it lives on the heap; reads
    /// only the entry (for prefetching the block).
    pub fn value_block(&self) -> Option<*const u8> {
        (self.layout & VALUE_HEAP != 0 && self.kind == Kind::Str).then(|| self.heap(3).block_ptr())
    }

    fn value_bytes(&self) -> &[u8] {
        if self.layout & VALUE_HEAP != 0 {
            self.heap(3).as_slice()
        } else {
            self.inline(self.value_at(), self.vlen as usize)
        }
    }

    fn int_value(&self) -> i64 {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(self.value_bytes());
        i64::from_ne_bytes(raw)
    }

    /// The value.
    pub fn value(&self) -> ValueRef<'_> {
        match self.kind {
            Kind::Int => ValueRef::Str(StrRef::Int(self.int_value())),
            Kind::Str => ValueRef::Str(StrRef::Bytes(self.value_bytes())),
            Kind::List => ValueRef::List(self.heap_list()),
            Kind::Hash => ValueRef::Hash(self.heap_hash()),
            Kind::ZSet => ValueRef::ZSet(self.heap_zset()),
            Kind::Set => ValueRef::Set(self.heap_set()),
            Kind::Stream => ValueRef::Stream(self.heap_stream()),
        }
    }

    /// The value, for changing a collection in place (strings change through
    /// [`set_value`](Self::set_value), [`append`](Self::append) ...).
    pub fn value_mut(&mut self) -> ValueMut<'_> {
        match self.kind {
            Kind::Str | Kind::Int => ValueMut::Str,
            Kind::List => ValueMut::List(self.heap_list_mut()),
            Kind::Hash => ValueMut::Hash(self.heap_hash_mut()),
            Kind::ZSet => ValueMut::ZSet(self.heap_zset_mut()),
            Kind::Set => ValueMut::Set(self.heap_set_mut()),
            Kind::Stream => ValueMut::Stream(self.heap_stream_mut()),
        }
    }

    /// The string value; the empty string for a collection (tests and the
    /// string paths that checked the type first).
    pub fn str_value(&self) -> StrRef<'_> {
        self.value().as_str().unwrap_or(StrRef::Bytes(b""))
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> Encoding {
        match self.kind {
            Kind::Int => Encoding::Int,
            Kind::Str if self.flags & FLAG_RAW != 0 => Encoding::Raw,
            Kind::Str if self.value_bytes().len() > EMBSTR_BYTES_MAX => Encoding::Raw,
            Kind::Str => Encoding::Embstr,
            Kind::List => match self.heap_list().encoding() {
                ListEncoding::Listpack => Encoding::Listpack,
                ListEncoding::Quicklist => Encoding::Quicklist,
            },
            Kind::Hash => match self.heap_hash().encoding() {
                HashEncoding::Listpack => Encoding::Listpack,
                HashEncoding::ListpackEx => Encoding::ListpackEx,
                HashEncoding::Hashtable => Encoding::Hashtable,
            },
            Kind::ZSet => match self.heap_zset().encoding() {
                ZSetEncoding::Listpack => Encoding::Listpack,
                ZSetEncoding::Skiplist => Encoding::Skiplist,
            },
            Kind::Set => match self.heap_set().encoding() {
                SetEncoding::Intset => Encoding::Intset,
                SetEncoding::Listpack => Encoding::Listpack,
                SetEncoding::Hashtable => Encoding::Hashtable,
            },
            Kind::Stream => Encoding::Stream,
        }
    }

    /// What OBJECT REFCOUNT reports: shared small integers say `INT_MAX`.
    pub fn refcount(&self) -> i64 {
        if self.kind == Kind::Int && self.flags & FLAG_PRIVATE_INT == 0 {
            let n = self.int_value();
            if (0..SHARED_INTEGERS).contains(&n) {
                return SHARED_REFCOUNT;
            }
        }
        1
    }

    /// Absolute expiry in Unix milliseconds, if any.
    pub fn expire_at(&self) -> Option<u64> {
        (self.expire_at_ms != 0).then_some(self.expire_at_ms)
    }

    /// Only the keyspace sets expiries, so it can keep its TTL bookkeeping right.
    pub(super) fn set_expire_at(&mut self, at: Option<u64>) {
        debug_assert!(at != Some(0));
        self.expire_at_ms = at.unwrap_or(0);
    }

    /// The 24-bit access clock (seconds).
    pub fn clock(&self) -> u32 {
        u32::from_le_bytes([self.clock[0], self.clock[1], self.clock[2], 0])
    }

    /// Set the access clock.
    pub fn set_clock(&mut self, clock: u32) {
        let b = (clock & CLOCK_MASK).to_le_bytes();
        self.clock = [b[0], b[1], b[2]];
    }

    /// Heap bytes owned by this entry, estimated as glibc malloc chunks.
    pub fn heap_bytes(&self) -> usize {
        if self.is_vacant() {
            return 0;
        }
        let mut total = 0;
        if self.layout & KEY_HEAP != 0 {
            total += malloc_chunk_bytes(self.heap(self.key_word()).block_bytes());
        }
        if self.layout & VALUE_HEAP != 0 {
            total += match self.kind {
                Kind::Str | Kind::Int => malloc_chunk_bytes(self.heap(3).block_bytes()),
                Kind::List => self.heap_list().heap_bytes(),
                Kind::Hash => self.heap_hash().heap_bytes(),
                Kind::ZSet => self.heap_zset().heap_bytes(),
                Kind::Set => self.heap_set().heap_bytes(),
                Kind::Stream => self.heap_stream().heap_bytes(),
            };
        }
        total
    }

    /// Free up to about `nodes_max` nodes of a big collection (lazy freeing); true
    /// when what is left is cheap to drop at once.
    pub fn free_some(&mut self, nodes_max: usize) -> bool {
        match self.value_mut() {
            ValueMut::Str => true,
            ValueMut::List(l) => l.free_some(nodes_max),
            ValueMut::Hash(h) => h.free_some(nodes_max),
            ValueMut::ZSet(z) => z.free_some(nodes_max),
            ValueMut::Set(s) => s.free_some(nodes_max),
            ValueMut::Stream(s) => s.free_some(nodes_max),
        }
    }

    /// Replace the value (the key, expiry and clock stay).
    pub fn set_value(&mut self, value: NewValue<'_>) {
        if self.layout & VALUE_HEAP != 0 && crate::undo::inverses_wanted() {
            self.hand_over_for_undo();
        }
        match value {
            NewValue::Str { bytes, raw } => self.set_str(bytes, raw),
            NewValue::Int(n) => {
                self.replace_value(ValuePart::Inline(&n.to_ne_bytes()), Kind::Int, 0)
            }
        }
    }

    fn set_str(&mut self, bytes: &[u8], raw: bool) {
        let flags = if raw { FLAG_RAW } else { 0 };
        let fits_inline = bytes.len() <= self.inline_room_for_value();
        let in_place = if matches!(
            self.kind,
            Kind::List | Kind::Hash | Kind::ZSet | Kind::Set | Kind::Stream
        ) {
            false
        } else if self.layout & VALUE_HEAP == 0 {
            if fits_inline {
                let at = self.value_at();
                self.write_inline(at, bytes);
                self.vlen = bytes.len() as u8;
            }
            fits_inline
        } else {
            !fits_inline && self.kind == Kind::Str && self.heap_mut(3).try_overwrite(bytes)
        };
        if in_place {
            self.kind = Kind::Str;
            self.flags = flags;
        } else {
            self.replace_value(ValuePart::Inline(bytes), Kind::Str, flags);
        }
    }

    /// Rebuild around the current key with a new value.
    fn replace_value(&mut self, value: ValuePart<'_>, kind: Kind, flags: u8) {
        let parts = std::mem::replace(self, Entry::vacant(0)).into_parts();
        let key = match parts.key_heap {
            Some(h) => KeyPart::Heap(h),
            None => KeyPart::Bytes(&parts.key_inline[..parts.klen]),
        };
        *self = Entry::assemble(key, value, kind, flags, parts.clock, parts.expire_at_ms);
    }

    /// Take the entry apart without freeing anything it owns.
    fn into_parts(mut self) -> Parts {
        debug_assert!(!self.is_vacant());
        let mut parts = Parts {
            key_inline: [0; AREA_BYTES],
            key_heap: None,
            klen: self.klen as usize,
            value_inline: [0; AREA_BYTES],
            value_heap: None,
            vlen: self.vlen as usize,
            kind: self.kind,
            flags: self.flags,
            clock: self.clock(),
            expire_at_ms: self.expire_at_ms,
        };
        if self.layout & KEY_HEAP != 0 {
            parts.key_heap = Some(self.take_heap(self.key_word()));
        } else {
            parts.key_inline[..parts.klen].copy_from_slice(self.inline(0, parts.klen));
        }
        if self.layout & VALUE_HEAP != 0 {
            parts.value_heap = Some(self.take_heap_value());
        } else {
            let at = self.value_at();
            parts.value_inline[..parts.vlen].copy_from_slice(self.inline(at, parts.vlen));
        }
        // Everything owned has been moved out: dropping `self` must free nothing.
        self.layout = VACANT;
        parts
    }

    /// The same value (moved, not copied), expiry and clock under another key
    /// (RENAME, MOVE).
    pub fn rekey(self, key: &[u8]) -> Entry {
        let parts = self.into_parts();
        let value = match parts.value_heap {
            Some(h) => ValuePart::Heap(h),
            None => ValuePart::Inline(&parts.value_inline[..parts.vlen]),
        };
        Entry::assemble(
            KeyPart::Bytes(key),
            value,
            parts.kind,
            parts.flags,
            parts.clock,
            parts.expire_at_ms,
        )
    }

    /// A deep copy of the value under `key`, with this expiry (COPY; Redis'
    /// dupStringObject: the copy of a shared integer is a private object).
    pub fn duplicate(&self, key: &[u8], clock: u32) -> Entry {
        let mut flags = self.flags;
        let value = match self.kind {
            Kind::Int => {
                flags |= FLAG_PRIVATE_INT;
                ValuePart::Inline(self.value_bytes())
            }
            Kind::Str => ValuePart::Inline(self.value_bytes()),
            Kind::List => ValuePart::Heap(HeapValue::List(self.heap_list().deep_clone())),
            Kind::Hash => ValuePart::Heap(HeapValue::Hash(self.heap_hash().deep_clone())),
            Kind::ZSet => ValuePart::Heap(HeapValue::ZSet(self.heap_zset().deep_clone())),
            Kind::Set => ValuePart::Heap(HeapValue::Set(self.heap_set().deep_clone())),
            Kind::Stream => ValuePart::Heap(HeapValue::Stream(self.heap_stream().deep_clone())),
        };
        Entry::assemble(
            KeyPart::Bytes(key),
            value,
            self.kind,
            flags,
            clock,
            self.expire_at_ms,
        )
    }

    /// A copy of the whole entry, flags and all, when it owns no heap block (key
    /// and value inline: a short string or an integer), which costs a copy of its
    /// 48 bytes (the undo journal's copy of an entry about to change).
    pub(crate) fn copy_if_inline(&self) -> Option<Entry> {
        // SAFETY: an entry that owns no heap block is plain bytes: the copy and
        // the original each own nothing, and dropping either frees nothing.
        (self.layout & (KEY_HEAP | VALUE_HEAP) == 0).then(|| unsafe { std::ptr::read(self) })
    }

    /// APPEND: the string becomes `raw`; returns the new length.
    pub fn append(&mut self, tail: &[u8]) -> usize {
        debug_assert!(matches!(self.kind, Kind::Str | Kind::Int));
        if self.layout & VALUE_HEAP != 0 && self.kind == Kind::Str {
            let len = self.heap(3).len();
            self.record_str_restore(len..len);
            self.flags |= FLAG_RAW;
            let s = self.heap_mut(3);
            s.append(tail);
            return s.len();
        }
        let mut buf = itoa::Buffer::new();
        let current = self.str_value();
        let current = current.bytes(&mut buf);
        let new_len = current.len() + tail.len();
        if new_len <= self.inline_room_for_value() {
            let mut joined: SmallVec<[u8; AREA_BYTES]> = SmallVec::from_slice(current);
            joined.extend_from_slice(tail);
            self.set_str(&joined, true);
        } else {
            let mut s = HeapStr::with_capacity_from(current, greedy_capacity(new_len));
            s.append(tail);
            self.replace_value(ValuePart::Heap(HeapValue::Str(s)), Kind::Str, FLAG_RAW);
        }
        new_len
    }

    /// A string value's bytes for changing in place at the same length (a
    /// HyperLogLog's registers and header); the string becomes `raw`, as Redis's
    /// `dbUnshareStringValue` makes it. `None` for integers and collections.
    pub(crate) fn str_bytes_mut(&mut self) -> Option<&mut [u8]> {
        if self.kind != Kind::Str {
            return None;
        }
        self.flags |= FLAG_RAW;
        if self.layout & VALUE_HEAP != 0 {
            // Any byte may change: no inverse (a big string is never an HLL).
            crate::undo::no_inverse();
            return Some(self.heap_mut(3).as_mut_slice());
        }
        let (at, len) = (self.value_at(), self.vlen as usize);
        assert!(at + len <= AREA_BYTES);
        // SAFETY: in bounds, the inline value bytes are initialised, and `&mut self`
        // makes the access unique; u8 and MaybeUninit<u8> share their layout.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.area.as_mut_ptr().add(at) as *mut u8, len)
        })
    }

    /// SETRANGE: write `patch` at `offset`, zero-padding; the string becomes `raw`.
    /// Returns the new length.
    pub fn set_range(&mut self, offset: usize, patch: &[u8]) -> usize {
        let end = offset + patch.len();
        self.edit_bytes(end, offset..end, |bytes| {
            bytes[offset..end].copy_from_slice(patch);
            bytes.len()
        })
    }

    /// SETRANGE, SETBIT and BITFIELD: make the string at least `len` bytes long
    /// (zero-filled), mark it `raw` (Redis unshares the object before writing into
    /// it, so an `int` or `embstr` becomes `raw` even when no byte changes), and let
    /// `change` edit the bytes in place. A string that was empty gets exactly `len`
    /// bytes of zeroed memory (Redis' `sdsnewlen` for a new key: a far-out SETBIT
    /// costs no memset, the pages come zeroed); one that grows on the heap grows
    /// greedily (`sdsgrowzero`), so a bitmap filled upwards is amortised O(1) per
    /// byte. Short results stay inline.
    pub fn edit_bytes<R>(
        &mut self,
        len: usize,
        touched: std::ops::Range<usize>,
        change: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        debug_assert!(matches!(self.kind, Kind::Str | Kind::Int));
        if !(self.layout & VALUE_HEAP != 0 && self.kind == Kind::Str) {
            let mut buf = itoa::Buffer::new();
            let current = self.str_value();
            let current = current.bytes(&mut buf);
            let new_len = current.len().max(len);
            if new_len <= self.inline_room_for_value() {
                let mut joined: SmallVec<[u8; AREA_BYTES]> = SmallVec::from_slice(current);
                joined.resize(new_len, 0);
                let result = change(&mut joined);
                self.set_str(&joined, true);
                return result;
            }
            let s = if current.is_empty() {
                HeapStr::zeroed(new_len)
            } else if new_len > current.len() {
                HeapStr::with_capacity_from(current, greedy_capacity(new_len))
            } else {
                HeapStr::from_slice(current)
            };
            self.replace_value(ValuePart::Heap(HeapValue::Str(s)), Kind::Str, FLAG_RAW);
        }
        self.record_str_restore(touched);
        self.flags |= FLAG_RAW;
        let s = self.heap_mut(3);
        s.grow_zeroed(len);
        change(s.as_mut_slice())
    }

    /// Longest value that can stay inline next to the current key.
    fn inline_room_for_value(&self) -> usize {
        if self.layout & KEY_HEAP != 0 {
            INLINE_BESIDE_WORD_MAX
        } else {
            AREA_BYTES - self.klen as usize
        }
    }
}

/// True when an inline key and this value share the area (L0).
fn fits_l0(key: &[u8], value: &ValuePart<'_>) -> bool {
    matches!(value, ValuePart::Inline(v) if key.len() + v.len() <= AREA_BYTES)
}

impl Drop for Entry {
    fn drop(&mut self) {
        if self.is_vacant() {
            return;
        }
        if self.layout & KEY_HEAP != 0 {
            drop(self.take_heap(self.key_word()));
        }
        if self.layout & VALUE_HEAP != 0 {
            drop(self.take_heap_value());
        }
        self.layout = VACANT;
    }
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_vacant() {
            return write!(f, "Vacant(next={})", self.next_free());
        }
        f.debug_struct("Entry")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("value", &self.value())
            .field("layout", &self.layout)
            .field("expire_at_ms", &self.expire_at())
            .finish()
    }
}

#[cfg(test)]
mod tests;
