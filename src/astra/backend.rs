//! [`AstraBackend`]: a [`LatencyBackend`] whose step times come from ASTRA-Sim.
//!
//! Each step's batch is priced by the wrapped compute backend (its per-layer
//! [`LatencyBackend::breakdown`]), turned into the batch's Chakra trace ([`BatchTrace`]: input
//! load, one COMP node per layer, the TP and EP collectives, output store) and handed to ASTRA-Sim,
//! which times compute, memory and collectives together. A colocated instance's chain is sent
//! lean ([`lean_nodes`]: each run of COMP nodes between communications as one node, the same
//! times), unless `--astra-detailed-traces` asks for one node per layer.
//!
//! **Memoisation.** A batch is keyed by the exact bytes of its trace (a 128-bit XXH3 hash of
//! the encoded `.et` file, identical for every NPU, plus the NPU count), with one exception:
//! a colocated instance's trace without weight loads is a chain (every node depends on the one
//! before it) whose NPUs run in lock step, so ASTRA-Sim's time of it is the sum of its COMP
//! durations plus the time of everything else (memory accesses and collectives, which on the
//! congestion-unaware network do not depend on when they start). Such a batch is keyed by its
//! *skeleton*, the trace with every COMP duration 0, and the memo keeps the time less the
//! COMP sum: a batch with the same tensors and collectives but other compute times (decode
//! steps whose contexts differ) reuses it, adding its own COMP sum (as written: rounded to µs
//! per node in stock mode). A key seen before
//! reuses its step time without talking to ASTRA-Sim at all: the fork keeps its last prompt
//! unanswered, so its clock simply does not advance for memoised steps (nor while the engine
//! idles). Its clock is therefore the sum of the initial workload and the non-memoised step
//! times, not the engine's time; nothing depends on the offset, because every step time is a
//! difference of two reports that enclose exactly one batch. With a batch's time a function
//! of its trace, `--no-memo` and memoisation give identical results.
//!
//! **Pipeline parallelism** (`pp > 1`, [`LatencyBackend::stage_times`]). The process holds
//! the instance's `tp · pp` NPUs (network `[tp, pp]`, or `[pp]` with `tp = 1`), and a step's
//! files are cut into stages ([`crate::chakra::stages`]: each stage's blocks, the activation
//! sent point to point to the next stage). The first NPU of every stage but the last is one
//! of the fork's start NPUs and the last NPU its end NPU ([`reporting_npus`]), so the step,
//! priced alone, reports when each stage has finished: stage `s`'s busy time is its first
//! NPU's finish minus stage `s − 1`'s (stage 0: from the step's start), the last stage's
//! ends at the step's last report. The
//! engine runs those times through its pipeline ([`crate::engine::Pipeline`]): stage `s` of a
//! step starts when the previous stage's busy time is over (its activation has arrived) and
//! stage `s` is free of the previous step, which is what the fork does with several steps in
//! flight (LLMServingSim, §3f): each NPU runs its workloads in order; a stage's RECV posted
//! after the activation arrived completes at once (the congestion-unaware network keeps
//! early messages), one posted before waits for it; a SEND completes when it arrives; and the
//! stages share nothing else (a congestion-unaware network has no link contention, and a
//! pipelined instance keeps its weights on the GPU, so no memory queue is shared). Pricing a
//! step alone keeps the memo exact: its stage times are a function of its traces. What one
//! number per stage cannot carry: with `tp > 1` the ranks of a stage may finish a few ns apart
//! (a stage's first rank stands for all of them); and a step's kv recall is added to stage 0
//! by the engine, as for an unpipelined step.
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
use super::stock::{StockRun, check_network, with_idle_peer};
use super::{
    AstraError, AstraInputs, AstraMode, AstraOptions, Fault, IoFault, NoStageFinish, ShapeError,
    Stage, StepError, WriteError,
};
use crate::Nanos;
use crate::chakra::attr::bool_attr;
use crate::chakra::stages::encode_stages;
use crate::chakra::{
    BatchTrace, EtError, EtNode, NodeKind, TraceError, encode_et, lean_nodes, npu_file, prefill,
    write_npu_files,
};
use crate::config::{Dtype, ModelArch, Placement};
use crate::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming, StageSends};

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
    /// The transformer blocks of each pipeline stage when `pp_size > 1` (empty otherwise):
    /// the instance has `tp` NPUs per stage, and its steps are priced by
    /// [`LatencyBackend::stage_times`] (see the module documentation).
    pub stage_blocks: &'a [u32],
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
    /// The driver of `options.mode`. Stock: refuses a network upstream would refuse
    /// ([`check_network`]). For the fork: writes the initial workload (one COMP node
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
            check_network(&options.network).map_err(|f| (f, Vec::new()))?;
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
            .map_err(|e| (Fault::Io(IoFault::Initial(Box::new(e))), Vec::new()))?;
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
    /// Each key's time less its COMP sum (see the module documentation).
    memo: HashMap<MemoKey, Nanos>,
    /// The last step's key and time less its COMP sum (for [`LatencyBackend::breakdown`]
    /// under `--no-memo`).
    last: Option<(MemoKey, Nanos)>,
    /// The encoded skeleton of the batch being priced (reused from step to step).
    skeleton: Vec<u8>,
    /// The breakdown with every time 0, from which the skeleton is encoded.
    zeroed: Vec<LayerTiming>,
    /// The breakdown of the chain trace whose file [`AstraBackend::encode`] left unwritten
    /// (written only when the batch is sent: [`AstraBackend::write_chain`]).
    chain: Option<Vec<LayerTiming>>,
    /// Weight bytes per rank the last encoded trace loads from host or CXL memory.
    streamed_bytes: u64,
    stats: AstraStats,
    /// The encoded `.et` file of the batch being priced (reused from step to step).
    et: Vec<u8>,
    /// The two sets of batch files, when the run directory is not kept.
    slots: [Slot; 2],
    /// Set on a prefill instance: its batches send their KV to receiver NPUs.
    prefill: Option<PrefillSends>,
    /// The blocks of each pipeline stage (empty without pipeline parallelism).
    stage_blocks: Vec<u32>,
    /// Each stage's busy time of a pipelined step, by the step's key.
    stage_memo: HashMap<MemoKey, Vec<Nanos>>,
    /// The per-NPU files of the batch being priced, on a prefill instance.
    files: Vec<Vec<u8>>,
    /// In stock mode, a TP-1 instance's idle peer's file (an empty trace): upstream refuses a
    /// network of 1 NPU (see [`with_idle_peer`]).
    idle_peer: Option<Vec<u8>>,
}

/// What a prefill instance's traces need beyond a colocated one's (see
/// [`crate::chakra::prefill`]).
#[derive(Debug, Clone, Copy)]
struct PrefillSends {
    /// Bytes per element of the KV cache.
    kv_bytes: u64,
}

/// The `involved_dim` of a prefill instance's collectives: its TP NPUs (dimension 0), not
/// the receivers (dimension 1). Also that of a pipelined instance's collectives on its
/// `[tp, pp]` network: a stage's TP NPUs, not the other stages.
const PREFILL_INVOLVED_DIM: [bool; 2] = [true, false];

/// The fork's start NPUs and end NPUs of an instance of `npus` NPUs in `stages` stages of
/// `tp` (1 stage without pipeline parallelism): the first NPU of every stage but the last,
/// and the last NPU when there are several. Each start NPU hands every batch to the NPUs up
/// to the next start or end NPU, so the last stage's other NPUs come with the one before it.
///
/// The last stage has no start NPU so that the end NPU is always the last to report a batch
/// (every other reporter finishes when its stage's send has arrived, before the last stage
/// computes): its prompt, the first of the fork's polling order, then takes the next batch,
/// and every other reporter takes it in the same polling round. A start NPU of the last
/// stage could report last; the next batch would reach it first, and its first node, a RECV,
/// gives the fork no event: with nothing queued the fork idles a whole millisecond before
/// the round that hands stage 0 the batch.
pub fn reporting_npus(npus: u32, tp: u32, stages: u32) -> (Vec<u32>, Vec<u32>) {
    let starts = (0..stages.max(2) - 1).map(|s| s * tp.max(1)).collect();
    let ends = (npus > 1).then(|| npus - 1).into_iter().collect();
    (starts, ends)
}

/// In stock mode, gives an unpipelined one-NPU network its idle peer ([`with_idle_peer`]) and
/// returns the peer's file (an empty trace); `None` otherwise.
fn add_idle_peer(options: &mut AstraOptions, stages: u32) -> Result<Option<Vec<u8>>, EtError> {
    if options.mode != AstraMode::Stock || stages > 1 {
        return Ok(None);
    }
    let Some(network) = with_idle_peer(&options.network) else {
        return Ok(None);
    };
    options.network = network;
    encode_et(&[], options.mode.dialect()).map(Some)
}

/// One set of batch files rewritten in place: per NPU, the open file and the length last
/// written (`u64::MAX` after a failed write); empty until first used.
#[derive(Default)]
pub struct Slot(Vec<(File, u64)>);

impl Slot {
    /// Writes `bytes(npu)` as the file `<prefix>.<npu>.et` of each of `npus` NPUs.
    pub fn write_each<'b>(
        &mut self,
        prefix: &Path,
        npus: u32,
        bytes: impl Fn(u32) -> &'b [u8],
    ) -> Result<(), WriteError> {
        let failed = |npu: u32, source| WriteError {
            path: npu_file(prefix, npu),
            source,
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
        mut options: AstraOptions,
        instance: AstraInstance<'_>,
        compute: Box<dyn LatencyBackend>,
        first_step_ns: Nanos,
    ) -> Result<AstraBackend, AstraError> {
        let stages = instance.stage_blocks.len() as u32;
        let idle_peer = add_idle_peer(&mut options, stages);
        let fail = |fault, last_lines| AstraError {
            binary: options.binary.clone(),
            stage: Stage::StartUp,
            fault,
            last_lines,
        };
        let idle_peer =
            idle_peer.map_err(|e| fail(Fault::Io(IoFault::IdlePeer(Box::new(e))), Vec::new()))?;
        let inputs = AstraInputs::create(&options)
            .map_err(|e| fail(Fault::Io(IoFault::Inputs(e)), Vec::new()))?;
        let npus = u32::try_from(options.network.npus()).unwrap_or(u32::MAX);
        if stages > 1 && u64::from(npus) != u64::from(instance.tp.max(1)) * u64::from(stages) {
            return Err(fail(
                Fault::Io(IoFault::PipelineNetwork {
                    stages,
                    tp: instance.tp.max(1),
                    npus,
                }),
                Vec::new(),
            ));
        }
        let (starts, ends) = reporting_npus(npus, instance.tp, stages);
        let mut driver = Driver::start(&options, &inputs, npus, (&starts, &ends), first_step_ns)
            .map_err(|(fault, lines)| fail(fault, lines))?;
        if let (true, Driver::Fork(session)) = (stages > 1, &mut driver) {
            session.deliver_in_one_round();
        }
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
            skeleton: Vec::new(),
            zeroed: Vec::new(),
            chain: None,
            streamed_bytes: 0,
            stats: AstraStats::default(),
            et: Vec::new(),
            slots: Default::default(),
            prefill: None,
            stage_blocks: if stages > 1 {
                instance.stage_blocks.to_vec()
            } else {
                Vec::new()
            },
            stage_memo: HashMap::new(),
            files: Vec::new(),
            idle_peer,
        })
    }

    /// Makes this the backend of a prefill instance whose KV cache (`kv_bytes` per element)
    /// goes to the decode side inside each batch ([`crate::chakra::prefill`]). Its network
    /// must hold `2 · tp` NPUs: the TP NPUs on dimension 0 and the receivers one dimension
    /// further, `[tp, 2]` (see [`super::prefill_network`]).
    pub fn with_prefill(mut self, kv_bytes: u64) -> Result<AstraBackend, ShapeError> {
        let dims: Vec<u32> = self.options.network.dims.iter().map(|d| d.npus).collect();
        if dims != [self.tp.max(1), 2] {
            return Err(ShapeError::PrefillNetwork {
                tp: self.tp.max(1),
                dims,
            });
        }
        self.prefill = Some(PrefillSends { kv_bytes });
        Ok(self)
    }

    /// NPUs of the process: the TP NPUs (of every pipeline stage), and their receivers on a
    /// prefill instance; a TP-1 instance and its idle peer in stock mode.
    fn npus(&self) -> u32 {
        let tp = self.tp.max(1);
        if self.idle_peer.is_some() {
            2
        } else if self.prefill.is_some() {
            2 * tp
        } else {
            tp * (self.stage_blocks.len() as u32).max(1)
        }
    }

    /// Whether the instance's steps are cut into pipeline stages.
    fn pipelined(&self) -> bool {
        self.stage_blocks.len() > 1
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

    /// Encodes the batch's `.et` file (the same for every NPU) into `self.et`, except a chain's,
    /// left to [`AstraBackend::write_chain`], and returns its memo key and the part of its
    /// time the key leaves out: the COMP sum of a chain keyed by its skeleton, else 0 (see the
    /// module documentation).
    fn encode(
        &mut self,
        batch: &BatchDesc<'_>,
        breakdown: &[LayerTiming],
    ) -> Result<(MemoKey, Nanos), TraceError> {
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
        self.streamed_bytes = trace.weight_load_bytes()?;
        if self.pipelined() {
            // Every collective stays in its stage (dimension 0 of `[tp, pp]`; `[pp]` has no
            // collectives).
            if self.tp > 1 {
                trace.involved_dim = Some(&PREFILL_INVOLVED_DIM);
                trace.ep_involved_dim = Some(&PREFILL_INVOLVED_DIM);
            }
            self.files = encode_stages(&trace, &self.stage_blocks, 0, dialect)?;
        } else if let Some(prefill) = self.prefill {
            // Every collective stays on the prefill NPUs (dimension 0), away from the receivers.
            trace.involved_dim = Some(&PREFILL_INVOLVED_DIM);
            trace.ep_involved_dim = Some(&PREFILL_INVOLVED_DIM);
            self.files = prefill::encode_prefill(&trace, prefill.kv_bytes, dialect)?;
        } else {
            self.chain = None;
            if self.placement.is_some() {
                trace.encode_into(dialect, &mut self.et)?;
                return Ok((MemoKey::of(&self.et, self.tp), 0));
            }
            let compute = trace.compute_ns(dialect)?;
            self.zeroed.clear();
            self.zeroed.extend(breakdown.iter().map(|l| LayerTiming {
                time_ns: 0,
                ..l.clone()
            }));
            let skeleton = BatchTrace {
                breakdown: &self.zeroed,
                ..trace
            };
            skeleton.encode_into(dialect, &mut self.skeleton)?;
            self.chain = Some(breakdown.to_vec());
            return Ok((MemoKey::of(&self.skeleton, self.tp), compute));
        }
        // The key covers every file: the senders' and receivers' differ.
        self.et.clear();
        for file in &self.files {
            self.et
                .extend_from_slice(&(file.len() as u64).to_le_bytes());
            self.et.extend_from_slice(file);
        }
        Ok((MemoKey::of(&self.et, self.npus()), 0))
    }

    /// Writes the `.et` file of the chain [`AstraBackend::encode`] left unwritten into
    /// `self.et`: lean, or detailed with `--astra-detailed-traces`.
    fn write_chain(&mut self, batch: &BatchDesc<'_>) -> Result<(), TraceError> {
        let Some(breakdown) = self.chain.take() else {
            return Ok(());
        };
        let dialect = self.options.mode.dialect();
        let trace = BatchTrace {
            batch,
            model: &self.model,
            tp: self.tp,
            ep: self.ep,
            dtype: self.dtype,
            breakdown: &breakdown,
            involved_dim: None,
            placement: None,
            ep_involved_dim: None,
        };
        if self.options.detailed_traces {
            return trace.encode_into(dialect, &mut self.et);
        }
        let nodes = trace.nodes()?;
        self.et = encode_et(&lean_nodes(&nodes, dialect), dialect)?;
        Ok(())
    }

    /// Sends one batch to ASTRA-Sim and returns its time.
    fn price(&mut self, step: u64, bytes: &[u8]) -> Result<Nanos, AstraError> {
        Ok(self
            .price_each(step, bytes)?
            .into_iter()
            .flatten()
            .max()
            .unwrap_or(0))
    }

    /// Sends one batch to ASTRA-Sim and returns, by NPU id, the time from its start to the
    /// NPU's finish where ASTRA-Sim reports it (the fork: its start and end NPUs; stock: every
    /// NPU).
    fn price_each(&mut self, step: u64, bytes: &[u8]) -> Result<Vec<Option<Nanos>>, AstraError> {
        let stage = Stage::Step {
            step,
            batch: self.stats.calls,
        };
        if matches!(self.driver, Driver::Failed) {
            return Err(self.error(stage, Fault::Io(IoFault::Stopped), Vec::new()));
        }
        let npus = self.npus();
        let files = &self.files;
        let per_npu = self.prefill.is_some() || self.pipelined();
        let peer = self.idle_peer.as_deref();
        let file = |npu: u32| match (files.get(npu as usize), peer) {
            (Some(file), _) if per_npu => file.as_slice(),
            (_, Some(empty)) if npu > 0 => empty,
            _ => bytes,
        };
        let written = if self.inputs.is_kept() {
            let prefix = self.inputs.dir().join(format!("b{}", self.stats.calls));
            (0..npus)
                .try_for_each(|npu| {
                    let path = npu_file(&prefix, npu);
                    fs::write(&path, file(npu)).map_err(|source| WriteError { path, source })
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
            Err(e) => return Err(self.error(stage, Fault::Write(e), Vec::new())),
        };
        self.stats.calls += 1;
        let started = Instant::now();
        let mut finished = vec![None; npus as usize];
        let result = match &mut self.driver {
            Driver::Fork(session) => session
                .run_batch_each(&prefix)
                .map(|times| {
                    for (&npu, t) in session.reporters().iter().zip(times) {
                        if let Some(slot) = finished.get_mut(npu as usize) {
                            *slot = Some(t);
                        }
                    }
                })
                .map_err(|f| (f, session.last_lines())),
            Driver::Stock => StockRun::run_each(
                &self.options.binary,
                &self.inputs,
                &prefix,
                npus,
                self.options.timeout,
                self.options.limits,
            )
            .map(|times| {
                for (slot, t) in finished.iter_mut().zip(times) {
                    *slot = Some(t);
                }
            }),
            Driver::Failed => unreachable!("checked above"),
        };
        self.stats.wall += started.elapsed();
        match result {
            Ok(()) => Ok(finished),
            Err((fault, last_lines)) => {
                // Dropping the session kills and reaps the process.
                self.driver = Driver::Failed;
                Err(self.error(stage, fault, last_lines))
            }
        }
    }
}

/// Each stage's busy time of a pipelined step priced alone (see the module documentation),
/// written into `out`: stage `s` (not the last) finished at `stage_finish(s)` (its send
/// arrived), the step at `end`, both counted from the step's start; a stage is busy from the
/// previous stage's finish to its own.
pub(super) fn stage_busy(
    stage_finish: impl Fn(usize) -> Option<Nanos>,
    end: Nanos,
    out: &mut [Nanos],
) -> Result<(), NoStageFinish> {
    let last = out.len().saturating_sub(1);
    let mut previous = 0;
    for (s, busy) in out.iter_mut().enumerate() {
        let finish = if s == last {
            end
        } else {
            stage_finish(s).ok_or(NoStageFinish { stage: s })?
        };
        *busy = finish.saturating_sub(previous);
        previous = finish.max(previous);
    }
    Ok(())
}

impl AstraBackend {
    /// Counts a new step and encodes its trace into `self.et`: the step's number, its memo
    /// key and the COMP sum the key leaves out.
    fn next_step(&mut self, batch: &BatchDesc<'_>) -> Result<(u64, MemoKey, Nanos), LatencyError> {
        let step = self.stats.steps;
        self.stats.steps += 1;
        let breakdown = self.compute.breakdown(batch)?;
        let (key, compute) = self
            .encode(batch, &breakdown)
            .map_err(|error| StepError::Trace {
                step: Some(step),
                error,
            })?;
        Ok((step, key, compute))
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
        let (step, key, compute) = self.next_step(batch)?;
        if self.options.memo
            && let Some(&rest) = self.memo.get(&key)
        {
            self.stats.memo_hits += 1;
            self.last = Some((key, rest));
            return Ok(rest + compute);
        }
        self.write_chain(batch).map_err(|error| StepError::Trace {
            step: Some(step),
            error,
        })?;
        let bytes = std::mem::take(&mut self.et);
        let priced = self.price(step, &bytes);
        self.et = bytes;
        let time = priced?;
        let rest = time.checked_sub(compute).ok_or(StepError::BelowCompute {
            step,
            time,
            compute,
        })?;
        if self.options.memo {
            self.memo.insert(key, rest);
        }
        self.last = Some((key, rest));
        Ok(time)
    }

    /// The weight bytes per rank the last trace built (by `step_time` or `breakdown`) loads
    /// from host or CXL memory.
    fn streamed_weight_bytes(&self) -> u64 {
        self.streamed_bytes
    }

    /// The compute backend's compute layers, plus `astra_non_compute`: the rest of the
    /// ASTRA-Sim step time (memory, collectives, waits). Only for a batch already priced.
    fn layer_times(
        &mut self,
        batch: &BatchDesc<'_>,
        layers: &mut Vec<LayerTiming>,
    ) -> Result<(), LatencyError> {
        let full = self.compute.breakdown(batch)?;
        let (key, astra_compute) = self
            .encode(batch, &full)
            .map_err(|error| StepError::Trace { step: None, error })?;
        let rest = match self.last {
            Some((k, rest)) if k == key => rest,
            _ => self
                .memo
                .get(&key)
                .copied()
                .or_else(|| self.stage_memo.get(&key).map(|t| t.iter().sum()))
                .ok_or(StepError::Unpriced)?,
        };
        let step = rest + astra_compute;
        layers.clear();
        layers.extend(full.into_iter().filter(|l| !l.is_comm));
        let compute: Nanos = layers.iter().map(|l| l.repeats * l.time_ns).sum();
        layers.push(LayerTiming {
            name: "astra_non_compute",
            repeats: 1,
            time_ns: step.saturating_sub(compute),
            is_comm: true,
        });
        Ok(())
    }

    /// A pipelined step: its stage-cut traces ([`crate::chakra::stages`]) priced alone, as
    /// one batch, by ASTRA-Sim (or the memo), which reports when each stage's first NPU has
    /// finished; each stage's busy time runs from the previous stage's finish to its own, its
    /// send included ([`StageSends::Included`]). See the module documentation for why this
    /// equals the stages' times when several steps are in flight.
    fn stage_times(
        &mut self,
        batch: &BatchDesc<'_>,
        stage_blocks: &[u32],
        out: &mut [Nanos],
    ) -> Result<StageSends, LatencyError> {
        if stage_blocks != self.stage_blocks.as_slice() || out.len() != stage_blocks.len() {
            return Err(StepError::Stages {
                started: self.stage_blocks.clone(),
                asked: stage_blocks.to_vec(),
            }
            .into());
        }
        // A pipelined step's key covers its whole trace: nothing is left out.
        let (step, key, _) = self.next_step(batch)?;
        if self.options.memo
            && let Some(times) = self.stage_memo.get(&key)
        {
            self.stats.memo_hits += 1;
            out.copy_from_slice(times);
            self.last = Some((key, out.iter().sum()));
            return Ok(StageSends::Included);
        }
        let finished = self.price_each(step, &[])?;
        let tp = self.tp.max(1) as usize;
        let end = finished.iter().flatten().copied().max().unwrap_or(0);
        stage_busy(|s| finished.get(s * tp).copied().flatten(), end, out)
            .map_err(|error| StepError::StageFinish { step, error })?;
        if self.options.memo {
            self.stage_memo.insert(key, out.to_vec());
        }
        self.last = Some((key, out.iter().sum()));
        Ok(StageSends::Included)
    }

    fn inner(&self) -> Option<&dyn LatencyBackend> {
        Some(&*self.compute)
    }

    fn inner_mut(&mut self) -> Option<&mut dyn LatencyBackend> {
        Some(&mut *self.compute)
    }
}
