//! The commands as ACL rules see them: one bit per command and subcommand row of
//! the command table, with the row's categories as a bit set.
//!
//! The table itself lives above this floor (`cmd::registry`), so it builds a
//! [`Catalog`] once and hands it down: the rule compiler needs only names,
//! categories and the container/subcommand shape, and the check needs only the
//! bit a row was given (the row's statistics slot, already unique per row).

use ahash::AHashMap;

/// Redis 7.0's ACL categories, in Redis's order (ACL CAT lists them so, and the
/// rule describer tries them in this order).
pub const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of category `name` (case-insensitive), as Redis's
/// `ACLGetCommandCategoryFlagByName`.
pub fn category_bit(name: &[u8]) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// One command or subcommand row.
#[derive(Debug, Clone)]
pub struct CatalogRow {
    /// The full name (`config|get`).
    pub name: &'static str,
    /// Bit set over [`CATEGORIES`].
    pub categories: u32,
    /// A subcommand's container.
    pub parent: Option<usize>,
    /// A container's subcommands.
    pub subs: Vec<usize>,
}

/// Every row, indexed by its bit.
#[derive(Debug, Default)]
pub struct Catalog {
    rows: Vec<CatalogRow>,
    /// The top-level rows, in table order.
    top: Vec<usize>,
    /// Bits by full name (a script's call knows its row's name, not its bit),
    /// looked up per `redis.call` of a restricted user: aHash, not SipHash.
    by_name: AHashMap<&'static str, usize>,
}

impl Catalog {
    /// A catalog of `rows` (indexed by bit; `parent`/`subs` name bits).
    pub fn new(rows: Vec<CatalogRow>) -> Catalog {
        let top = (0..rows.len())
            .filter(|&i| rows[i].parent.is_none())
            .collect();
        let by_name = rows.iter().enumerate().map(|(i, r)| (r.name, i)).collect();
        Catalog { rows, top, by_name }
    }

    /// How many bits a command bitmap needs.
    pub fn bits(&self) -> usize {
        self.rows.len()
    }

    pub fn row(&self, bit: usize) -> &CatalogRow {
        &self.rows[bit]
    }

    /// The bit of the row with this full name (a row's own `name`).
    pub fn bit_of(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// Top-level rows in table order.
    pub fn top(&self) -> &[usize] {
        &self.top
    }

    /// The row named `name` (`get`, `config|get`; case-insensitive), as Redis's
    /// `ACLLookupCommand`: a `|` names a container's subcommand.
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        let mut parts = name.split(|&b| b == b'|');
        let first = parts.next()?;
        let top = *self
            .top
            .iter()
            .find(|&&i| self.rows[i].name.as_bytes().eq_ignore_ascii_case(first))?;
        match (parts.next(), parts.next()) {
            (None, _) => Some(top),
            (Some(sub), None) => self.rows[top].subs.iter().copied().find(|&s| {
                let full = self.rows[s].name.as_bytes();
                full[full.len() - sub.len().min(full.len())..].eq_ignore_ascii_case(sub)
                    && full.len() == self.rows[top].name.len() + 1 + sub.len()
            }),
            _ => None,
        }
    }

    /// Every row, containers before their subcommands (Redis's walk order of a
    /// category: the command, then its subcommands).
    pub fn walk(&self) -> impl Iterator<Item = usize> + '_ {
        self.top
            .iter()
            .flat_map(|&t| std::iter::once(t).chain(self.rows[t].subs.iter().copied()))
    }
}

#[cfg(test)]
pub(crate) fn sample() -> Catalog {
    let row = |name, categories, parent, subs| CatalogRow {
        name,
        categories,
        parent,
        subs,
    };
    let read = category_bit(b"read").unwrap();
    let write = category_bit(b"write").unwrap();
    let admin = category_bit(b"admin").unwrap();
    let slow = category_bit(b"slow").unwrap();
    Catalog::new(vec![
        row("get", read, None, vec![]),
        row("set", write, None, vec![]),
        row("config", slow, None, vec![3, 4]),
        row("config|get", admin | slow, Some(2), vec![]),
        row("config|set", admin | slow, Some(2), vec![]),
        row("select", 0, None, vec![]),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_commands_and_subcommands() {
        let c = sample();
        assert_eq!(c.lookup(b"GET"), Some(0));
        assert_eq!(c.lookup(b"config|GET"), Some(3));
        assert_eq!(c.lookup(b"config|nope"), None);
        assert_eq!(c.lookup(b"get|x"), None);
        assert_eq!(c.lookup(b"config|get|x"), None);
        assert_eq!(c.lookup(b"nope"), None);
        assert_eq!(category_bit(b"Read"), Some(2));
    }
}
