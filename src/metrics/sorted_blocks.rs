//! The sorted part of a [`super::CountLog`], compact: its packed entries (`value << 24 |
//! count`, ascending by value) in blocks of [`BLOCK`], each block a header word (its first
//! value and two bit widths) followed by the differences from each value to the one before,
//! then the counts less one, each packed at the block's width for them. A run's inter-token
//! gaps, nearly all distinct but close together once sorted, take a few bytes an entry
//! instead of eight. A batch of sorted entries is merged in as a stream, decoded a block at a
//! time and written into a buffer kept from the merge before.

use super::count_log::{COUNT_BITS, MAX_COUNT, unpack};

/// Entries of a block: a block of width `w` takes exactly `w` words.
pub const BLOCK: usize = 64;

/// Bits of a header that hold a width (differences need at most 40, counts 24).
const WIDTH_BITS: u32 = 6;

/// The low `WIDTH_BITS` bits.
const WIDTH_MASK: u64 = (1 << WIDTH_BITS) - 1;

/// Packed entries, ascending by value, held in blocks (see the module).
#[derive(Debug, Default)]
pub struct SortedBlocks {
    /// The blocks, one after another.
    words: Vec<u64>,
    /// Entries held (the last block may be short of [`BLOCK`]).
    entries: usize,
    /// The buffer of the merge before, reused by the next one.
    spare: Vec<u64>,
}

impl SortedBlocks {
    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Words its blocks take (with the one past them, once merged into; not the spare buffer).
    pub fn words(&self) -> usize {
        self.words.len()
    }

    /// Its entries, ascending, to `each` a block at a time.
    pub fn each_block(&self, mut each: impl FnMut(&[u64])) {
        let mut decoder = Decoder::new(&self.words, self.entries);
        while let Some(block) = decoder.next_block() {
            each(block);
        }
    }

    /// Merges `batch`, packed entries ascending by value, into those it holds; entries of a
    /// value come out added into one while their counts fit [`MAX_COUNT`].
    pub fn merge(&mut self, batch: &[u64]) {
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        let mut encoder = Encoder::new(&mut out);
        let mut decoder = Decoder::new(&self.words, self.entries);
        let mut j = 0;
        while let Some(block) = decoder.next_block() {
            let mut i = 0;
            // Which side comes next is as good as random: chosen without a branch.
            while i < block.len() && j < batch.len() {
                let (x, y) = (block[i], batch[j]);
                let from_block = x <= y;
                encoder.push(if from_block { x } else { y });
                i += usize::from(from_block);
                j += usize::from(!from_block);
            }
            block[i..].iter().for_each(|&e| encoder.push(e));
        }
        batch[j..].iter().for_each(|&e| encoder.push(e));
        self.entries = encoder.finish();
        self.spare = std::mem::replace(&mut self.words, out);
    }
}

impl Clone for SortedBlocks {
    /// A copy of its blocks, without the spare buffer.
    fn clone(&self) -> Self {
        SortedBlocks {
            words: self.words.clone(),
            entries: self.entries,
            spare: Vec::new(),
        }
    }
}

/// Writes packed entries, ascending by value, as blocks; an entry is added to the one before
/// when both hold the same value and the sum fits (rarely: a branch that is nearly always
/// not taken, on an entry held in a register).
struct Encoder<'a> {
    out: &'a mut Vec<u64>,
    /// Entries not yet written, a block's at most.
    staged: [u64; BLOCK],
    /// How many are staged.
    len: usize,
    /// The entry last taken, not yet staged (a count of 0: none).
    pending: u64,
    /// Entries written.
    entries: usize,
}

impl<'a> Encoder<'a> {
    fn new(out: &'a mut Vec<u64>) -> Encoder<'a> {
        Encoder {
            out,
            staged: [0; BLOCK],
            len: 0,
            pending: 0,
            entries: 0,
        }
    }

    /// Takes `entry` (after those taken, by value).
    #[inline(always)]
    fn push(&mut self, entry: u64) {
        let last = self.pending;
        if last >> COUNT_BITS == entry >> COUNT_BITS
            && (last & MAX_COUNT) + (entry & MAX_COUNT) <= MAX_COUNT
            && last & MAX_COUNT > 0
        {
            self.pending = last + (entry & MAX_COUNT);
            return;
        }
        self.pending = entry;
        if last & MAX_COUNT > 0 {
            self.staged[self.len] = last;
            self.len += 1;
            if self.len == BLOCK {
                self.write_block(BLOCK);
                self.len = 0;
            }
        }
    }

    /// Writes the first `n` staged entries as a block (a short one padded with zeros).
    fn write_block(&mut self, n: usize) {
        let first = self.staged[0] >> COUNT_BITS;
        let (mut deltas, mut counts) = ([0u64; BLOCK], [0u64; BLOCK]);
        let mut previous = first;
        for (k, &entry) in self.staged[..n].iter().enumerate() {
            let (value, count) = unpack(entry);
            (deltas[k], counts[k]) = (value - previous, count - 1);
            previous = value;
        }
        let width =
            |xs: &[u64; BLOCK]| u64::BITS - xs.iter().fold(0, |a, &x| a | x).leading_zeros();
        let (wd, wc) = (width(&deltas), width(&counts));
        self.out
            .push(first << (2 * WIDTH_BITS) | u64::from(wd) << WIDTH_BITS | u64::from(wc));
        pack(&deltas, wd, self.out);
        pack(&counts, wc, self.out);
        self.entries += n;
    }

    /// Writes what is left, and a word past the blocks (see [`unpack_block`]); returns how
    /// many entries were written.
    fn finish(mut self) -> usize {
        if self.pending & MAX_COUNT > 0 {
            self.staged[self.len] = self.pending;
            self.len += 1;
            if self.len == BLOCK {
                self.write_block(BLOCK);
                self.len = 0;
            }
        }
        if self.len > 0 {
            self.write_block(self.len);
        }
        self.out.push(0);
        self.entries
    }
}

/// Appends `xs`, each below `2^width`, as `width` words: number `i` at bits `i * width`
/// on, across two words where it must be. Gathered in a register, without a branch on when a
/// word is full (a shift by `64 - filled` is written as two, so that `filled = 0` shifts it
/// all out).
fn pack(xs: &[u64; BLOCK], width: u32, out: &mut Vec<u64>) {
    if width == 0 {
        return;
    }
    let base = out.len();
    // A word past the block, which the last number's spill (none) is written to.
    out.resize(base + width as usize + 1, 0);
    let words = &mut out[base..];
    let (mut k, mut word, mut filled) = (0, 0u64, 0u32);
    for &x in xs {
        word |= x << filled;
        words[k] = word;
        let full = filled + width >= 64;
        word = if full {
            (x >> 1) >> (63 - filled)
        } else {
            word
        };
        k += usize::from(full);
        filled = (filled + width) % 64;
    }
    out.truncate(base + width as usize);
}

/// Reads [`BLOCK`] numbers of `width` bits from the start of `words` ([`pack`]'s layout) into
/// `xs`; `words` holds a word past them.
#[inline]
fn unpack_block(words: &[u64], width: u32, xs: &mut [u64; BLOCK]) {
    if width == 0 {
        xs.fill(0);
        return;
    }
    let w = width as usize;
    let mask = (1u64 << w) - 1;
    for (i, x) in xs.iter_mut().enumerate() {
        let (k, off) = ((i * w) / 64, ((i * w) % 64) as u32);
        let bits = (words[k] >> off) | ((words[k + 1] << 1) << (63 - off));
        *x = bits & mask;
    }
}

/// Reads blocks back as packed entries, a block at a time.
struct Decoder<'a> {
    words: &'a [u64],
    /// Entries not yet read.
    left: usize,
    block: [u64; BLOCK],
}

impl<'a> Decoder<'a> {
    fn new(words: &'a [u64], entries: usize) -> Decoder<'a> {
        Decoder {
            words,
            left: entries,
            block: [0; BLOCK],
        }
    }

    /// The next block's entries, packed; none past the last.
    fn next_block(&mut self) -> Option<&[u64]> {
        if self.left == 0 {
            return None;
        }
        let header = self.words[0];
        let (wd, wc) = ((header >> WIDTH_BITS) & WIDTH_MASK, header & WIDTH_MASK);
        let (wd, wc) = (wd as usize, wc as usize);
        let mut deltas = [0u64; BLOCK];
        // The words hold one past the last block.
        unpack_block(&self.words[1..], wd as u32, &mut deltas);
        unpack_block(&self.words[1 + wd..], wc as u32, &mut self.block);
        let mut value = header >> (2 * WIDTH_BITS);
        for (entry, delta) in self.block.iter_mut().zip(deltas) {
            value += delta;
            *entry += value << COUNT_BITS | 1;
        }
        self.words = &self.words[1 + wd + wc..];
        let n = self.left.min(BLOCK);
        self.left -= n;
        Some(&self.block[..n])
    }
}
