//! [`AstraBackend`]: a [`LatencyBackend`] whose step times come from ASTRA-Sim.
//!
//! Each step's batch is priced by the wrapped compute backend (its per-layer
//! [`LatencyBackend::breakdown`]), turned into the batch's Chakra trace ([`BatchTrace`]: input
//! load, one COMP node per layer, the TP all-reduces, output store) and handed to ASTRA-Sim,
//! which times compute, memory and collectives together.
//!
//! **Memoisation.** A batch is keyed by the exact bytes of its trace (a 128-bit XXH3 hash of
//! the encoded `.et` file, identical for every NPU, plus the NPU count). A key seen before
//! reuses its step time without talking to ASTRA-Sim at all: the fork keeps its last prompt
//! unanswered, so its clock simply does not advance for memoised steps (nor while the engine
//! idles). Its clock is therefore the sum of the initial workload and the non-memoised step
//! times, not the engine's time; nothing depends on the offset, because every step time is a
//! difference of two reports that enclose exactly one batch. With a batch's time a function
//! of its trace, `--no-memo` and memoisation give identical results.
//!
//! **Batch files.** Batch `k` goes to `b<k>.<npu>.et` with `--keep-astra-inputs`. Otherwise
//! two sets of files, `b0` and `b1`, take the batches in turn and are rewritten in place
//! (creating and deleting files for every batch costs more than the fork's work on a small
//! batch). ASTRA-Sim reads a whole file when an NPU loads it (an NPU still busy queues the
//! prefix and loads it when it finishes), so a set may be rewritten once every NPU has loaded
//! the batch it held; it is rewritten only after the next batch has completed. Deleting each
//! batch's files as soon as it completed, as this did before, assumed more: that every NPU
//! had loaded them by then.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use xxhash_rust::xxh3::xxh3_128;

use super::fork::ForkSession;
use super::stock::StockRun;
use super::{AstraError, AstraInputs, AstraMode, AstraOptions, Fault, Stage};
use crate::Nanos;
use crate::chakra::attr::bool_attr;
use crate::chakra::{BatchTrace, EtNode, NodeKind, npu_file, prefill, write_npu_files};
use crate::config::{Dtype, ModelArch, Placement};
use crate::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming, LookupCounts};

/// The instance whose batches are priced.
#[derive(Debug, Clone, Copy)]
pub struct AstraInstance<'a> {
    /// The served model.
    pub model: &'a ModelArch,
    /// Tensor-parallel degree: the NPUs of the instance.
    pub tp: u32,
    /// Expert-parallel degree (1 without expert parallelism).
    pub ep: u32,
    /// Activation dtype.
    pub dtype: Dtype,
    /// Where the weights live, when a `placement` keeps some outside the GPU: the trace then
    /// loads them every step.
    pub placement: Option<&'a Placement>,
}

/// What the backend did, for the end-of-run report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AstraStats {
    /// Steps priced.
    pub steps: u64,
    /// Batches sent to ASTRA-Sim (fork: round trips; stock: processes).
    pub calls: u64,
    /// Steps answered from the memo.
    pub memo_hits: u64,
    /// Wall time spent waiting for ASTRA-Sim on batches.
    pub wall: Duration,
}

/// The memo key of a batch: the hash of its `.et` bytes and the NPU count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct MemoKey {
    hash: u128,
    npus: u32,
}

/// How batches reach ASTRA-Sim (shared by [`AstraBackend`] and the DP-group pricer).
pub(super) enum Driver {
    Fork(Box<ForkSession>),
    Stock,
    /// A fault stopped ASTRA-Sim; every later batch fails.
    Failed,
}

impl Driver {
    /// The driver of `options.mode`. For the fork: writes the initial workload (one COMP node
    /// of `first_step_ns`, at least 1 ns, on each of `npus` NPUs) into `inputs`, starts the
    /// fork with start NPUs `starts` and end NPUs `ends`, and reads its first prompts. A
    /// failure comes back with ASTRA-Sim's last lines.
    pub(super) fn start(
        options: &AstraOptions,
        inputs: &AstraInputs,
        npus: u32,
        (starts, ends): (&[u32], &[u32]),
        first_step_ns: Nanos,
    ) -> Result<Driver, (Fault, Vec<String>)> {
        if options.mode == AstraMode::Stock {
            return Ok(Driver::Stock);
        }
        let initial = inputs.dir().join("event");
        let duration_ns = first_step_ns.max(1);
        let event = EtNode {
            id: 0,
            name: format!("event_{duration_ns}ns"),
            kind: NodeKind::Comp,
            data_deps: Vec::new(),
            ctrl_deps: Vec::new(),
            duration_ns,
            attrs: vec![bool_attr("is_cpu_op", false)],
        };
        write_npu_files(&initial, 0..npus, &[event], options.mode.dialect())
            .map_err(|e| (Fault::Io(e.to_string()), Vec::new()))?;
        let mut session = ForkSession::spawn(
            &options.binary,
            inputs,
            &initial,
            starts,
            ends,
            options.timeout,
            options.limits,
        )
        .map_err(|f| (f, Vec::new()))?;
        if let Err(fault) = session.handshake() {
            let lines = session.last_lines();
            drop(session);
            return Err((fault, lines));
        }
        Ok(Driver::Fork(Box::new(session)))
    }

    /// Ends a fork session (`done`/`exit`; a fork that exits without confirming that all
    /// requests ended only logs a warning). On a fault the driver is `Failed` and the fault
    /// comes back with ASTRA-Sim's last lines.
    pub(super) fn shut_down(&mut self) -> Result<(), (Fault, Vec<String>)> {
        if let Driver::Fork(session) = self {
            match session.shutdown() {
                Ok(None) => {}
                Ok(Some(warning)) => log::warn!("{warning}"),
                Err(fault) => {
                    let last_lines = session.last_lines();
                    *self = Driver::Failed;
                    return Err((fault, last_lines));
                }
            }
        }
        Ok(())
    }
}

/// The error of `binary` at `stage`.
pub(super) fn astra_error(
    options: &AstraOptions,
    stage: Stage,
    fault: Fault,
    last_lines: Vec<String>,
) -> AstraError {
    AstraError {
        binary: options.binary.clone(),
        stage,
        fault,
        last_lines,
    }
}

/// Step times from ASTRA-Sim, for one instance. See the module documentation.
pub struct AstraBackend {
    // Declared before `inputs`: the process ends before its directory is removed.
    driver: Driver,
    inputs: AstraInputs,
    compute: Box<dyn LatencyBackend>,
    model: ModelArch,
    tp: u32,
    ep: u32,
    dtype: Dtype,
    placement: Option<Placement>,
    options: AstraOptions,
    memo: HashMap<MemoKey, Nanos>,
    /// The last step's key and time (for [`LatencyBackend::breakdown`] under `--no-memo`).
    last: Option<(MemoKey, Nanos)>,
    stats: AstraStats,
    /// The encoded `.et` file of the batch being priced (reused from step to step).
    et: Vec<u8>,
    /// The two sets of batch files, when the run directory is not kept.
    slots: [Slot; 2],
    /// Set on a prefill instance: its batches send their KV to receiver NPUs.
    prefill: Option<PrefillSends>,
    /// The per-NPU files of the batch being priced, on a prefill instance.
    files: Vec<Vec<u8>>,
}

/// What a prefill instance's traces need beyond a colocated one's (see
/// [`crate::chakra::prefill`]).
#[derive(Debug, Clone, Copy)]
struct PrefillSends {
    /// Bytes per element of the KV cache.
    kv_bytes: u64,
}

/// The `involved_dim` of a prefill instance's collectives: its TP NPUs (dimension 0), not
/// the receivers (dimension 1).
const PREFILL_INVOLVED_DIM: [bool; 2] = [true, false];

/// One set of batch files rewritten in place: per NPU, the open file and the length last
/// written (`u64::MAX` after a failed write); empty until first used.
#[derive(Default)]
pub(super) struct Slot(Vec<(File, u64)>);

impl Slot {
    /// Writes `bytes` as the file `<prefix>.<npu>.et` of each of `npus` NPUs.
    #[cfg(test)]
    pub(super) fn write(&mut self, prefix: &Path, npus: u32, bytes: &[u8]) -> Result<(), String> {
        self.write_each(prefix, npus, |_| bytes)
    }

    /// Writes `bytes(npu)` as the file `<prefix>.<npu>.et` of each of `npus` NPUs.
    pub(super) fn write_each<'b>(
        &mut self,
        prefix: &Path,
        npus: u32,
        bytes: impl Fn(u32) -> &'b [u8],
    ) -> Result<(), String> {
        let failed = |npu: u32, e: std::io::Error| {
            format!("writing {}: {e}", npu_file(prefix, npu).display())
        };
        if self.0.is_empty() {
            self.0 = (0..npus)
                .map(|npu| {
                    File::create(npu_file(prefix, npu))
                        .map(|f| (f, 0))
                        .map_err(|e| failed(npu, e))
                })
                .collect::<Result<_, _>>()?;
        }
        for (npu, (file, written)) in (0..).zip(&mut self.0) {
            let bytes = bytes(npu);
            let len = bytes.len() as u64;
            let result = file
                .seek(SeekFrom::Start(0))
                .and_then(|_| file.write_all(bytes))
                .and_then(|()| {
                    if len < *written {
                        file.set_len(len)
                    } else {
                        Ok(())
                    }
                });
            *written = if result.is_ok() { len } else { u64::MAX };
            result.map_err(|e| failed(npu, e))?;
        }
        Ok(())
    }
}

impl AstraBackend {
    /// Writes the run's inputs and, for the fork, starts ASTRA-Sim with an initial workload of
    /// one COMP node lasting `first_step_ns` (at least 1 ns; the first arrival, so that the
    /// fork's clock starts where the engine's first step does), and reads its first prompt.
    pub fn start(
        options: AstraOptions,
        instance: AstraInstance<'_>,
        compute: Box<dyn LatencyBackend>,
        first_step_ns: Nanos,
    ) -> Result<AstraBackend, AstraError> {
        let fail = |fault, last_lines| AstraError {
            binary: options.binary.clone(),
            stage: Stage::StartUp,
            fault,
            last_lines,
        };
        let inputs = AstraInputs::create(&options)
            .map_err(|e| fail(Fault::Io(format!("writing its inputs: {e}")), Vec::new()))?;
        let npus = u32::try_from(options.network.npus()).unwrap_or(u32::MAX);
        let ends: Vec<u32> = (npus > 1).then(|| npus - 1).into_iter().collect();
        let driver = Driver::start(&options, &inputs, npus, (&[0], &ends), first_step_ns)
            .map_err(|(fault, lines)| fail(fault, lines))?;
        Ok(AstraBackend {
            driver,
            inputs,
            compute,
            model: instance.model.clone(),
            tp: instance.tp,
            ep: instance.ep,
            placement: instance.placement.cloned(),
            dtype: instance.dtype,
            options,
            memo: HashMap::new(),
            last: None,
            stats: AstraStats::default(),
            et: Vec::new(),
            slots: Default::default(),
            prefill: None,
            files: Vec::new(),
        })
    }

    /// Makes this the backend of a prefill instance whose KV cache (`kv_bytes` per element)
    /// goes to the decode side inside each batch ([`crate::chakra::prefill`]). Its network
    /// must hold `2 · tp` NPUs: the TP NPUs on dimension 0 and the receivers one dimension
    /// further, `[tp, 2]` (see [`super::prefill_network`]).
    pub fn with_prefill(mut self, kv_bytes: u64) -> Result<AstraBackend, String> {
        let dims: Vec<u32> = self.options.network.dims.iter().map(|d| d.npus).collect();
        if dims != [self.tp.max(1), 2] {
            return Err(format!(
                "a prefill instance's ASTRA-Sim network must be [{}, 2] NPUs (its TP NPUs and \
                 their KV receivers), got {dims:?}",
                self.tp.max(1)
            ));
        }
        self.prefill = Some(PrefillSends { kv_bytes });
        Ok(self)
    }

    /// NPUs of the process: the TP NPUs, and their receivers on a prefill instance.
    fn npus(&self) -> u32 {
        let tp = self.tp.max(1);
        if self.prefill.is_some() { 2 * tp } else { tp }
    }

    /// What the backend has done so far.
    pub fn stats(&self) -> AstraStats {
        self.stats
    }

    /// The fork's clock after the last batch sent to it (absolute, ns); `None` in stock mode.
    pub fn astra_clock_ns(&self) -> Option<Nanos> {
        match &self.driver {
            Driver::Fork(session) => Some(session.clock()),
            Driver::Stock | Driver::Failed => None,
        }
    }

    /// The run directory (configs and traces).
    pub fn inputs_dir(&self) -> &Path {
        self.inputs.dir()
    }

    /// Ends the run: the fork gets `done`/`exit` and must exit cleanly (a fork that exits
    /// without confirming that all requests ended only logs a warning). Removes the run
    /// directory unless it is kept.
    pub fn finish(mut self) -> Result<AstraStats, AstraError> {
        self.driver
            .shut_down()
            .map_err(|(fault, last_lines)| self.error(Stage::ShutDown, fault, last_lines))?;
        Ok(self.stats)
    }

    fn error(&self, stage: Stage, fault: Fault, last_lines: Vec<String>) -> AstraError {
        astra_error(&self.options, stage, fault, last_lines)
    }

    /// Encodes the batch's `.et` file (the same for every NPU) into `self.et` and returns its
    /// memo key.
    fn encode(
        &mut self,
        batch: &BatchDesc<'_>,
        breakdown: &[LayerTiming],
    ) -> Result<MemoKey, String> {
        let dialect = self.options.mode.dialect();
        let mut trace = BatchTrace {
            batch,
            model: &self.model,
            tp: self.tp,
            ep: self.ep,
            dtype: self.dtype,
            breakdown,
            involved_dim: None,
            placement: self.placement.as_ref(),
            ep_involved_dim: None,
        };
        let Some(prefill) = self.prefill else {
            trace
                .encode_into(dialect, &mut self.et)
                .map_err(|e| e.to_string())?;
            return Ok(MemoKey::of(&self.et, self.tp));
        };
        // Every collective stays on the prefill NPUs (dimension 0), away from the receivers.
        trace.involved_dim = Some(&PREFILL_INVOLVED_DIM);
        trace.ep_involved_dim = Some(&PREFILL_INVOLVED_DIM);
        self.files = prefill::encode_prefill(&trace, prefill.kv_bytes, dialect)
            .map_err(|e| e.to_string())?;
        // The key covers every file: the senders' and receivers' differ.
        self.et.clear();
        for file in &self.files {
            self.et
                .extend_from_slice(&(file.len() as u64).to_le_bytes());
            self.et.extend_from_slice(file);
        }
        Ok(MemoKey::of(&self.et, self.npus()))
    }

    /// Sends one batch to ASTRA-Sim and returns its time.
    fn price(&mut self, step: u64, bytes: &[u8]) -> Result<Nanos, AstraError> {
        let stage = Stage::Step {
            step,
            batch: self.stats.calls,
        };
        if matches!(self.driver, Driver::Failed) {
            return Err(self.error(
                stage,
                Fault::Io("ASTRA-Sim was stopped by an earlier fault".into()),
                Vec::new(),
            ));
        }
        let npus = self.npus();
        let files = &self.files;
        let file = |npu: u32| match files.get(npu as usize) {
            Some(file) if self.prefill.is_some() => file.as_slice(),
            _ => bytes,
        };
        let written = if self.inputs.is_kept() {
            let prefix = self.inputs.dir().join(format!("b{}", self.stats.calls));
            (0..npus)
                .try_for_each(|npu| {
                    let path = npu_file(&prefix, npu);
                    fs::write(&path, file(npu))
                        .map_err(|e| format!("writing {}: {e}", path.display()))
                })
                .map(|()| prefix)
        } else {
            let slot = (self.stats.calls % 2) as usize;
            let prefix = self.inputs.dir().join(format!("b{slot}"));
            self.slots[slot]
                .write_each(&prefix, npus, file)
                .map(|()| prefix)
        };
        let prefix = match written {
            Ok(prefix) => prefix,
            Err(m) => return Err(self.error(stage, Fault::Io(m), Vec::new())),
        };
        self.stats.calls += 1;
        let started = Instant::now();
        let result = match &mut self.driver {
            Driver::Fork(session) => session
                .run_batch(&prefix)
                .map_err(|f| (f, session.last_lines())),
            Driver::Stock => StockRun::spawn(
                &self.options.binary,
                &self.inputs,
                &prefix,
                npus,
                self.options.timeout,
                self.options.limits,
            )
            .map_err(|f| (f, Vec::new()))
            .and_then(|mut run| run.finish().map_err(|f| (f, run.last_lines()))),
            Driver::Failed => unreachable!("checked above"),
        };
        self.stats.wall += started.elapsed();
        result.map_err(|(fault, last_lines)| {
            // Dropping the session kills and reaps the process.
            self.driver = Driver::Failed;
            self.error(stage, fault, last_lines)
        })
    }
}

impl MemoKey {
    fn of(bytes: &[u8], npus: u32) -> MemoKey {
        MemoKey {
            hash: xxh3_128(bytes),
            npus,
        }
    }
}

impl LatencyBackend for AstraBackend {
    fn name(&self) -> &'static str {
        "astra"
    }

    /// Builds the batch's trace, reuses a memoised time or sends it to ASTRA-Sim. Allocates
    /// (the trace, the files); the no-allocation rule of the trait holds for the analytical
    /// backends only.
    fn step_time(&mut self, batch: &BatchDesc<'_>) -> Result<Nanos, LatencyError> {
        let step = self.stats.steps;
        self.stats.steps += 1;
        let breakdown = self.compute.breakdown(batch)?;
        let key = self
            .encode(batch, &breakdown)
            .map_err(|m| LatencyError::Backend(format!("ASTRA-Sim trace of step {step}: {m}")))?;
        if self.options.memo
            && let Some(&time) = self.memo.get(&key)
        {
            self.stats.memo_hits += 1;
            self.last = Some((key, time));
            return Ok(time);
        }
        let bytes = std::mem::take(&mut self.et);
        let priced = self.price(step, &bytes);
        self.et = bytes;
        let time = priced.map_err(|e| LatencyError::Backend(e.to_string()))?;
        if self.options.memo {
            self.memo.insert(key, time);
        }
        self.last = Some((key, time));
        Ok(time)
    }

    /// The compute backend's compute layers, plus `astra_non_compute`: the rest of the
    /// ASTRA-Sim step time (memory, collectives, waits). Only for a batch already priced.
    fn breakdown(&mut self, batch: &BatchDesc<'_>) -> Result<Vec<LayerTiming>, LatencyError> {
        let full = self.compute.breakdown(batch)?;
        let key = self
            .encode(batch, &full)
            .map_err(|m| LatencyError::Backend(format!("ASTRA-Sim trace: {m}")))?;
        let step = match self.last {
            Some((k, time)) if k == key => time,
            _ => self.memo.get(&key).copied().ok_or_else(|| {
                LatencyError::Backend("ASTRA-Sim has not priced this batch".into())
            })?,
        };
        let mut layers: Vec<LayerTiming> = full.into_iter().filter(|l| !l.is_comm).collect();
        let compute: Nanos = layers.iter().map(|l| l.repeats * l.time_ns).sum();
        layers.push(LayerTiming {
            name: "astra_non_compute",
            repeats: 1,
            time_ns: step.saturating_sub(compute),
            is_comm: true,
        });
        Ok(layers)
    }

    fn profile_lookups(&self) -> Option<LookupCounts> {
        self.compute.profile_lookups()
    }

    fn count_lookups(&mut self, on: bool) {
        self.compute.count_lookups(on);
    }
}
