//! The printed outputs of the README and the guide are what the binary prints now: every
//! fenced block marked as an example is run and compared, so a change that moves a number
//! fails here until the pages are regenerated (`scripts/regen_docs.sh`, which sets
//! `BLIS_COSIM_BLESS_DOCS=1` for this module and `docs_flags`).
//!
//! A marked block is preceded by an HTML comment, invisible in the rendered guide:
//!
//! ```text
//! <!-- example -->                       the block's leading `$ ` lines are the command
//! <!-- example: COMMAND -->              the command, the block all output
//! <!-- example
//! run: COMMAND                           (the command, when the block does not show it)
//! needs: traces                          (a data set of the shared data root)
//! file: target/x/plot.svg = plot.svg     (a file it writes, compared with the page's own)
//! -->
//! ```
//!
//! Commands run in bash (with `pipefail`) in a fresh folder holding links to the
//! repository's top-level entries (so `examples/...` resolves and outputs land in the
//! folder), with the binary under test first on `PATH`, `$DATA` the shared data root, and
//! `section NAME`, a filter keeping the summary's section headed `= NAME =` (up to the next
//! line starting with `=`). Lines are compared without trailing spaces.

use crate::shared_data;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to rewrite the blocks (and the files they name) from what the commands print.
const BLESS: &str = "BLIS_COSIM_BLESS_DOCS";

/// Whether data set `set` (a folder of the shared data root) is there; else a recorded skip
/// of this example (or, under `BLIS_COSIM_REQUIRE_DATA`, a failure).
fn have_data(set: &str, what: &str) -> bool {
    let dir = shared_data::data_root().join(set);
    if dir.is_dir() {
        return true;
    }
    assert!(
        std::env::var_os(shared_data::REQUIRE_ENV).is_none(),
        "{what}: no {} and {} is set",
        dir.display(),
        shared_data::REQUIRE_ENV
    );
    let reason = match set {
        "traces" => "no traces",
        "llmservingsim" => "no LLMServingSim data",
        "frontier" => "no Frontier data",
        _ => panic!("{what}: unknown data set `{set}`"),
    };
    shared_data::skip_part(reason, &format!("{what}: expected {}", dir.display()));
    false
}

/// Defined for every command: keeps one section of a console summary.
const SECTION: &str = r#"section() { awk -v name="= $1 =" 'index($0, name) { on = 1; print; next } on && /^=/ { exit } on { print }'; }
"#;

/// One marked block.
#[derive(Debug, Clone)]
struct Example {
    /// The page, relative to the repository.
    page: String,
    /// 1-based line of the block's opening fence.
    fence_line: usize,
    /// The command.
    run: String,
    /// Data sets of the shared root it needs.
    needs: Vec<String>,
    /// Files it writes (relative to its folder) and the page files they must equal.
    files: Vec<(String, String)>,
    /// Lines of the block that show the command (`$ ...` and its continuations), kept.
    command_lines: Vec<String>,
    /// Index range, in the page's lines, of the block's content.
    content: std::ops::Range<usize>,
    /// The output the block shows.
    shown: String,
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README and every page of the guide, except the generated flag reference.
fn pages() -> Vec<String> {
    let mut pages = vec!["README.md".to_owned()];
    let mut guide: Vec<String> = std::fs::read_dir(repo().join("docs/src"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "flags-reference.md")
        .map(|n| format!("docs/src/{n}"))
        .collect();
    guide.sort();
    pages.extend(guide);
    pages
}

/// The marker's settings: the comment's lines after `<!-- example`.
fn parse_marker(
    page: &str,
    line: usize,
    text: &str,
) -> (Option<String>, Vec<String>, Vec<(String, String)>) {
    let mut run = None;
    let mut needs = Vec::new();
    let mut files = Vec::new();
    let body = text
        .trim_start_matches("<!-- example")
        .trim_end_matches("-->")
        .trim();
    if let Some(command) = body.strip_prefix(':') {
        return (Some(command.trim().to_owned()), needs, files);
    }
    for setting in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (key, value) = setting
            .split_once(':')
            .unwrap_or_else(|| panic!("{page}:{line}: `{setting}` is not `key: value`"));
        let value = value.trim().to_owned();
        match key {
            "run" => run = Some(value),
            "needs" => needs.extend(value.split(',').map(|s| s.trim().to_owned())),
            "file" => {
                let (made, kept) = value
                    .split_once(" = ")
                    .unwrap_or_else(|| panic!("{page}:{line}: file: wants `made = kept`"));
                files.push((made.trim().to_owned(), kept.trim().to_owned()));
            }
            _ => panic!("{page}:{line}: unknown example setting `{key}`"),
        }
    }
    (run, needs, files)
}

/// The `$ ` lines opening a block (with their `\` continuations) and the command they make.
fn shown_command(content: &[&str]) -> (Vec<String>, String) {
    let mut lines = Vec::new();
    let mut command = String::new();
    let mut continued = false;
    for line in content {
        if !continued && !line.starts_with("$ ") {
            break;
        }
        let text = if continued { line } else { &line[2..] };
        command.push_str(text);
        command.push('\n');
        lines.push((*line).to_owned());
        continued = line.trim_end().ends_with('\\');
    }
    (lines, command)
}

/// The marked blocks of one page.
fn examples_of(page: &str) -> Vec<Example> {
    let text = std::fs::read_to_string(repo().join(page)).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut examples = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].trim_start().starts_with("<!-- example") {
            i += 1;
            continue;
        }
        let start = i;
        while !lines[i].trim_end().ends_with("-->") {
            i += 1;
        }
        let marker = lines[start..=i].join("\n");
        let (run, needs, files) = parse_marker(page, start + 1, marker.trim());
        let fence = i + 1;
        assert!(
            lines.get(fence).is_some_and(|l| l.starts_with("```")),
            "{page}:{}: an example marker must be followed by a fenced block",
            start + 1
        );
        let end = (fence + 1..lines.len())
            .find(|&j| lines[j].starts_with("```"))
            .unwrap_or_else(|| panic!("{page}:{}: unclosed block", fence + 1));
        let (command_lines, command) = match run {
            Some(run) => (Vec::new(), run),
            None => shown_command(&lines[fence + 1..end]),
        };
        assert!(
            !command.trim().is_empty(),
            "{page}:{}: an example needs `run:` or `$ ` lines",
            fence + 1
        );
        let shown = lines[fence + 1 + command_lines.len()..end].join("\n");
        examples.push(Example {
            page: page.to_owned(),
            fence_line: fence + 1,
            run: command,
            needs,
            files,
            command_lines,
            content: fence + 1..end,
            shown,
        });
        i = end + 1;
    }
    examples
}

/// Lines without trailing spaces, no trailing blank lines.
fn normalised(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    lines.join("\n").trim_end_matches('\n').to_owned()
}

/// A fresh folder linking the repository's top-level entries (not `target`, not hidden).
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(repo()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        let name_text = name.to_string_lossy();
        if name_text == "target" || name_text.starts_with('.') {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), dir.path().join(&name)).unwrap();
    }
    dir
}

/// What an example printed, and the files it wrote that its page keeps (path, bytes).
type Printed = (String, Vec<(PathBuf, Vec<u8>)>);

/// What the example prints now, and the files it wrote that the page keeps.
fn run(example: &Example) -> Printed {
    let work = workspace();
    let bin = Path::new(env!("CARGO_BIN_EXE_blis-cosim"))
        .parent()
        .unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let out = Command::new("bash")
        .args(["-o", "pipefail", "-c", &format!("{SECTION}{}", example.run)])
        .current_dir(work.path())
        .env("PATH", path)
        .env("DATA", shared_data::data_root())
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}:{}: `{}` failed: {}",
        example.page,
        example.fence_line,
        example.run.trim(),
        String::from_utf8_lossy(&out.stderr)
    );
    let files = example
        .files
        .iter()
        .map(|(made, kept)| {
            let bytes = std::fs::read(work.path().join(made))
                .unwrap_or_else(|e| panic!("{}: {made}: {e}", example.page));
            let page_dir = repo().join(&example.page);
            (page_dir.parent().unwrap().join(kept), bytes)
        })
        .collect();
    (String::from_utf8(out.stdout).unwrap(), files)
}

/// Rewrites the page's blocks with the outputs now printed.
fn bless(page: &str, outputs: &[(&Example, String)]) {
    let path = repo().join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for (example, printed) in outputs.iter().rev() {
        let mut content = example.command_lines.clone();
        content.extend(normalised(printed).lines().map(str::to_owned));
        lines.splice(example.content.clone(), content);
    }
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

/// The first line where two texts differ, for the failure message.
fn first_difference(shown: &str, printed: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (shown.lines().collect(), printed.lines().collect());
    let at = (0..a.len().max(b.len()))
        .find(|&i| a.get(i) != b.get(i))
        .unwrap_or(0);
    format!(
        "block line {}: shown `{}`, printed `{}`",
        at + 1,
        a.get(at).unwrap_or(&"(nothing)"),
        b.get(at).unwrap_or(&"(nothing)")
    )
}

#[test]
fn every_example_block_prints_what_the_binary_prints() {
    let blessing = std::env::var_os(BLESS).is_some();
    let mut stale = Vec::new();
    let mut checked = 0;
    let mut cache: BTreeMap<String, Printed> = BTreeMap::new();
    for page in pages() {
        let examples = examples_of(&page);
        let mut outputs = Vec::new();
        for example in &examples {
            let what = format!("{page}:{}", example.fence_line);
            if !example.needs.iter().all(|set| have_data(set, &what)) {
                continue;
            }
            let (printed, files) = cache
                .entry(example.run.clone())
                .or_insert_with(|| run(example))
                .clone();
            checked += 1;
            let printed = normalised(&printed);
            if printed != normalised(&example.shown) {
                let diff = first_difference(&normalised(&example.shown), &printed);
                stale.push(format!("{page}:{}: {diff}", example.fence_line));
            }
            for (kept, bytes) in &files {
                if std::fs::read(kept).ok().as_deref() != Some(bytes.as_slice()) {
                    if blessing {
                        std::fs::write(kept, bytes).unwrap();
                    }
                    stale.push(format!("{page}: {} differs", kept.display()));
                }
            }
            outputs.push((example, printed));
        }
        if blessing && !outputs.is_empty() {
            bless(&page, &outputs);
        }
    }
    assert!(checked > 0, "no example blocks found");
    assert!(
        blessing || stale.is_empty(),
        "example blocks differ from what the binary prints; regenerate them with \
         scripts/regen_docs.sh and review the diff:\n{}",
        stale.join("\n")
    );
}
