//! PIM (processing-in-memory) devices: LLMServingSim's `configs/pim/<stem>.ini` files, the
//! DRAMSim3-style INIs a node's `cpu_mem.pim_config` names.
//!
//! Only the keys the attention-offloading model reads are parsed: the DRAM structure
//! (`bankgroups`, `banks_per_group`, `rows`, `columns`, `device_width`, `bus_width`,
//! `channel_size`) for a channel's capacity, `data_rate` for its bandwidth, `CL` and `tCK` for
//! its read latency, and `idle_power`/`peak_power` (mW). Sections are ignored (keys are
//! unique across them in every bundled file); `#` starts a comment, `;` and `[` lines are
//! skipped, as in LLMServingSim's `load_flat_config`.
//!
//! The attention latency is LLMServingSim's linear model, fitted per memory type for
//! Llama-3.1-8B (32 heads, 8 KV heads, head_dim 128) and scaled to other shapes: the slope
//! by the GQA ratio over 4, the intercept by `heads × head_dim / 4096`. The fit is keyed by
//! the INI's stem (the memory type), so an INI under another name is refused.

use super::{Bound, ConfigError, Problem};
use std::path::{Path, PathBuf};

/// LLMServingSim's fitted PIM attention model: `(stem, slope ns/token, intercept ns)`.
const ATTENTION_FITS: [(&str, f64, f64); 4] = [
    ("LPDDR4X_2GB_4266_pim", 432.4458, 33918.1734),
    ("DDR4_8GB_3200_pim", 333.2538, 30675.2739),
    ("LPDDR5_2GB_6400_pim", 282.4338, 15996.7018),
    ("HBM2_1GB_2000_pim", 242.0548, 14513.5015),
];

/// One PIM memory type, from its INI file.
#[derive(Debug, Clone, PartialEq)]
pub struct PimDevice {
    /// The INI's stem (the memory type, e.g. `DDR4_8GB_3200_pim`).
    pub stem: String,
    /// Capacity of one channel (one DIMM), GiB.
    pub channel_gib: f64,
    /// Bandwidth of one channel, GB/s: `bus_width / 8 × data_rate / 1000`.
    pub channel_bw_gbps: f64,
    /// Read latency, ns: `CL × tCK`.
    pub read_latency_ns: f64,
    /// Idle power of the memory, W (`idle_power` mW).
    pub idle_power_w: f64,
    /// Peak (active) power of the memory, W (`peak_power` mW).
    pub peak_power_w: f64,
    /// Attention model slope, ns per context token (Llama-3.1-8B shape).
    pub slope_ns: f64,
    /// Attention model intercept, ns (Llama-3.1-8B shape).
    pub intercept_ns: f64,
}

impl PimDevice {
    /// The INI of `stem` for a cluster config at `cluster_config`: in `dir` when given, else
    /// where LLMServingSim keeps them, `<config dir>/../pim/<stem>.ini`. A missing file is an
    /// error listing the path tried.
    pub fn locate(
        stem: &str,
        cluster_config: &Path,
        dir: Option<&Path>,
    ) -> Result<PathBuf, ConfigError> {
        let file = format!("{stem}.ini");
        let path = match dir {
            Some(d) => d.join(&file),
            None => cluster_config
                .parent()
                .unwrap_or(Path::new("."))
                .join("..")
                .join("pim")
                .join(&file),
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(ConfigError::invalid(
                &cluster_config.display().to_string(),
                "cpu_mem.pim_config",
                Problem::NotFound {
                    what: format!("PIM config `{stem}`"),
                    tried: format!(
                        "{} (point --pim-config-dir at the folder holding {file})",
                        path.display()
                    ),
                },
            ))
        }
    }

    /// Reads and checks the INI at `path`; its stem selects the attention model.
    pub fn load(path: &Path) -> Result<PimDevice, ConfigError> {
        let text = crate::paths::read_text(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        PimDevice::parse(&text, stem, &path.display().to_string())
    }

    /// Parses INI `text` of memory type `stem`; `source_name` is used in error messages.
    pub fn parse(text: &str, stem: &str, source_name: &str) -> Result<PimDevice, ConfigError> {
        let keys = Keys::read(text, source_name)?;
        let int = |k: &str| keys.positive(k, source_name);
        let banks = int("bankgroups")? * int("banks_per_group")?;
        let bus_width = int("bus_width")?;
        let device_width = int("device_width")?;
        let columns = int("columns")?;
        let rows = int("rows")?;
        let channel_size = int("channel_size")?;
        let data_rate = int("data_rate")?;
        // LLMServingSim's PIMModel: a rank of `bus_width / device_width` devices; a channel
        // holds whole ranks, at least one.
        let devices_per_rank = bus_width / device_width;
        let page_bytes = columns * device_width / 8.0;
        let mib_per_bank = page_bytes * (rows / 1024.0) / 1024.0;
        let mib_per_rank = mib_per_bank * banks * devices_per_rank;
        let channel_mib = if mib_per_rank > channel_size {
            mib_per_rank
        } else {
            (channel_size / mib_per_rank) * mib_per_rank
        };
        let Some(&(_, slope_ns, intercept_ns)) = ATTENTION_FITS.iter().find(|f| f.0 == stem) else {
            let known: Vec<&str> = ATTENTION_FITS.iter().map(|f| f.0).collect();
            // The attention latency model is fitted only for the known memory types.
            return Err(ConfigError::invalid(
                source_name,
                "PIM memory type (the file name)",
                Problem::not_one_of(format!("`{stem}`"), &known),
            ));
        };
        Ok(PimDevice {
            stem: stem.to_owned(),
            channel_gib: channel_mib / 1024.0,
            channel_bw_gbps: bus_width / 8.0 * data_rate / 1000.0,
            read_latency_ns: int("CL")? * int("tCK")?,
            idle_power_w: keys.non_negative("idle_power", source_name)? / 1000.0,
            peak_power_w: keys.non_negative("peak_power", source_name)? / 1000.0,
            slope_ns,
            intercept_ns,
        })
    }

    /// PIM channels of a memory of `mem_size_gib`: one per whole DIMM
    /// (`int(mem_size // dimm_size)`).
    pub fn channels(&self, mem_size_gib: f64) -> u32 {
        (mem_size_gib / self.channel_gib).floor() as u32
    }
}

/// The `key = value` lines of an INI, with their line numbers.
struct Keys<'a> {
    entries: Vec<(&'a str, &'a str, usize)>,
}

impl<'a> Keys<'a> {
    fn read(text: &'a str, source_name: &str) -> Result<Keys<'a>, ConfigError> {
        let mut entries = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() || line.starts_with('[') || line.starts_with(';') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                let problem = Problem::WrongKind {
                    expected: "`key = value`".into(),
                    got: Some(format!("`{line}`")),
                };
                return Err(ConfigError::invalid(source_name, "(ini)", problem).at_line(n + 1));
            };
            entries.push((key.trim(), value.trim(), n + 1));
        }
        Ok(Keys { entries })
    }

    /// The last value of `key` (later lines win, as in a dict) as a finite number `>= 0`.
    fn non_negative(&self, key: &str, source_name: &str) -> Result<f64, ConfigError> {
        self.within(key, source_name, Bound::NonNegative)
    }

    /// The value of `key` as a finite number `> 0`.
    fn positive(&self, key: &str, source_name: &str) -> Result<f64, ConfigError> {
        self.within(key, source_name, Bound::Positive)
    }

    /// The last value of `key` as a number within `bound`.
    fn within(&self, key: &str, source_name: &str, bound: Bound) -> Result<f64, ConfigError> {
        let Some(&(_, value, line)) = self.entries.iter().rev().find(|e| e.0 == key) else {
            let problem = Problem::missing_for("needed by the PIM model");
            return Err(ConfigError::invalid(source_name, key, problem));
        };
        let parsed = value
            .parse::<f64>()
            .map_err(|_| Problem::out_of_range(format!("`{value}`"), bound));
        parsed
            .and_then(|v| bound.check(v))
            .map_err(|p| ConfigError::invalid(source_name, key, p).at_line(line))
    }
}
