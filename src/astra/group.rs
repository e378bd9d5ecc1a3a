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
//! **Memoisation**: a wave is keyed by every member's trace bytes (in member order) and the
//! NPU count.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use xxhash_rust::xxh3::xxh3_128;

use super::backend::{Driver, astra_error};
use super::stock::StockRun;
use super::{AstraError, AstraInputs, AstraOptions, AstraStats, Fault, Stage};
use crate::Nanos;
use crate::chakra::{BatchTrace, npu_file};
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
}

/// The network LLMServingSim generates for a DP group: dimensions `[tp, members]`
/// (`[tp, 1]` loses its trailing 1), FullyConnected, with the links of the cluster's
/// dimensions 0 and 1 (`link_bw` and `link_latency`: one value for all dimensions, or one per
/// dimension).
pub fn group_network(
    tp: u32,
    members: u32,
    link_bw: &[f64],
    link_latency: &[f64],
) -> super::NetworkConfig {
    let mut npus = vec![tp.max(1), members.max(1)];
    while npus.len() > 1 && npus.last() == Some(&1) {
        npus.pop();
    }
    let pick = |v: &[f64], d: usize| v.get(d).or(v.last()).copied().unwrap_or(0.0);
    super::NetworkConfig {
        dims: (0..npus.len())
            .map(|d| super::NetworkDim {
                topology: super::Topology::FullyConnected,
                npus: npus[d],
                bandwidth_gbps: pick(link_bw, d),
                latency_ns: pick(link_latency, d),
            })
            .collect(),
    }
}

/// `involved_dim` of the TP all-reduces and of the EP collectives of a DP group on a network
/// of `dims` dimensions (LLMServingSim's `_resolve_dp_groups`); `None` on a one-dimensional
/// network (no suffix).
pub fn group_dims(dims: usize, tp: u32, ep: u32) -> Option<(Vec<bool>, Vec<bool>)> {
    if dims < 2 {
        return None;
    }
    let ep_dim = if ep <= tp {
        [true, false]
    } else if tp > 1 {
        [true, true]
    } else {
        [false, true]
    };
    Some((vec![true, false], ep_dim.to_vec()))
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
        let tp = group.tp.max(1);
        let npus = tp * group.members.max(1);
        if options.network.npus() != u64::from(npus) {
            return Err(fail(
                Fault::Io(format!(
                    "the network has {} NPUs but the DP group runs on {npus} ({} members of TP {tp})",
                    options.network.npus(),
                    group.members
                )),
                Vec::new(),
            ));
        }
        let inputs = AstraInputs::create(&options)
            .map_err(|e| fail(Fault::Io(format!("writing its inputs: {e}")), Vec::new()))?;
        let starts: Vec<u32> = (0..group.members).map(|m| m * tp).collect();
        let ends: Vec<u32> = if tp > 1 {
            (0..group.members).map(|m| m * tp + tp - 1).collect()
        } else {
            Vec::new()
        };
        // One initial report per start and end NPU; the first is kept for the first wave, the
        // others are answered `pass` and come back.
        let driver = Driver::start(&options, &inputs, npus, (&starts, &ends), first_step_ns)
            .map_err(|(fault, lines)| fail(fault, lines))?;
        Ok(AstraGroup {
            driver,
            inputs,
            model: group.model.clone(),
            tp,
            ep: group.ep,
            members: group.members,
            dtype: group.dtype,
            dims: group_dims(options.network.dims.len(), tp, group.ep),
            options,
            memo: HashMap::new(),
            stats: AstraStats::default(),
            ets: vec![Vec::new(); group.members as usize],
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
                Fault::Io(format!(
                    "a wave of {} batches for a group of {} members",
                    batches.len(),
                    self.members
                )),
                Vec::new(),
            ));
        }
        let mut hashes = Vec::with_capacity(16 * batches.len());
        for (m, (batch, breakdown)) in batches.iter().zip(breakdowns).enumerate() {
            let (tp_dim, ep_dim) = match &self.dims {
                Some((t, e)) => (Some(&t[..]), Some(&e[..])),
                None => (None, None),
            };
            let trace = BatchTrace {
                batch,
                model: &self.model,
                tp: self.tp,
                ep: self.ep,
                dtype: self.dtype,
                breakdown,
                involved_dim: tp_dim,
                ep_involved_dim: ep_dim,
                // A DP group serves a MoE model, whose weights stay on the GPU (a placement
                // keeping them elsewhere is refused).
                placement: None,
            };
            let mut et = std::mem::take(&mut self.ets[m]);
            let encoded = trace.encode_into(self.options.mode.dialect(), &mut et);
            hashes.extend_from_slice(&xxh3_128(&et).to_le_bytes());
            self.ets[m] = et;
            if let Err(e) = encoded {
                let fault = Fault::Io(format!("the trace of member {m}: {e}"));
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
        let times = self.price(stage)?;
        if self.options.memo {
            self.memo.insert(key, times.clone());
        }
        Ok(times)
    }

    /// Writes the members' files and runs the wave in ASTRA-Sim; returns each member's time.
    fn price(&mut self, stage: Stage) -> Result<Vec<Nanos>, AstraError> {
        if matches!(self.driver, Driver::Failed) {
            return Err(self.error(
                stage,
                Fault::Io("ASTRA-Sim was stopped by an earlier fault".into()),
                Vec::new(),
            ));
        }
        // Kept inputs hold every wave; otherwise two prefixes take the waves in turn (a set
        // is rewritten only after the next wave has completed, when every NPU has loaded it).
        let name = if self.inputs.is_kept() {
            format!("b{}", self.stats.calls)
        } else {
            format!("b{}", self.stats.calls % 2)
        };
        let prefix: PathBuf = self.inputs.dir().join(name);
        let written = (0..self.members).try_for_each(|m| {
            (m * self.tp..(m + 1) * self.tp).try_for_each(|npu| {
                let path = npu_file(&prefix, npu);
                fs::write(&path, &self.ets[m as usize])
                    .map_err(|e| format!("writing {}: {e}", path.display()))
            })
        });
        if let Err(m) = written {
            return Err(self.error(stage, Fault::Io(m), Vec::new()));
        }
        self.stats.calls += 1;
        let (tp, members) = (self.tp, self.members as usize);
        let npus = tp * self.members;
        // The member of an NPU.
        let member = |npu: u32| (npu / tp) as usize;
        let per_member = |npus: &[u32], times: Vec<u64>| {
            let mut each = vec![0; members];
            for (&npu, t) in npus.iter().zip(times) {
                let m = member(npu).min(members - 1);
                each[m] = each[m].max(t);
            }
            each
        };
        let started = Instant::now();
        let result = match &mut self.driver {
            Driver::Fork(session) => match session.run_batch_each(&prefix) {
                Ok(times) => Ok(per_member(session.reporters(), times)),
                Err(f) => Err((f, session.last_lines())),
            },
            Driver::Stock => StockRun::spawn(
                &self.options.binary,
                &self.inputs,
                &prefix,
                npus,
                self.options.timeout,
                self.options.limits,
            )
            .map_err(|f| (f, Vec::new()))
            .and_then(|mut run| run.finish_each().map_err(|f| (f, run.last_lines())))
            .map(|times| per_member(&(0..npus).collect::<Vec<_>>(), times)),
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
