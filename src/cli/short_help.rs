//! The command line as the binary parses it: `-h` shows the flags a first run needs, under
//! their usual headings, and `--help` every flag; a negative number given to a flag that
//! takes none is named as such (not taken for an unknown flag).

use super::Cli;
use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, CommandFactory, FromArgMatches};

/// The main command's flags `-h` shows (clap ids): a workload, a deployment, the scheduler's
/// two main limits, a policy bundle and the outputs.
pub const FIRST_RUN: [&str; 16] = [
    "dataset",
    "workload_spec",
    "scenario",
    "num_reqs",
    "cluster_config",
    "model",
    "hardware",
    "tp",
    "seed",
    "max_num_seqs",
    "max_num_batched_tokens",
    "policy_config",
    "output",
    "summary_json",
    "plots",
    "slo_ttft",
];

const SHORT_FOOTER: &str = "These are the flags of a first run. `blis-cosim --help` lists every \
flag with its details, and the guide's flag reference (docs/src/flags-reference.md) is the same \
list on one page.";

const LONG_FOOTER: &str = "The user guide (docs/, `mdbook build docs`) explains each \
command with worked examples.";

/// The command line: every flag in `--help`, those of [`FIRST_RUN`] in `-h`; a flag's value
/// may be a negative number (`--max-num-seqs -5` reaches the flag's own check).
pub fn command() -> clap::Command {
    let negative_values = |arg: Arg| {
        let takes_value = arg.get_action().takes_values();
        arg.allow_negative_numbers(takes_value)
    };
    Cli::command()
        .mut_args(|arg: Arg| {
            let first_run = FIRST_RUN.contains(&arg.get_id().as_str());
            negative_values(arg.hide_short_help(!first_run))
        })
        .mut_subcommands(move |sub| sub.mut_args(negative_values))
        .after_help(SHORT_FOOTER)
        .after_long_help(LONG_FOOTER)
}

/// Parses the process's arguments with [`command`]; exits with the error on a bad one.
pub fn parse() -> Cli {
    let matches = command()
        .try_get_matches()
        .unwrap_or_else(|e| explain_negative(e).exit());
    Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
}

/// A negative number refused by a flag of whole numbers says that the value cannot be
/// negative (clap's own words are `invalid digit found in string` or a range).
pub fn explain_negative(error: clap::Error) -> clap::Error {
    if error.kind() != ErrorKind::ValueValidation {
        return error;
    }
    let (Some(ContextValue::String(arg)), Some(ContextValue::String(value))) = (
        error.get(ContextKind::InvalidArg),
        error.get(ContextKind::InvalidValue),
    ) else {
        return error;
    };
    let negative = value.parse::<f64>().is_ok_and(|v| v < 0.0);
    let text = error.to_string();
    if !negative || !(text.contains("invalid digit") || text.contains("is not in 0..")) {
        return error;
    }
    let message = format!(
        "invalid value '{value}' for '{arg}': the value cannot be negative (a whole number, 0 \
         or more)"
    );
    command().error(ErrorKind::ValueValidation, message)
}
