//! The waves of DP groups under ASTRA-Sim: one ASTRA-Sim process per group, holding every
//! member's NPUs ([`AstraGroup`]); the members' own backends price compute only.

use crate::Nanos;
use crate::astra::{self, AstraGroup, AstraGroupSpec};
use crate::config::InstanceRole;
use crate::engine::WavePricer;
use crate::latency::{BatchDesc, LatencyBackend, LatencyError, LayerTiming, StageSends};
use crate::setup::SimConfig;

/// One [`AstraGroup`] per DP group whose members are co-simulated, by group index.
pub(super) struct AstraWaves {
    groups: Vec<Option<Group>>,
}

struct Group {
    astra: AstraGroup,
    /// `DP group <g>: `, prefixing errors and the report.
    label: String,
}

impl AstraWaves {
    /// Starts a process for every DP group of `config` whose members run under ASTRA-Sim (the
    /// options of its first member, which carry the group's network); `None` when there is
    /// none. `first_arrival` is where the initial workload ends.
    pub(super) fn start(config: &SimConfig, first_arrival: Nanos) -> anyhow::Result<Option<Self>> {
        let mut groups: Vec<Option<Group>> = Vec::new();
        for inst in &config.instances {
            let (Some(g), Some(options)) = (inst.dp_group, &inst.astra) else {
                continue;
            };
            let g = g as usize;
            if groups.len() <= g {
                groups.resize_with(g + 1, || None);
            }
            if groups[g].is_some() {
                continue;
            }
            let members = config
                .instances
                .iter()
                .filter(|i| i.dp_group == Some(g as u32))
                .count() as u32;
            let label = format!("DP group {g}: ");
            let spec = AstraGroupSpec {
                model: &inst.model,
                tp: inst.tp,
                ep: inst.collectives.ep.total,
                members,
                dtype: inst.dtype,
                stage_blocks: inst.pipeline.as_ref().map_or(&[], |p| &p.stage_blocks),
                // The KV transfer is part of every prefill wave (the engine does not add it).
                prefill_kv_bytes: (inst.role == InstanceRole::Prefill)
                    .then(|| inst.kv_dtype().bytes()),
            };
            let astra = AstraGroup::start(options.clone(), spec, first_arrival)
                .map_err(|e| anyhow::anyhow!("{label}{e}"))?;
            if options.keep_inputs {
                eprintln!(
                    "{label}ASTRA-Sim inputs kept in {}",
                    astra.inputs_dir().display()
                );
            }
            groups[g] = Some(Group { astra, label });
        }
        Ok(groups
            .iter()
            .any(Option::is_some)
            .then_some(AstraWaves { groups }))
    }

    /// Ends every group's ASTRA-Sim (each even when an earlier one fails) and prints their
    /// reports on stderr.
    pub(super) fn finish(self) -> anyhow::Result<()> {
        let mut finished = Ok(());
        for Group { astra, label } in self.groups.into_iter().flatten() {
            let result = astra
                .finish()
                .map(|stats| eprintln!("{label}{}", astra::report_line(&stats)))
                .map_err(|e| anyhow::anyhow!("{label}{e}"));
            if finished.is_ok() {
                finished = result;
            }
        }
        finished
    }
}

/// A group's process and each member's compute breakdown of its batch.
type Priced<'g> = (&'g mut Group, Vec<Vec<LayerTiming>>);

impl AstraWaves {
    /// The group's process and each member's compute breakdown of its batch.
    fn group_and_breakdowns(
        &mut self,
        group: u32,
        members: &[u32],
        batches: &[BatchDesc<'_>],
        backends: &mut [&mut dyn LatencyBackend],
    ) -> Result<Option<Priced<'_>>, LatencyError> {
        let Some(Some(g)) = self.groups.get_mut(group as usize) else {
            return Ok(None);
        };
        let breakdowns = members
            .iter()
            .zip(batches)
            .map(|(&m, batch)| backends[m as usize].breakdown(batch))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some((g, breakdowns)))
    }
}

impl WavePricer for AstraWaves {
    fn wave_ns(
        &mut self,
        group: u32,
        members: &[u32],
        batches: &[BatchDesc<'_>],
        backends: &mut [&mut dyn LatencyBackend],
    ) -> Result<Option<Vec<Nanos>>, LatencyError> {
        let Some((g, breakdowns)) = self.group_and_breakdowns(group, members, batches, backends)?
        else {
            return Ok(None);
        };
        g.astra
            .wave_ns(batches, &breakdowns)
            .map(Some)
            .map_err(|e| LatencyError::from(e).of(g.label.trim_end_matches(": ")))
    }

    fn wave_stage_times(
        &mut self,
        group: u32,
        members: &[u32],
        batches: &[BatchDesc<'_>],
        backends: &mut [&mut dyn LatencyBackend],
        out: &mut [Nanos],
    ) -> Result<Option<StageSends>, LatencyError> {
        let Some((g, breakdowns)) = self.group_and_breakdowns(group, members, batches, backends)?
        else {
            return Ok(None);
        };
        g.astra
            .wave_stage_times(batches, &breakdowns, out)
            .map(|()| Some(StageSends::Included))
            .map_err(|e| LatencyError::from(e).of(g.label.trim_end_matches(": ")))
    }
}
