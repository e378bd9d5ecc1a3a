//! The subcommands besides the main job: validate, et, generate, scenarios.

use super::{EtCommand, GenerateArgs, ValidateArgs};
use crate::chakra::{read_et, render_dump};
use crate::metrics::{PlotFormat, RunSettings, SettingHint, Validation, write_atomically};
use crate::workload::spec::{
    Generator, Overrides, SCENARIOS, WorkloadSpec, nothing_generated, scenario, write_jsonl,
};
use crate::workload::{
    DatasetFormat, DatasetOptions, DatasetRead, TRACE_SCENARIOS, detected, read_dataset_within,
    trace_scenario, write_requests_in_order, write_requests_jsonl,
};
use anyhow::Context;
use std::path::Path;

/// `blis-cosim validate`: prints the Diff% table of a simulated run against a real vLLM run,
/// and optionally writes it as JSON and draws the comparison plots.
pub fn validate(args: &ValidateArgs) -> anyhow::Result<()> {
    // With --sim-summary the run's meta.json beside --vllm is read too.
    let meta = args.vllm.with_file_name("meta.json");
    let mut paths = args.paths();
    if args.sim_summary.is_some() && meta.is_file() {
        paths.push(crate::paths::CommandPath::new(
            "the meta.json beside --vllm",
            &meta,
            crate::paths::Role::Input,
        ));
    }
    crate::paths::check(&paths)?;
    let validation = Validation::compare(&args.vllm, &args.sim, args.vllm_arrival)?;
    for difference in validation.differences() {
        eprintln!("blis-cosim: warning: the runs differ: {difference}");
    }
    for hint in setting_hints(args)? {
        eprintln!("blis-cosim: hint: {hint}");
    }
    let mut report = String::new();
    if let Some(offset) = validation.clock_offset_s() {
        report.push_str(&format!(
            "vLLM arrivals: client arrival_time moved onto the engine clock by {offset:.6} s \
             (the smallest queued_ts - arrival_time)\n"
        ));
    }
    report.push_str(&validation.render());
    if let Some(hardware) = &args.hardware {
        report.push_str(&fitted_or_held_out(&args.vllm, hardware)?);
    }
    report.push_str(&format!(
        "\nGeneration throughput series: {}% error (weighted absolute, second by second)\n",
        python_fixed_pct(validation.gen_series_error_pct())
    ));
    // With `--json -` the JSON owns standard output and the table goes to stderr.
    match &args.json {
        Some(path) if crate::output::is_stdout(path) => eprint!("{report}"),
        _ => print!("{report}"),
    }
    if let Some(path) = &args.json {
        let mut text = serde_json::to_string_pretty(&validation.to_json())?;
        text.push('\n');
        write_atomically(path, |w| w.write_all(text.as_bytes()))?;
    }
    if let Some(dir) = &args.plots {
        let format = match args.plot_format.as_str() {
            "png" => PlotFormat::Png,
            _ => PlotFormat::Svg,
        };
        for path in validation.write_plots(dir, format)? {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The engine settings on which the simulated run (its `--sim-summary`) and the real run (the
/// `meta.json` beside `--vllm`) disagree; none without both files.
fn setting_hints(args: &ValidateArgs) -> anyhow::Result<Vec<SettingHint>> {
    let Some(summary_path) = &args.sim_summary else {
        return Ok(Vec::new());
    };
    let meta_path = args.vllm.with_file_name("meta.json");
    if !meta_path.is_file() {
        eprintln!(
            "blis-cosim: note: --sim-summary: no {} beside --vllm to compare it with",
            meta_path.display()
        );
        return Ok(Vec::new());
    }
    let read = |path: &Path| -> anyhow::Result<serde_json::Value> {
        let text =
            crate::paths::read_text(path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
    };
    let summary = read(summary_path)?;
    let Some(engine) = summary.get("engine") else {
        anyhow::bail!(
            "{}: field `engine`: missing (a summary JSON of this version of blis-cosim has it)",
            summary_path.display()
        );
    };
    let simulated: RunSettings = serde_json::from_value(engine.clone())
        .with_context(|| format!("{}: field `engine`", summary_path.display()))?;
    Ok(simulated.hints(&RunSettings::from_vllm_meta(&read(&meta_path)?)))
}

/// Whether the real run `vllm` is one the calibrated hardware file `hardware` was fitted to,
/// in words; empty for a file no calibration wrote.
fn fitted_or_held_out(vllm: &Path, hardware: &Path) -> anyhow::Result<String> {
    let file = crate::config::Hardware::resolve(&hardware.display().to_string())?;
    let Some(calibrated) = &file.calibrated else {
        return Ok(String::new());
    };
    let bytes = std::fs::read(vllm).with_context(|| format!("reading {}", vllm.display()))?;
    let sha256 = crate::evaluation::sha256_hex(&bytes);
    Ok(match calibrated.run_with_sha256(&sha256) {
        Some(_) => format!(
            "\nThis run was USED to fit {} (calibrated {}, residual {}% RMS): the error above \
             is the fit's residual, not evidence of accuracy; judge the file on runs it was \
             not fitted to.\n",
            hardware.display(),
            calibrated.date,
            calibrated.residual_pct
        ),
        None => format!(
            "\nThis run was NOT used to fit {} (held out of its calibration of {}, residual {}% \
             RMS on the runs fitted): the error above measures how the calibration transfers.\n",
            hardware.display(),
            calibrated.date,
            calibrated.residual_pct
        ),
    })
}

/// A percentage with one decimal, `nan` when it does not exist.
fn python_fixed_pct(value: f64) -> String {
    if value.is_nan() {
        "nan".to_owned()
    } else {
        format!("{value:.1}")
    }
}

/// `blis-cosim et ...`: tools for Chakra execution-trace files.
pub fn et(command: &EtCommand) -> anyhow::Result<()> {
    match command {
        EtCommand::Dump(args) => {
            let file = read_et(&args.file)?;
            print!("{}", render_dump(&args.file, &file, args.astra_dialect));
            Ok(())
        }
    }
}

/// `blis-cosim generate`: writes the requests of a workload spec, a built-in scenario or a
/// trace as workload JSONL, atomically; refuses to write an empty workload.
pub fn generate(args: &GenerateArgs) -> anyhow::Result<()> {
    if args.dataset.is_none()
        && let Some(flag) = args.dataset_args.given_without_dataset()
    {
        anyhow::bail!("{flag}: applies only to --dataset");
    }
    // A trace scenario reads its trace, which --output must not replace.
    let trace = match args.dataset {
        Some(_) => None,
        None => args.scenario.as_deref().and_then(trace_scenario),
    };
    let trace_path = match trace {
        Some(t) => Some(
            t.locate(args.dataset_args.trace_dir.as_deref())
                .map_err(|m| anyhow::anyhow!("--scenario: {m}"))?,
        ),
        None => None,
    };
    let mut paths = args.paths();
    if let Some(path) = &trace_path {
        paths.insert(
            0,
            crate::paths::CommandPath::new(
                "the trace of --scenario",
                path,
                crate::paths::Role::Input,
            ),
        );
    }
    crate::paths::check(&paths)?;
    if let Some(path) = &args.dataset {
        return convert(path, args.dataset_args.options(), args);
    }
    if let (Some(t), Some(path)) = (trace, &trace_path) {
        return convert(path, t.options(), args);
    }
    if args.dataset_args.trace_dir.is_some() {
        anyhow::bail!("--trace-dir: applies only to a trace scenario");
    }
    let spec = match (&args.workload_spec, &args.scenario) {
        (Some(path), _) => WorkloadSpec::load_seeded(path, args.seed)?,
        (None, Some(name)) => scenario(name)
            .with_context(|| format!("unknown scenario `{name}`"))?
            .spec()?,
        (None, None) => anyhow::bail!("give --workload-spec, --scenario or --dataset"),
    };
    let overrides = Overrides {
        num_requests: args.num_requests,
        seed: args.seed,
        max_requests: args.max_requests,
    };
    let generator = Generator::new(&spec, overrides)?;
    let mut count = 0;
    write_atomically(&args.out, |w| {
        count = write_jsonl(generator, w)?;
        if count == 0 {
            return Err(std::io::Error::other(nothing_generated(&spec)));
        }
        Ok(())
    })?;
    let what = if spec.clients.iter().any(|c| c.traffic.is_session()) {
        "requests and sessions"
    } else {
        "requests"
    };
    eprintln!("wrote {count} {what} to {}", args.out.display());
    Ok(())
}

/// `generate --dataset` (or a trace scenario, read with `options`): converts the first `--num-requests` requests (all by default) of the
/// trace at `path` to LLMServingSim JSONL; a file already in that format is refused.
fn convert(path: &Path, options: DatasetOptions, args: &GenerateArgs) -> anyhow::Result<()> {
    let limit = args
        .num_requests
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
    let (read, format) = read_dataset_within(path, options, limit)?;
    if options.format == DatasetFormat::Auto {
        eprintln!("{}", detected(path, format));
    }
    if format == DatasetFormat::LlmServingSim {
        anyhow::bail!(
            "{}: already LLMServingSim JSONL; nothing to convert",
            path.display()
        );
    }
    let mut count = 0;
    write_atomically(&args.out, |w| {
        count = match read {
            DatasetRead::Listed(workload) => write_requests_jsonl(&workload.requests, w)?,
            DatasetRead::Streamed(plan) => {
                let requests = plan.requests_in_file_order();
                let failure = requests.failure();
                let count = write_requests_in_order(requests, w)?;
                failure
                    .take()
                    .map_or(Ok(count), |e| Err(std::io::Error::other(e)))?
            }
        };
        Ok(())
    })?;
    eprintln!("wrote {count} requests to {}", args.out.display());
    Ok(())
}

/// `blis-cosim scenarios`: prints the built-in scenarios, one per line with its description.
pub fn list_scenarios() {
    for s in SCENARIOS {
        println!("{:<21} {}", s.name, s.description);
    }
    for t in TRACE_SCENARIOS {
        println!("{:<21} {} (trace {})", t.name, t.description, t.file);
    }
}
