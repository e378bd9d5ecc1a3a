//! `blis-cosim`: parse flags, run, map errors to exit codes.

use blis_cosim::cli::Cli;
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    blis_cosim::logging::init(cli.log_level);
    let result = cli
        .into_config()
        .map_err(anyhow::Error::from)
        .and_then(|config| blis_cosim::runner::run(&config));
    match result {
        Ok(summary) => {
            print!("{}", summary.render());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("blis-cosim: error: {err}");
            for cause in err.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
