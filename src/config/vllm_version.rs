//! The vLLM release a run models (`--vllm-version`) and the defaults that changed between
//! releases. Scheduling and pricing follow vLLM 0.19 whatever the version; what the version
//! moves is listed on [`VllmVersion`]'s methods, each with the releases' code that shows it.

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

    /// Release `major.minor`.
    pub const fn new(major: u32, minor: u32) -> VllmVersion {
        VllmVersion { major, minor }
    }

    /// Whether this release schedules asynchronously when no flag says otherwise.
    pub fn async_scheduling_by_default(self) -> bool {
        self >= VllmVersion::ASYNC_SCHEDULING_DEFAULT
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

    /// A release this build can model: readable, not older than [`VllmVersion::OLDEST`] and
    /// not newer than [`VllmVersion::MODELLED`].
    fn from_str(text: &str) -> Result<VllmVersion, String> {
        let version = VllmVersion::read(text).ok_or_else(|| {
            format!("`{text}` is not a vLLM version (expected major.minor, e.g. 0.13 or 0.13.0)")
        })?;
        if version < VllmVersion::OLDEST {
            return Err(format!(
                "vLLM {version} predates its V1 engine (default from {}), the scheduler \
                 simulated here",
                VllmVersion::OLDEST
            ));
        }
        if version > VllmVersion::MODELLED {
            return Err(format!(
                "vLLM {version} is newer than the release this build models ({}); its \
                 defaults are not known here",
                VllmVersion::MODELLED
            ));
        }
        Ok(version)
    }
}

impl fmt::Display for VllmVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}
