//! `blis-cosim`: parse flags, run, map errors to exit codes.

use blis_cosim::cli::{Command, MainFlags, RunArgs};
use blis_cosim::paths::{CommandPath, Role};
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = blis_cosim::cli::short_help::parse();
    blis_cosim::logging::init(cli.run.log_level);
    if let Err(e) = blis_cosim::interrupt::install() {
        eprintln!("blis-cosim: error: cannot handle interruption signals: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        None => main_job(cli.run),
        Some(Command::Validate(args)) => {
            Failure::hinted(blis_cosim::cli::validate(&args), &args.paths())
        }
        Some(Command::Calibrate(args)) => blis_cosim::cli::calibrate(args).map_err(Failure::from),
        Some(Command::Et(command)) => blis_cosim::cli::et(&command).map_err(Failure::from),
        Some(Command::Generate(args)) => {
            Failure::hinted(blis_cosim::cli::generate(&args), &args.paths())
        }
        Some(Command::Sweep(args)) => Failure::hinted(sweep(&args), &args.paths()),
        Some(Command::Scenarios) => {
            blis_cosim::cli::list_scenarios();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            failure.print();
            ExitCode::FAILURE
        }
    }
}

/// An error, and the hints of files that look given to the wrong flag.
struct Failure {
    error: anyhow::Error,
    hints: Vec<String>,
}

impl From<anyhow::Error> for Failure {
    fn from(error: anyhow::Error) -> Failure {
        Failure {
            error,
            hints: Vec::new(),
        }
    }
}

impl Failure {
    /// `result`, its error with the hints of the command's input `paths`.
    fn hinted(result: anyhow::Result<()>, paths: &[CommandPath<'_>]) -> Result<(), Failure> {
        result.map_err(|error| Failure {
            error,
            hints: hints(&inputs(paths)),
        })
    }

    fn print(&self) {
        let mut shown = self.error.to_string();
        eprintln!("blis-cosim: error: {shown}");
        for cause in self.error.chain().skip(1) {
            // Messages that embed their cause (`latency backend: <cause>`) already said it.
            let text = cause.to_string();
            if !shown.contains(&text) {
                eprintln!("  caused by: {text}");
            }
            shown = text;
        }
        for hint in &self.hints {
            eprintln!("  hint: {hint}");
        }
    }
}

/// The files a command reads, with their flags.
fn inputs(paths: &[CommandPath<'_>]) -> Vec<(String, PathBuf)> {
    paths
        .iter()
        .filter(|p| p.role == Role::Input)
        .map(|p| (p.flag.to_owned(), p.path.to_path_buf()))
        .collect()
}

fn hints(inputs: &[(String, PathBuf)]) -> Vec<String> {
    let borrowed: Vec<(&str, &std::path::Path)> = inputs
        .iter()
        .map(|(f, p)| (f.as_str(), p.as_path()))
        .collect();
    blis_cosim::cli::mixups::hints(&borrowed)
}

/// The main job: the options the flags give, their paths checked before any work, resolved,
/// run; the summary goes to stdout, or to stderr when an output is written to stdout (`-`).
fn main_job(args: RunArgs) -> Result<(), Failure> {
    let options = args.into_options().map_err(anyhow::Error::from)?;
    let paths = options.paths();
    let summary_to_stderr = blis_cosim::paths::writes_stdout(&paths);
    options.check_paths()?;
    let inputs = inputs(&paths);
    let run = || -> anyhow::Result<()> {
        let config = blis_cosim::setup::resolve(options)?;
        let summary = blis_cosim::runner::run(&config)?;
        if summary_to_stderr {
            eprint!("{}", summary.render());
        } else {
            print!("{}", summary.render());
        }
        Ok(())
    };
    run().map_err(|error| Failure {
        error,
        hints: hints(&inputs),
    })
}

/// `blis-cosim sweep`: its paths checked before any point runs.
fn sweep(args: &blis_cosim::cli::SweepArgs) -> anyhow::Result<()> {
    blis_cosim::paths::check(&args.paths())?;
    let options = args.clone().into();
    blis_cosim::sweep::main(&options, &MainFlags, &blis_cosim::runner::run)
}
