//! The flag reference of the user guide (`docs/src/flags-reference.md`) is the binary's own
//! `--help` of every command: one source of truth. When a flag changes, regenerate the page
//! with `BLIS_COSIM_BLESS_DOCS=1 cargo test --release --test cli docs_flags::`.

use crate::binary;

use std::path::Path;

/// The commands whose help the reference holds, as their argument lists.
const COMMANDS: &[&[&str]] = &[
    &[],
    &["validate"],
    &["calibrate"],
    &["generate"],
    &["scenarios"],
    &["sweep"],
    &["et", "dump"],
];

/// The reference page as the binary describes itself now.
fn reference() -> String {
    let mut page = String::from(
        "# Flag reference\n\n\
         Generated from the binary's `--help` (the test `tests/cli/docs_flags.rs` fails when this \
         page and the flags differ; `BLIS_COSIM_BLESS_DOCS=1 cargo test --release --test \
         cli docs_flags::` rewrites it).\n",
    );
    for command in COMMANDS {
        let mut args: Vec<&str> = command.to_vec();
        args.push("--help");
        let out = binary::ok(&args);
        let title = if command.is_empty() {
            "blis-cosim".to_owned()
        } else {
            format!("blis-cosim {}", command.join(" "))
        };
        page.push_str(&format!("\n## `{title}`\n\n```text\n"));
        page.push_str(String::from_utf8(out.stdout).unwrap().trim_end());
        page.push_str("\n```\n");
    }
    page
}

#[test]
fn the_flag_reference_is_the_binarys_help() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/src/flags-reference.md");
    let expected = reference();
    if std::env::var_os("BLIS_COSIM_BLESS_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap();
    }
    let written = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        written == expected,
        "{} differs from the binary's --help; regenerate it with \
         BLIS_COSIM_BLESS_DOCS=1 cargo test --release --test cli docs_flags::",
        path.display()
    );
}
