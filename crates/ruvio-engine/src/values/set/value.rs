//! `SetValue`: a Redis set in ONE machine word.
//!
//! Why one word: the keyspace entry keeps a collection as a one-word owned handle
//! in its word 3 and lends out `&SetValue` / `&mut SetValue` borrowed from it.
//!
//! The two low pointer bits tag the encoding:
//! - `_0`: an [`SPacked`] block (`listpack`), 2-aligned;
//! - `01`: a `Box<Table>` (`hashtable`), 8-aligned;
//! - `11`: an [`Intset`] block (`intset`), 8-aligned.
//!
//! The methods that change the set convert exactly where Redis 7.2's t_set.c
//! does (`setTypeCreate`, `setTypeMaybeConvert`, `setTypeAddAux`,
//! `maybeConvertIntset`, `maybeConvertToIntset`), judged by the limits in
//! [`SetLimits`]. Like Redis, a set never converts back to a smaller encoding
//! when it shrinks; only a freshly computed STORE result may be made an intset.

use std::ptr::NonNull;

use super::intset::{self, Intset, INTSET_LEN_MAX};
use super::packed::{self, SPacked};
use super::table::Table;
use crate::value::StrRef;
use crate::values::list::rules;
use crate::values::list::Popped;

/// Tag of a `Box<Table>` pointer.
const TABLE_TAG: usize = 0b01;
/// Tag of an intset pointer.
const INTSET_TAG: usize = 0b11;
/// Both tag bits.
const TAG_MASK: usize = 0b11;

// Packed blocks leave bit 0 free; Table boxes and intset blocks leave both.
const _: () = assert!(packed::BLOCK_ALIGN >= 2);
// The safety check below bounds Redis's listpack size by a multiple of ours.
const _: () = assert!(LISTPACK_SAFETY_BYTES <= packed::PACKED_BYTES_MAX);
const _: () = assert!(intset::BLOCK_ALIGN > TAG_MASK);
const _: () = assert!(std::mem::align_of::<Table>() > TAG_MASK);

/// Redis's `LISTPACK_MAX_SAFETY_SIZE`: a listpack never grows past 1 GiB
/// (`lpSafeToAdd`), whatever `set-max-listpack-*` say.
pub const LISTPACK_SAFETY_BYTES: usize = 1 << 30;

/// Bytes of a listpack entry's backlen for the small entries that intset
/// members become (`lpEstimateBytesRepeatedInteger`).
const INT_ENTRY_BACKLEN_BYTES: usize = 1;

/// The thresholds that decide a set's encoding (CONFIG `set-max-*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetLimits {
    /// `set-max-intset-entries`.
    pub intset_entries: usize,
    /// `set-max-listpack-entries`.
    pub listpack_entries: usize,
    /// `set-max-listpack-value`.
    pub listpack_value: usize,
}

impl Default for SetLimits {
    fn default() -> Self {
        SetLimits {
            intset_entries: 512,
            listpack_entries: 128,
            listpack_value: 64,
        }
    }
}

impl SetLimits {
    /// `intsetMaxEntries`: the intset limit, capped by what an intset can hold.
    fn intset_max(&self) -> usize {
        self.intset_entries.min(INTSET_LEN_MAX)
    }
}

/// The encoding OBJECT ENCODING reports for a set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetEncoding {
    /// Sorted integers.
    Intset,
    /// One packed block.
    Listpack,
    /// A hash table.
    Hashtable,
}

impl SetEncoding {
    /// The name OBJECT ENCODING replies with.
    pub fn name(self) -> &'static str {
        match self {
            SetEncoding::Intset => "intset",
            SetEncoding::Listpack => "listpack",
            SetEncoding::Hashtable => "hashtable",
        }
    }
}

/// A set value: one tagged pointer (see the module docs).
#[repr(transparent)]
pub struct SetValue {
    ptr: NonNull<u8>,
}

const _: () = assert!(std::mem::size_of::<SetValue>() == 8);
const _: () = assert!(std::mem::size_of::<Option<SetValue>>() == 8);

// SAFETY: a SetValue uniquely owns its block or box, like a Box.
unsafe impl Send for SetValue {}

enum Repr<'a> {
    Intset(&'a Intset),
    Listpack(&'a SPacked),
    Table(&'a Table),
}

enum ReprMut<'a> {
    Intset(&'a mut Intset),
    Listpack(&'a mut SPacked),
    Table(&'a mut Table),
}

/// `lpSafeToAdd`: Redis's listpack of the set's members and `add` more bytes
/// stays within [`LISTPACK_SAFETY_BYTES`]. Redis's entry of an `L`-byte member
/// takes at most `L + 10` bytes (5 of encoding, 5 of backlen) and ours at least
/// `L + 1`, so Redis's listpack is under 10 times our entry bytes plus its empty
/// size: the exact O(n) count is only needed for a block near 100 MiB.
fn redis_bytes_allow(p: &SPacked, add: usize) -> bool {
    /// Bound of Redis's listpack entry bytes per byte of ours (see above).
    const REDIS_PER_OURS_MAX: usize = 10;
    let bound = rules::LP_EMPTY_BYTES + REDIS_PER_OURS_MAX * p.block_bytes();
    bound + add <= LISTPACK_SAFETY_BYTES || p.redis_bytes() + add <= LISTPACK_SAFETY_BYTES
}

/// The value of `member` if Redis would store it in an intset (`string2ll`).
pub fn int_member(member: &[u8]) -> Option<i64> {
    rules::listpack_int(member)
}

impl SetValue {
    fn from_intset(set: Intset) -> SetValue {
        let raw = set.into_raw().as_ptr().map_addr(|a| a | INTSET_TAG);
        // SAFETY: a non-null pointer with low bits set is non-null.
        SetValue {
            ptr: unsafe { NonNull::new_unchecked(raw) },
        }
    }

    fn from_packed(block: SPacked) -> SetValue {
        SetValue {
            ptr: block.into_raw(),
        }
    }

    fn from_table(table: Table) -> SetValue {
        let raw = Box::into_raw(Box::new(table)).map_addr(|a| a | TABLE_TAG) as *mut u8;
        // SAFETY: a Box pointer is non-null, and so is it with a bit set.
        SetValue {
            ptr: unsafe { NonNull::new_unchecked(raw) },
        }
    }

    /// An empty intset.
    pub fn new_intset() -> SetValue {
        Self::from_intset(Intset::new())
    }

    /// An empty listpack.
    pub fn new_listpack() -> SetValue {
        Self::from_packed(SPacked::new())
    }

    /// An empty hash table sized for `hint` members.
    pub fn new_hashtable(hint: usize) -> SetValue {
        Self::from_table(Table::with_capacity(hint))
    }

    /// `setTypeCreate`: the encoding a new set starts in, from its first member
    /// and how many members are about to be added.
    pub fn create(first: &[u8], size_hint: usize, limits: &SetLimits) -> SetValue {
        if int_member(first).is_some() && size_hint <= limits.intset_entries {
            Self::new_intset()
        } else if size_hint <= limits.listpack_entries {
            Self::new_listpack()
        } else {
            Self::new_hashtable(size_hint)
        }
    }

    fn tag(&self) -> usize {
        self.ptr.as_ptr().addr() & TAG_MASK
    }

    fn untagged(&self) -> *mut u8 {
        self.ptr.as_ptr().map_addr(|a| a & !TAG_MASK)
    }

    fn repr(&self) -> Repr<'_> {
        match self.tag() {
            // SAFETY: a word tagged INTSET_TAG holds an Intset's pointer with the
            // tag in its owner bits, which Intset masks off on every access and
            // keeps across reallocation; Intset is repr(transparent) over one
            // NonNull, so the word is an Intset.
            INTSET_TAG => Repr::Intset(unsafe { &*(self as *const SetValue as *const Intset) }),
            // SAFETY: a word tagged TABLE_TAG is a live Box<Table> owned by self.
            TABLE_TAG => Repr::Table(unsafe { &*(self.untagged() as *const Table) }),
            // SAFETY: an untagged word is an SPacked's pointer, and SPacked is a
            // repr(transparent) NonNull like SetValue.
            _ => Repr::Listpack(unsafe { &*(self as *const SetValue as *const SPacked) }),
        }
    }

    fn repr_mut(&mut self) -> ReprMut<'_> {
        match self.tag() {
            // SAFETY: as in `repr`; `&mut self` makes the access unique, and a
            // reallocating Intset writes its new pointer, tag kept, into this word.
            INTSET_TAG => ReprMut::Intset(unsafe { &mut *(self as *mut SetValue as *mut Intset) }),
            // SAFETY: as in `repr`; `&mut self` makes the access unique.
            TABLE_TAG => ReprMut::Table(unsafe { &mut *(self.untagged() as *mut Table) }),
            // SAFETY: as in `repr`; a reallocating SPacked writes its new pointer
            // into this word, which stays untagged (its blocks are 2-aligned).
            _ => ReprMut::Listpack(unsafe { &mut *(self as *mut SetValue as *mut SPacked) }),
        }
    }

    /// Replace the whole representation (a conversion).
    fn replace(&mut self, new: SetValue) {
        // Dropping the old value frees its block; `new`'s word moves in.
        *self = new;
    }

    // ---- reading -----------------------------------------------------------

    /// Number of members (SCARD).
    pub fn len(&self) -> usize {
        match self.repr() {
            Repr::Intset(s) => s.len(),
            Repr::Listpack(p) => p.len(),
            Repr::Table(t) => t.len(),
        }
    }

    /// True without members (the keyspace deletes such keys).
    pub fn is_empty(&self) -> bool {
        match self.repr() {
            Repr::Intset(s) => s.is_empty(),
            Repr::Listpack(p) => p.is_empty(),
            Repr::Table(t) => t.is_empty(),
        }
    }

    /// What OBJECT ENCODING reports.
    pub fn encoding(&self) -> SetEncoding {
        match self.repr() {
            Repr::Intset(_) => SetEncoding::Intset,
            Repr::Listpack(_) => SetEncoding::Listpack,
            Repr::Table(_) => SetEncoding::Hashtable,
        }
    }

    /// Heap bytes owned, estimated as glibc chunks; O(1).
    pub fn heap_bytes(&self) -> usize {
        match self.repr() {
            Repr::Intset(s) => s.heap_bytes(),
            Repr::Listpack(p) => p.heap_bytes(),
            Repr::Table(t) => t.heap_bytes(),
        }
    }

    /// The one heap block that holds the whole value in a compact encoding, as
    /// (bytes, alignment): plain bytes, no pointer inside and nothing depending on
    /// its address, so a byte copy at another address is the same value (the undo
    /// journal's copies, `keyspace::entry::FlatCopy`). None for a big encoding.
    pub(crate) fn flat_block(&self) -> Option<(usize, usize)> {
        match self.repr() {
            Repr::Intset(i) => Some((i.block_bytes(), intset::BLOCK_ALIGN)),
            Repr::Listpack(p) => Some((p.block_bytes(), packed::BLOCK_ALIGN)),
            Repr::Table(_) => None,
        }
    }

    /// True when `member` is in the set (SISMEMBER).
    pub fn contains(&self, member: &[u8]) -> bool {
        match self.repr() {
            Repr::Intset(s) => int_member(member).is_some_and(|v| s.contains(v)),
            Repr::Listpack(p) => p.contains(member),
            Repr::Table(t) => t.contains(member),
        }
    }

    /// Member number `i` in iteration order (random picks index with it; O(i)
    /// for a listpack, which is at most `set-max-listpack-entries` long).
    pub fn get(&self, i: usize) -> Option<StrRef<'_>> {
        match self.repr() {
            Repr::Intset(s) => s.get(i).map(StrRef::Int),
            Repr::Listpack(p) => p.get(i).map(StrRef::Bytes),
            Repr::Table(t) => t.get(i).map(StrRef::Bytes),
        }
    }

    /// Every member, in Redis's order for intsets (ascending) and listpacks
    /// (insertion); a table's order is its own.
    pub fn iter(&self) -> Iter<'_> {
        Iter(match self.repr() {
            Repr::Intset(s) => IterInner::Intset(s, 0),
            Repr::Listpack(p) => IterInner::Packed(p.iter()),
            Repr::Table(t) => IterInner::Table(t, 0),
        })
    }

    // ---- conversions -------------------------------------------------------

    /// Convert to a hash table sized for `hint` members
    /// (`setTypeConvertAndExpand(OBJ_ENCODING_HT)`).
    pub fn convert_to_table(&mut self, hint: usize) {
        if self.encoding() == SetEncoding::Hashtable {
            return;
        }
        let mut table = Table::with_capacity(hint.max(self.len()));
        let mut digits = itoa::Buffer::new();
        for m in self.iter() {
            table.insert(m.bytes(&mut digits));
        }
        self.replace(Self::from_table(table));
    }

    /// `setTypeMaybeConvert`: a set about to receive `size_hint` members
    /// converts to a hash table when the hint alone passes its encoding's limit.
    pub fn maybe_convert(&mut self, size_hint: usize, limits: &SetLimits) {
        let over = match self.encoding() {
            SetEncoding::Listpack => size_hint > limits.listpack_entries,
            SetEncoding::Intset => size_hint > limits.intset_entries,
            SetEncoding::Hashtable => false,
        };
        if over {
            self.convert_to_table(size_hint);
        }
    }

    /// `maybeConvertToIntset`: a STORE result whose members are all integers
    /// becomes an intset when it is small enough.
    pub fn maybe_convert_to_intset(&mut self, limits: &SetLimits) {
        if self.encoding() == SetEncoding::Intset || self.len() > limits.intset_max() {
            return;
        }
        let mut set = Intset::new();
        for m in self.iter() {
            let v = match m {
                StrRef::Int(v) => Some(v),
                StrRef::Bytes(b) => int_member(b),
            };
            match v {
                Some(v) => {
                    set.insert(v);
                }
                // Callers only ask for all-integer sets; keep the set as it is.
                None => return,
            }
        }
        self.replace(Self::from_intset(set));
    }

    // ---- changing ----------------------------------------------------------

    /// `setTypeAdd`: add `member`, converting where Redis 7.2 converts. False
    /// when it was already there.
    pub fn add(&mut self, member: &[u8], limits: &SetLimits) -> bool {
        match self.repr_mut() {
            ReprMut::Table(t) => t.insert(member),
            ReprMut::Listpack(p) => {
                if p.contains(member) {
                    return false;
                }
                if p.len() < limits.listpack_entries
                    && member.len() <= limits.listpack_value
                    && redis_bytes_allow(p, member.len())
                {
                    p.push_back(member);
                } else {
                    let hint = p.len() + 1;
                    self.convert_to_table(hint);
                    self.add_to_table(member);
                }
                true
            }
            ReprMut::Intset(s) => {
                if let Some(v) = int_member(member) {
                    let added = s.insert(v);
                    if added && s.len() > limits.intset_max() {
                        self.convert_to_table(0);
                    }
                    return added;
                }
                let n = s.len();
                let (mut longest, mut estimate) = (0, 0);
                if let (Some(min), Some(max)) = (s.min(), s.max()) {
                    let mut digits = itoa::Buffer::new();
                    longest = digits.format(min).len().max(digits.format(max).len());
                    estimate = [min, max]
                        .iter()
                        .map(|&v| (rules::int_encoding_bytes(v) + INT_ENTRY_BACKLEN_BYTES) * n)
                        .max()
                        .unwrap_or(0);
                }
                // As Redis: strict `<` for the lengths here, unlike the
                // listpack's own `<=` check.
                if n < limits.listpack_entries
                    && member.len() < limits.listpack_value
                    && longest < limits.listpack_value
                    && estimate + member.len() <= LISTPACK_SAFETY_BYTES
                {
                    let mut block = SPacked::new();
                    let mut digits = itoa::Buffer::new();
                    for v in s.iter() {
                        block.push_back(digits.format(v).as_bytes());
                    }
                    block.push_back(member);
                    self.replace(Self::from_packed(block));
                } else {
                    self.convert_to_table(n + 1);
                    self.add_to_table(member);
                }
                true
            }
        }
    }

    fn add_to_table(&mut self, member: &[u8]) -> bool {
        match self.repr_mut() {
            ReprMut::Table(t) => t.insert(member),
            _ => false,
        }
    }

    /// `setTypeRemove`: false when `member` was not there. Never converts.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.repr_mut() {
            ReprMut::Intset(s) => int_member(member).is_some_and(|v| s.remove(v)),
            ReprMut::Listpack(p) => p.remove(member),
            ReprMut::Table(t) => t.remove(member),
        }
    }

    /// Remove member number `i` (iteration order) and return it (SPOP).
    pub fn remove_index(&mut self, i: usize) -> Option<Popped> {
        if i >= self.len() {
            return None;
        }
        Some(match self.repr_mut() {
            ReprMut::Intset(s) => {
                let v = s.get(i)?;
                s.remove_at(i);
                Popped::from_slice(itoa::Buffer::new().format(v).as_bytes())
            }
            ReprMut::Listpack(p) => Popped::from_slice(&p.remove_index(i)?),
            ReprMut::Table(t) => Popped::from_slice(&t.remove_at(i)),
        })
    }

    // ---- whole value -------------------------------------------------------

    /// An independent copy with the same encoding (COPY).
    pub fn deep_clone(&self) -> SetValue {
        match self.repr() {
            Repr::Intset(s) => Self::from_intset(s.deep_clone()),
            Repr::Listpack(p) => Self::from_packed(p.deep_clone()),
            Repr::Table(t) => Self::from_table(t.deep_clone()),
        }
    }

    /// Reverse one change of a big set (the undo journal's roll-back).
    pub(crate) fn reverse(&mut self, inverse: crate::undo::Inverse, arena: &[u8]) {
        match self.repr_mut() {
            ReprMut::Table(t) => t.reverse(inverse, arena),
            _ => unreachable!("a set table never becomes compact"),
        }
    }

    /// Free up to `members_max` members of a big set so a huge value can be
    /// released in slices; true when what is left is cheap to drop at once.
    pub fn free_some(&mut self, members_max: usize) -> bool {
        match self.repr_mut() {
            ReprMut::Intset(_) | ReprMut::Listpack(_) => true,
            ReprMut::Table(t) => t.free_some(members_max),
        }
    }
}

impl Drop for SetValue {
    fn drop(&mut self) {
        match self.tag() {
            // SAFETY: the word is an Intset (see `repr`), dropped once.
            INTSET_TAG => drop(unsafe { Intset::from_raw(self.ptr) }),
            // SAFETY: a tagged word is a Box<Table> owned by self, freed once.
            TABLE_TAG => drop(unsafe { Box::from_raw(self.untagged() as *mut Table) }),
            // SAFETY: an untagged word is an SPacked owned by self, freed once.
            _ => drop(unsafe { SPacked::from_raw(self.ptr) }),
        }
    }
}

impl std::fmt::Debug for SetValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.encoding().name())?;
        let mut digits = itoa::Buffer::new();
        let members: Vec<String> = self
            .iter()
            .map(|m| String::from_utf8_lossy(m.bytes(&mut digits)).into_owned())
            .collect();
        f.debug_set().entries(members).finish()
    }
}

enum IterInner<'a> {
    Intset(&'a Intset, usize),
    Packed(packed::SPackedIter<'a>),
    Table(&'a Table, usize),
}

/// Members of a set; no allocation per member.
pub struct Iter<'a>(IterInner<'a>);

impl<'a> Iterator for Iter<'a> {
    type Item = StrRef<'a>;

    fn next(&mut self) -> Option<StrRef<'a>> {
        match &mut self.0 {
            IterInner::Intset(s, i) => {
                let v = s.get(*i)?;
                *i += 1;
                Some(StrRef::Int(v))
            }
            IterInner::Packed(it) => it.next().map(StrRef::Bytes),
            IterInner::Table(t, i) => {
                let m = t.get(*i)?;
                *i += 1;
                Some(StrRef::Bytes(m))
            }
        }
    }
}
