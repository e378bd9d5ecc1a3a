//! Running the points: worker threads take the next unfinished point, run it in this process,
//! write its summary JSON; the calling thread appends each finished point's row to
//! results.csv (flushed at once) and its wall time to timings.csv, and moves the progress bar.

use super::console::Quiet;
use super::exec::{Flags, Runner, run_point};
use super::points::Point;
use super::results::{self, Folder, Outcome, Stream, Table};
use super::spec::Spec;
use crate::setup::Threads;
use anyhow::Context;
use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Stack of each worker thread (a run's own main thread gets 8 MiB).
const STACK: usize = 8 << 20;

/// The main command's flags and the runner a point's options go to.
pub type Main<'a> = (&'a dyn Flags, &'a Runner);

/// Runs the points of `points` (those in `only`, when given) not yet finished in `folder`,
/// `jobs` at a time, each through `main`; returns how many failed.
pub fn run_all(
    spec: &Spec,
    points: &[Point],
    only: Option<&[usize]>,
    folder: &Folder,
    jobs: usize,
    main: Main<'_>,
) -> anyhow::Result<usize> {
    std::fs::create_dir_all(folder.points())
        .with_context(|| format!("creating {}", folder.points().display()))?;
    let header = results::header(&spec.param_names());
    let done = results::finished(folder, &header, points)?;
    let finished: BTreeSet<String> = done.rows.iter().map(|r| r[0].clone()).collect();
    let mut rows = Stream::start(&folder.results(), &done)?;
    let mut timings = timings_stream(folder, &finished)?;
    let wanted = |p: &&Point| only.is_none_or(|o| o.binary_search(&p.id).is_ok());
    let pending: Vec<&Point> = points
        .iter()
        .filter(wanted)
        .filter(|p| !finished.contains(&p.id.to_string()))
        .collect();
    write_configs(folder, &pending)?;
    let skipped = points.iter().filter(wanted).count() - pending.len();
    if skipped > 0 {
        eprintln!(
            "{skipped} point(s) already finished in {}",
            folder.results().display()
        );
    }
    let quiet = Quiet::start(&folder.log())?;
    let bar = quiet.progress(pending.len() as u64);
    let (tx, rx) = mpsc::channel::<(usize, Outcome, Duration)>();
    let next = AtomicUsize::new(0);
    let mut failed = 0;
    let workers = jobs.min(pending.len());
    // Points running side by side already use the cores: each keeps to its own thread.
    let shared = workers > 1;
    std::thread::scope(|s| -> anyhow::Result<()> {
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, pending) = (&next, &pending);
            std::thread::Builder::new()
                .stack_size(STACK)
                .spawn_scoped(s, move || worker(next, pending, folder, main, shared, &tx))
                .context("starting a worker thread")?;
        }
        drop(tx);
        for (i, outcome, wall) in rx {
            let point = pending[i];
            if matches!(outcome, Outcome::Failed(_)) {
                failed += 1;
                bar.set_message(format!("{failed} failed"));
            }
            rows.push(&results::row(point, &outcome))?;
            timings.push(&[point.id.to_string(), format!("{:.6}", wall.as_secs_f64())])?;
            bar.inc(1);
        }
        Ok(())
    })?;
    bar.finish_and_clear();
    drop(quiet);
    Ok(failed)
}

fn worker(
    next: &AtomicUsize,
    pending: &[&Point],
    folder: &Folder,
    main: Main<'_>,
    shared: bool,
    tx: &mpsc::Sender<(usize, Outcome, Duration)>,
) {
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(point) = pending.get(i) else { return };
        let started = Instant::now();
        let outcome = run_one(point, folder, main, shared);
        if tx.send((i, outcome, started.elapsed())).is_err() {
            return;
        }
    }
}

/// Runs one point (its flags become run options, handed to the runner) and writes its
/// summary JSON; a panic is a failure like an error. With `shared` cores (other points run
/// beside it), a point left to choose its threads takes one.
fn run_one(point: &Point, folder: &Folder, (flags, runner): Main<'_>, shared: bool) -> Outcome {
    let args = point_args(point, folder);
    // The flags and the runner keep no state a panic could leave half-changed.
    let ran = std::panic::catch_unwind(AssertUnwindSafe(|| -> anyhow::Result<Outcome> {
        let mut options = flags.options(&args)?;
        if shared && options.threads == Threads::Auto {
            options.threads = Threads::One;
        }
        let run = run_point(options, runner)?;
        let json_path = folder.points().join(format!("{}.json", point.id));
        run.summary.write_json(&json_path)?;
        Ok(Outcome::Ok {
            gpus: run.gpus,
            summary: run.summary.to_json(),
        })
    }));
    match ran {
        Ok(Ok(outcome)) => outcome,
        Ok(Err(e)) => Outcome::Failed(format!("{e:#}")),
        Err(panic) => {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Outcome::Failed(format!("the run panicked: {text}"))
        }
    }
}

/// The main command's flags of `point` as the sweep runs it: its own, then the cluster
/// config, workload spec and policy bundle the sweep wrote for its configuration in `folder`.
pub(super) fn point_args(point: &Point, folder: &Folder) -> Vec<String> {
    let mut args = point.args.clone();
    if point.cluster_config.is_some() {
        let path = config_path(folder, point.config);
        args.extend([
            "--cluster-config".to_owned(),
            path.to_string_lossy().into_owned(),
        ]);
    }
    if point.workload.is_some() {
        let path = workload_path(folder, point.config);
        args.extend([
            "--workload-spec".to_owned(),
            path.to_string_lossy().into_owned(),
        ]);
    }
    if point.policy.is_some() {
        let path = policy_path(folder, point.config);
        args.extend([
            "--policy-config".to_owned(),
            path.to_string_lossy().into_owned(),
        ]);
    }
    args
}

fn config_path(folder: &Folder, config: usize) -> std::path::PathBuf {
    folder.configs().join(format!("{config}.json"))
}

fn workload_path(folder: &Folder, config: usize) -> std::path::PathBuf {
    folder.workloads().join(format!("{config}.yaml"))
}

fn policy_path(folder: &Folder, config: usize) -> std::path::PathBuf {
    folder.policies().join(format!("{config}.yaml"))
}

/// Writes the cluster config, workload spec and policy bundle of each configuration among
/// `pending` that has them (atomically).
fn write_configs(folder: &Folder, pending: &[&Point]) -> anyhow::Result<()> {
    let mut written = BTreeSet::new();
    for p in pending {
        if !written.insert(p.config) {
            continue;
        }
        if let Some(config) = &p.cluster_config {
            let text = serde_json::to_string_pretty(config)? + "\n";
            write_file(&config_path(folder, p.config), &text)?;
        }
        if let Some(workload) = &p.workload {
            let text = serde_yaml_ng::to_string(workload)?;
            write_file(&workload_path(folder, p.config), &text)?;
        }
        if let Some(policy) = &p.policy {
            let text = serde_yaml_ng::to_string(policy)?;
            write_file(&policy_path(folder, p.config), &text)?;
        }
    }
    Ok(())
}

pub(super) fn write_file(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    crate::metrics::write_atomically(path, |out| out.write_all(text.as_bytes()))
}

/// timings.csv restarted with the rows of the points already finished.
fn timings_stream(folder: &Folder, finished: &BTreeSet<String>) -> anyhow::Result<Stream> {
    let path = folder.timings();
    let mut table = Table {
        header: vec!["point".into(), "wall_s".into()],
        rows: Vec::new(),
    };
    if path.exists() {
        let old = Table::read(&path)?;
        if old.header == table.header {
            table.rows = old
                .rows
                .into_iter()
                .filter(|r| finished.contains(&r[0]))
                .collect();
        }
    }
    Stream::start(Path::new(&path), &table)
}
