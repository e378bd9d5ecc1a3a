//! The vLLM release a run models (`--vllm-version`) and the defaults that changed between
//! releases. Scheduling and pricing follow vLLM 0.19 whatever the version; what the version
//! moves is listed on [`VllmVersion`]'s methods, each with the releases' code that shows it.
//!
//! Read in the sources of 0.11.1, 0.12.0, 0.13.0, 0.14.0 and 0.16.0-0.19.0 and found the same
//! in each (so no method here): the scheduler limits `vllm serve` picks per device
//! (`EngineArgs.get_batch_defaults`), chunked prefill and prefix caching on for a decoder-only
//! model, `long_prefill_token_threshold` 0, block size 16 on CUDA, `gpu_memory_utilization`
//! 0.9 with the CUDA graphs' memory left out of the KV budget, `cudagraph_mode`
//! `FULL_AND_PIECEWISE`, the capture sizes, and the attention backend per compute capability
//! (accuracy guide, "The vLLM those runs were served by"). Two changes are known and not
//! followed: the fused-MoE default tiles (0.17) and the symmetric-memory all-reduce on compute
//! capability 10.3 (0.19; no hardware file here has it).

use std::fmt;
use std::str::FromStr;

/// A vLLM release, `major.minor` (patch and build suffixes are read and dropped: no default
/// modelled here changed within a minor release).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct VllmVersion {
    pub major: u32,
    pub minor: u32,
}

impl VllmVersion {
    /// The release this build models: every default without a flag is 0.19's.
    pub const MODELLED: VllmVersion = VllmVersion::new(0, 19);
    /// The oldest release accepted: vLLM's V1 engine (the scheduler simulated here) is the
    /// default from 0.8.
    pub const OLDEST: VllmVersion = VllmVersion::new(0, 8);
    /// The first release that schedules asynchronously unless told not to. vLLM 0.13.0's
    /// `SchedulerConfig.async_scheduling: bool = False` (`vllm/config/scheduler.py`; its
    /// `VllmConfig.__post_init__` says "we won't reach here until async scheduling is enabled
    /// by default"); 0.14.0's is `Field(default=None)`, resolved to on unless pipeline
    /// parallelism or a non-EAGLE speculative method rules it out (`vllm/config/vllm.py`).
    pub const ASYNC_SCHEDULING_DEFAULT: VllmVersion = VllmVersion::new(0, 14);
    /// The first release whose scheduler admits a waiting request only when its whole prompt
    /// fits in the free KV blocks. vLLM 0.19.0's `SchedulerConfig.scheduler_reserve_full_isl:
    /// bool = True` (`vllm/config/scheduler.py`), checked through
    /// `KVCacheManager.can_fit_full_sequence` before `allocate_slots` in
    /// `Scheduler.schedule` (`vllm/v1/core/sched/scheduler.py`); 0.18.0's scheduler has no such
    /// setting and allocates the first chunk's blocks alone (as do 0.11.1, 0.12.0, 0.13.0,
    /// 0.14.0, 0.16.0 and 0.17.0).
    pub const RESERVE_FULL_ISL_DEFAULT: VllmVersion = VllmVersion::new(0, 19);

    /// Release `major.minor`.
    pub const fn new(major: u32, minor: u32) -> VllmVersion {
        VllmVersion { major, minor }
    }

    /// Whether this release schedules asynchronously when no flag says otherwise.
    pub fn async_scheduling_by_default(self) -> bool {
        self >= VllmVersion::ASYNC_SCHEDULING_DEFAULT
    }

    /// Whether this release admits a request only when its whole prompt fits in the free KV
    /// blocks (`--reserve-full-isl`) when no flag says otherwise.
    pub fn reserve_full_isl_by_default(self) -> bool {
        self >= VllmVersion::RESERVE_FULL_ISL_DEFAULT
    }

    /// This release, if this build can model it: not older than [`VllmVersion::OLDEST`] and
    /// not newer than [`VllmVersion::MODELLED`]; else why not.
    pub fn modelled(self) -> Result<VllmVersion, String> {
        if self < VllmVersion::OLDEST {
            return Err(format!(
                "vLLM {self} predates its V1 engine (default from {}), the scheduler \
                 simulated here",
                VllmVersion::OLDEST
            ));
        }
        if self > VllmVersion::MODELLED {
            return Err(format!(
                "vLLM {self} is newer than the release this build models ({}); its \
                 defaults are not known here",
                VllmVersion::MODELLED
            ));
        }
        Ok(self)
    }

    /// Reads a version as vLLM prints it: `0.13`, `0.13.0`, `v0.13.0rc2.dev79+g8f8fda261`,
    /// `0.11.1`. Anything else is `None`.
    pub fn read(text: &str) -> Option<VllmVersion> {
        let text = text.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts = text.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor_digits: String = parts
            .next()?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Some(VllmVersion::new(major, minor_digits.parse().ok()?))
    }
}

impl FromStr for VllmVersion {
    type Err = String;

    /// A release this build can model ([`VllmVersion::modelled`]), read as vLLM prints it.
    fn from_str(text: &str) -> Result<VllmVersion, String> {
        let version = VllmVersion::read(text).ok_or_else(|| {
            format!("`{text}` is not a vLLM version (expected major.minor, e.g. 0.13 or 0.13.0)")
        })?;
        version.modelled()
    }
}

impl fmt::Display for VllmVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}
