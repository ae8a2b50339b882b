//! A slab of connections indexed by a small integer, with a generation per slot so
//! a late io_uring completion for a closed connection is recognised and ignored.
//!
//! Values are boxed: a connection is taken out of the slab for every read batch
//! (so a command can see the other connections), and moving a pointer is cheaper
//! than moving the few hundred bytes of a connection twice per batch.

/// Slots holding `T`, reusing freed indexes.
#[derive(Debug)]
pub struct Slab<T> {
    slots: Vec<Option<Box<T>>>,
    gens: Vec<u32>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Store a value built from its (index, generation); returns the index.
    pub fn insert_with(&mut self, make: impl FnOnce(u32, u32) -> T) -> u32 {
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(None);
                self.gens.push(0);
                (self.slots.len() - 1) as u32
            }
        };
        let gen = self.gens[index as usize].wrapping_add(1) & 0x00ff_ffff;
        self.gens[index as usize] = gen;
        self.slots[index as usize] = Some(Box::new(make(index, gen)));
        self.len += 1;
        index
    }

    /// The value at `index` if its generation is `gen`.
    pub fn get_mut(&mut self, index: u32, gen: u32) -> Option<&mut T> {
        if self.gens.get(index as usize) != Some(&gen) {
            return None;
        }
        self.slots.get_mut(index as usize)?.as_deref_mut()
    }

    /// The value at `index` if its generation is `gen`, shared.
    pub fn get(&self, index: u32, gen: u32) -> Option<&T> {
        if self.gens.get(index as usize) != Some(&gen) {
            return None;
        }
        self.slots.get(index as usize)?.as_deref()
    }

    /// Take the value out (to work on it beside the rest of the slab); put it back with
    /// [`restore`](Self::restore).
    pub fn take(&mut self, index: u32, gen: u32) -> Option<Box<T>> {
        if self.gens.get(index as usize) != Some(&gen) {
            return None;
        }
        self.slots.get_mut(index as usize)?.take()
    }

    /// Put back a value taken with [`take`](Self::take).
    pub fn restore(&mut self, index: u32, value: Box<T>) {
        self.slots[index as usize] = Some(value);
    }

    /// Remove the value for good, freeing the index.
    pub fn remove(&mut self, index: u32) -> Option<Box<T>> {
        let value = self.slots.get_mut(index as usize)?.take()?;
        self.free.push(index);
        self.len -= 1;
        Some(value)
    }

    /// Number of stored values (including ones currently taken out).
    // Counted for INFO and the gauges only; nothing asks whether it is empty.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Iterate over present values with their index.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_deref().map(|v| (i as u32, v)))
    }

    /// Iterate mutably over present values with their index.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.as_deref_mut().map(|v| (i as u32, v)))
    }
}
