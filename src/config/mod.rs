//! Static descriptions of what is simulated: model architectures, hardware, numeric formats,
//! and the KV-cache memory model derived from them.
//!
//! Models are HuggingFace `config.json` files (bundled under `model_archs/` or given by path);
//! hardware specs are TOML files (bundled under `hardware/` or given by path).

mod cluster;
mod dtype;
mod hardware;
mod memory;
mod model;
mod pim;
mod pipeline;
mod placement;
mod power;
mod roles;
mod topology;

pub use cluster::{
    ClusterConfig, CxlMemSpec, InstanceSpec, MemorySpec, NodeSpec, PerDim, PlacedInstance,
    PrefixStorage, RuntimeOverrides,
};
pub use dtype::{Dtype, KvCacheDtype};
pub use hardware::{Hardware, HostSpec};
pub use memory::{KvCapacity, KvSizing, full_kv_bytes_per_token, kv_capacity};
pub use model::{ModelArch, MoeArch};
pub use pim::PimDevice;
pub use pipeline::{Pipeline, stage_blocks};
pub use placement::{Locations, MemLoc, PLACEMENT_LAYER_NAMES, Placement, PlacementContext};
pub use power::{CpuPower, DramPower, LinkPower, NicPower, NpuPower, PowerSpec, StoragePower};
pub use roles::InstanceRole;
pub use topology::{ClusterLinks, Link};

use std::path::PathBuf;

/// An error in a model, hardware or engine description. Always fatal for the run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A file could be read but its content is invalid; `field` names the offending key.
    #[error("{source_name}: field `{field}`: {message}")]
    Invalid {
        source_name: String,
        field: String,
        message: String,
    },
    /// A name matched no bundled description.
    #[error("unknown {kind} `{name}`; bundled: {known}. Or pass a path to a {hint}")]
    Unknown {
        kind: &'static str,
        name: String,
        known: String,
        hint: &'static str,
    },
    /// The model does not fit the hardware as configured.
    #[error("{0}")]
    DoesNotFit(String),
}
