//! Flags of `blis-cosim calibrate` and their plain conversion into [`CalibrateOptions`].

use super::{choices, parse_dtype, parse_vllm_arrival};
use crate::calibrate::{self, CalibrateOptions, EngineFlags, RealRun, SearchLimits};
use crate::config::{Dtype, KvCacheDtype};
use crate::metrics::VllmArrival;
use crate::paths::{CommandPath, Role};
use crate::setup::{
    Deployment, Layout, NamedFile, RunOptions, WorkloadSource, cluster_named_files,
};
use crate::workload::DatasetOptions;
use anyhow::bail;
use clap::Args;
use std::path::{Path, PathBuf};

/// Flags of `blis-cosim calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// A real run to fit (vLLM bench `requests.jsonl`; its `meta.json` beside it gives the
    /// engine settings). Repeat for several runs of the same GPU.
    #[arg(long, value_name = "PATH", required = true)]
    pub vllm: Vec<PathBuf>,

    /// The workload each --vllm run replayed (LLMServingSim JSONL): one per run, in order,
    /// or one for all.
    #[arg(long, value_name = "PATH", required = true)]
    pub dataset: Vec<PathBuf>,

    /// The cluster config of each --vllm run: one per run, in order, or one for all
    /// (else --model, --hardware and --tp).
    #[arg(long, value_name = "PATH")]
    pub cluster_config: Vec<PathBuf>,

    /// A real run only checked, never fitted: its error before and after is reported apart
    /// from the fit's residual. Repeatable.
    #[arg(long, value_name = "PATH")]
    pub held_out: Vec<PathBuf>,

    /// The workload of each --held-out run (one per run, or one for all).
    #[arg(long, value_name = "PATH")]
    pub held_out_dataset: Vec<PathBuf>,

    /// The cluster config of each --held-out run (one per run, or one for all).
    #[arg(long, value_name = "PATH")]
    pub held_out_cluster_config: Vec<PathBuf>,

    /// Model of a run without cluster config (name or config.json).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,

    /// The GPU the runs ran on, without cluster config: a bundled name or a hardware TOML
    /// (the file written starts from it).
    #[arg(long, value_name = "NAME")]
    pub hardware: Option<String>,

    /// Tensor parallelism, without cluster config.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub tp: Option<u32>,

    /// Engine settings, when a run has no meta.json (a flag that disagrees with a run's
    /// meta.json is refused).
    #[arg(long, value_name = "N")]
    pub max_num_seqs: Option<u32>,

    #[arg(long, value_name = "N")]
    pub max_num_batched_tokens: Option<u32>,

    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype)]
    pub dtype: Option<Dtype>,

    #[arg(long, value_name = "DTYPE", value_parser = choices::<KvCacheDtype>())]
    pub kv_cache_dtype: Option<KvCacheDtype>,

    /// Asynchronous scheduling on (the default without meta.json: vLLM 0.19's; with it, the
    /// recorded setting, else the recorded version's default, on from v0.14).
    #[arg(long, overrides_with = "no_async_scheduling")]
    pub async_scheduling: bool,

    /// Asynchronous scheduling off.
    #[arg(long)]
    pub no_async_scheduling: bool,

    /// Where the real runs' TTFT and latency start: `client` (the arrival a client sees, as
    /// simulated) or `queued` (vLLM's queued_ts, LLMServingSim's rule).
    #[arg(long, value_name = "FROM", default_value = "client", value_parser = parse_vllm_arrival)]
    pub vllm_arrival: VllmArrival,

    /// The constants to fit, comma-separated (default: every one the runs exercise):
    /// gemm_compute_efficiency, gemm_memory_efficiency, gemm_fixed_ns,
    /// decode_attention_efficiency, moe_memory_efficiency.
    #[arg(long, value_name = "KEYS", value_delimiter = ',')]
    pub fit: Option<Vec<String>>,

    /// Most simulations of the fit from each of its starts (each simulates every fitted run
    /// once).
    #[arg(long, value_name = "N", default_value_t = SearchLimits::default().max_evaluations)]
    pub max_evaluations: usize,

    /// The date recorded in [calibrated] (YYYY-MM-DD; default: today, UTC).
    #[arg(long, value_name = "DATE")]
    pub date: Option<String>,

    /// The hardware file to write.
    #[arg(long, value_name = "PATH")]
    pub output: PathBuf,
}

impl CalibrateArgs {
    /// The files read and the one written.
    pub fn paths(&self) -> Vec<CommandPath<'_>> {
        let inputs = [
            ("--vllm", &self.vllm),
            ("--dataset", &self.dataset),
            ("--cluster-config", &self.cluster_config),
            ("--held-out", &self.held_out),
            ("--held-out-dataset", &self.held_out_dataset),
            ("--held-out-cluster-config", &self.held_out_cluster_config),
        ];
        let mut paths: Vec<CommandPath<'_>> = inputs
            .into_iter()
            .flat_map(|(flag, list)| {
                list.iter()
                    .map(move |p| CommandPath::new(flag, p, Role::Input))
            })
            .collect();
        for (flag, name) in [("--model", &self.model), ("--hardware", &self.hardware)] {
            if let Some(name) = name.as_deref().map(Path::new).filter(|p| p.is_file()) {
                paths.push(CommandPath::new(flag, name, Role::Input));
            }
        }
        paths.push(CommandPath::new("--output", &self.output, Role::Output));
        paths
    }

    /// The files the runs read besides their flags: the `meta.json` beside each real run
    /// and the files each cluster config names, so that `--output` replaces none of them.
    pub fn named_files(&self) -> Vec<NamedFile> {
        let metas = [("--vllm", &self.vllm), ("--held-out", &self.held_out)]
            .into_iter()
            .flat_map(|(flag, runs)| {
                runs.iter().map(move |run| NamedFile {
                    named_at: format!("the meta.json beside {flag} {}", run.display()),
                    path: run.with_file_name("meta.json"),
                })
            })
            .filter(|meta| meta.path.is_file());
        let configs = [
            ("--cluster-config", &self.cluster_config),
            ("--held-out-cluster-config", &self.held_out_cluster_config),
        ]
        .into_iter()
        .flat_map(|(flag, configs)| {
            configs
                .iter()
                .flat_map(move |config| cluster_named_files(flag, config, None))
        });
        metas.chain(configs).collect()
    }

    /// The plain options these flags give.
    pub fn into_options(self) -> anyhow::Result<CalibrateOptions> {
        if let Some(date) = &self.date
            && !is_date(date)
        {
            bail!("--date {date}: expected YYYY-MM-DD");
        }
        if self.max_evaluations == 0 {
            bail!("--max-evaluations: at least 1");
        }
        let fit = self.runs(&self.vllm, &self.dataset, &self.cluster_config, "")?;
        let held_out = self.runs(
            &self.held_out,
            &self.held_out_dataset,
            &self.held_out_cluster_config,
            "held-out-",
        )?;
        let async_scheduling = match (self.async_scheduling, self.no_async_scheduling) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        };
        Ok(CalibrateOptions {
            fit,
            held_out,
            engine: EngineFlags {
                max_num_seqs: self.max_num_seqs,
                max_num_batched_tokens: self.max_num_batched_tokens,
                dtype: self.dtype,
                kv_cache_fp8: self.kv_cache_dtype.map(|d| d == KvCacheDtype::Fp8),
                async_scheduling,
            },
            vllm_arrival: self.vllm_arrival,
            scalars: self.fit,
            date: self.date,
            limits: SearchLimits {
                max_evaluations: self.max_evaluations,
                ..SearchLimits::default()
            },
        })
    }

    /// The runs `vllm` with their datasets and cluster configs paired in order (one value
    /// serves every run); `prefix` names the flags in errors.
    fn runs(
        &self,
        vllm: &[PathBuf],
        datasets: &[PathBuf],
        configs: &[PathBuf],
        prefix: &str,
    ) -> anyhow::Result<Vec<RealRun>> {
        let nth = |list: &[PathBuf], i: usize, flag: &str| -> anyhow::Result<Option<PathBuf>> {
            match list.len() {
                0 => Ok(None),
                1 => Ok(Some(list[0].clone())),
                n if n == vllm.len() => Ok(Some(list[i].clone())),
                n => bail!(
                    "--{prefix}{flag}: {n} given for {} runs: give one per run, or one for all",
                    vllm.len()
                ),
            }
        };
        if vllm.is_empty() && !(datasets.is_empty() && configs.is_empty()) {
            bail!("--{prefix}dataset and --{prefix}cluster-config need runs (--{prefix}vllm)");
        }
        (0..vllm.len())
            .map(|i| {
                let Some(dataset) = nth(datasets, i, "dataset")? else {
                    bail!("--{prefix}dataset: give the workload each run replayed");
                };
                let mut options =
                    RunOptions::new(WorkloadSource::Dataset(dataset, DatasetOptions::default()));
                options.deployment = match nth(configs, i, "cluster-config")? {
                    Some(path) => Deployment::ClusterConfig(path),
                    None => Deployment::Standalone {
                        model: self.model.clone(),
                        hardware: self.hardware.clone(),
                        tp: self.tp,
                        layout: Layout::Single,
                    },
                };
                Ok(RealRun {
                    vllm: vllm[i].clone(),
                    options,
                })
            })
            .collect()
    }
}

/// Whether `text` is `YYYY-MM-DD`.
fn is_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
}

/// `blis-cosim calibrate`: fits, prints the report, writes the hardware file atomically.
pub fn calibrate(args: CalibrateArgs) -> anyhow::Result<()> {
    let named = args.named_files();
    let mut paths = args.paths();
    paths.extend(named.iter().map(NamedFile::as_path));
    crate::paths::check(&paths)?;
    let output = args.output.clone();
    let options = args.into_options()?;
    let started = std::time::Instant::now();
    let calibrated = calibrate::calibrate(&options)?;
    let text = calibrate::hardware_file(&calibrated.hardware)?;
    crate::output::write_atomically(&output, |w| w.write_all(text.as_bytes()))?;
    print!("{}", calibrated.report);
    println!(
        "\nWrote {} in {:.1} s. Use it with --hardware {} (or as a cluster config's \
         \"hardware\").",
        output.display(),
        started.elapsed().as_secs_f64(),
        output.display()
    );
    Ok(())
}
