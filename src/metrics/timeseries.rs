//! The time series of a run (`--timeseries`): per interval of simulated time and instance, the
//! quantities vLLM's bench writes to its `timeseries.csv` (`prompt_throughput`,
//! `gen_throughput`, `running`, `waiting`, `kv_cache_pct`) plus finished requests and steps.
//!
//! A step counts in the interval its end falls in (`(end − 1) / interval`, so a step ending
//! exactly on a boundary belongs to the interval it closes): its prompt and generated tokens
//! add to the interval's throughput; `running`, `waiting` and `kv_cache_pct` are those of the
//! interval's last step (when it was formed, and once it is done); an interval without a step
//! repeats the previous interval's counts with no tokens. A request counts as finished in the
//! interval of its last token.
//!
//! Each instance tallies its own steps per interval as the engine completes them
//! ([`StepSeries`]), and the series adds them at the end: no step is reported one by one, so a
//! run with a time series settles its step ends quietly and runs ahead as any other.
//!
//! An autoscaled run's CSV has seven more columns: the row's replica slot's template and
//! state at the end of the interval, and that template's replicas pending, loading, warming
//! up, ready and draining then (a change of state at exactly the end counts). A slot whose
//! replica is off at the end of an interval shows nothing running, waiting or cached.

use std::io::Write;
use std::path::Path;

use crate::Nanos;
use crate::autoscale::{AutoscaleReport, ReplicaState, ReplicaTimeline};
use crate::output::Finished;
use crate::scheduler::StepTokens;

/// One interval of one instance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Cell {
    prompt_tokens: u64,
    generated_tokens: u64,
    finished: u64,
    steps: u64,
    /// The interval's last step: running and waiting when formed, KV blocks used after.
    last: Option<(usize, usize, usize, usize)>,
}

/// Most rows a time series holds, intervals times instances (each a cell of 72 bytes in the
/// instances' tallies and another in the series, about 60 bytes of CSV): a run that reaches
/// further is refused, naming `--timeseries-interval`, rather than holding a cell for every
/// interval of an interval far shorter than the run (one microsecond over 11.5 s of simulated
/// time on 2 instances once took 3 GB). At most about 1.2 GB, and a CSV of about 500 MB.
pub const MAX_SERIES_ROWS: usize = 1 << 23;

/// The most intervals a series of `instances` instances holds ([`MAX_SERIES_ROWS`]).
fn max_intervals(instances: usize) -> usize {
    MAX_SERIES_ROWS / instances.max(1)
}

/// A time series that would hold more than [`MAX_SERIES_ROWS`] rows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "--timeseries-interval {interval_s} s: the run reached {reached} of simulated time, more \
     than the {intervals} intervals a series of {instances} instances may hold ({max} rows); \
     raise the interval to at least {least_s:.3e} s"
)]
pub struct SeriesTooLong {
    interval_s: f64,
    /// `t = <s> s`, or `beyond <s> s` where only a bound is known.
    reached: String,
    intervals: usize,
    instances: usize,
    max: usize,
    least_s: f64,
}

impl SeriesTooLong {
    /// The error of a series of `instances` instances at `interval_ns` that reached `at_ns`
    /// (`exact`), or some time beyond it.
    fn new(interval_ns: Nanos, instances: usize, at_ns: Nanos, exact: bool) -> SeriesTooLong {
        let intervals = max_intervals(instances);
        let at_s = at_ns as f64 / 1e9;
        SeriesTooLong {
            interval_s: interval_ns as f64 / 1e9,
            reached: match exact {
                true => format!("t = {at_s} s"),
                false => format!("beyond {at_s} s"),
            },
            intervals,
            instances,
            max: MAX_SERIES_ROWS,
            least_s: at_s / intervals as f64,
        }
    }
}

/// The interval of `interval_ns` that an event at `at_ns` counts in: the one it ends, when
/// exactly on a boundary.
fn interval_of(at_ns: Nanos, interval_ns: Nanos) -> usize {
    (at_ns.saturating_sub(1) / interval_ns) as usize
}

/// One instance's steps per interval of simulated time, tallied as the engine completes them
/// (`RunOutcome::step_series`), for a time series to add at the end
/// ([`TimeSeries::add_steps`]): a run that tallies its steps need not report each one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepSeries {
    interval_ns: Nanos,
    /// By interval; `finished` unused.
    cells: Vec<Cell>,
    /// The most intervals it holds; steps past them are not tallied: `beyond` is the end of
    /// the last of them.
    max_intervals: usize,
    beyond: Option<Nanos>,
}

impl StepSeries {
    /// An empty tally at one cell per `interval_ns` (at least 1 ns), of one of `instances`
    /// instances: it holds its share of [`MAX_SERIES_ROWS`] intervals at most.
    pub fn new(interval_ns: Nanos, instances: usize) -> StepSeries {
        StepSeries {
            interval_ns: interval_ns.max(1),
            cells: Vec::new(),
            max_intervals: max_intervals(instances),
            beyond: None,
        }
    }

    /// How many intervals it holds a cell for (up to the last it tallied a step in).
    pub fn intervals_held(&self) -> usize {
        self.cells.len()
    }

    /// Counts a step that ended at `end_ns` having computed `tokens`, formed with `running`
    /// and `waiting` requests and leaving `kv_blocks_used` of `kv_blocks` in use.
    pub fn step(
        &mut self,
        end_ns: Nanos,
        tokens: StepTokens,
        (running, waiting): (usize, usize),
        (kv_blocks_used, kv_blocks): (usize, usize),
    ) {
        let interval = interval_of(end_ns, self.interval_ns);
        if interval >= self.cells.len() {
            if interval >= self.max_intervals {
                self.beyond = Some(end_ns);
                return;
            }
            self.cells.resize(interval + 1, Cell::default());
        }
        let cell = &mut self.cells[interval];
        cell.prompt_tokens += tokens.prompt;
        cell.generated_tokens += tokens.generated;
        cell.steps += 1;
        cell.last = Some((running, waiting, kv_blocks_used, kv_blocks));
    }
}

/// The time series being collected.
#[derive(Debug)]
pub struct TimeSeries {
    interval_ns: Nanos,
    instances: usize,
    /// `cells[interval × instances + instance]`.
    cells: Vec<Cell>,
}

impl TimeSeries {
    /// A series of `instances` instances at one row per `interval_ns` (at least 1 ns).
    pub fn new(interval_ns: Nanos, instances: usize) -> TimeSeries {
        TimeSeries {
            interval_ns: interval_ns.max(1),
            instances: instances.max(1),
            cells: Vec::new(),
        }
    }

    /// The length of its intervals.
    pub fn interval_ns(&self) -> Nanos {
        self.interval_ns
    }

    /// The cell of `instance` in `interval`, made if the series holds fewer intervals and
    /// may hold this one (`None` past its share of [`MAX_SERIES_ROWS`]).
    fn cell_of(&mut self, interval: usize, instance: u32) -> Option<&mut Cell> {
        let index = interval * self.instances + instance as usize;
        if index >= self.cells.len() {
            if interval >= max_intervals(self.instances) {
                return None;
            }
            self.cells
                .resize((interval + 1) * self.instances, Cell::default());
        }
        Some(&mut self.cells[index])
    }

    /// The error of a series that reached `at_ns` (`exact`), or beyond.
    fn too_long(&self, at_ns: Nanos, exact: bool) -> SeriesTooLong {
        SeriesTooLong::new(self.interval_ns, self.instances, at_ns, exact)
    }

    /// Adds the steps the run tallied per instance (by id, at this series' interval); an
    /// error when a tally went past the intervals a series may hold.
    pub fn add_steps(&mut self, tallies: &[StepSeries]) -> Result<(), SeriesTooLong> {
        for (instance, tally) in tallies.iter().enumerate() {
            debug_assert_eq!(tally.interval_ns, self.interval_ns, "one interval");
            if let Some(end_ns) = tally.beyond {
                return Err(self.too_long(end_ns, true));
            }
            let held = self
                .interval_ns
                .saturating_mul(tally.max_intervals as Nanos);
            for (interval, steps) in tally.cells.iter().enumerate() {
                if steps.steps == 0 {
                    continue;
                }
                let Some(cell) = self.cell_of(interval, instance as u32) else {
                    return Err(self.too_long(held, false));
                };
                cell.prompt_tokens += steps.prompt_tokens;
                cell.generated_tokens += steps.generated_tokens;
                cell.steps += steps.steps;
                cell.last = steps.last;
            }
        }
        Ok(())
    }

    /// Records a request whose last token came out at `end_ns` on `instance`; an error when
    /// that is past the intervals the series may hold.
    pub fn request_finished(&mut self, instance: u32, end_ns: Nanos) -> Result<(), SeriesTooLong> {
        let interval = interval_of(end_ns, self.interval_ns);
        match self.cell_of(interval, instance) {
            Some(cell) => {
                cell.finished += 1;
                Ok(())
            }
            None => Err(self.too_long(end_ns, true)),
        }
    }

    /// Writes the series as CSV, atomically: `t` (end of the interval, s), `instance`, then
    /// tokens per second and the counts; with `replicas` (an autoscaled run), the replica
    /// columns.
    pub fn write(&self, path: &Path, replicas: Option<&AutoscaleReport>) -> anyhow::Result<()> {
        self.prepare(path, replicas)?.commit()
    }

    /// [`TimeSeries::write`] up to putting the file in place ([`Finished::commit`]).
    pub fn prepare(
        &self,
        path: &Path,
        replicas: Option<&AutoscaleReport>,
    ) -> anyhow::Result<Finished> {
        crate::output::prepare(path, |w| self.write_rows(w, replicas))
    }

    /// The cluster's totals per interval, `(t s, value)`: prompt tokens/s, generated
    /// tokens/s, running and waiting requests (each instance's as in [`TimeSeries::write`]).
    pub fn totals(&self) -> [Vec<(f64, f64)>; 4] {
        let seconds = self.interval_ns as f64 / 1e9;
        let mut out: [Vec<(f64, f64)>; 4] = Default::default();
        let mut last = vec![(0, 0, 0, 0); self.instances];
        for (interval, row) in self.cells.chunks(self.instances).enumerate() {
            let t = (interval + 1) as f64 * seconds;
            let (mut prompt, mut generated, mut running, mut waiting) = (0.0, 0.0, 0.0, 0.0);
            for (instance, cell) in row.iter().enumerate() {
                if let Some(state) = cell.last {
                    last[instance] = state;
                }
                prompt += cell.prompt_tokens as f64 / seconds;
                generated += cell.generated_tokens as f64 / seconds;
                running += last[instance].0 as f64;
                waiting += last[instance].1 as f64;
            }
            for (series, value) in out.iter_mut().zip([prompt, generated, running, waiting]) {
                series.push((t, value));
            }
        }
        out
    }

    /// KV cache use per interval, %, of each instance: `(t s, %)` by instance id.
    pub fn kv_use(&self) -> Vec<Vec<(f64, f64)>> {
        let seconds = self.interval_ns as f64 / 1e9;
        let mut out = vec![Vec::new(); self.instances];
        let mut last = vec![0.0; self.instances];
        for (interval, row) in self.cells.chunks(self.instances).enumerate() {
            for (instance, cell) in row.iter().enumerate() {
                if let Some((_, _, used, total)) = cell.last {
                    last[instance] = if total == 0 {
                        0.0
                    } else {
                        100.0 * used as f64 / total as f64
                    };
                }
                out[instance].push(((interval + 1) as f64 * seconds, last[instance]));
            }
        }
        out
    }

    fn write_rows(
        &self,
        w: &mut dyn Write,
        replicas: Option<&AutoscaleReport>,
    ) -> std::io::Result<()> {
        write!(
            w,
            "t,instance,prompt_throughput,gen_throughput,running,waiting,kv_cache_pct,\
             finished,steps"
        )?;
        let mut timeline = replicas.map(ReplicaTimeline::new);
        if timeline.is_some() {
            write!(w, ",template,state")?;
            for s in &REPLICA_COLUMNS {
                write!(w, ",{}", s.name())?;
            }
        }
        writeln!(w)?;
        let seconds = self.interval_ns as f64 / 1e9;
        let mut last = vec![(0, 0, 0, 0); self.instances];
        for (i, cell) in self.cells.iter().enumerate() {
            let (interval, instance) = (i / self.instances, i % self.instances);
            if let Some(state) = cell.last {
                last[instance] = state;
            }
            if let Some(timeline) = &mut timeline {
                timeline.advance_to((interval as u64 + 1) * self.interval_ns);
                // A replica turned off holds no request and no KV block.
                if timeline.state(instance as u32) == ReplicaState::Off {
                    last[instance] = (0, 0, 0, 0);
                }
            }
            let (running, waiting, used, total) = last[instance];
            let kv_pct = if total == 0 {
                0.0
            } else {
                100.0 * used as f64 / total as f64
            };
            write!(
                w,
                "{},{instance},{},{},{running},{waiting},{kv_pct:.2},{},{}",
                (interval + 1) as f64 * seconds,
                cell.prompt_tokens as f64 / seconds,
                cell.generated_tokens as f64 / seconds,
                cell.finished,
                cell.steps
            )?;
            if let Some(timeline) = &timeline {
                write_replicas(w, timeline, instance as u32)?;
            }
            writeln!(w)?;
        }
        Ok(())
    }
}

/// The template counts the CSV of an autoscaled run shows, in its column order.
const REPLICA_COLUMNS: [ReplicaState; 5] = [
    ReplicaState::Pending,
    ReplicaState::Loading,
    ReplicaState::WarmingUp,
    ReplicaState::Ready,
    ReplicaState::Draining,
];

/// The replica columns of slot `id`'s row: its template and state, and the template's
/// replicas by state.
fn write_replicas(w: &mut dyn Write, t: &ReplicaTimeline<'_>, id: u32) -> std::io::Result<()> {
    let template = t.template_of(id);
    write!(w, ",{template},{}", t.state(id).name())?;
    for s in REPLICA_COLUMNS {
        write!(w, ",{}", t.count(template, s))?;
    }
    Ok(())
}
