//! The library's module graph (no import circles, layering).
//!
//! The module graph of `src/`, read from the source, and the layering it must keep: no import
//! circle among the layers that turn flags into runs, nothing the engine builds on imports the
//! engine, no configuration module imports the engine, and clap stays in `cli/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level module → the top-level modules its non-test code names (`crate::x`).
type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a file holds tests only (`tests.rs`, `*_tests.rs`).
fn is_test_file(path: &Path) -> bool {
    let name = path.file_stem().unwrap().to_string_lossy();
    name == "tests" || name.ends_with("_tests")
}

/// The code of `text` without comments and without `#[cfg(test)]` items.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            skip_item(&mut lines);
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        // A trailing comment after code (not inside a string: an even number of quotes).
        let line = match line.find(" //") {
            Some(at) if line[..at].matches('"').count() % 2 == 0 => &line[..at],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Skips the item after `#[cfg(test)]`: one line ending in `;`, or a braced block.
fn skip_item<'a>(lines: &mut impl Iterator<Item = &'a str>) {
    let mut depth = 0i64;
    for line in lines {
        depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
        if depth <= 0 && (line.trim_end().ends_with(';') || line.trim_end().ends_with('}')) {
            return;
        }
    }
}

/// The top-level modules `code` names through `crate::`.
fn named_modules(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a, b::c}`: the first segment of each top-level entry.
            let mut depth = 0;
            let mut entry = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.insert(first_segment(&entry));
                        entry.clear();
                        continue;
                    }
                    _ => {}
                }
                entry.push(c);
            }
            out.insert(first_segment(&entry));
        } else {
            out.insert(first_segment(rest));
        }
    }
    // Items of the crate root (`crate::Nanos`) are no module.
    out.retain(|m| m.starts_with(|c: char| c.is_ascii_lowercase()) && m != "self");
    out
}

fn first_segment(path: &str) -> String {
    path.trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level module of a file under `src` (`cli` for `src/cli.rs` and `src/cli/x.rs`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// The graph of `src/` and the non-test files of each module.
fn graph() -> (Graph, BTreeMap<String, Vec<(PathBuf, String)>>) {
    let src = Path::new(root!()).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut graph = Graph::new();
    let mut sources: BTreeMap<String, Vec<(PathBuf, String)>> = BTreeMap::new();
    for file in files.into_iter().filter(|f| !is_test_file(f)) {
        let module = module_of(&src, &file);
        let code = code(&std::fs::read_to_string(&file).unwrap());
        let mut names = named_modules(&code);
        names.remove(&module);
        graph.entry(module.clone()).or_default().extend(names);
        sources.entry(module).or_default().push((file, code));
    }
    (graph, sources)
}

/// The modules `from` reaches through imports (not itself unless through a circle).
fn reached(graph: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<&str> = graph
        .get(from)
        .into_iter()
        .flatten()
        .map(|s| s.as_str())
        .collect();
    while let Some(m) = stack.pop() {
        if seen.insert(m.to_owned()) {
            stack.extend(graph.get(m).into_iter().flatten().map(|s| s.as_str()));
        }
    }
    seen
}

/// The layers that turn flags into runs, from the top: none may reach one above it.
const LAYERS: [&str; 9] = [
    "cli",
    "calibrate",
    "sweep",
    "runner",
    "evaluation",
    "setup",
    "engine",
    "trace",
    "config",
];

#[test]
fn the_layers_import_no_circle() {
    let (graph, _) = graph();
    for (i, upper) in LAYERS.iter().enumerate() {
        for lower in &LAYERS[i + 1..] {
            assert!(
                !reached(&graph, lower).contains(*upper),
                "{lower} reaches {upper}: an import circle ({lower} imports {:?})",
                graph[*lower]
            );
        }
    }
}

#[test]
fn nothing_below_the_engine_imports_it() {
    let (graph, _) = graph();
    let below = reached(&graph, "engine");
    let importing: BTreeSet<&str> = below
        .iter()
        .filter(|m| graph.get(*m).is_some_and(|n| n.contains("engine")))
        .map(String::as_str)
        .collect();
    assert!(
        importing.is_empty(),
        "modules the engine builds on import it: {importing:?}"
    );
    for config in ["config", "setup"] {
        assert!(
            !reached(&graph, config).contains("engine") || config == "setup",
            "{config} reaches the engine"
        );
        assert!(
            !graph[config].contains("engine"),
            "{config} imports the engine"
        );
    }
}

#[test]
fn the_sweep_and_the_runner_know_no_command_line() {
    let (graph, _) = graph();
    for m in ["calibrate", "sweep", "runner", "setup", "evaluation"] {
        assert!(!graph[m].contains("cli"), "{m} imports cli");
    }
    assert!(
        !graph["sweep"].contains("runner"),
        "the sweep is given its runner"
    );
}

#[test]
fn clap_stays_in_the_command_line() {
    let (_, sources) = graph();
    for (module, files) in &sources {
        if module == "cli" || module == "main" {
            continue;
        }
        for (file, code) in files {
            assert!(
                !code.contains("clap"),
                "{} names clap outside cli/",
                file.display()
            );
        }
    }
}

/// Whether a line of library code is test code: a `#[test]`, a `cfg` on `test`, a proptest
/// block or a test module file.
fn is_test_line(line: &str) -> bool {
    let line = line.trim_start();
    let attribute = line.starts_with("#[")
        && (line.starts_with("#[test]")
            || ["(test)", "(test,", " test)", " test,"]
                .iter()
                .any(|p| line.contains(p)));
    attribute || line.contains("cfg!(test") || line.starts_with("proptest!")
}

/// The library is built without its tests (`[lib] test = false` in `lib/Cargo.toml`), so a test
/// written in `src/` would never run: unit tests live in this harness.
#[test]
fn the_library_holds_no_tests() {
    let mut files = Vec::new();
    rust_files(&Path::new(root!()).join("src"), &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        if is_test_file(file) {
            found.push(format!("{} (a test module file)", file.display()));
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if is_test_line(line) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "test code in src/ would never run:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_test_line_is_told_from_code() {
    assert!(is_test_line("    #[test]"));
    assert!(is_test_line("#[cfg(test)]"));
    assert!(is_test_line("#[cfg(all(test, unix))]"));
    assert!(is_test_line(
        "const N: usize = if cfg!(test) { 8 } else { 64 };"
    ));
    assert!(is_test_line("proptest! {"));
    assert!(!is_test_line("#[cfg(unix)]"));
    assert!(!is_test_line("/// The latest test of the queue."));
    assert!(!is_test_line("fn test_count(&self) -> usize {"));
}

#[test]
fn the_reader_sees_imports_and_skips_tests_and_comments() {
    let text = "use crate::a::X;\n// use crate::b;\nfn f() { crate::c::g(); } // crate::d\n\
                use crate::{e, f::{G, H}};\n#[cfg(test)]\nmod tests {\n    use crate::t;\n}\n";
    let names = named_modules(&code(text));
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(names, ["a", "c", "e", "f"]);
}
