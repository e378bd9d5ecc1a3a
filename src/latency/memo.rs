//! A bounded memo of step prices.
//!
//! [`PriceMemo`] keeps the prices of recently seen keys in a fixed number of slots (direct
//! mapped: a key's hash picks its slot, and a new key evicts the one there). All its memory is
//! taken when it is made; looking up and storing never allocate. A backend memoises only what
//! its key fully determines, so a hit returns exactly what pricing again would: the memo
//! changes speed, never a nanosecond. The roofline uses one for the layers that depend only on
//! a step's token counts (`roofline/token_memo.rs`); ASTRA-Sim's prices are never memoised (a
//! step's time there depends on the simulated network's state, not on the batch alone).

use crate::Nanos;

/// A key of a [`PriceMemo`]: compared exactly, hashed to pick its slot.
pub trait MemoKey: Copy + Eq {
    /// A well-mixed hash of the key (any deterministic function: it only spreads keys over
    /// slots).
    fn memo_hash(&self) -> u64;
}

/// How often a memo answered from its slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoStats {
    /// Lookups answered from a slot.
    pub hits: u64,
    /// Lookups that had to price (and then stored their prices).
    pub misses: u64,
}

impl MemoStats {
    /// Hits over lookups, 0 before the first.
    pub fn hit_rate(&self) -> f64 {
        let lookups = self.hits + self.misses;
        if lookups == 0 {
            0.0
        } else {
            self.hits as f64 / lookups as f64
        }
    }
}

/// A direct-mapped cache of `slots` keys, each holding `width` prices.
#[derive(Debug, Clone)]
pub struct PriceMemo<K> {
    /// The key each slot holds, if any.
    pub keys: Box<[Option<K>]>,
    /// `width` prices per slot, slot after slot.
    prices: Box<[Nanos]>,
    width: usize,
    stats: MemoStats,
}

impl<K: MemoKey> PriceMemo<K> {
    /// An empty memo of `slots` slots (rounded up to a power of two, at least 1) of `width`
    /// prices each.
    pub fn new(slots: usize, width: usize) -> PriceMemo<K> {
        let slots = slots.max(1).next_power_of_two();
        PriceMemo {
            keys: vec![None; slots].into_boxed_slice(),
            prices: vec![0; slots * width].into_boxed_slice(),
            width,
            stats: MemoStats::default(),
        }
    }

    /// The slot `key` maps to.
    pub fn slot(&self, key: &K) -> usize {
        // The high bits of a multiplicative hash are the well-mixed ones.
        let mixed = key.memo_hash().wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed >> 32) as usize & (self.keys.len() - 1)
    }

    /// The prices stored under `key` (a hit), or a slot to store them in, now `key`'s, its
    /// old prices to be overwritten (a miss). Counted either way.
    pub fn entry(&mut self, key: K) -> (bool, &mut [Nanos]) {
        let slot = self.slot(&key);
        let hit = self.keys[slot] == Some(key);
        if hit {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
            self.keys[slot] = Some(key);
        }
        let start = slot * self.width;
        (hit, &mut self.prices[start..start + self.width])
    }

    /// Hits and misses so far.
    pub fn stats(&self) -> MemoStats {
        self.stats
    }
}
