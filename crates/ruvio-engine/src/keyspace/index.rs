//! `Index`: key hash -> slab slot id, as an extendible hash table of small
//! `hashbrown::HashTable<u32>` segments.
//!
//! No stop-the-world resize: a segment never grows past [`SEGMENT_ITEMS_MAX`] ids
//! (a 2048-bucket table, ~10 KiB); when it is full it splits in two by one more hash
//! bit, moving about 900 ids. The directory (one `u32` per `2^depth` prefix) doubles
//! when a segment at full depth splits, which copies only the directory. So the
//! longest pause any insert can cause is one segment split or one segment rehash,
//! whatever the size of the database.
//!
//! The directory uses hash bits 32.. (hashbrown uses the low bits for the bucket
//! and the top 7 for its tag), so the three choices are independent.

use hashbrown::HashTable;

/// Most ids in one segment: 7/8 of 2048 buckets, hashbrown's load limit, so a
/// segment splits instead of growing to 4096 buckets.
pub const SEGMENT_ITEMS_MAX: usize = 1792;
/// Deepest directory (2^20 segments of ~1800 keys is ~1.9 G keys); past it segments
/// simply grow.
const DEPTH_MAX: u32 = 20;
/// First hash bit used by the directory.
const DIR_SHIFT: u32 = 32;
const _: () = assert!(
    DIR_SHIFT + DEPTH_MAX <= 57,
    "directory bits must not reach hashbrown's tag bits"
);

struct Segment {
    table: HashTable<u32>,
    depth: u32,
}

/// Extendible hash index of slot ids.
pub struct Index {
    dir: Vec<u32>,
    depth: u32,
    segments: Vec<Segment>,
}

impl Default for Index {
    fn default() -> Self {
        Index {
            dir: vec![0],
            depth: 0,
            segments: vec![Segment {
                table: HashTable::new(),
                depth: 0,
            }],
        }
    }
}

impl Index {
    fn segment_of(&self, hash: u64) -> usize {
        let slot = (hash >> DIR_SHIFT) as usize & (self.dir.len() - 1);
        self.dir[slot] as usize
    }

    /// The id whose key `is_key` accepts, among those stored under `hash`.
    pub fn find(&self, hash: u64, mut is_key: impl FnMut(u32) -> bool) -> Option<u32> {
        let seg = &self.segments[self.segment_of(hash)];
        seg.table.find(hash, |&id| is_key(id)).copied()
    }

    /// Add `id` (not present yet) under `hash`; `hash_of` recomputes any stored id's hash.
    pub fn insert(&mut self, hash: u64, id: u32, hash_of: impl Fn(u32) -> u64) {
        let mut s = self.segment_of(hash);
        if self.segments[s].table.len() >= SEGMENT_ITEMS_MAX && self.segments[s].depth < DEPTH_MAX {
            self.split(s, hash, &hash_of);
            s = self.segment_of(hash);
        }
        self.segments[s]
            .table
            .insert_unique(hash, id, |&x| hash_of(x));
    }

    /// Remove `id` stored under `hash`; false when it was not there.
    pub fn remove(&mut self, hash: u64, id: u32) -> bool {
        let s = self.segment_of(hash);
        match self.segments[s].table.find_entry(hash, |&x| x == id) {
            Ok(entry) => {
                entry.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Make room for about `n` ids in an empty index (a file being loaded says how
    /// many keys follow): the directory at the depth `n` needs, each segment sized
    /// for its share, so the load splits no segment and rehashes no key. Does
    /// nothing once ids are stored.
    pub fn reserve(&mut self, n: usize) {
        let empty = self.segments.len() == 1 && self.segments[0].table.is_empty();
        if !empty {
            return;
        }
        // Segments filled to 3/4 of their limit after the load: room to grow.
        let per_segment = SEGMENT_ITEMS_MAX * 3 / 4;
        let mut depth = 0;
        while (n >> depth) > per_segment && depth < DEPTH_MAX {
            depth += 1;
        }
        let share = (n >> depth).min(SEGMENT_ITEMS_MAX);
        self.depth = depth;
        self.dir = (0..1u32 << depth).collect();
        self.segments = (0..1usize << depth)
            .map(|_| Segment {
                table: HashTable::with_capacity(share),
                depth,
            })
            .collect();
    }

    /// Split segment `s` (which `hash` maps to) by its next hash bit.
    fn split(&mut self, s: usize, hash: u64, hash_of: &impl Fn(u32) -> u64) {
        let d = self.segments[s].depth;
        if d == self.depth {
            self.dir.extend_from_within(..);
            self.depth += 1;
        }
        let bit = 1u64 << (DIR_SHIFT + d);
        let old = &mut self.segments[s];
        let moved: Vec<u32> = old.table.extract_if(|id| hash_of(*id) & bit != 0).collect();
        old.depth = d + 1;
        old.table.shrink_to_fit(|&x| hash_of(x));
        let mut table = HashTable::with_capacity(moved.len());
        for id in moved {
            table.insert_unique(hash_of(id), id, |&x| hash_of(x));
        }
        let new_seg = self.segments.len() as u32;
        self.segments.push(Segment {
            table,
            depth: d + 1,
        });
        // Directory slots of `s` are those equal to its d-bit prefix; the ones with
        // bit d set now belong to the new segment.
        let prefix = (hash >> DIR_SHIFT) as usize & ((1 << d) - 1);
        let stride = 1usize << (d + 1);
        let mut slot = prefix | (1 << d);
        while slot < self.dir.len() {
            debug_assert_eq!(self.dir[slot] as usize, s);
            self.dir[slot] = new_seg;
            slot += stride;
        }
    }

    /// Bytes allocated by the directory and the segment tables.
    pub fn allocated_bytes(&self) -> usize {
        self.dir.capacity() * 4
            + self.segments.capacity() * std::mem::size_of::<Segment>()
            + self
                .segments
                .iter()
                .map(|s| s.table.allocation_size())
                .sum::<usize>()
    }

    /// Number of ids stored.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.segments.iter().map(|s| s.table.len()).sum()
    }

    /// Largest segment (to check that splitting bounds them).
    #[cfg(test)]
    pub fn largest_segment(&self) -> usize {
        self.segments
            .iter()
            .map(|s| s.table.len())
            .max()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mix(id: u32) -> u64 {
        // A fixed scrambler standing in for the key hash.
        let mut x = id as u64 ^ 0x9E37_79B9_7F4A_7C15;
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    /// A reserved index holds what it was sized for without splitting, and goes on
    /// splitting past it.
    #[test]
    fn reserved_index_loads_without_splits() {
        let mut index = Index::default();
        index.reserve(50_000);
        let segments = index.segments.len();
        assert!(segments > 1);
        for id in 0..50_000u32 {
            index.insert(mix(id), id, mix);
        }
        assert_eq!(
            index.segments.len(),
            segments,
            "no split within the reservation"
        );
        for id in 50_000..200_000u32 {
            index.insert(mix(id), id, mix);
        }
        assert!(index.largest_segment() <= SEGMENT_ITEMS_MAX);
        for id in (0..200_000u32).step_by(3) {
            assert_eq!(index.find(mix(id), |x| x == id), Some(id));
        }
        index.reserve(1 << 30);
        assert_eq!(
            index.len(),
            200_000,
            "a reservation never touches a filled index"
        );
    }

    #[test]
    fn splits_keep_every_id_findable() {
        let mut index = Index::default();
        for id in 0..100_000u32 {
            index.insert(mix(id), id, mix);
        }
        assert_eq!(index.len(), 100_000);
        assert!(index.largest_segment() <= SEGMENT_ITEMS_MAX);
        for id in (0..100_000u32).step_by(7) {
            assert_eq!(index.find(mix(id), |x| x == id), Some(id));
        }
        for id in 0..50_000u32 {
            assert!(index.remove(mix(id), id));
        }
        assert!(!index.remove(mix(3), 3));
        assert_eq!(index.find(mix(3), |x| x == 3), None);
        assert_eq!(index.find(mix(70_000), |x| x == 70_000), Some(70_000));
    }
}
