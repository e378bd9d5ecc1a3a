//! Expert and data parallelism of the instances: DP groups, EP degrees, the links their
//! collectives run over, and the expert routing policy (LLMServingSim's rules, §2.2).

use super::InstanceConfig;
use crate::config::{ClusterConfig, ConfigError, Hardware, PerDim, PlacedInstance, Problem};
use crate::latency::{
    Collectives, CommLink, EpNetwork, ExpertParallel, ExpertRouting, VllmAllReduce,
};

/// How a cluster config's TP all-reduces are priced on its declared link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TpAllReduce {
    /// As vLLM dispatches them on the instance's part (its custom kernel, torch's symmetric
    /// memory or NCCL, and the copies around them), wherever the declared link can be the
    /// part's own TP fabric (`declared_dispatch`); NCCL's ring on the declared link elsewhere.
    Vllm,
    /// NCCL's ring alone on the declared link, as LLMServingSim prices them
    /// (`--llmservingsim`).
    DeclaredRing,
}

/// How the instances' collectives are priced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CommPricing {
    /// By the latency backend, on the analytical ring model, a cluster config's TP
    /// all-reduces as vLLM dispatches them ([`TpAllReduce::Vllm`]).
    Analytical,
    /// By the latency backend, a cluster config's TP all-reduces on its declared link's ring
    /// alone ([`TpAllReduce::DeclaredRing`]).
    DeclaredRing,
    /// By ASTRA-Sim from the trace: the backend prices compute only.
    Astra,
}

impl CommPricing {
    /// The pricing of a run that co-simulates with ASTRA-Sim if `astra`, else prices a cluster
    /// config's TP all-reduces as `tp_all_reduce` says.
    pub(super) fn of(astra: bool, tp_all_reduce: TpAllReduce) -> CommPricing {
        match (astra, tp_all_reduce) {
            (true, _) => CommPricing::Astra,
            (false, TpAllReduce::Vllm) => CommPricing::Analytical,
            (false, TpAllReduce::DeclaredRing) => CommPricing::DeclaredRing,
        }
    }
}

/// The link of a standalone instance's TP all-reduces: the hardware's intra-node link at the
/// share of it NCCL's ring reaches (`link_efficiency`, fitted to whole all-reduces of 16-64
/// MiB, their reductions included, so none is added), in the analytical network's GiB/s. The
/// ring then costs what the roofline's own all-reduce does: `2(n − 1)/n` of the bytes at
/// `link_efficiency × link_bw`, and `2(n − 1)` hops of `link_latency_ns`. A cluster config's
/// link is taken as given: LLMServingSim's `link_bw` is the bandwidth ASTRA-Sim moves a
/// collective's chunks at (docs/src/modelling.md; vLLM's dispatch over it:
/// [`declared_dispatch`]). GPUs without peer access
/// (`tp_fabric = "pcie-no-p2p"`) stage their collectives through host memory instead
/// ([`crate::latency::host_staged`]).
pub(super) fn hardware_link(hardware: &Hardware) -> CommLink {
    CommLink {
        bandwidth_gbps: hardware.link_bw_gbps * hardware.link_efficiency * 1e9
            / f64::from(1u32 << 30),
        latency_ns: hardware.link_latency_ns,
        local_mem_gbps: 0.0,
        through_host: hardware.stages_collectives_through_host(),
    }
}

/// Puts the TP all-reduces of a quick cluster's instances (`--num-instances`, `--pd`) on
/// their hardware's link as a standalone instance has it (`hardware_link`): the quick
/// cluster's link is the hardware file's datasheet link, so `--tp 4` prices the same
/// all-reduce alone or beside other instances. Its KV transfers and EP collectives keep the
/// cluster link (no table here measures them at a share of the link).
pub(super) fn hardware_tp_links(instances: &mut [InstanceConfig]) {
    for inst in instances {
        if inst.collectives.tp_link.is_some() {
            inst.collectives.tp_link = Some(hardware_link(&inst.hardware));
            inst.collectives.tp_dispatch = vllm_dispatch(inst);
        }
    }
}

/// How vLLM dispatches the TP all-reduces of an instance on its hardware's link
/// ([`VllmAllReduce`]: the path's kernel and the copies around it, decided by the hardware
/// file's `compute_capability` and `tp_fabric`). An SGLang instance keeps the ring alone:
/// SGLang dispatches its all-reduces its own way, not read here.
fn vllm_dispatch(inst: &InstanceConfig) -> Option<VllmAllReduce> {
    if inst.sglang.is_some() {
        return None;
    }
    VllmAllReduce::of(&inst.hardware, inst.tp, inst.dtype.activations())
}

/// How vLLM dispatches the TP all-reduces of a cluster config's instance over its declared
/// link `declared` (dimension 0): as on the part ([`vllm_dispatch`]) where that link can be
/// the part's own TP fabric, i.e. it is at least as fast as NCCL's ring reaches on it
/// ([`hardware_link`]: `link_efficiency × link_bw_gbps`, both in the analytical network's
/// GiB/s). A slower declared link is another fabric (PCIe between NVLink parts, a network
/// between boards) or one the config derates on purpose (LLMServingSim's 16 GB/s for the RTX
/// PRO 6000's PCIe 5.0): its ring is kept as declared. So is every ring under
/// [`CommPricing::DeclaredRing`] (LLMServingSim's pricing) and ASTRA-Sim's.
fn declared_dispatch(
    inst: &InstanceConfig,
    declared: CommLink,
    pricing: CommPricing,
) -> Option<VllmAllReduce> {
    let on_part_fabric = declared.bandwidth_gbps >= hardware_link(&inst.hardware).bandwidth_gbps;
    vllm_dispatch(inst).filter(|_| pricing == CommPricing::Analytical && on_part_fabric)
}

/// Link of network dimension `d` of a cluster config (a scalar applies to every dimension;
/// a list shorter than `d + 1` gives its last entry), for collectives of GPUs whose memory
/// runs at `local_mem_gbps` (their reductions). A declared link is taken as given: priced by
/// the ring whatever the hardware's peer access (the config states the link).
pub(super) fn cluster_link(cluster: &ClusterConfig, d: usize, local_mem_gbps: f64) -> CommLink {
    let pick = |v: &PerDim| match v {
        PerDim::One(x) => *x,
        PerDim::Many(xs) => xs.get(d).or(xs.last()).copied().unwrap_or(0.0),
    };
    CommLink {
        bandwidth_gbps: pick(&cluster.link_bw),
        latency_ns: pick(&cluster.link_latency),
        local_mem_gbps,
        through_host: false,
    }
}

/// Collectives of a standalone instance (no cluster config): TP all-reduces over the
/// hardware's link, no expert parallelism.
pub(super) fn standalone(inst: &mut InstanceConfig, pricing: CommPricing) {
    let analytical = pricing != CommPricing::Astra;
    inst.collectives = Collectives {
        tp: inst.tp,
        tp_link: analytical.then(|| hardware_link(&inst.hardware)),
        tp_dispatch: vllm_dispatch(inst).filter(|_| analytical),
        ep: ExpertParallel::NONE,
    };
}

/// Resolves DP groups and expert parallelism of the instances of a cluster config (`placed`
/// and `instances` in the same order) and sets each instance's collectives and DP group.
///
/// Rules: `ep_size` defaults to `tp_size` for a MoE model and is 1 for a dense one; it must
/// divide the expert count. Without a `dp_group`, `ep ≤ tp`. Members of one `dp_group` share
/// model, `tp_size` and `ep_size`; their `ep_size` is the EP degree over the whole group, so
/// each member holds `ep / members` ranks, at most `tp`. A group of a MoE model runs in lock
/// step (its members meet at every MoE collective); a dense model's members run
/// independently, as vLLM's data-parallel ranks do. TP all-reduces use the link of
/// dimension 0; EP collectives run over dimension 0 inside an instance and dimension 1
/// across the members of a DP group.
pub(super) fn resolve(
    cluster: &ClusterConfig,
    placed: &[PlacedInstance<'_>],
    instances: &mut [InstanceConfig],
    (routing, seed): (ExpertRouting, u64),
    pricing: CommPricing,
    source: &str,
) -> Result<(), ConfigError> {
    let groups = dp_groups(placed);
    for (id, p) in placed.iter().enumerate() {
        let (ep, experts) = ep_degree(p, &instances[id], source)?;
        let group = groups
            .iter()
            .position(|(name, _)| Some(*name) == p.spec.dp_group.as_deref());
        let (local, first_rank) = match group {
            None => {
                let tp = instances[id].tp;
                if ep > tp {
                    return Err(invalid(
                        source,
                        &p.path,
                        "ep_size",
                        Problem::disagrees(
                            ep,
                            format!(
                                "tp_size is {tp}: expert parallelism beyond one instance needs \
                                 a dp_group"
                            ),
                        ),
                    ));
                }
                (ep, 0)
            }
            // A dense model's members run independently: nothing to check or share.
            Some(_) if experts == 0 => (1, 0),
            Some(g) => {
                let group = Group {
                    name: groups[g].0,
                    members: &groups[g].1,
                };
                member_ranks(group, id, ep, placed, instances, pricing, source)?
            }
        };
        let ranks = EpRanks {
            total: ep,
            local,
            first_rank,
        };
        let routing = routing.reseeded(expert_seed(seed, id));
        set_collectives(cluster, &mut instances[id], ranks, routing, pricing);
        instances[id].dp_group = group
            .filter(|_| experts > 0)
            .map(|g| u32::try_from(g).unwrap_or(u32::MAX));
    }
    Ok(())
}

/// A config error at `path.key` of `source`.
fn invalid(source: &str, path: &str, key: &str, problem: Problem) -> ConfigError {
    ConfigError::invalid(source, format!("{path}.{key}"), problem)
}

/// An instance's EP degree (`ep_size`, by default its `tp_size` for a MoE model, 1 for a
/// dense one; it must divide the experts) and its model's expert count (0: dense).
fn ep_degree(
    p: &PlacedInstance<'_>,
    inst: &InstanceConfig,
    source: &str,
) -> Result<(u32, u64), ConfigError> {
    let experts = inst.model.moe.as_ref().map_or(0, |m| m.num_experts);
    if experts == 0 {
        return Ok((1, 0));
    }
    let ep = p.spec.ep_size.unwrap_or(inst.tp);
    if !experts.is_multiple_of(u64::from(ep)) {
        return Err(invalid(
            source,
            &p.path,
            "ep_size",
            Problem::disagrees(
                ep,
                format!(
                    "the {experts} experts of {} are not divisible by it",
                    inst.model.name
                ),
            ),
        ));
    }
    Ok((ep, experts))
}

/// An instance's EP ranks: the degree over its DP group, how many it holds, and its first.
struct EpRanks {
    total: u32,
    local: u32,
    first_rank: u32,
}

/// Sets an instance's collectives: TP all-reduces over dimension 0 (when priced
/// analytically; as vLLM dispatches them where [`declared_dispatch`] says), EP ranks inside
/// the instance on dimension 0 and across DP members on 1.
fn set_collectives(
    cluster: &ClusterConfig,
    inst: &mut InstanceConfig,
    ranks: EpRanks,
    routing: ExpertRouting,
    pricing: CommPricing,
) {
    let mem_bw = inst.hardware.memory_bw_gbps;
    let declared = cluster_link(cluster, 0, mem_bw);
    let network = EpNetwork {
        inner: (ranks.local, declared),
        outer: (ranks.total / ranks.local, cluster_link(cluster, 1, mem_bw)),
    };
    inst.collectives = Collectives {
        tp: inst.tp,
        tp_link: (pricing != CommPricing::Astra).then_some(declared),
        tp_dispatch: declared_dispatch(inst, declared, pricing),
        ep: ExpertParallel {
            total: ranks.total,
            local: ranks.local,
            first_rank: ranks.first_rank,
            routing,
            // Also under ASTRA-Sim: the breakdown's dispatch and combine entries mark where
            // the trace's EP collectives go (ASTRA-Sim times them).
            link: (ranks.total > 1).then_some(network),
        },
    };
}

/// A DP group: its name and its members' instance ids.
#[derive(Clone, Copy)]
struct Group<'g> {
    name: &'g str,
    members: &'g [usize],
}

/// DP group names in order of first appearance, with their members by instance id.
fn dp_groups<'p>(placed: &'p [PlacedInstance<'_>]) -> Vec<(&'p str, Vec<usize>)> {
    let mut groups: Vec<(&str, Vec<usize>)> = Vec::new();
    for (id, p) in placed.iter().enumerate() {
        if let Some(name) = &p.spec.dp_group {
            match groups.iter_mut().find(|(n, _)| n == name) {
                Some((_, members)) => members.push(id),
                None => groups.push((name, vec![id])),
            }
        }
    }
    groups
}

/// The EP ranks of instance `id`, a member of MoE DP group `group` whose EP degree over the
/// group is `ep`: (ranks on the instance, its first rank). The members must agree on model,
/// TP, EP and role, and share the ranks evenly.
fn member_ranks(
    group: Group<'_>,
    id: usize,
    ep: u32,
    placed: &[PlacedInstance<'_>],
    instances: &[InstanceConfig],
    pricing: CommPricing,
    source: &str,
) -> Result<(u32, u32), ConfigError> {
    let invalid = |path: &str, key: &str, problem| invalid(source, path, key, problem);
    let (inst, p, members) = (&instances[id], &placed[id], group.members);
    let differs = |o: usize| {
        let other = &instances[o];
        other.model.name != inst.model.name
            || other.tp != inst.tp
            || placed[o].spec.ep_size != p.spec.ep_size
            || other.role != inst.role
    };
    if let Some(&o) = members.iter().find(|&&o| differs(o)) {
        return Err(invalid(
            &p.path,
            "dp_group",
            Problem::disagrees(
                format!("\"{}\"", group.name),
                format!(
                    "{} differs from {}: members of a dp_group must share model_name, \
                     tp_size, ep_size and pd_type",
                    p.path, placed[o].path
                ),
            ),
        ));
    }
    let streams = inst.placement.as_ref().is_some_and(|p| p.streams_weights());
    if streams && pricing == CommPricing::Astra {
        return Err(invalid(
            &p.path,
            "placement",
            Problem::unsupported(
                format!(
                    "weights of a member of dp_group \"{}\" outside the GPU under ASTRA-Sim \
                     co-simulation (the group's process has no weight loads)",
                    group.name
                ),
                Some("use the analytical network backend"),
            ),
        ));
    }
    let n = members.len() as u32;
    if !ep.is_multiple_of(n) || ep / n > inst.tp {
        return Err(invalid(
            &p.path,
            "ep_size",
            Problem::disagrees(
                ep,
                format!(
                    "over the {n} members of dp_group \"{}\" it must give each a whole \
                     number of EP ranks, at most tp_size {}",
                    group.name, inst.tp
                ),
            ),
        ));
    }
    let member = members.iter().position(|&m| m == id).unwrap_or(0) as u32;
    Ok((ep / n, member * (ep / n)))
}

/// Seed of instance `id`'s expert gate: `--seed` hashed with the stream's name and the id.
fn expert_seed(seed: u64, id: usize) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(format!("expert-routing/{id}").as_bytes(), seed)
}
