//! The analytical network description ASTRA-Sim reads (`network.yml`): one entry per
//! dimension in each of four lists. Generated for an instance from the cluster config or the
//! hardware file (LLMServingSim §4.3), or read from the user's own file (`--network-config`).

use std::fmt::{self, Write as _};
use std::path::Path;

use serde::Deserialize;

use crate::config::{Bound, ConfigError, Problem};

/// Topology of one network dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// A bidirectional ring.
    Ring,
    /// Every NPU linked to every other (one hop).
    FullyConnected,
    /// NPUs behind one switch (two hops).
    Switch,
}

impl Topology {
    /// The name in `network.yml`.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Ring => "Ring",
            Topology::FullyConnected => "FullyConnected",
            Topology::Switch => "Switch",
        }
    }

    fn parse(s: &str) -> Option<Topology> {
        [Topology::Ring, Topology::FullyConnected, Topology::Switch]
            .into_iter()
            .find(|t| t.name() == s)
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One dimension of the network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetworkDim {
    /// How the NPUs of the dimension are linked.
    pub topology: Topology,
    /// NPUs along the dimension (at least 1).
    pub npus: u32,
    /// Link bandwidth, GB/s (positive).
    pub bandwidth_gbps: f64,
    /// Link latency, ns (non-negative).
    pub latency_ns: f64,
}

/// A whole `network.yml`: the dimensions, innermost (dimension 0) first.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkConfig {
    /// At least one dimension.
    pub dims: Vec<NetworkDim>,
}

/// The file as written, before validation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNetwork {
    topology: Vec<String>,
    npus_count: Vec<i64>,
    bandwidth: Vec<f64>,
    latency: Vec<f64>,
}

impl NetworkConfig {
    /// The network LLMServingSim generates for one instance of `tp` NPUs (§4.3): dimensions
    /// `[tp]` (`[1]` for one NPU), FullyConnected, with the link bandwidth and latency given
    /// as one value or one per dimension.
    pub fn for_instance(
        tp: u32,
        link_bw: &[f64],
        link_latency: &[f64],
        source_name: &str,
    ) -> Result<NetworkConfig, ConfigError> {
        let npus = [tp.max(1)];
        let per_dim = |values: &[f64], field: &str| -> Result<Vec<f64>, ConfigError> {
            match values {
                [one] => Ok(vec![*one; npus.len()]),
                many if many.len() == npus.len() => Ok(many.to_vec()),
                many => Err(ConfigError::invalid(
                    source_name,
                    field,
                    Problem::WrongLength {
                        len: many.len(),
                        expected: npus.len(),
                        why: format!(
                            "one per dimension of this instance's network ({npus:?} NPUs), \
                             or one value for all"
                        ),
                    },
                )),
            }
        };
        let bw = per_dim(link_bw, "link_bw")?;
        let lat = per_dim(link_latency, "link_latency")?;
        let config = NetworkConfig {
            dims: (0..npus.len())
                .map(|d| NetworkDim {
                    topology: Topology::FullyConnected,
                    npus: npus[d],
                    bandwidth_gbps: bw[d],
                    latency_ns: lat[d],
                })
                .collect(),
        };
        config.check(source_name)?;
        Ok(config)
    }

    /// Reads and validates a `network.yml` (see [`NetworkConfig::parse`]).
    pub fn load(path: &Path) -> Result<NetworkConfig, ConfigError> {
        let text = crate::paths::read_text(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        NetworkConfig::parse(&text, &path.display().to_string())
    }

    /// Parses and validates the text of a `network.yml`: the keys `topology`, `npus_count`,
    /// `bandwidth` (GB/s) and `latency` (ns), lists of one equal, non-zero length; topologies
    /// `Ring`, `FullyConnected` or `Switch`; NPU counts and bandwidths positive, latencies
    /// non-negative (a zero-latency link is a legitimate idealisation).
    pub fn parse(text: &str, source_name: &str) -> Result<NetworkConfig, ConfigError> {
        let invalid = |field: &str, problem| ConfigError::invalid(source_name, field, problem);
        let syntax = |message: String| invalid("(yaml)", Problem::Syntax(message));
        crate::yaml::check_nesting(text).map_err(|deep| syntax(deep.to_string()))?;
        let raw: RawNetwork = serde_yaml_ng::from_str(text).map_err(|e| syntax(e.to_string()))?;
        let n = raw.topology.len();
        if n == 0 {
            return Err(invalid("topology", Problem::Empty));
        }
        for (field, len) in [
            ("npus_count", raw.npus_count.len()),
            ("bandwidth", raw.bandwidth.len()),
            ("latency", raw.latency.len()),
        ] {
            if len != n {
                let why = "one per dimension, as `topology` has".to_owned();
                return Err(invalid(
                    field,
                    Problem::WrongLength {
                        len,
                        expected: n,
                        why,
                    },
                ));
            }
        }
        let mut dims = Vec::with_capacity(n);
        for d in 0..n {
            let topology = Topology::parse(&raw.topology[d]).ok_or_else(|| {
                invalid(
                    &format!("topology[{d}]"),
                    Problem::not_one_of(
                        format!("`{}`", raw.topology[d]),
                        &["Ring", "FullyConnected", "Switch"],
                    ),
                )
            })?;
            let npus = u32::try_from(raw.npus_count[d])
                .ok()
                .filter(|&c| c >= 1)
                .ok_or_else(|| {
                    invalid(
                        &format!("npus_count[{d}]"),
                        Problem::out_of_range(raw.npus_count[d], Bound::AtLeast(1)),
                    )
                })?;
            dims.push(NetworkDim {
                topology,
                npus,
                bandwidth_gbps: raw.bandwidth[d],
                latency_ns: raw.latency[d],
            });
        }
        let config = NetworkConfig { dims };
        config.check(source_name)?;
        Ok(config)
    }

    fn check(&self, source_name: &str) -> Result<(), ConfigError> {
        for (d, dim) in self.dims.iter().enumerate() {
            for (field, v, bound) in [
                ("bandwidth", dim.bandwidth_gbps, Bound::Positive),
                ("latency", dim.latency_ns, Bound::NonNegative),
            ] {
                bound
                    .check(v)
                    .map_err(|p| ConfigError::invalid(source_name, format!("{field}[{d}]"), p))?;
            }
        }
        Ok(())
    }

    /// NPUs of the whole network (the product of the dimensions).
    pub fn npus(&self) -> u64 {
        self.dims.iter().map(|d| u64::from(d.npus)).product()
    }

    /// The file's text, in LLMServingSim's flow-list layout.
    pub fn render(&self) -> String {
        fn line<T: fmt::Display>(out: &mut String, key: &str, values: impl Iterator<Item = T>) {
            let items: Vec<String> = values.map(|v| v.to_string()).collect();
            writeln!(out, "{key}: [ {} ]", items.join(", ")).expect("a String grows");
        }
        let mut out = String::new();
        line(&mut out, "topology", self.dims.iter().map(|d| d.topology));
        line(&mut out, "npus_count", self.dims.iter().map(|d| d.npus));
        line(
            &mut out,
            "bandwidth",
            self.dims.iter().map(|d| Float(d.bandwidth_gbps)),
        );
        line(
            &mut out,
            "latency",
            self.dims.iter().map(|d| Float(d.latency_ns)),
        );
        out
    }
}

/// A float written with a decimal point (`16.0`), as LLMServingSim writes the YAML.
struct Float(f64);

impl fmt::Display for Float {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
