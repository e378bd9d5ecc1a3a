//! The CSV writer thread's copy of an instance's step finish times, each step's gap (from the
//! step before it) formatted once as it arrives, so that a request's run of consecutive steps
//! is written as one copy of text, whatever its length: the ITL column costs a copy per byte
//! and a formatting per step, not per token.
//!
//! The simulation sends each step's finish time once, with the first row that needs it
//! ([`super::RequestCsv::write`]), and with every row the oldest step a record of its instance
//! could still name then (the first step of its records' window: no later row names an
//! earlier one): the writer lets go of the steps before it, so that it holds the steps from
//! about its instance's oldest live request's first token on (the scheduler looks for that
//! step every 256 steps, `scheduler/itl.rs`), not every step the scheduler still holds.

use crate::Nanos;
use crate::metrics::{StepGaps, StepWindow};
use anyhow::Context;

/// Lines of a run's text warmed ahead of its row; the hardware's own prefetch follows the
/// copy from there.
const TEXT_LINES_WARMED: usize = 4;

/// The gap texts of an instance's steps from the `first`-th on.
#[derive(Debug, Default)]
pub(super) struct StepTexts {
    /// The step number of `times[0]`.
    first: u64,
    times: Vec<Nanos>,
    /// `ends[k]`: where the text of the gap ending at step `first + k` ends in `text`, which
    /// holds each gap's digits followed by `", "`, in step order. The first step's own gap
    /// is not held (no row names it: a run's gaps end at the steps after its start).
    ends: Vec<u32>,
    text: Vec<u8>,
}

impl StepTexts {
    /// The steps held, by number.
    pub fn window(&self) -> StepWindow<'_> {
        StepWindow {
            first: self.first,
            times: &self.times,
        }
    }

    /// Adds the finish times `times` of the steps from the `first`-th on: the steps after
    /// those held, or, when steps between were never sent (no row needed them), the first
    /// held from now on.
    pub fn append(&mut self, first: u64, times: &[Nanos]) -> anyhow::Result<()> {
        let end = self.window().end();
        if first < end && !self.times.is_empty() {
            anyhow::bail!("step {first}'s finish time was sent twice to the CSV writer");
        }
        if first != end || self.times.is_empty() {
            self.first = first;
            self.times.clear();
            self.ends.clear();
            self.text.clear();
        }
        let mut num = itoa::Buffer::new();
        for &t in times {
            if let Some(&p) = self.times.last() {
                self.text.extend_from_slice(num.format(t - p).as_bytes());
                self.text.extend_from_slice(b", ");
            }
            self.times.push(t);
            let at = u32::try_from(self.text.len())
                .context("the CSV writer holds more than 4 GiB of an instance's gaps")?;
            self.ends.push(at);
        }
        Ok(())
    }

    /// Lets go of the steps before `step`.
    pub fn forget_before(&mut self, step: u64) {
        let k = step.saturating_sub(self.first);
        if k == 0 {
            return;
        }
        let k = usize::try_from(k).map_or(self.times.len(), |k| k.min(self.times.len()));
        let cut = match self.ends.get(k) {
            Some(&end) => end,
            None => self.text.len() as u32,
        };
        self.times.drain(..k);
        self.ends.drain(..k);
        self.text.drain(..cut as usize);
        for end in &mut self.ends {
            *end -= cut;
        }
        self.first += k as u64;
    }

    /// Warms what a row whose runs start at step `start` reads first and cannot find ahead
    /// by itself (a hint, see `scheduler/warm.rs`): the ends of the three lists, where the
    /// steps sent with it are appended, and the entries of `start`, where its gaps' text
    /// begins. With hundreds of instances, an instance's texts are cold by its next row.
    #[inline]
    pub fn warm_entries(&self, start: u64) {
        use crate::scheduler::warm_line;
        warm_line(self.times.as_ptr_range().end);
        warm_line(self.ends.as_ptr_range().end);
        warm_line(self.text.as_ptr_range().end);
        if let Some(k) = self.index_of(start) {
            warm_line(&self.ends[k]);
            warm_line(&self.times[k]);
        }
    }

    /// Warms the first lines of the text of the gaps after step `start` (a hint): a read of
    /// its entry, which [`StepTexts::warm_entries`] warmed a few rows before.
    #[inline]
    pub fn warm_text(&self, start: u64) {
        let Some(&at) = self.index_of(start).and_then(|k| self.ends.get(k)) else {
            return;
        };
        let from = self.text.as_ptr().wrapping_add(at as usize);
        for line in 0..TEXT_LINES_WARMED {
            crate::scheduler::warm_line(from.wrapping_add(64 * line));
        }
    }

    /// Where step `step` is held, if it is.
    fn index_of(&self, step: u64) -> Option<usize> {
        let k = usize::try_from(step.checked_sub(self.first)?).ok()?;
        (k < self.times.len()).then_some(k)
    }

    /// The texts of the gaps ending at the steps after `start` up to `start + len - 1`,
    /// each followed by `", "`, or `None` when they are not all held.
    fn gap_texts(&self, start: u64, len: u32) -> Option<&[u8]> {
        let from = usize::try_from(start.checked_sub(self.first)?).ok()?;
        let to = from.checked_add(len.checked_sub(1)? as usize)?;
        let (a, b) = (*self.ends.get(from)?, *self.ends.get(to)?);
        self.text.get(a as usize..b as usize)
    }
}

/// Appends `gaps`, whose steps `texts` holds, as Python's list repr, quoted when it contains
/// a comma (as [`super::format_row`] writes it): runs of consecutive steps copied from their
/// texts, the other gaps formatted one by one.
pub(super) fn push_step_itl(
    row: &mut Vec<u8>,
    gaps: &StepGaps<'_>,
    texts: &StepTexts,
) -> anyhow::Result<()> {
    let n = gaps.len();
    let quoted = n > 1;
    if quoted {
        row.push(b'"');
    }
    row.push(b'[');
    let mut num = itoa::Buffer::new();
    let mut gap = |row: &mut Vec<u8>, gap: Nanos| {
        row.extend_from_slice(num.format(gap).as_bytes());
        row.extend_from_slice(b", ");
    };
    let steps = texts.window();
    let mut previous = gaps.from;
    for run in gaps.runs() {
        let at = |k: u32| {
            let step = run.start + u64::from(k) * u64::from(run.stride);
            let held = steps.get(step);
            held.with_context(|| format!("step {step}'s finish time is not held by the writer"))
        };
        let first = at(0)?;
        if let Some(p) = previous {
            gap(row, first - p);
        }
        if run.stride == 1 {
            let texts = texts.gap_texts(run.start, run.len);
            row.extend_from_slice(texts.context("a run's gaps are not held by the writer")?);
        } else {
            let mut p = first;
            for k in 1..run.len {
                let t = at(k)?;
                gap(row, t - p);
                p = t;
            }
        }
        previous = Some(at(run.len - 1)?);
    }
    if n > 0 {
        // The last gap's separator.
        row.truncate(row.len() - 2);
    }
    row.push(b']');
    if quoted {
        row.push(b'"');
    }
    Ok(())
}
