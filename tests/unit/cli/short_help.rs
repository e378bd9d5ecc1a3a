//! Unit tests of `blis_cosim::cli::short_help`.

use blis_cosim::cli::short_help::{FIRST_RUN, command, explain_negative};

fn error_of(args: &[&str]) -> String {
    let mut argv = vec!["blis-cosim", "--scenario", "mixed-slo"];
    argv.extend(args);
    let e = command().try_get_matches_from(argv).unwrap_err();
    explain_negative(e).to_string()
}

#[test]
fn a_negative_count_is_named_as_negative() {
    let e = error_of(&["--max-num-seqs", "-5"]);
    assert!(
        e.contains("'-5' for '--max-num-seqs <N>': the value cannot be negative"),
        "{e}"
    );
    assert!(!e.contains("unexpected argument"), "{e}");
    let e = error_of(&["--emit-et-limit", "-2"]);
    assert!(e.contains("cannot be negative"), "{e}");
    // A flag with a range keeps its range; a flag taking negative numbers takes them.
    let e = error_of(&["--tp", "-1"]);
    assert!(e.contains("1..=1024"), "{e}");
    let matches = command().try_get_matches_from([
        "blis-cosim",
        "generate",
        "--scenario",
        "mixed-slo",
        "--output",
        "x",
        "--seed",
        "-3",
    ]);
    assert!(matches.is_ok(), "{matches:?}");
}

#[test]
fn every_first_run_flag_exists_and_short_help_is_short() {
    let cmd = command();
    for id in FIRST_RUN {
        assert!(
            cmd.get_arguments().any(|a| a.get_id() == id),
            "no flag {id}"
        );
    }
    let short = command().render_help().to_string();
    let long = command().render_long_help().to_string();
    assert!(short.lines().count() < 80, "{short}");
    assert!(short.contains("--dataset") && short.contains("`blis-cosim --help`"));
    assert!(!short.contains("--admission-policy"), "{short}");
    assert!(long.contains("--admission-policy"));
    for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
        let long_flag = format!("--{}", arg.get_long().unwrap_or_default());
        assert!(long.contains(&long_flag), "{long_flag} missing from --help");
    }
}
