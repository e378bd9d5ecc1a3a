//! [`AstraGroup`]: the waves of one DP group, priced by one ASTRA-Sim process holding every
//! member's NPUs (LLMServingSim §3c, §4.3, §4.7).
//!
//! The network has the dimensions `[tp, members]` (each member's TP NPUs on dimension 0, the
//! members along dimension 1), member `m` owns NPUs `m·tp .. (m+1)·tp`, and each member's
//! start NPU (and end NPU, with TP > 1) is one of the fork's start (end) NPUs. A wave's
//! batches (one per member, already padded to the widest, a dummy for an idle member) become
//! one trace per member, written as that member's NPUs' `.et` files under one prefix, which
//! every start and end NPU receives. The TP all-reduces carry `involved_dim = [T, F]`; the EP
//! dispatch and combine carry the group's `ep_dim` (LLMServingSim's rule: `[T, F]` when the
//! EP degree fits in the TP degree, else `[T, T]` with TP > 1, else `[F, T]`), so that the
//! EP collectives of a group whose EP spans its members are collectives across the members'
//! NPUs, which ASTRA-Sim synchronises. Each member's step ends when the last of its NPUs
//! reports the wave finished (its tokens are out then); the next wave starts when every
//! member's has.
//!
//! **Pipelined members** (`pp > 1`): the network is LLMServingSim's `[tp, pp, members]`,
//! member `m` owning NPUs `m·tp·pp ..`, rank `r` of its stage `s` being NPU `m·tp·pp + s·tp +
//! r`; the TP all-reduces carry `[T, F, F]` and the EP collectives `ep_dim` with the stage
//! dimension left out (`[T, F, F]`, `[T, F, T]` or `[F, F, T]`). Each member's batch is cut
//! into stages ([`crate::chakra::stages`]); each member's start NPUs are the first NPU of
//! each of its stages but the last, its end NPU its last NPU (as for one pipelined instance,
//! [`super::backend::reporting_npus`]). A wave is priced alone and the group's stage `s` is
//! busy until the last member's stage `s` has finished ([`AstraGroup::wave_stage_times`]):
//! the engine runs the group's waves through one pipeline, as the analytical pricing does.
//!
//! **Prefill members** (a group of `pd_type` prefill instances): the network has one more
//! dimension of 2, `[tp, members, 2]`, over the link to the KV receivers; member `m`'s rank `r`
//! (NPU `m·tp + r`) sends each layer's KV and its sampler output to its receiver, NPU
//! `m·tp + r + tp·members` ([`crate::chakra::prefill`]; message tags numbered on through the
//! members), and no collective involves that dimension. Each member's end NPU is its last
//! receiver, so its step lasts until its KV has arrived; every NPU gets a file of its own.
//!
//! **Memoisation**: a wave is keyed by every member's trace bytes (in member order; every
//! NPU's file for pipelined and prefill waves) and the NPU count.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use xxhash_rust::xxh3::xxh3_128;

use super::backend::{Driver, astra_error, reporting_npus, stage_busy};
use super::stock::StockRun;
use super::{
    AstraError, AstraInputs, AstraOptions, AstraStats, Fault, IoFault, ShapeError, Stage,
    WriteError,
};
use crate::Nanos;
use crate::chakra::prefill::{Senders, prefill_nodes_at};
use crate::chakra::stages::encode_stages;
use crate::chakra::{BatchTrace, TraceError, encode_et, npu_file};
use crate::config::{Dtype, ModelArch};
use crate::latency::{BatchDesc, LayerTiming};

/// The DP group whose waves are priced.
#[derive(Debug, Clone, Copy)]
pub struct AstraGroupSpec<'a> {
    /// The served model (the same on every member).
    pub model: &'a ModelArch,
    /// Tensor-parallel degree of each member.
    pub tp: u32,
    /// Expert-parallel degree over the whole group (1 without expert parallelism).
    pub ep: u32,
    /// Members of the group.
    pub members: u32,
    /// Activation dtype.
    pub dtype: Dtype,
    /// The transformer blocks of each pipeline stage of every member when `pp_size > 1`
    /// (empty otherwise).
    pub stage_blocks: &'a [u32],
    /// Set on a group of prefill instances: the KV cache's bytes per element. Each member's
    /// batches then send their KV to receivers one network dimension further (see the module
    /// documentation).
    pub prefill_kv_bytes: Option<u64>,
}

/// The network LLMServingSim generates for a DP group: dimensions `[tp, members]`, or
/// `[tp, pp, members]` with pipelined members (`pp > 1`; trailing 1s are removed),
/// FullyConnected, dimension `d` with `link_bw[d]` and `link_latency[d]` (the last entry for
/// the dimensions past the list). A group of prefill instances gets one more dimension of 2
/// over `receivers`, the link to their KV receivers (see the module documentation).
pub fn group_network(
    tp: u32,
    pp: u32,
    members: u32,
    (link_bw, link_latency): (&[f64], &[f64]),
    receivers: Option<crate::config::Link>,
) -> super::NetworkConfig {
    let mut npus = vec![tp.max(1)];
    if pp > 1 {
        npus.push(pp);
    }
    npus.push(members.max(1));
    while npus.len() > 1 && npus.last() == Some(&1) {
        npus.pop();
    }
    let pick = |v: &[f64], d: usize| v.get(d).or(v.last()).copied().unwrap_or(0.0);
    let mut dims: Vec<super::NetworkDim> = (0..npus.len())
        .map(|d| super::NetworkDim {
            topology: super::Topology::FullyConnected,
            npus: npus[d],
            bandwidth_gbps: pick(link_bw, d),
            latency_ns: pick(link_latency, d),
        })
        .collect();
    if let Some(link) = receivers {
        dims.push(super::NetworkDim {
            topology: super::Topology::FullyConnected,
            npus: 2,
            bandwidth_gbps: link.bandwidth_gbps,
            latency_ns: link.latency_ns,
        });
    }
    super::NetworkConfig { dims }
}

/// `involved_dim` of the TP all-reduces and of the EP collectives of a DP group on a network
/// of `dims` dimensions (LLMServingSim's `_resolve_dp_groups`); `None` on a one-dimensional
/// network (no suffix). Three dimensions are `[tp, pp, members]`: the stage dimension is
/// never involved.
pub fn group_dims(dims: usize, tp: u32, ep: u32) -> Option<(Vec<bool>, Vec<bool>)> {
    if dims < 2 {
        return None;
    }
    let (inside, across) = if ep <= tp {
        (true, false)
    } else if tp > 1 {
        (true, true)
    } else {
        (false, true)
    };
    Some(if dims >= 3 {
        (vec![true, false, false], vec![inside, false, across])
    } else {
        (vec![true, false], vec![inside, across])
    })
}

/// The waves of one DP group, priced by one ASTRA-Sim process. See the module documentation.
pub struct AstraGroup {
    // Declared before `inputs`: the process ends before its directory is removed.
    driver: Driver,
    inputs: AstraInputs,
    model: ModelArch,
    tp: u32,
    ep: u32,
    members: u32,
    dtype: Dtype,
    /// `involved_dim` of the TP all-reduces and of the EP collectives.
    dims: Option<(Vec<bool>, Vec<bool>)>,
    options: AstraOptions,
    /// Each member's step time of a wave, by the wave's key.
    memo: HashMap<(u128, u32), Vec<Nanos>>,
    stats: AstraStats,
    /// Each member's encoded `.et` file of the wave being priced.
    ets: Vec<Vec<u8>>,
    /// The blocks of each pipeline stage of every member (empty without pipelining).
    stage_blocks: Vec<u32>,
    /// Each NPU's encoded `.et` file of the pipelined wave being priced.
    files: Vec<Vec<u8>>,
    /// The group's stage busy times of a pipelined wave, by the wave's key.
    stage_memo: HashMap<(u128, u32), Vec<Nanos>>,
    /// Set on a group of prefill instances: the KV cache's bytes per element.
    prefill_kv_bytes: Option<u64>,
}

/// The NPU layout of a DP group's process: members of TP × PP NPUs that send, and for
/// prefill instances as many KV receivers after them.
struct GroupShape {
    tp: u32,
    pp: u32,
    members: u32,
    prefill: bool,
}

impl GroupShape {
    fn of(group: &AstraGroupSpec<'_>) -> GroupShape {
        GroupShape {
            tp: group.tp.max(1),
            pp: (group.stage_blocks.len() as u32).max(1),
            members: group.members,
            prefill: group.prefill_kv_bytes.is_some(),
        }
    }

    /// NPUs that run the members' steps.
    fn senders(&self) -> u32 {
        self.tp * self.pp * self.members.max(1)
    }

    /// NPUs of the whole network: the senders, and for prefill as many receivers.
    fn npus(&self) -> u32 {
        self.senders() * if self.prefill { 2 } else { 1 }
    }

    /// Refuses pipelined prefill groups and a network of another size.
    fn check(&self, options: &AstraOptions) -> Result<(), ShapeError> {
        let (tp, pp, npus) = (self.tp, self.pp, self.npus());
        if self.prefill && pp > 1 {
            return Err(ShapeError::PipelinedPrefillGroup);
        }
        if options.network.npus() != u64::from(npus) {
            return Err(ShapeError::GroupNetwork {
                network: options.network.npus(),
                npus,
                members: self.members,
                tp,
                pp,
                prefill: self.prefill,
            });
        }
        Ok(())
    }

    /// The NPUs that report a wave's start and end: each member's stages' first NPUs but the
    /// last's, and its last NPU (for prefill, its last receiver: the wave is over for the
    /// member once its KV has arrived).
    fn wave_reporters(&self) -> (Vec<u32>, Vec<u32>) {
        let (tp, pp) = (self.tp, self.pp);
        let (mut starts, mut ends) = (Vec::new(), Vec::new());
        for m in 0..self.members {
            let (s, e) = reporting_npus(tp * pp, tp, pp);
            starts.extend(s.into_iter().map(|n| m * tp * pp + n));
            if self.prefill {
                ends.push(self.senders() + m * tp + tp - 1);
            } else {
                ends.extend(e.into_iter().map(|n| m * tp * pp + n));
            }
        }
        (starts, ends)
    }
}

/// Which network dimensions the TP and EP collectives use (see [`group_dims`]); a prefill
/// group's last dimension, its receivers', takes part in none.
fn collective_dims(
    network_dims: usize,
    tp: u32,
    ep: u32,
    prefill: bool,
) -> Option<(Vec<bool>, Vec<bool>)> {
    group_dims(network_dims - usize::from(prefill), tp, ep)
        .or(prefill.then(|| (vec![true], vec![true])))
        .map(|(mut tp_dim, mut ep_dim)| {
            if prefill {
                tp_dim.push(false);
                ep_dim.push(false);
            }
            (tp_dim, ep_dim)
        })
}

impl AstraGroup {
    /// Writes the run's inputs (`options.network` must hold `tp × members` NPUs) and, for the
    /// fork, starts ASTRA-Sim with an initial workload of one COMP node lasting
    /// `first_step_ns` on every NPU and reads the first prompts.
    pub fn start(
        options: AstraOptions,
        group: AstraGroupSpec<'_>,
        first_step_ns: Nanos,
    ) -> Result<AstraGroup, AstraError> {
        let fail = |fault, last_lines| AstraError {
            binary: options.binary.clone(),
            stage: Stage::StartUp,
            fault,
            last_lines,
        };
        let shape = GroupShape::of(&group);
        let (tp, pp, prefill) = (shape.tp, shape.pp, shape.prefill);
        shape
            .check(&options)
            .map_err(|e| fail(Fault::Shape(e), Vec::new()))?;
        let inputs = AstraInputs::create(&options)
            .map_err(|e| fail(Fault::Io(IoFault::Inputs(e)), Vec::new()))?;
        let (starts, ends) = shape.wave_reporters();
        // One initial report per start and end NPU; the first is kept for the first wave, the
        // others are answered `pass` and come back.
        let mut driver = Driver::start(
            &options,
            &inputs,
            shape.npus(),
            (&starts, &ends),
            first_step_ns,
        )
        .map_err(|(fault, lines)| fail(fault, lines))?;
        if let (true, Driver::Fork(session)) = (pp > 1, &mut driver) {
            session.deliver_in_one_round();
        }
        Ok(AstraGroup {
            driver,
            inputs,
            model: group.model.clone(),
            tp,
            ep: group.ep,
            members: group.members,
            dtype: group.dtype,
            dims: collective_dims(options.network.dims.len(), tp, group.ep, prefill),
            options,
            memo: HashMap::new(),
            stats: AstraStats::default(),
            ets: vec![Vec::new(); group.members as usize],
            stage_blocks: if pp > 1 {
                group.stage_blocks.to_vec()
            } else {
                Vec::new()
            },
            files: Vec::new(),
            stage_memo: HashMap::new(),
            prefill_kv_bytes: group.prefill_kv_bytes,
        })
    }

    /// What the group's process has done so far.
    pub fn stats(&self) -> AstraStats {
        self.stats
    }

    /// The run directory (configs and traces).
    pub fn inputs_dir(&self) -> &Path {
        self.inputs.dir()
    }

    /// Prices one wave: `batches[m]` is member `m`'s padded batch, `breakdowns[m]` its
    /// compute backend's breakdown of it. Returns each member's step time: until the last of
    /// its NPUs reports the wave finished (the fork's start and end NPUs; every NPU in stock
    /// mode). Allocates (traces, files).
    pub fn wave_ns(
        &mut self,
        batches: &[BatchDesc<'_>],
        breakdowns: &[Vec<LayerTiming>],
    ) -> Result<Vec<Nanos>, AstraError> {
        let step = self.stats.steps;
        self.stats.steps += 1;
        let stage = Stage::Step {
            step,
            batch: self.stats.calls,
        };
        if batches.len() != self.members as usize || breakdowns.len() != batches.len() {
            return Err(self.error(
                stage,
                Fault::Io(IoFault::WaveSize {
                    batches: batches.len(),
                    members: self.members,
                }),
                Vec::new(),
            ));
        }
        if let Some(kv_bytes) = self.prefill_kv_bytes {
            return self.prefill_wave_ns(batches, breakdowns, kv_bytes, stage);
        }
        let mut hashes = Vec::with_capacity(16 * batches.len());
        for (m, (batch, breakdown)) in batches.iter().zip(breakdowns).enumerate() {
            let mut et = std::mem::take(&mut self.ets[m]);
            let trace = self.member_trace(batch, breakdown);
            let encoded = trace.encode_into(self.options.mode.dialect(), &mut et);
            hashes.extend_from_slice(&xxh3_128(&et).to_le_bytes());
            self.ets[m] = et;
            if let Err(error) = encoded {
                let fault = Fault::Io(IoFault::MemberTrace {
                    member: m,
                    error: Box::new(error),
                });
                return Err(self.error(stage, fault, Vec::new()));
            }
        }
        let key = (xxh3_128(&hashes), self.tp * self.members);
        if self.options.memo
            && let Some(times) = self.memo.get(&key)
        {
            self.stats.memo_hits += 1;
            return Ok(times.clone());
        }
        let finished = self.price(stage)?;
        // Each member's time: until the last of its NPUs reported.
        let npus_per_member = (finished.len() / self.members.max(1) as usize).max(1);
        let times: Vec<Nanos> = finished
            .chunks(npus_per_member)
            .map(|npus| npus.iter().flatten().copied().max().unwrap_or(0))
            .collect();
        if self.options.memo {
            self.memo.insert(key, times.clone());
        }
        Ok(times)
    }

    /// [`AstraGroup::wave_ns`] of a group of prefill instances: member `m`'s rank `r` is NPU
    /// `m·tp + r` and sends its KV to NPU `m·tp + r + tp·members`; a member's step lasts until
    /// its last receiver has everything.
    fn prefill_wave_ns(
        &mut self,
        batches: &[BatchDesc<'_>],
        breakdowns: &[Vec<LayerTiming>],
        kv_bytes: u64,
        stage: Stage,
    ) -> Result<Vec<Nanos>, AstraError> {
        let senders = self.tp * self.members;
        let mut files: Vec<Vec<u8>> = vec![Vec::new(); 2 * senders as usize];
        let mut tag = 0;
        for (m, (batch, breakdown)) in batches.iter().zip(breakdowns).enumerate() {
            let trace = self.member_trace(batch, breakdown);
            let at = Senders {
                first: m as u32 * self.tp,
                receiver_offset: senders,
            };
            let dialect = self.options.mode.dialect();
            let encoded = prefill_nodes_at(&trace, kv_bytes, at, &mut tag).and_then(|nodes| {
                nodes
                    .iter()
                    .map(|n| encode_et(n, dialect).map_err(TraceError::from))
                    .collect::<Result<Vec<_>, _>>()
            });
            let member_files = match encoded {
                Ok(f) => f,
                Err(error) => {
                    let fault = Fault::Io(IoFault::MemberTrace {
                        member: m,
                        error: Box::new(error),
                    });
                    return Err(self.error(stage, fault, Vec::new()));
                }
            };
            let (own, theirs) = member_files.split_at(self.tp as usize);
            for (r, (sender, receiver)) in own.iter().zip(theirs).enumerate() {
                let npu = at.first as usize + r;
                files[npu] = sender.clone();
                files[npu + senders as usize] = receiver.clone();
            }
        }
        let mut bytes = Vec::new();
        for file in &files {
            bytes.extend_from_slice(&(file.len() as u64).to_le_bytes());
            bytes.extend_from_slice(file);
        }
        let key = (xxh3_128(&bytes), 2 * senders);
        if self.options.memo
            && let Some(times) = self.memo.get(&key)
        {
            self.stats.memo_hits += 1;
            return Ok(times.clone());
        }
        self.files = files;
        let finished = self.price(stage)?;
        let mut times = vec![0; self.members as usize];
        for (npu, t) in finished.iter().enumerate() {
            let member = (npu % senders as usize) / self.tp as usize;
            if let (Some(t), Some(slot)) = (t, times.get_mut(member)) {
                *slot = (*slot).max(*t);
            }
        }
        if self.options.memo {
            self.memo.insert(key, times.clone());
        }
        Ok(times)
    }

    /// Prices one wave of pipelined members (`batches[m]` member `m`'s padded batch,
    /// `breakdowns[m]` its compute backend's breakdown of it) alone, and writes the group's
    /// busy time of each stage into `out` (one per stage): stage `s` (not the last) is done
    /// when every member's stage `s` has finished (its first NPU's send arrived), the last when
    /// the last member's end NPU has; each is busy from the previous one's finish (see
    /// [`super::AstraBackend`]'s timing contract). Allocates (traces, files).
    pub fn wave_stage_times(
        &mut self,
        batches: &[BatchDesc<'_>],
        breakdowns: &[Vec<LayerTiming>],
        out: &mut [Nanos],
    ) -> Result<(), AstraError> {
        let step = self.stats.steps;
        self.stats.steps += 1;
        let stage = Stage::Step {
            step,
            batch: self.stats.calls,
        };
        let pp = self.stage_blocks.len();
        if batches.len() != self.members as usize
            || breakdowns.len() != batches.len()
            || pp < 2
            || out.len() != pp
        {
            return Err(self.error(
                stage,
                Fault::Io(IoFault::PipelinedWaveSize {
                    batches: batches.len(),
                    stages: out.len(),
                    members: self.members,
                    pp,
                }),
                Vec::new(),
            ));
        }
        let per_member = self.tp * pp as u32;
        self.files.clear();
        for (m, (batch, breakdown)) in batches.iter().zip(breakdowns).enumerate() {
            let trace = self.member_trace(batch, breakdown);
            let first_npu = m as u32 * per_member;
            match encode_stages(
                &trace,
                &self.stage_blocks,
                first_npu,
                self.options.mode.dialect(),
            ) {
                Ok(files) => self.files.extend(files),
                Err(error) => {
                    let fault = Fault::Io(IoFault::MemberTrace {
                        member: m,
                        error: Box::new(error),
                    });
                    return Err(self.error(stage, fault, Vec::new()));
                }
            }
        }
        let mut bytes = Vec::new();
        for file in &self.files {
            bytes.extend_from_slice(&(file.len() as u64).to_le_bytes());
            bytes.extend_from_slice(file);
        }
        let key = (xxh3_128(&bytes), per_member * self.members);
        if self.options.memo
            && let Some(times) = self.stage_memo.get(&key)
        {
            self.stats.memo_hits += 1;
            out.copy_from_slice(times);
            return Ok(());
        }
        let finished = self.price(stage)?;
        let end = finished.iter().flatten().copied().max().unwrap_or(0);
        let tp = self.tp as usize;
        let stage_finish = |s: usize| {
            (0..self.members as usize)
                .map(|m| {
                    finished
                        .get(m * per_member as usize + s * tp)
                        .copied()
                        .flatten()
                })
                .collect::<Option<Vec<Nanos>>>()
                .and_then(|each| each.into_iter().max())
        };
        if let Err(e) = stage_busy(stage_finish, end, out) {
            return Err(self.error(stage, Fault::NoStageFinish(e), Vec::new()));
        }
        if self.options.memo {
            self.stage_memo.insert(key, out.to_vec());
        }
        Ok(())
    }

    /// The trace of one member's batch: its TP and EP collectives on the group's dimensions.
    /// A DP group serves a MoE model, whose weights stay on the GPU (a placement keeping them
    /// elsewhere is refused).
    fn member_trace<'a>(
        &'a self,
        batch: &'a BatchDesc<'a>,
        breakdown: &'a [LayerTiming],
    ) -> BatchTrace<'a> {
        let (tp_dim, ep_dim) = match &self.dims {
            Some((t, e)) => (Some(&t[..]), Some(&e[..])),
            None => (None, None),
        };
        BatchTrace {
            batch,
            model: &self.model,
            tp: self.tp,
            ep: self.ep,
            dtype: self.dtype,
            breakdown,
            involved_dim: tp_dim,
            ep_involved_dim: ep_dim,
            placement: None,
        }
    }

    /// Writes the wave's files (each member's for its NPUs, or each NPU's of a pipelined
    /// wave) and runs the wave in ASTRA-Sim; returns, by NPU, the time from the wave's start to
    /// the NPU's finish where ASTRA-Sim reports it (the fork: its start and end NPUs; stock:
    /// every NPU).
    fn price(&mut self, stage: Stage) -> Result<Vec<Option<Nanos>>, AstraError> {
        if matches!(self.driver, Driver::Failed) {
            return Err(self.error(stage, Fault::Io(IoFault::Stopped), Vec::new()));
        }
        // Kept inputs hold every wave; otherwise two prefixes take the waves in turn (a set
        // is rewritten only after the next wave has completed, when every NPU has loaded it).
        let name = if self.inputs.is_kept() {
            format!("b{}", self.stats.calls)
        } else {
            format!("b{}", self.stats.calls % 2)
        };
        let prefix: PathBuf = self.inputs.dir().join(name);
        // Pipelined and prefill waves have a file per NPU.
        let per_npu = !self.stage_blocks.is_empty() || self.prefill_kv_bytes.is_some();
        let npus = self.tp
            * (self.stage_blocks.len() as u32).max(1)
            * self.members
            * if self.prefill_kv_bytes.is_some() {
                2
            } else {
                1
            };
        let written = (0..npus).try_for_each(|npu| {
            let path = npu_file(&prefix, npu);
            let bytes = if per_npu {
                &self.files[npu as usize]
            } else {
                &self.ets[(npu / self.tp) as usize]
            };
            fs::write(&path, bytes).map_err(|source| WriteError { path, source })
        });
        if let Err(e) = written {
            return Err(self.error(stage, Fault::Write(e), Vec::new()));
        }
        self.stats.calls += 1;
        // Each NPU's finish, by NPU id.
        let by_npu = |ids: &[u32], times: Vec<u64>| {
            let mut each = vec![None; npus as usize];
            for (&npu, t) in ids.iter().zip(times) {
                if let Some(slot) = each.get_mut(npu as usize) {
                    *slot = Some(t);
                }
            }
            each
        };
        let started = Instant::now();
        let result = match &mut self.driver {
            Driver::Fork(session) => match session.run_batch_each(&prefix) {
                Ok(times) => Ok(by_npu(session.reporters(), times)),
                Err(f) => Err((f, session.last_lines())),
            },
            Driver::Stock => StockRun::run_each(
                &self.options.binary,
                &self.inputs,
                &prefix,
                npus,
                self.options.timeout,
                self.options.limits,
            )
            .map(|times| by_npu(&(0..npus).collect::<Vec<_>>(), times)),
            Driver::Failed => unreachable!("checked above"),
        };
        self.stats.wall += started.elapsed();
        result.map_err(|(fault, last_lines)| {
            // Dropping the session kills and reaps the process.
            self.driver = Driver::Failed;
            self.error(stage, fault, last_lines)
        })
    }

    /// Ends the run (see [`AstraBackend::finish`](super::AstraBackend::finish)).
    pub fn finish(mut self) -> Result<AstraStats, AstraError> {
        self.driver
            .shut_down()
            .map_err(|(fault, last_lines)| self.error(Stage::ShutDown, fault, last_lines))?;
        Ok(self.stats)
    }

    fn error(&self, stage: Stage, fault: Fault, last_lines: Vec<String>) -> AstraError {
        astra_error(&self.options, stage, fault, last_lines)
    }
}
