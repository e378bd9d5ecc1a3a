//! Static descriptions of what is simulated: model architectures, hardware, numeric formats,
//! and the KV-cache memory model derived from them.
//!
//! Models are HuggingFace `config.json` files (bundled under `model_archs/` or given by path);
//! hardware specs are TOML files (bundled under `hardware/` or given by path).

mod cluster;
mod dtype;
mod error;
pub mod hardware;
pub mod memory;
mod model;
mod pim;
mod pipeline;
mod placement;
mod power;
mod release2;
mod roles;
mod routing_spec;
mod topology;
pub mod value_line;
mod vllm_version;

pub use cluster::{
    ClusterConfig, CxlMemSpec, InstanceSpec, MemorySpec, NodeSpec, PerDim, PlacedInstance,
    PrefixStorage, RuntimeOverrides,
};
pub use dtype::{Dtype, KvCacheDtype, ServedBytes};
pub use error::{Bound, COMMAND_LINE, ConfigError, DurationError, Problem};
pub use hardware::{
    Accelerator, Calibration, CalibrationRun, Hardware, HostSpec, KernelSpec,
    MAX_KERNEL_EFFICIENCY, MemoryType, TpFabric,
};
pub use memory::{FitError, KvCapacity, KvSizing, full_kv_bytes_per_token, kv_capacity};
pub use model::{ModelArch, MoeArch};
pub use pim::PimDevice;
pub use pipeline::{Pipeline, stage_blocks};
pub use placement::{Locations, MemLoc, PLACEMENT_LAYER_NAMES, Placement, PlacementContext};
pub use power::{CpuPower, DramPower, LinkPower, NicPower, NpuPower, PowerSpec, StoragePower};
pub use roles::{InstanceRole, PdFlow};
pub use routing_spec::{RoutingSpecError, WeightBound};
pub use topology::{ClusterLinks, Link};
pub use vllm_version::VllmVersion;
