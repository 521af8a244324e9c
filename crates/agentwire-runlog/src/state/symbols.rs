//! The string sets the deriver looks ids and keys up in: [`Symbols`], strings interned in one
//! arena with an open-addressing table, and [`IdHasher`], which hashes event ids the way the
//! deriver's id set does so another thread can hash them ahead.

/// Hashes event ids the way the deriver's id set does (so another thread can do it).
#[derive(Debug, Clone)]
pub(crate) struct IdHasher(pub(super) ahash::RandomState);

impl IdHasher {
    pub(crate) fn hash(&self, id: &str) -> u64 {
        self.0.hash_one(id.as_bytes())
    }
}

/// Strings interned in one arena, each numbered by its arrival (its symbol). The table is open
/// addressing with linear probing, at most half full; a slot holds the top 28 bits of the
/// string's hash (its tag) and its symbol, so a lookup touches one cache line of the table and
/// reads the arena only when the tags match. A string's home slot is the top bits of its hash,
/// so a table of up to 2^28 slots doubles from the tags alone: the old slots are read in order
/// and each is written near the same place of the new table (no string hashed again, no random
/// access). The tag bits below the home's tell apart strings of one home (6 bits at 4M slots).
/// About `len + 24` bytes per string and no allocation per string: a long stream's dedup costs
/// one random memory access per new id.
#[derive(Clone, Default)]
pub(super) struct Symbols {
    arena: Vec<u8>,
    /// Where each symbol's text ends in the arena (it starts where the previous one ends).
    ends: Vec<usize>,
    /// 0: empty; else `tag << SYMBOL_BITS | (symbol + 1)`.
    pub(super) slots: Vec<u64>,
    pub(super) hasher: ahash::RandomState,
}

/// Bits of a slot that hold the symbol (2^36 strings, at 24 bytes or more each: more than any
/// memory holds).
const SYMBOL_BITS: u32 = 36;
const SYMBOL_MASK: u64 = (1 << SYMBOL_BITS) - 1;
/// Bits of the hash a slot keeps (its tag): tables of up to 2^TAG_BITS slots grow from the tags.
const TAG_BITS: u32 = 64 - SYMBOL_BITS;
/// Tables of fewer slots (512 KiB) stay in a core's own cache; [`Symbols::warm`] skips them.
pub(super) const WARM_MIN_SLOTS: usize = 1 << 16;
/// Events whose ids are looked up together (see [`Symbols::warm`]).
pub(super) const WARM_GROUP: usize = 16;

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("len", &self.ends.len())
            .finish()
    }
}

impl Symbols {
    fn len(&self) -> usize {
        self.ends.len()
    }

    /// The home slot of a string with this hash in a table of `slots` slots (a power of two, at
    /// least 2): the hash's top bits.
    fn home(hash: u64, slots: usize) -> usize {
        (hash >> (64 - slots.trailing_zeros())) as usize
    }

    fn text(&self, symbol: usize) -> &[u8] {
        let start = symbol.checked_sub(1).map_or(0, |prev| self.ends[prev]);
        &self.arena[start..self.ends[symbol]]
    }

    /// The symbol of `text` (whose hash by `self.hasher` is `hash`, when known), and whether it
    /// is new (then interned now).
    pub(super) fn intern(&mut self, text: &str, hash: Option<u64>) -> (usize, bool) {
        let hash = hash.unwrap_or_else(|| self.hasher.hash_one(text.as_bytes()));
        if (self.len() + 1) * 2 > self.slots.len() {
            self.grow(((self.len() + 1) * 2).next_power_of_two().max(64));
        }
        let mask = self.slots.len() - 1;
        let tag = hash >> SYMBOL_BITS;
        let mut i = Symbols::home(hash, self.slots.len());
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                break;
            }
            let symbol = ((slot & SYMBOL_MASK) - 1) as usize;
            if slot >> SYMBOL_BITS == tag && self.text(symbol) == text.as_bytes() {
                return (symbol, false);
            }
            i = (i + 1) & mask;
        }
        let symbol = self.len();
        self.arena.extend_from_slice(text.as_bytes());
        self.ends.push(self.arena.len());
        self.slots[i] = tag << SYMBOL_BITS | (symbol as u64 + 1);
        (symbol, true)
    }

    /// Loads the table lines that lookups of strings with these hashes will start at, all at
    /// once. The loads are independent, so the core runs them together and their cache misses
    /// overlap instead of each lookup waiting for its own; the lookups that follow find the lines
    /// cached. (It is what a prefetch does, in safe code.) A table that fits in the faster
    /// caches is left alone.
    pub(super) fn warm(&self, hashes: impl IntoIterator<Item = u64>) {
        if self.slots.len() < WARM_MIN_SLOTS {
            return;
        }
        let mut lines = 0u64;
        for hash in hashes {
            lines ^= self.slots[Symbols::home(hash, self.slots.len())];
        }
        std::hint::black_box(lines);
    }

    /// Rebuilds the table with `capacity` slots (a power of two, larger than the table's).
    fn grow(&mut self, capacity: usize) {
        if capacity.trailing_zeros() > TAG_BITS {
            return self.rehash(capacity);
        }
        // Each tag holds the top bits of its hash, all a home in this table needs.
        let mut slots = vec![0u64; capacity];
        for &slot in self.slots.iter().filter(|&&slot| slot != 0) {
            place(&mut slots, slot & !SYMBOL_MASK, slot);
        }
        self.slots = slots;
    }

    /// Rebuilds the table with `capacity` slots from the strings, hashing each again (for tables
    /// larger than the tags can address).
    fn rehash(&mut self, capacity: usize) {
        let mut slots = vec![0u64; capacity];
        for symbol in 0..self.len() {
            let hash = self.hasher.hash_one(self.text(symbol));
            let slot = (hash >> SYMBOL_BITS) << SYMBOL_BITS | (symbol as u64 + 1);
            place(&mut slots, hash, slot);
        }
        self.slots = slots;
    }

    /// Makes room for `more` strings of `bytes` bytes in all.
    pub(super) fn reserve(&mut self, more: usize, bytes: usize) {
        self.arena.reserve(bytes);
        self.ends.reserve(more);
        let want = (self.len() + more).saturating_mul(2).next_power_of_two();
        if want > self.slots.len() {
            self.grow(want);
        }
    }
}

/// Writes `slot` into the first free slot of `slots` from the home of `hash` on.
fn place(slots: &mut [u64], hash: u64, slot: u64) {
    let mask = slots.len() - 1;
    let mut i = Symbols::home(hash, slots.len());
    while slots[i] != 0 {
        i = (i + 1) & mask;
    }
    slots[i] = slot;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_remember_every_string_across_growth() {
        let mut set = Symbols::default();
        let ids: Vec<String> = (0..20_000).map(|i| format!("e_{i}")).collect();
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(set.intern(id, None), (n, true), "{id}");
        }
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(set.intern(id, None), (n, false), "{id}");
            assert_eq!(set.text(n), id.as_bytes());
        }
        assert_eq!(set.intern("", None), (20_000, true));
        assert_eq!(set.intern("", None), (20_000, false));
        assert_eq!(set.intern("e_20000", None), (20_001, true));
        assert_eq!(set.len(), 20_002);
        assert!(set.slots.len() >= set.len() * 2);

        // Rebuilt from the strings, as tables too large for the tags are.
        set.rehash(set.slots.len() * 2);
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(set.intern(id, None), (n, false), "{id}");
        }
        assert_eq!(set.intern("e_20001", None), (20_002, true));

        // A reserved set, and a hash computed ahead by the same hasher.
        let mut set = Symbols::default();
        set.reserve(1000, 8000);
        let hasher = IdHasher(set.hasher.clone());
        assert_eq!(set.intern("x", Some(hasher.hash("x"))), (0, true));
        assert_eq!(set.intern("x", None), (0, false));
        assert_eq!(set.intern("x", Some(hasher.hash("x"))), (0, false));
    }
}
