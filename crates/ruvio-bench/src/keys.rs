//! Choosing key numbers: random or sequential, over the whole key space or only
//! the part a shard owns.
//!
//! Each connection owns its picker, so no state is shared between threads. The
//! random generator is xorshift64*: a few instructions, plenty for spreading keys.

use std::sync::Arc;

/// How key numbers are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// Uniform over the space, independently for every placeholder.
    Random,
    /// Connection `i` of `n` takes `i, i+n, i+2n, ...` (wrapping), so together the
    /// connections visit every key once per pass: a preload fills the space.
    Sequential,
}

/// The numbers a connection may use.
#[derive(Debug, Clone)]
pub enum Space {
    /// `0..len`.
    Range(u64),
    /// Only these numbers: the keys whose slot the target shard owns.
    Owned(Arc<Vec<u32>>),
}

impl Space {
    fn len(&self) -> u64 {
        match self {
            Space::Range(n) => *n,
            Space::Owned(v) => v.len() as u64,
        }
    }

    #[inline]
    fn nth(&self, i: u64) -> u64 {
        match self {
            Space::Range(_) => i,
            Space::Owned(v) => v[i as usize] as u64,
        }
    }
}

/// Per-connection source of key numbers.
#[derive(Debug, Clone)]
pub struct KeyPicker {
    order: KeyOrder,
    space: Space,
    rng: u64,
    next: u64,
    stride: u64,
}

impl KeyPicker {
    /// A picker for connection `index` of `count`; `seed` varies the random stream.
    pub fn new(order: KeyOrder, space: Space, index: u64, count: u64, seed: u64) -> Self {
        assert!(space.len() > 0, "empty key space");
        KeyPicker {
            order,
            space,
            rng: splitmix(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1,
            next: index,
            stride: count.max(1),
        }
    }

    /// The next key number.
    #[inline]
    pub fn pick(&mut self) -> u64 {
        let len = self.space.len();
        let i = match self.order {
            KeyOrder::Random => {
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
                ((r as u128 * len as u128) >> 64) as u64
            }
            KeyOrder::Sequential => {
                let i = self.next % len;
                self.next += self.stride;
                i
            }
        };
        self.space.nth(i)
    }
}

/// SplitMix64 finalizer: turns a small seed into a well-mixed starting state.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_stays_in_range_and_spreads() {
        let mut p = KeyPicker::new(KeyOrder::Random, Space::Range(100), 0, 1, 1);
        let mut seen = [false; 100];
        for _ in 0..10_000 {
            seen[p.pick() as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn sequential_connections_cover_the_space_once() {
        let mut all: Vec<u64> = (0..3)
            .flat_map(|i| {
                let mut p = KeyPicker::new(KeyOrder::Sequential, Space::Range(10), i, 3, 0);
                let n = (10 - i).div_ceil(3);
                (0..n).map(move |_| p.pick()).collect::<Vec<_>>()
            })
            .collect();
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }

    #[test]
    fn owned_space_only_yields_owned_numbers() {
        let owned = Arc::new(vec![3u32, 9, 27]);
        let mut p = KeyPicker::new(KeyOrder::Random, Space::Owned(owned), 0, 1, 5);
        for _ in 0..100 {
            assert!([3, 9, 27].contains(&p.pick()));
        }
    }
}
