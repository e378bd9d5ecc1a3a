//! `blis-cosim`: parse flags, run, map errors to exit codes.

use blis_cosim::cli::{Cli, Command, MainFlags, RunArgs};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    blis_cosim::logging::init(cli.run.log_level);
    if let Err(e) = blis_cosim::interrupt::install() {
        eprintln!("blis-cosim: error: cannot handle interruption signals: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        None => main_job(cli.run),
        Some(Command::Validate(args)) => blis_cosim::cli::validate(&args),
        Some(Command::Et(command)) => blis_cosim::cli::et(&command),
        Some(Command::Generate(args)) => blis_cosim::cli::generate(&args),
        Some(Command::Sweep(args)) => {
            blis_cosim::sweep::main(&args.into(), &MainFlags, &blis_cosim::runner::run)
        }
        Some(Command::Scenarios) => {
            blis_cosim::cli::list_scenarios();
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let mut shown = err.to_string();
            eprintln!("blis-cosim: error: {shown}");
            for cause in err.chain().skip(1) {
                // Messages that embed their cause (`latency backend: <cause>`) already said it.
                let text = cause.to_string();
                if !shown.contains(&text) {
                    eprintln!("  caused by: {text}");
                }
                shown = text;
            }
            ExitCode::FAILURE
        }
    }
}

/// The main job: the options the flags give, their paths checked before any work, resolved,
/// run; the summary goes to stdout, or to stderr when an output is written to stdout (`-`).
fn main_job(args: RunArgs) -> anyhow::Result<()> {
    let options = args.into_options()?;
    let summary_to_stderr = blis_cosim::paths::writes_stdout(&options.paths());
    options.check_paths()?;
    let config = blis_cosim::setup::resolve(options)?;
    let summary = blis_cosim::runner::run(&config)?;
    if summary_to_stderr {
        eprint!("{}", summary.render());
    } else {
        print!("{}", summary.render());
    }
    Ok(())
}
