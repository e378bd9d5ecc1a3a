//! `blis-cosim-profile`: blis-cosim's main job (the same flags) sampled by pprof-rs; prints
//! the functions holding the most samples and writes every sampled stack in the folded
//! format flame-graph tools read (`scripts/profile.sh` builds and runs it).

mod table;

use std::process::ExitCode;

/// Settings from the environment, so that every argument stays blis-cosim's.
struct Settings {
    /// Samples per second of CPU time (`BLIS_COSIM_PROFILE_RATE`).
    rate: i32,
    /// Rows of each table (`BLIS_COSIM_PROFILE_TOP`).
    top: usize,
    /// Where the folded stacks go (`BLIS_COSIM_PROFILE_STACKS`), if anywhere.
    stacks: Option<std::path::PathBuf>,
    /// Runs of the job sampled together (`BLIS_COSIM_PROFILE_RUNS`): the kernel serves the
    /// sampling timer at its tick (often 250 Hz), so a short run needs several.
    runs: u32,
}

impl Settings {
    fn from_env() -> anyhow::Result<Settings> {
        let number = |name: &str, default: i64, max: i64| -> anyhow::Result<i64> {
            match std::env::var(name) {
                Err(_) => Ok(default),
                Ok(text) => match text.parse::<i64>() {
                    Ok(n) if (1..=max).contains(&n) => Ok(n),
                    _ => {
                        anyhow::bail!("{name} = {text:?}: expected a whole number from 1 to {max}")
                    }
                },
            }
        };
        Ok(Settings {
            rate: number("BLIS_COSIM_PROFILE_RATE", 4000, 20_000)? as i32,
            top: number("BLIS_COSIM_PROFILE_TOP", 25, 1000)? as usize,
            stacks: std::env::var_os("BLIS_COSIM_PROFILE_STACKS").map(Into::into),
            runs: number("BLIS_COSIM_PROFILE_RUNS", 1, 10_000)? as u32,
        })
    }
}

fn main() -> ExitCode {
    let cli = blis_cosim::cli::short_help::parse();
    if cli.command.is_some() {
        eprintln!("blis-cosim-profile: error: it profiles the main job only (no subcommand)");
        return ExitCode::FAILURE;
    }
    blis_cosim::logging::init(cli.run.log_level);
    // As the binary does: an interrupted run leaves no partial output behind.
    if let Err(e) = blis_cosim::interrupt::install() {
        eprintln!("blis-cosim-profile: error: cannot handle interruption signals: {e}");
        return ExitCode::FAILURE;
    }
    match Settings::from_env().and_then(|settings| profile(cli.run, &settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blis-cosim-profile: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the main job of `args` under the sampler (as many times as `settings` says), then
/// prints its summary and where the CPU time went.
fn profile(args: blis_cosim::cli::RunArgs, settings: &Settings) -> anyhow::Result<()> {
    let options = args.into_options()?;
    options.check_paths()?;
    let config = blis_cosim::setup::resolve(options)?;
    let guard = pprof::ProfilerGuardBuilder::default()
        .frequency(settings.rate)
        .build()?;
    let (wall, cpu) = (std::time::Instant::now(), process_cpu_secs());
    let mut summary = blis_cosim::runner::run(&config)?;
    for _ in 1..settings.runs {
        summary = blis_cosim::runner::run(&config)?;
    }
    let spent = table::Spent {
        wall_secs: wall.elapsed().as_secs_f64(),
        cpu_secs: process_cpu_secs() - cpu,
        runs: settings.runs,
        rate: settings.rate,
    };
    let report = guard.report().build()?;
    drop(guard);
    print!("{}", summary.render());
    let samples = table::Samples::of(&report);
    if let Some(path) = &settings.stacks {
        std::fs::write(path, samples.folded())
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    eprint!("{}", samples.render(settings.top, &spent));
    Ok(())
}

/// CPU time the process has used, all threads, in seconds.
fn process_cpu_secs() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to write; the clock always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}
