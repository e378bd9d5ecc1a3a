//! `blis-cosim`: parse flags, run, map errors to exit codes.

use blis_cosim::cli::{Cli, Command};
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
        None => {
            let paths = cli.run.paths();
            // An output sent to standard output (`-`) owns it; the summary goes to stderr.
            let summary_to_stderr = blis_cosim::paths::writes_stdout(&paths);
            blis_cosim::paths::check(&paths)
                .and_then(|()| cli.run.into_config().map_err(anyhow::Error::from))
                .and_then(|config| blis_cosim::runner::run(&config))
                .map(|summary| {
                    if summary_to_stderr {
                        eprint!("{}", summary.render());
                    } else {
                        print!("{}", summary.render());
                    }
                })
        }
        Some(Command::Validate(args)) => blis_cosim::runner::validate(&args),
        Some(Command::Et(command)) => blis_cosim::runner::et(&command),
        Some(Command::Generate(args)) => blis_cosim::runner::generate(&args),
        Some(Command::Sweep(args)) => blis_cosim::sweep::main(&args),
        Some(Command::Scenarios) => {
            blis_cosim::runner::list_scenarios();
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
