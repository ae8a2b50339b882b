//! Finding the members of a geo set inside a shape, with Redis's answer and
//! faster than Redis.
//!
//! Redis (`membersOfAllNeighbors`) walks the score range of each of the nine cells
//! of [`hash::areas`] in turn and computes the haversine distance of every member
//! there. Its answer is defined by that walk: the members inside the shape, in
//! the order (cell index, rank in the set). This module finds exactly those
//! members and knows each one's place in that order, but visits far fewer:
//!
//! - A cell is split into its four children (in score order, so the walk order is
//!   kept) while it holds many members; a child whose conservative bounds
//!   ([`hash::cell_bounds`]) put it wholly outside the shape is skipped. Only the
//!   members of the remaining small cells get the exact test.
//! - A COUNT search sorted nearest first ([`nearest`]) visits cells best-first by
//!   their least possible distance and stops once COUNT members are nearer than
//!   any unvisited cell can be: GEOSEARCH ... COUNT 10 computes a few dozen
//!   distances where Redis computes thousands.
//!
//! A cell's members are found by two rank lookups for its score range; nothing is
//! allocated per member (a [`Hit`] borrows the member from the set).

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use super::hash::{self, Cell, Shape};
use crate::zsets::ZSetValue;

/// A cell with at most this many members is scanned rather than split: a split
/// costs rank lookups that pay off only when they skip several members.
const SCAN_MEMBERS_MAX: usize = 16;

/// A member found inside the shape.
#[derive(Clone, Copy, Debug)]
pub struct Hit<'a> {
    /// The member.
    pub member: &'a [u8],
    /// Its score (the geohash).
    pub score: f64,
    /// Decoded longitude.
    pub lon: f64,
    /// Decoded latitude.
    pub lat: f64,
    /// Metres from the centre.
    pub dist_m: f64,
    /// Which of the nine cells Redis finds it in, and its rank in the set:
    /// Redis's order of discovery.
    pub order: (u8, usize),
}

impl Hit<'_> {
    /// Nearest first, ties in Redis's order of discovery (glibc's `qsort` is a
    /// stable merge sort for arrays of this size).
    pub fn cmp_near(&self, other: &Self) -> Ordering {
        self.dist_m
            .total_cmp(&other.dist_m)
            .then(self.order.cmp(&other.order))
    }

    /// Farthest first, ties in Redis's order of discovery.
    pub fn cmp_far(&self, other: &Self) -> Ordering {
        other
            .dist_m
            .total_cmp(&self.dist_m)
            .then(self.order.cmp(&other.order))
    }
}

/// A cell and the ranks `lo..hi` of its members (scores in its range).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    cell: Cell,
    lo: usize,
    hi: usize,
}

impl Span {
    /// The members of `cell`: two rank lookups.
    fn of(z: &ZSetValue, cell: Cell) -> Span {
        let (min, max) = cell.score_range();
        let lo = z.count_while(|_, s| s < min);
        let hi = z.count_while(|_, s| s < max).max(lo);
        Span { cell, lo, hi }
    }

    fn len(&self) -> usize {
        self.hi - self.lo
    }

    /// The four children in score order: three rank lookups, the outer bounds
    /// being the parent's.
    fn children(&self, z: &ZSetValue) -> [Span; 4] {
        let mut bounds = [self.lo, self.lo, self.lo, self.lo, self.hi];
        for (q, bound) in bounds.iter_mut().enumerate().take(4).skip(1) {
            let (min, _) = self.cell.child(q as u64).score_range();
            *bound = z.count_while(|_, s| s < min).clamp(self.lo, self.hi);
        }
        std::array::from_fn(|q| Span {
            cell: self.cell.child(q as u64),
            lo: bounds[q],
            hi: bounds[q + 1].max(bounds[q]),
        })
    }
}

/// The cells Redis scans, with their index, skipping the excluded ones and a cell
/// equal to the one scanned just before (Redis's duplicate check, which never
/// compares with the centre).
fn redis_cells(shape: &Shape) -> impl Iterator<Item = (u8, Cell)> {
    let cells = hash::areas(shape);
    let mut last: Option<Cell> = None;
    (0u8..9).filter_map(move |i| {
        let cell = cells[usize::from(i)];
        if cell.is_zero() || (i > 1 && last == Some(cell)) {
            return None;
        }
        // Redis's `last_processed` stays 0 after the centre: cell 1 is never
        // compared with it.
        last = if i == 0 { None } else { Some(cell) };
        Some((i, cell))
    })
}

/// The members of `span` inside the shape, in rank order, to `emit`; stops when
/// `emit` says so.
fn scan<'a>(
    z: &'a ZSetValue,
    shape: &Shape,
    index: u8,
    span: Span,
    emit: &mut impl FnMut(Hit<'a>) -> bool,
) -> bool {
    let members = z.iter_from(span.lo, false).take(span.len());
    for (k, (member, score)) in members.enumerate() {
        let (lon, lat) = hash::decode_score(score);
        if let Some(dist_m) = shape.contains(lon, lat) {
            let hit = Hit {
                member,
                score,
                lon,
                lat,
                dist_m,
                order: (index, span.lo + k),
            };
            if !emit(hit) {
                return false;
            }
        }
    }
    true
}

/// True when `span` is worth scanning or splitting.
fn may_hold(shape: &Shape, cos_lat: f64, span: &Span) -> bool {
    span.len() > 0
        && shape.may_contain(&hash::cell_bounds(span.cell, shape.lon, shape.lat, cos_lat))
}

/// True when `span` is scanned rather than split.
fn scan_whole(span: &Span) -> bool {
    span.len() <= SCAN_MEMBERS_MAX || span.cell.step >= hash::STEP_MAX
}

/// Every member inside the shape, in Redis's order, to `emit` until it returns
/// false (ANY's early stop).
pub fn walk<'a>(z: &'a ZSetValue, shape: &Shape, mut emit: impl FnMut(Hit<'a>) -> bool) {
    let cos_lat = shape.cos_lat();
    for (index, cell) in redis_cells(shape) {
        if !walk_span(z, shape, cos_lat, index, Span::of(z, cell), &mut emit) {
            return;
        }
    }
}

fn walk_span<'a>(
    z: &'a ZSetValue,
    shape: &Shape,
    cos_lat: f64,
    index: u8,
    span: Span,
    emit: &mut impl FnMut(Hit<'a>) -> bool,
) -> bool {
    if !may_hold(shape, cos_lat, &span) {
        return true;
    }
    if scan_whole(&span) {
        return scan(z, shape, index, span, emit);
    }
    span.children(z)
        .into_iter()
        .all(|child| walk_span(z, shape, cos_lat, index, child, emit))
}

/// A cell waiting in [`nearest`]'s queue, least bound first.
struct Pending {
    bound_m: f64,
    index: u8,
    span: Span,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> Ordering {
        self.bound_m
            .total_cmp(&other.bound_m)
            .then((self.index, self.span).cmp(&(other.index, other.span)))
    }
}

/// A found member in [`nearest`]'s bounded heap, worst (farthest) on top.
struct Kept<'a>(Hit<'a>);

impl PartialEq for Kept<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Kept<'_> {}
impl PartialOrd for Kept<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Kept<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.cmp_near(&other.0)
    }
}

/// The `count` members inside the shape nearest the centre, nearest first (ties
/// in Redis's order of discovery), found best-first. `count` is at least 1.
pub fn nearest<'a>(z: &'a ZSetValue, shape: &Shape, count: usize) -> Vec<Hit<'a>> {
    let cos_lat = shape.cos_lat();
    let mut queue = BinaryHeap::new();
    let push = |queue: &mut BinaryHeap<Reverse<Pending>>, index: u8, span: Span| {
        if span.len() == 0 {
            return;
        }
        let bounds = hash::cell_bounds(span.cell, shape.lon, shape.lat, cos_lat);
        if shape.may_contain(&bounds) {
            queue.push(Reverse(Pending {
                bound_m: bounds.distance_m,
                index,
                span,
            }));
        }
    };
    for (index, cell) in redis_cells(shape) {
        push(&mut queue, index, Span::of(z, cell));
    }
    // At most `count` kept; the bound keeps the allocation within the set's size.
    let mut kept: BinaryHeap<Kept<'a>> = BinaryHeap::with_capacity(count.min(z.len()) + 1);
    while let Some(Reverse(p)) = queue.pop() {
        if kept.len() >= count && kept.peek().is_some_and(|w| p.bound_m > w.0.dist_m) {
            break;
        }
        if !scan_whole(&p.span) {
            for child in p.span.children(z) {
                push(&mut queue, p.index, child);
            }
            continue;
        }
        scan(z, shape, p.index, p.span, &mut |hit| {
            if kept.len() < count {
                kept.push(Kept(hit));
            } else if kept
                .peek()
                .is_some_and(|w| hit.cmp_near(&w.0) == Ordering::Less)
            {
                kept.pop();
                kept.push(Kept(hit));
            }
            true
        });
    }
    let mut out: Vec<Hit<'a>> = kept.into_iter().map(|k| k.0).collect();
    out.sort_by(Hit::cmp_near);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::hash::ShapeKind;
    use crate::zsets::ZLimits;

    /// A small deterministic generator (no dependency for a test).
    struct Lcg(u64);
    impl Lcg {
        fn unit(&mut self) -> f64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 11) as f64 / (1u64 << 53) as f64
        }
        fn range(&mut self, lo: f64, hi: f64) -> f64 {
            lo + (hi - lo) * self.unit()
        }
    }

    /// Redis's walk without shortcuts: every member of every cell, tested.
    fn plain_walk<'a>(z: &'a ZSetValue, shape: &Shape) -> Vec<(u8, usize, &'a [u8])> {
        let mut out = Vec::new();
        for (index, cell) in redis_cells(shape) {
            let span = Span::of(z, cell);
            scan(z, shape, index, span, &mut |h| {
                out.push((h.order.0, h.order.1, h.member));
                true
            });
        }
        out
    }

    /// Points clustered at the poles' limits, across the antimeridian and
    /// spread out; shapes of every size around them: the pruned walk and the
    /// best-first search answer what the plain walk answers.
    #[test]
    fn pruned_searches_answer_as_the_plain_walk() {
        let lim = ZLimits {
            entries: 128,
            value: 64,
        };
        let centres = [
            (179.95, 0.0),
            (-179.95, 40.0),
            (10.0, 85.0),
            (-70.0, -85.0),
            (13.36, 38.11),
        ];
        let mut rng = Lcg(7);
        let mut z = ZSetValue::new();
        for i in 0..3000 {
            let (lon, lat) = if i % 4 == 0 {
                (rng.range(-180.0, 180.0), rng.range(-85.0, 85.0))
            } else {
                let (clon, clat) = centres[i % centres.len()];
                let lon = clon + rng.range(-0.5, 0.5);
                let lon = if lon > 180.0 {
                    lon - 360.0
                } else if lon < -180.0 {
                    lon + 360.0
                } else {
                    lon
                };
                (
                    lon,
                    (clat + rng.range(-0.5, 0.5)).clamp(hash::LAT_MIN, hash::LAT_MAX),
                )
            };
            let score = hash::score_of(lon, lat).expect("in range");
            z.insert(format!("p{i}").as_bytes(), score, lim);
        }
        for round in 0..300 {
            let (clon, clat) = centres[round % centres.len()];
            let lon = (clon + rng.range(-0.6, 0.6)).clamp(-180.0, 180.0);
            let lat = (clat + rng.range(-0.6, 0.6)).clamp(hash::LAT_MIN, hash::LAT_MAX);
            let size = 10f64.powf(rng.range(0.0, 7.0));
            let kind = if round % 2 == 0 {
                ShapeKind::Radius(size)
            } else {
                ShapeKind::Box {
                    width: size,
                    height: size * rng.range(0.2, 3.0),
                }
            };
            let shape = Shape {
                lon,
                lat,
                kind,
                conversion: 1.0,
            };
            let expected = plain_walk(&z, &shape);
            let mut got = Vec::new();
            walk(&z, &shape, |h| {
                got.push((h.order.0, h.order.1, h.member));
                true
            });
            assert_eq!(got, expected, "walk, round {round}");
            let mut all = Vec::new();
            walk(&z, &shape, |h| {
                all.push(h);
                true
            });
            all.sort_by(Hit::cmp_near);
            for count in [1, 10, 100] {
                let near: Vec<_> = nearest(&z, &shape, count)
                    .iter()
                    .map(|h| h.member)
                    .collect();
                let want: Vec<_> = all.iter().take(count).map(|h| h.member).collect();
                assert_eq!(near, want, "nearest {count}, round {round}");
            }
        }
    }
}
