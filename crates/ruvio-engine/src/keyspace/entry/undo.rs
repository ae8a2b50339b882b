//! What the undo journal (`crate::undo`) needs from an entry: a byte copy of an
//! entry whose heap blocks are plain bytes (strings, compact collections) and the
//! entry rebuilt from it; for a string too long to copy, the bytes a write in
//! place covers and their roll-back; and an entry handed over whole when its
//! value is replaced.

use std::mem::MaybeUninit;

use super::{
    Entry, KeyPart, Kind, ValuePart, ENTRY_BYTES, FLAG_RAW, KEY_HEAP, VALUE_HEAP, WORD_BYTES,
};

/// An entry copied for the undo journal (see [`Entry::copy_flat`]): its 48 bytes,
/// with heap words that point at blocks the copy does not own, and where each
/// block's bytes were put in the journal's arena.
pub(crate) struct FlatCopy {
    bits: [MaybeUninit<u8>; ENTRY_BYTES],
    blocks: [Option<FlatBlock>; 2],
}

/// One heap block of a [`FlatCopy`].
#[derive(Clone, Copy)]
struct FlatBlock {
    /// The heap word (2 or 3) that points at it.
    word: u8,
    /// Where its bytes start in the arena.
    at: u32,
    /// Initialized bytes copied, allocation size and alignment.
    copy: u32,
    size: u32,
    align: u8,
}

impl Entry {
    /// The undo journal takes this (big, open) entry as it is, to put it back on
    /// a roll-back, and this one goes on as a copy with the same key, expiry,
    /// access clock and an empty string value, about to be replaced.
    pub(super) fn hand_over_for_undo(&mut self) {
        let before = std::mem::replace(self, Entry::vacant(0));
        let key = before.key().to_vec();
        *self = Entry::assemble(
            KeyPart::Bytes(&key),
            ValuePart::Inline(b""),
            Kind::Str,
            0,
            before.clock(),
            before.expire_at_ms,
        );
        crate::keyspace::journal::record_replaced(before);
    }

    /// The block behind heap word `word` as (initialized bytes, allocation size,
    /// alignment), when it is one block of plain bytes (see [`FlatCopy`]).
    pub(super) fn flat_block(&self, word: usize) -> Option<(usize, usize, usize)> {
        if word == self.key_word() && self.layout & KEY_HEAP != 0 {
            return Some(self.heap(word).flat_block());
        }
        let whole = |b: Option<(usize, usize)>| b.map(|(bytes, align)| (bytes, bytes, align));
        match self.kind {
            Kind::Str | Kind::Int => Some(self.heap(3).flat_block()),
            Kind::List => whole(self.heap_list().flat_block()),
            Kind::Hash => whole(self.heap_hash().flat_block()),
            Kind::ZSet => whole(self.heap_zset().flat_block()),
            Kind::Set => whole(self.heap_set().flat_block()),
            Kind::Stream => None,
        }
    }

    /// True for a string on the heap, a stream, or a list, hash, set or sorted
    /// set in a big encoding (quicklist, table, skiplist), whose mutators record
    /// the inverse of each change for the undo journal (`undo::Inverse`) when it
    /// is not copied; a compact encoding records none.
    pub(crate) fn records_inverses(&self) -> bool {
        if self.layout & VALUE_HEAP == 0 {
            return false;
        }
        match self.kind {
            Kind::Str | Kind::Int | Kind::Stream => true,
            Kind::List | Kind::Hash | Kind::Set | Kind::ZSet => self.flat_block(3).is_none(),
        }
    }

    /// The heap words this entry's layout uses.
    fn heap_words(&self) -> impl Iterator<Item = usize> {
        let key = (self.layout & KEY_HEAP != 0).then(|| self.key_word());
        let value = (self.layout & VALUE_HEAP != 0).then_some(3);
        key.into_iter().chain(value)
    }

    /// A copy of this entry for the undo journal when every heap block it owns is
    /// one block of plain bytes (strings, compact collections) and they are at
    /// most `bytes_max` together: its 48 bytes here, the blocks' bytes appended
    /// to `arena` (no allocation once the arena has grown). None for a big
    /// encoding, a stream or more bytes than that.
    pub(crate) fn copy_flat(&self, arena: &mut Vec<u8>, bytes_max: usize) -> Option<FlatCopy> {
        let mut blocks = [None; 2];
        let mut total = 0;
        for (slot, word) in self.heap_words().enumerate() {
            let (copy, size, align) = self.flat_block(word)?;
            total += copy;
            if total > bytes_max {
                return None;
            }
            blocks[slot] = Some(FlatBlock {
                word: word as u8,
                at: 0,
                copy: copy as u32,
                size: size as u32,
                align: align as u8,
            });
        }
        for block in blocks.iter_mut().flatten() {
            block.at = arena.len() as u32;
            let base = self.word_addr(block.word as usize) & !(block.align as usize - 1);
            let base = self.word_ptr(block.word as usize).with_addr(base);
            // SAFETY: the block at `base` is live and its first `copy` bytes are
            // initialized (`flat_block`).
            arena.extend_from_slice(unsafe {
                std::slice::from_raw_parts(base, block.copy as usize)
            });
        }
        // SAFETY: plain bytes of a live entry; the copy is never used as an Entry
        // before `from_flat` gives its heap words blocks of their own.
        let bits = unsafe {
            std::ptr::read(self as *const Entry as *const [MaybeUninit<u8>; ENTRY_BYTES])
        };
        Some(FlatCopy { bits, blocks })
    }

    /// The entry `copy_flat` copied, with fresh heap blocks holding the copied
    /// bytes (each word's tag bits kept), owned by nobody else.
    pub(crate) fn from_flat(copy: &FlatCopy, arena: &[u8]) -> Entry {
        // SAFETY: the bits of a valid entry; each heap word is overwritten below
        // with a block of its own before the entry is returned.
        let mut e: Entry = unsafe { std::mem::transmute_copy(&copy.bits) };
        for block in copy.blocks.iter().flatten() {
            let layout =
                std::alloc::Layout::from_size_align(block.size as usize, block.align as usize)
                    .expect("a layout the block had");
            // SAFETY: the layout is the block's own, never zero-sized (a header).
            let raw = unsafe { std::alloc::alloc(layout) };
            if raw.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            let at = block.at as usize;
            let bytes = &arena[at..at + block.copy as usize];
            // SAFETY: `raw` holds `size >= copy` bytes and does not overlap the arena.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), raw, bytes.len()) };
            let tag = e.word_addr(block.word as usize) & (block.align as usize - 1);
            let word = raw.map_addr(|a| a | tag);
            // SAFETY: heap words are 8-aligned pointer-sized slots of the area.
            unsafe {
                std::ptr::write(
                    e.area.as_mut_ptr().add(block.word as usize * WORD_BYTES) as *mut *mut u8,
                    word,
                )
            };
        }
        e
    }

    /// The pointer in heap word `word`.
    fn word_ptr(&self, word: usize) -> *const u8 {
        // SAFETY: heap words hold a pointer (with tag bits) in an 8-aligned slot.
        unsafe { std::ptr::read(self.area.as_ptr().add(word * WORD_BYTES) as *const *const u8) }
    }

    /// The address in heap word `word`, tag bits included.
    fn word_addr(&self, word: usize) -> usize {
        self.word_ptr(word).addr()
    }

    /// For the undo journal (a big string open): the bytes of `touched` that the
    /// string has now, its length and whether it is `raw`, before a change in
    /// place that writes only there (and may grow the string).
    pub(super) fn record_str_restore(&self, touched: std::ops::Range<usize>) {
        if !crate::undo::inverses_wanted() {
            return;
        }
        let bytes = self.heap(3).as_slice();
        let at = touched.start.min(bytes.len());
        let old = &bytes[at..touched.end.clamp(at, bytes.len())];
        let raw = self.flags & FLAG_RAW != 0;
        crate::undo::record_inverse(|arena| crate::undo::Inverse::StrRestore {
            len: bytes.len() as u32,
            raw,
            at: at as u32,
            old: crate::undo::Kept::of(arena, old),
        });
    }

    /// Reverse one change in place of a big string (the undo journal's roll-back).
    pub(crate) fn reverse_str(&mut self, inverse: crate::undo::Inverse, arena: &[u8]) {
        let crate::undo::Inverse::StrRestore { len, raw, at, old } = inverse else {
            unreachable!("{inverse:?} recorded for a string")
        };
        debug_assert!(self.kind == Kind::Str && self.layout & VALUE_HEAP != 0);
        let s = self.heap_mut(3);
        let old = old.get(arena);
        let at = at as usize;
        s.as_mut_slice()[at..at + old.len()].copy_from_slice(old);
        s.truncate(len as usize);
        if !raw {
            self.flags &= !FLAG_RAW;
        }
    }
}
