//! What the engine's results become: CSV rows, summary samples, progress, execution traces,
//! debug logs.

use crate::Nanos;
use crate::chakra::StepEmitter;
use crate::control::{Dropped, OutcomeCollector};
use crate::engine::Observer;
use crate::latency::LatencyBackend;
use crate::metrics::{
    RequestCsv, RequestRecord, RunPlots, SloCollector, SummaryCollector, TimeSeries,
};
use crate::observe::{StepEvent, TransferEvent};
use crate::output::StagedDir;
use crate::power::PowerModel;
use crate::trace::{Decision, TraceLevel, TraceWriter};
use crate::workload::Request;
use crate::workload::sessions::{SessionSet, SharedSessions};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Receives the engine's results: CSV rows, summary samples, progress, execution traces,
/// debug logs.
pub(super) struct Outputs<'w> {
    pub csv: Option<RequestCsv>,
    pub summary: SummaryCollector,
    pub progress: Progress,
    /// One per instance when `--emit-et` is given, else none.
    pub emit_et: Vec<StepEmitter>,
    /// The folder the execution traces are written in until the run succeeds.
    pub emit_et_dir: Option<StagedDir>,
    /// Several instances: log lines name the instance.
    pub multi: bool,
    /// The workload's sessions, when it has any: the CSV then names each request's session.
    pub sessions: Option<SessionLabels<'w>>,
    /// The power model, when the cluster config has `power` blocks.
    pub power: Option<PowerModel>,
    /// The time series (`--timeseries`), if asked for.
    pub timeseries: Option<TimeSeries>,
    /// SLO metrics, when the run has classes, tenants or targets.
    pub slo: Option<SloCollector>,
    /// The latencies of the run's pictures (`--plots`).
    pub plots: Option<RunPlots>,
    /// How every request ended, when the run has a control plane or timeouts, or is evaluated.
    pub outcomes: Option<OutcomeCollector>,
    /// The decision trace, when asked for (`--trace-level`).
    pub trace: Option<TraceWriter>,
    /// Whether the run counts anomalies (a control plane or several SLO classes).
    pub watch_anomalies: bool,
    /// Whether the outcomes are shown: with a control plane, or requests with timeouts.
    pub show_outcomes: bool,
}

/// Where the request CSV finds each request's session and step.
pub(super) enum SessionLabels<'w> {
    /// A workload's sessions, all planned before the run.
    Listed(&'w SessionSet),
    /// Sessions started as the run reaches them; the observer tells them each finished
    /// request it has seen, so that an ended session can be let go.
    Live(SharedSessions<'w>),
}

impl Observer for Outputs<'_> {
    fn request_finished(&mut self, record: &RequestRecord<'_>) -> anyhow::Result<()> {
        if let Some(csv) = &mut self.csv {
            let id = record.request_id;
            match &self.sessions {
                Some(SessionLabels::Listed(set)) => csv.write(record, set.label(id))?,
                Some(SessionLabels::Live(live)) => csv.write(record, live.borrow().label(id))?,
                None => csv.write(record, None)?,
            }
        }
        self.summary.record(record);
        if let Some(series) = &mut self.timeseries {
            series.request_finished(record.instance_id, record.end_ns)?;
        }
        if let Some(slo) = &mut self.slo {
            slo.record(record);
        }
        if let Some(pictures) = &mut self.plots {
            pictures.record(record);
        }
        if let Some(outcomes) = &mut self.outcomes {
            outcomes.completed(record.request_id);
        }
        if let Some(SessionLabels::Live(live)) = &self.sessions {
            live.borrow_mut().observed(record.request_id);
        }
        self.progress.advance();
        Ok(())
    }

    fn request_dropped(
        &mut self,
        request: &Request,
        now: Nanos,
        why: Dropped,
    ) -> anyhow::Result<()> {
        log::debug!("[t={now} ns] request {} {why}", request.id);
        if let Some(outcomes) = &mut self.outcomes {
            outcomes.dropped(request.id, why);
        }
        self.progress.advance();
        Ok(())
    }

    fn wants_itl_values(&self) -> bool {
        // The summary pools them from the run's outcome, and so does the SLO report where
        // one model serves the run (its groups by class and tenant where vLLM does).
        self.csv.is_some()
            || self
                .slo
                .as_ref()
                .is_some_and(SloCollector::wants_itl_values)
    }

    fn pools_itl_by(&self) -> Option<std::rc::Rc<crate::workload::RequestClasses>> {
        self.slo.as_ref().and_then(SloCollector::cell_classes)
    }

    fn wants_steps(&self) -> bool {
        // What `step_finished` below reads; the log level is set before the run.
        self.trace
            .as_ref()
            .is_some_and(|t| t.level() == TraceLevel::Detailed)
            || self.rereads_steps()
    }

    fn tallies_steps_every(&self) -> Option<crate::Nanos> {
        // The time series adds them at the end (`write_results`).
        self.timeseries.as_ref().map(TimeSeries::interval_ns)
    }

    fn trace_level(&self) -> TraceLevel {
        self.trace
            .as_ref()
            .map_or(TraceLevel::None, TraceWriter::level)
    }

    fn decision(&mut self, decision: &Decision<'_>) -> anyhow::Result<()> {
        match &mut self.trace {
            Some(trace) => trace.record(decision),
            None => Ok(()),
        }
    }

    fn step_finished(
        &mut self,
        step: &StepEvent<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        if let Some(trace) = self
            .trace
            .as_mut()
            .filter(|t| t.level() == TraceLevel::Detailed)
        {
            trace.record(&Decision::Step {
                instance: step.instance,
                start_ns: step.start_ns,
                end_ns: step.end_ns,
                batch: step.batch.items.len(),
                waiting: step.waiting,
                running: step.running,
            })?;
        }
        // The step was priced (and its lookups counted) before it ran; the reports below
        // re-read it, when there are any.
        if !self.rereads_steps() {
            return Ok(());
        }
        backend.count_lookups(false);
        let reported = self.report_step(step, backend);
        backend.count_lookups(true);
        reported
    }

    fn kv_transfer(&mut self, t: &TransferEvent) -> anyhow::Result<()> {
        if t.arrived {
            log::debug!(
                "[t={} ns] KV of request {} arrived: instance {} -> {}, {} bytes, {} ns on the \
                 wire after {} ns waiting for the link; {} blocks freed on instance {}",
                t.end_ns,
                t.request_id,
                t.from,
                t.to,
                t.bytes,
                t.end_ns - t.start_ns,
                t.start_ns - t.prefill_end_ns,
                t.request_blocks,
                t.from
            );
        }
        Ok(())
    }
}

impl Outputs<'_> {
    /// Whether a finished step is read again for the reports of [`Outputs::report_step`]:
    /// execution traces, the power model, debug lines.
    fn rereads_steps(&self) -> bool {
        !self.emit_et.is_empty() || self.power.is_some() || log::log_enabled!(log::Level::Debug)
    }

    /// The step's execution trace, power and debug lines.
    fn report_step(
        &mut self,
        step: &StepEvent<'_>,
        backend: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        if let Some(emitter) = self.emit_et.get_mut(step.instance as usize) {
            emitter.step_finished(&step.batch, backend)?;
        }
        if let Some(power) = &mut self.power {
            power.step(
                step.instance,
                step.start_ns,
                step.end_ns,
                &step.batch,
                backend,
            )?;
        }
        if !log::log_enabled!(log::Level::Debug) {
            return Ok(());
        }
        let decodes = step.batch.items.iter().filter(|i| i.is_decode()).count();
        let instance = if self.multi {
            format!(" instance {}", step.instance)
        } else {
            String::new()
        };
        log::debug!(
            "[t={} ns]{instance} step {} ns: {} seqs ({} decode), {} tokens; {} waiting, {} running",
            step.end_ns,
            step.end_ns - step.start_ns,
            step.batch.num_seqs(),
            decodes,
            step.batch.total_tokens(),
            step.waiting,
            step.running
        );
        for layer in backend.breakdown(&step.batch)? {
            log::debug!(
                "    {:<26} {:>4} x {:>10} ns{}",
                layer.name,
                layer.repeats,
                layer.time_ns,
                if layer.is_comm { "  (comm)" } else { "" }
            );
        }
        Ok(())
    }
}

/// A progress bar on stderr, shown only when stderr is a terminal and the run has lasted more
/// than a second.
pub(super) struct Progress {
    bar: ProgressBar,
    started: Instant,
    shown: bool,
    enabled: bool,
}

impl Progress {
    pub fn new(total: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} requests  {elapsed} (eta {eta})")
                .expect("valid template"),
        );
        Progress {
            bar,
            started: Instant::now(),
            shown: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    /// One more request ended. Nothing at all when stderr is not a terminal: the bar can never
    /// show then, and counting on it reads the clock (about 1 % of a short-prompt run's CPU).
    pub fn advance(&mut self) {
        if !self.enabled {
            return;
        }
        self.bar.inc(1);
        if !self.shown && self.started.elapsed() > Duration::from_secs(1) {
            self.shown = true;
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
