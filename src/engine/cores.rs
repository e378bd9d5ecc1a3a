//! The instances' engine cores, by instance id. A core is built when the loop first changes
//! it: in an autoscaled run, a replica slot that is never provisioned never holds one, so
//! memory follows the replicas ever on, not the most the autoscaler may have. Until then the
//! slot reads as a pristine core of its template (idle, empty, every KV block free, no
//! statistic), which is what it would hold had it been built before the run.

use super::Setups;
use super::tiers::Seat;
use crate::Nanos;
use crate::config::InstanceRole;
use crate::scheduler::sglang::SglangScheduler;
use crate::scheduler::{Core, PreemptionOrder, QueueOrder, Scheduler};

/// How every core of a run is built: the same steps in the same order, whether before the
/// run or when its slot is first provisioned.
pub(super) struct Recipe<'r> {
    pub setups: Setups<'r>,
    /// Each instance's role.
    pub roles: Vec<InstanceRole>,
    /// The control plane's queue order and preemption victims, when there is one.
    pub policies: Option<(QueueOrder, PreemptionOrder)>,
    /// Each setup's place in the lower tier of the prefix cache (`tiers.rs`).
    pub seats: Vec<Option<Seat>>,
    /// The thrash window, when anomalies are watched.
    pub thrash_window_ns: Option<Nanos>,
    /// Whether scheduling decisions are noted for the trace.
    pub tracing: bool,
    /// Whether finished requests' records list their inter-token latencies.
    pub itl_values: bool,
    /// The classes by which vLLM cores pool finished requests' gaps per cell as well.
    pub itl_cells: Option<std::rc::Rc<crate::workload::RequestClasses>>,
    /// Whether the prefix cache keeps its history (a stale prefix signal).
    pub cache_history: bool,
    /// Whether finished requests hand their block hashes on to the requests they release
    /// (a run whose injector may release requests).
    pub hand_on_hashes: bool,
}

impl Recipe<'_> {
    /// Instance `id`'s core: vLLM's scheduler, or SGLang's when its setup has SGLang
    /// settings, set up for its pipeline depth, role and the run's settings.
    fn build(&self, id: usize) -> Core {
        let setup = self.setups.get(id);
        let mut core = match &setup.sglang {
            Some(config) => Core::Sglang(Box::new(SglangScheduler::new(
                config.clone(),
                setup.num_blocks,
                setup.max_model_len,
                id as u64,
            ))),
            None => {
                let mut vllm = Scheduler::new(setup.scheduler.clone(), setup.num_blocks);
                if let Some(p) = &setup.pipeline {
                    vllm.set_pipeline_depth(p.stage_blocks.len());
                }
                Core::Vllm(vllm)
            }
        };
        if self.roles[id] == InstanceRole::Prefill {
            core.hand_off_prefills();
        }
        if let Some((order, preemption)) = self.policies {
            core.set_policies(order, preemption);
        }
        if let Some(seat) = &self.seats[id / self.setups.per()] {
            seat.attach(&mut core);
        }
        if let Some(window) = self.thrash_window_ns
            && let Some(vllm) = core.vllm_mut()
        {
            vllm.watch_anomalies(window);
        }
        if self.tracing {
            core.trace_decisions();
        }
        core.keep_itl_values(self.itl_values);
        if let (Some(classes), Some(vllm)) = (&self.itl_cells, core.vllm_mut()) {
            vllm.pool_itl_by_cell(std::rc::Rc::clone(classes));
        }
        if self.cache_history {
            core.keep_cache_history();
        }
        if self.hand_on_hashes
            && let Some(vllm) = core.vllm_mut()
        {
            vllm.hand_on_hashes();
        }
        core
    }
}

/// Marks an instance whose core is not built.
const UNBUILT: u32 = u32::MAX;

/// Every instance's core, built before the run when each setup is one instance's, else
/// when the loop first changes it (indexing mutably builds it).
pub(super) struct Cores<'r> {
    recipe: Recipe<'r>,
    /// The cores built, in the order they were.
    built: Vec<Core>,
    /// By instance id: its index in `built`, or [`UNBUILT`]; empty when every core is built,
    /// by id.
    at: Vec<u32>,
    /// Per setup: a core as built and never changed, which unbuilt instances read as.
    pristine: Vec<Core>,
    /// When asked for ([`Cores::track_changes`]): the instances indexed mutably since the
    /// list was last cleared.
    changes: Option<Changes>,
    /// When set ([`Cores::retire_steps_after`]): how many step finish times a core holds
    /// before letting go of some, for the cores built from now on.
    retire_after: Option<usize>,
}

/// Instances that may have changed, each listed once.
struct Changes {
    ids: Vec<u32>,
    /// By instance id: whether it is in `ids`.
    listed: Vec<bool>,
}

impl<'r> Cores<'r> {
    /// How many cells the vLLM cores pool finished requests' gaps in
    /// ([`crate::workload::RequestClasses::cells`]); 0 when they do not.
    pub(super) fn itl_cells(&self) -> usize {
        let classes = self.recipe.itl_cells.as_deref();
        classes.map_or(0, crate::workload::RequestClasses::cells)
    }

    /// The cores `recipe` builds: each instance's now when each setup is one instance's,
    /// else none yet.
    pub(super) fn new(recipe: Recipe<'r>) -> Cores<'r> {
        let (n, per) = (recipe.setups.len(), recipe.setups.per());
        if per == 1 {
            let built = (0..n).map(|id| recipe.build(id)).collect();
            return Cores {
                recipe,
                built,
                at: Vec::new(),
                pristine: Vec::new(),
                changes: None,
                retire_after: None,
            };
        }
        let pristine = (0..n).step_by(per).map(|id| recipe.build(id)).collect();
        Cores {
            recipe,
            built: Vec::new(),
            at: vec![UNBUILT; n],
            pristine,
            changes: None,
            retire_after: None,
        }
    }

    /// How many cores were built: one per instance built so far, and one per setup standing
    /// for its unbuilt instances.
    pub(super) fn built(&self) -> usize {
        self.built.len() + self.pristine.len()
    }

    /// Makes every core, built or still to build, let go of step finish times once `steps`
    /// are held ([`Core::retire_steps_after`]).
    pub(super) fn retire_steps_after(&mut self, steps: usize) {
        self.retire_after = Some(steps);
        for core in self.built.iter_mut().chain(&mut self.pristine) {
            core.retire_steps_after(steps);
        }
    }

    /// How many instances there are.
    pub(super) fn len(&self) -> usize {
        self.recipe.setups.len()
    }

    /// Every instance's core, by id (an unbuilt one's pristine core).
    pub(super) fn iter(&self) -> impl Iterator<Item = &Core> {
        (0..self.len()).map(|id| &self[id])
    }

    /// Calls `each` on every built core, by instance id (an unbuilt instance's pristine core
    /// has run nothing).
    pub(super) fn each_built_mut(&mut self, mut each: impl FnMut(&mut Core)) {
        if self.at.is_empty() {
            self.built.iter_mut().for_each(each);
            return;
        }
        for &k in &self.at {
            if k != UNBUILT {
                each(&mut self.built[k as usize]);
            }
        }
    }

    /// From now on (`on`), or no longer, lists the instances indexed mutably
    /// ([`Cores::changed`]), starting with none.
    pub(super) fn track_changes(&mut self, on: bool) {
        if on == self.changes.is_some() {
            return;
        }
        self.changes = on.then(|| Changes {
            ids: Vec::with_capacity(self.len()),
            listed: vec![false; self.len()],
        });
    }

    /// The instances indexed mutably (which may have changed) since the last
    /// [`Cores::clear_changes`], in the order first indexed; none when not tracking.
    pub(super) fn changed(&self) -> &[u32] {
        self.changes.as_ref().map_or(&[], |c| &c.ids)
    }

    /// Empties the list of [`Cores::changed`] instances.
    pub(super) fn clear_changes(&mut self) {
        if let Some(c) = &mut self.changes {
            for &id in &c.ids {
                c.listed[id as usize] = false;
            }
            c.ids.clear();
        }
    }
}

impl std::ops::Index<usize> for Cores<'_> {
    type Output = Core;

    #[inline]
    fn index(&self, id: usize) -> &Core {
        if self.at.is_empty() {
            return &self.built[id];
        }
        match self.at[id] {
            UNBUILT => &self.pristine[id / self.recipe.setups.per()],
            k => &self.built[k as usize],
        }
    }
}

impl Cores<'_> {
    /// Lists instance `id` among the [`Cores::changed`] ones, when tracking.
    #[inline(always)]
    pub(super) fn note_changed(&mut self, id: usize) {
        if let Some(c) = &mut self.changes
            && !c.listed[id]
        {
            c.listed[id] = true;
            c.ids.push(id as u32);
        }
    }

    /// Instance `id`'s core, built now if it was not, without listing it among the
    /// [`Cores::changed`] ones: for a caller that lists it ([`Cores::note_changed`]) when
    /// what it changed is read by the ranking.
    #[inline(always)]
    pub(super) fn get_mut_unlisted(&mut self, id: usize) -> &mut Core {
        if self.at.is_empty() {
            return &mut self.built[id];
        }
        self.get_mut_by_slot(id)
    }

    /// [`Cores::get_mut_unlisted`] where cores are built as their slots are first changed.
    fn get_mut_by_slot(&mut self, id: usize) -> &mut Core {
        if self.at[id] == UNBUILT {
            self.at[id] = self.built.len() as u32;
            let mut core = self.recipe.build(id);
            if let Some(steps) = self.retire_after {
                core.retire_steps_after(steps);
            }
            self.built.push(core);
        }
        &mut self.built[self.at[id] as usize]
    }
}

impl std::ops::IndexMut<usize> for Cores<'_> {
    /// Instance `id`'s core, built now if it was not, listed among the changed ones.
    #[inline]
    fn index_mut(&mut self, id: usize) -> &mut Core {
        self.note_changed(id);
        self.get_mut_unlisted(id)
    }
}

/// The immediate view of the cluster: the instances' cores as they are.
impl crate::router::ClusterView for Cores<'_> {
    fn snapshot(&self, id: u32) -> crate::router::InstanceSnapshot {
        crate::router::InstanceSnapshot::of(&self[id as usize])
    }

    fn cached_prefix_blocks(&self, id: u32, hashes: &[u64]) -> usize {
        self[id as usize].cached_prefix_blocks(hashes)
    }
}
