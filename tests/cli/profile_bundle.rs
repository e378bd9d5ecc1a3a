//! Damaged profile bundles through the real binary (issue 19, finding 6), each a temporary
//! copy of one of LLMServingSim's bundles, mutated: a `meta.yaml` path leading out of the
//! bundle, files that are not regular files (a link to `/dev/zero`, a FIFO), a `meta.yaml`
//! that does not list the TP degree used, is empty or lacks a key, names another
//! architecture or a malformed checksum, times that are zero, negative or not finite, and
//! tables without the grid shapes the lookups need are refused naming the file and the line,
//! column or field; a different checksum, model or hardware and garbled skew labels are
//! warned about. A run whose limits exceed a bundle's profiled range works, and says so once.

use crate::binary;

use binary::{run, shared_data};
use std::path::{Path, PathBuf};

const BUNDLE: &str = "RTX4090/meta-llama/Llama-3.1-8B/bf16";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A copy of the RTX4090 Llama-3.1-8B bundle under `<dir>/perf`; returns the copy's folder.
fn bundle_copy(dir: &Path) -> PathBuf {
    copy_of(dir, BUNDLE)
}

/// A copy of `bundle`'s `meta.yaml` and `tp1/` under `<dir>/perf`; returns the copy's folder.
fn copy_of(dir: &Path, bundle: &str) -> PathBuf {
    let ours = dir.join("perf").join(bundle);
    std::fs::create_dir_all(ours.join("tp1")).unwrap();
    let theirs = shared_data::shared_path("profiler/perf").join(bundle);
    std::fs::copy(theirs.join("meta.yaml"), ours.join("meta.yaml")).unwrap();
    for entry in std::fs::read_dir(theirs.join("tp1")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), ours.join("tp1").join(entry.file_name())).unwrap();
    }
    ours
}

/// Runs one request on the bundle copy; expects failure and returns stderr.
fn refused(dir: &Path) -> String {
    let (code, err) = attempt(dir);
    assert_eq!(code, Some(1), "{err}");
    err
}

/// Replaces `old` by `new` in the copy's `meta.yaml`.
fn edit_meta(bundle: &Path, old: &str, new: &str) {
    let path = bundle.join("meta.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(old));
    std::fs::write(&path, text.replace(old, new)).unwrap();
}

#[test]
fn a_skew_table_path_leaving_the_bundle_is_refused() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_copy(dir.path());
    let escape = "../../../../../../../../../../etc/passwd";
    edit_meta(
        &bundle,
        "skew_fit:\n  enabled: false",
        &format!("skew_fit:\n  enabled: true\n  per_tp:\n    1:\n      bucket_table: {escape}"),
    );
    let err = refused(dir.path());
    assert!(
        err.contains(&format!(
            "meta.yaml: skew_fit.per_tp.1.bucket_table: `{escape}` must be a relative path \
             inside the bundle"
        )),
        "{err}"
    );
    assert!(!err.contains("root:"), "{err}");
}

#[test]
fn profile_files_that_are_not_regular_files_are_refused() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_copy(dir.path());
    let attention = bundle.join("tp1/attention.csv");
    std::fs::remove_file(&attention).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &attention).unwrap();
    let err = refused(dir.path());
    assert!(err.contains("attention.csv: not a regular file"), "{err}");
    std::fs::remove_file(&attention).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&attention)
        .status()
        .unwrap();
    assert!(made.success());
    let err = refused(dir.path());
    assert!(err.contains("attention.csv: not a regular file"), "{err}");
}

#[test]
fn a_meta_yaml_not_listing_the_tp_degree_is_refused() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_copy(dir.path());
    edit_meta(&bundle, "tp_degrees: [1]", "tp_degrees: [2, 4]");
    let err = refused(dir.path());
    assert!(
        err.contains("meta.yaml: tp_degrees: [2, 4] does not list tp 1, whose tp1/ folder is used"),
        "{err}"
    );
}

#[test]
fn skew_buckets_with_labels_the_axes_lack_are_warned_about() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = "RTXPRO6000/meta-llama/Llama-3.1-8B/bf16";
    let ours = dir.path().join("perf").join(bundle);
    std::fs::create_dir_all(ours.join("tp1")).unwrap();
    let theirs = shared_data::shared_path("profiler/perf").join(bundle);
    std::fs::copy(theirs.join("meta.yaml"), ours.join("meta.yaml")).unwrap();
    for entry in std::fs::read_dir(theirs.join("tp1")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), ours.join("tp1").join(entry.file_name())).unwrap();
    }
    let table = ours.join("tp1/skew_fit.csv");
    let text = std::fs::read_to_string(&table).unwrap();
    let w = dir.path().join("w.jsonl");
    std::fs::write(
        &w,
        "{\"input_toks\":30,\"output_toks\":4,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    let perf = dir.path().join("perf");
    let args = [
        "--dataset",
        s(&w),
        "--profile-dir",
        s(&perf),
        "--hardware",
        "RTXPRO6000",
    ];
    let stderr = |args: &[&str]| String::from_utf8(binary::ok(args).stderr).unwrap();
    assert!(!stderr(&args).contains("skew fit"));
    // Two rows' labels garbled: their alphas could never apply.
    let garbled = text
        .replacen("0,n<=128,sr<=15%", "0,n<=1e9,sr<=15%", 1)
        .replacen(",kvB<=1k,", ",kvB<=?,", 1);
    std::fs::write(&table, garbled).unwrap();
    let err = stderr(&args);
    assert!(
        err.contains("meta.yaml: skew fit for tp 1: 2 of 3982 bucket keys name labels not in its bucket axes and are never used"),
        "{err}"
    );
}

/// Runs one request on the RTX4090 bundle copy under `dir`: `(exit code, stderr)`.
/// Runs one request on the bundle copy; returns the exit code and stderr.
fn attempt(dir: &Path) -> (Option<i32>, String) {
    let w = dir.join("w.jsonl");
    std::fs::write(
        &w,
        "{\"input_toks\":30,\"output_toks\":4,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    let (perf, out) = (dir.join("perf"), dir.join("out.csv"));
    let args = [
        "--dataset",
        s(&w),
        "--profile-dir",
        s(&perf),
        "--hardware",
        "RTX4090",
        "--output",
        s(&out),
    ];
    let run = run(&args);
    (run.status.code(), String::from_utf8(run.stderr).unwrap())
}

/// Sets the last field (`time_us`) of 1-based `line` of `file` to `value`, keeping the
/// file's CRLF line ends.
fn set_time(file: &Path, line: usize, value: &str) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let row = &mut lines[line - 1];
    let cut = row.rfind(',').unwrap();
    let end = if row.ends_with('\r') { "\r" } else { "" };
    *row = format!("{},{value}{end}", &row[..cut]);
    std::fs::write(file, lines.join("\n")).unwrap();
}

#[test]
fn times_that_are_zero_negative_or_not_finite_are_refused_naming_file_line_and_column() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_copy(dir.path());
    // LLMServingSim writes CRLF files: the named line must be the file's own line.
    assert!(
        std::fs::read_to_string(bundle.join("tp1/dense.csv"))
            .unwrap()
            .contains("\r\n")
    );
    let cases = [
        ("dense.csv", 3, "0", "time 0 µs is outside (0, 1e9] µs"),
        (
            "dense.csv",
            700,
            "-2.5",
            "time -2.5 µs is outside (0, 1e9] µs",
        ),
        ("attention.csv", 2, "nan", "`nan` is not a finite number"),
        (
            "attention.csv",
            5000,
            "-0",
            "time -0 µs is outside (0, 1e9] µs",
        ),
        (
            "per_sequence.csv",
            41,
            "inf",
            "`inf` is not a finite number",
        ),
        (
            "per_sequence.csv",
            42,
            "1e30",
            "time 1e30 µs is outside (0, 1e9] µs",
        ),
    ];
    for (file, line, value, why) in cases {
        let path = bundle.join("tp1").join(file);
        let original = std::fs::read(&path).unwrap();
        set_time(&path, line, value);
        let (code, err) = attempt(dir.path());
        assert_eq!(code, Some(1), "{file} {value}: {err}");
        let named = format!("{}, line {line}, column `time_us`: {why}", path.display());
        assert!(err.contains(&named), "{named}\n{err}");
        std::fs::write(&path, original).unwrap();
    }
    let (code, err) = attempt(dir.path());
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn an_empty_meta_yaml_or_one_without_a_required_key_is_refused_naming_it() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_copy(dir.path());
    let meta = bundle.join("meta.yaml");
    let original = std::fs::read_to_string(&meta).unwrap();
    std::fs::write(&meta, "").unwrap();
    assert!(refused(dir.path()).contains(
        "meta.yaml: (file): empty: a bundle's meta.yaml records model, architecture, \
             tp_degrees and engine_effective"
    ));
    let keys = [
        ("model: meta-llama/Llama-3.1-8B\n", "model"),
        ("architecture: llama\n", "architecture"),
        ("tp_degrees: [1]\n", "tp_degrees"),
        (
            "  max_num_batched_tokens: 2048\n",
            "engine_effective.max_num_batched_tokens",
        ),
        ("  max_num_seqs: 256\n", "engine_effective.max_num_seqs"),
    ];
    for (line, field) in keys {
        assert!(original.contains(line), "{line}");
        std::fs::write(&meta, original.replacen(line, "", 1)).unwrap();
        let err = refused(dir.path());
        assert!(
            err.contains(&format!("meta.yaml: {field}: missing")),
            "{err}"
        );
    }
    std::fs::write(
        &meta,
        original.replace("max_num_seqs: 256", "max_num_seqs: 0"),
    )
    .unwrap();
    let err = refused(dir.path());
    assert!(
        err.contains("meta.yaml: engine_effective.max_num_seqs: 0: must be at least 1"),
        "{err}"
    );
}

#[test]
fn another_architecture_is_refused_and_a_different_checksum_model_or_hardware_warned_about() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_copy(dir.path());
    let sha = "19d708000ec8a89edf1ca12dd388235b2cfe59007aaec6ea48702fb856ff2cfb";
    let (code, err) = attempt(dir.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("WARN"), "{err}");

    edit_meta(&bundle, "architecture: llama\n", "architecture: qwen3\n");
    let err = refused(dir.path());
    assert!(
        err.contains(
            "meta.yaml: architecture: the bundle was profiled for `qwen3`, but the model's \
             model_type is `llama`"
        ),
        "{err}"
    );
    edit_meta(&bundle, "architecture: qwen3\n", "architecture: llama\n");

    edit_meta(&bundle, sha, "not-a-checksum");
    let err = refused(dir.path());
    assert!(
        err.contains("meta.yaml: architecture_sha256: `not-a-checksum` is not a SHA-256"),
        "{err}"
    );
    let other = "0".repeat(64);
    edit_meta(&bundle, "not-a-checksum", &other);
    edit_meta(
        &bundle,
        "model: meta-llama/Llama-3.1-8B\n",
        "model: other/Model\n",
    );
    edit_meta(&bundle, "hardware: RTX4090\n", "hardware: H100\n");
    let (code, err) = attempt(dir.path());
    assert_eq!(code, Some(0), "{err}");
    for warning in [
        format!("meta.yaml: architecture_sha256 {other} is not the SHA-256 of the `llama` layer file in use"),
        "meta.yaml: model: the bundle profiled `other/Model`, not this run's `meta-llama/Llama-3.1-8B`".into(),
        "meta.yaml: hardware: the bundle profiled `H100`, not this run's `RTX4090`".into(),
    ] {
        assert!(err.contains(&warning), "{warning}\n{err}");
    }
}

/// Which lines of a table to keep, by 1-based number and text.
type KeepLine = dyn Fn(usize, &str) -> bool;

/// Rewrites `file` of the bundle copy's `tp1/` keeping only the lines `keep` accepts (by
/// 1-based number and text).
fn keep_lines(bundle: &Path, file: &str, keep: impl Fn(usize, &str) -> bool) {
    let path = bundle.join("tp1").join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: Vec<&str> = text
        .split_inclusive('\n')
        .enumerate()
        .filter(|(i, l)| keep(i + 1, l))
        .map(|(_, l)| l)
        .collect();
    std::fs::write(&path, kept.concat()).unwrap();
}

#[test]
fn tables_without_the_grid_shapes_the_lookups_need_are_refused_naming_what_is_missing() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = bundle_copy(dir.path());
    let tp1 = bundle.join("tp1");
    let originals: Vec<(PathBuf, Vec<u8>)> = ["attention.csv", "dense.csv", "per_sequence.csv"]
        .iter()
        .map(|f| (tp1.join(f), std::fs::read(tp1.join(f)).unwrap()))
        .collect();
    let restore = || {
        for (path, bytes) in &originals {
            std::fs::write(path, bytes).unwrap();
        }
    };
    let cases: [(&str, Box<KeepLine>, String); 5] = [
        // A one-row attention table.
        (
            "attention.csv",
            Box::new(|i, _| i <= 2),
            format!(
                "{}: the pure-decode rows (prefill_chunk 0) need at least two n_decode and two \
             kv_decode values; they have 1 and 1 (1 rows in all)",
                tp1.join("attention.csv").display()
            ),
        ),
        // No pure prefills.
        (
            "attention.csv",
            Box::new(|i, l| i == 1 || l.split(',').nth(2) != Some("0")),
            format!(
                "{}: no pure-prefill rows",
                tp1.join("attention.csv").display()
            ),
        ),
        // One token count missing for one layer (line 5 is act_fn at 4 tokens).
        (
            "dense.csv",
            Box::new(|i, _| i != 5),
            format!(
                "{}: not a full grid: layer `act_fn` lacks tokens 4 that other layers have",
                tp1.join("dense.csv").display()
            ),
        ),
        // The sampler at one sequence count fewer than lm_head.
        (
            "per_sequence.csv",
            Box::new(|_, l| !l.starts_with("sampler,256,")),
            format!(
                "{}: not a full grid: layer `sampler` lacks sequences 256 that other layers have",
                tp1.join("per_sequence.csv").display()
            ),
        ),
        // One sequence count for every layer.
        (
            "per_sequence.csv",
            Box::new(|i, l| i == 1 || l.contains(",1,")),
            format!(
                "{}: every layer has one sequences count (1)",
                tp1.join("per_sequence.csv").display()
            ),
        ),
    ];
    for (file, keep, message) in &cases {
        keep_lines(&bundle, file, keep);
        let err = refused(dir.path());
        assert!(err.contains(message.as_str()), "{message}\n{err}");
        restore();
    }
    // A decode row claiming a prefill history breaks the profiler's rules: its line is named.
    let attention = tp1.join("attention.csv");
    let text = String::from_utf8(originals[0].1.clone()).unwrap();
    std::fs::write(&attention, text.replacen("\n0,0,1,32,", "\n0,16,1,32,", 1)).unwrap();
    let err = refused(dir.path());
    let named = format!(
        "{}, line 3, column `kv_prefill`: a pure decode (prefill_chunk 0) has kv_prefill 0",
        attention.display()
    );
    assert!(err.contains(&named), "{named}\n{err}");
}

#[test]
fn a_moe_table_with_a_hole_is_refused_naming_the_row_and_the_missing_tokens() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = copy_of(
        dir.path(),
        "RTXPRO6000/Qwen/Qwen3-30B-A3B-Instruct-2507/bf16",
    );
    keep_lines(&bundle, "moe.csv", |_, l| !l.starts_with("64,32,"));
    let w = dir.path().join("w.jsonl");
    std::fs::write(
        &w,
        "{\"input_toks\":30,\"output_toks\":4,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    let perf = dir.path().join("perf");
    let out = run(&[
        "--dataset",
        s(&w),
        "--profile-dir",
        s(&perf),
        "--hardware",
        "RTXPRO6000",
        "--model",
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
    ]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let named = format!(
        "{}: not a full grid: activated_experts 32 lacks tokens 64",
        bundle.join("tp1/moe.csv").display()
    );
    assert!(err.contains(&named), "{named}\n{err}");
}

#[test]
fn skew_alphas_that_are_not_finite_or_beyond_ten_thousand_are_refused_naming_them() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let bundle = copy_of(dir.path(), "RTXPRO6000/meta-llama/Llama-3.1-8B/bf16");
    let w = dir.path().join("w.jsonl");
    std::fs::write(
        &w,
        "{\"input_toks\":30,\"output_toks\":4,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    let perf = dir.path().join("perf");
    let attempt = || {
        let out = run(&[
            "--dataset",
            s(&w),
            "--profile-dir",
            s(&perf),
            "--hardware",
            "RTXPRO6000",
        ]);
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    // The real fits reach −735: they load.
    assert_eq!(attempt().0, Some(0));
    let table = bundle.join("tp1/skew_fit.csv");
    let text = std::fs::read_to_string(&table).unwrap();
    let row = "0,n<=128,sr<=15%,kvB<=1k,kp=0,0.035,";
    assert!(text.contains(row));
    for (value, why) in [
        ("1e30", "alpha 1e30 is outside [-1e4, 1e4]"),
        ("nan", "`nan` is not a finite number"),
    ] {
        let bad = row.replace("0.035", value);
        std::fs::write(&table, text.replacen(row, &bad, 1)).unwrap();
        let (code, err) = attempt();
        assert_eq!(code, Some(1), "{err}");
        let named = format!("{}, line 3, column `alpha`: {why}", table.display());
        assert!(err.contains(&named), "{named}\n{err}");
    }
    std::fs::write(&table, text).unwrap();
    edit_meta(&bundle, "alpha_default: 0.0543", "alpha_default: -2e4");
    let (code, err) = attempt();
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("meta.yaml: skew_fit.per_tp.1.alpha_default: alpha -20000 is outside"),
        "{err}"
    );
}

/// The RTX PRO 6000 Llama bundle was profiled up to 2,048 batched tokens and 256 sequences;
/// vLLM 0.19's defaults on that GPU (a 96 GB part) are 8,192 and 1,024. A run without flags
/// works: one line on stderr says the bundle's range, that steps beyond it extrapolate, and
/// the flags that keep to it, and the summary counts the extrapolated lookups; a cluster of
/// two instances on the bundle says it once. With those flags nothing is said.
#[test]
fn a_run_beyond_the_profiled_range_works_and_says_so_once() {
    if !shared_data::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dataset = shared_data::shared_path("workloads/sharegpt-llama-3.1-8b-300-sps10.jsonl");
    let perf = shared_data::shared_path("profiler/perf");
    let out = dir.path().join("out.csv");
    let base = [
        "--dataset",
        s(&dataset),
        "--profile-dir",
        s(&perf),
        "--hardware",
        "RTXPRO6000",
        "--num-reqs",
        "100",
        "--output",
        s(&out),
    ];
    let bundle = perf.join("RTXPRO6000/meta-llama/Llama-3.1-8B/bf16");
    let note = format!(
        "blis-cosim [WARN] profile bundle {} was profiled up to 2048 batched tokens and 256 \
         sequences per step; this run allows max-num-batched-tokens 8192 and max-num-seqs 1024 \
         (vLLM's defaults for the GPU unless set), and a step beyond the profiled range is \
         priced by extending each table linearly from its last two points (counted as \
         extrapolated lookups in the summary); --max-num-batched-tokens 2048 --max-num-seqs 256 \
         keep every step within it",
        bundle.display()
    );
    let extrapolated = |stdout: &str| -> u64 {
        let line = stdout
            .lines()
            .find(|l| l.starts_with("Profile lookups / clamped / extrapolated:"))
            .unwrap_or_else(|| panic!("{stdout}"));
        line.rsplit('/').next().unwrap().trim().parse().unwrap()
    };
    let run_with = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let r = run(&args);
        let err = String::from_utf8(r.stderr).unwrap();
        assert!(r.status.success(), "{err}");
        (String::from_utf8(r.stdout).unwrap(), err)
    };
    let (stdout, err) = run_with(&[]);
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("profiled up to"))
        .collect();
    assert_eq!(lines, [note.as_str()], "{err}");
    assert!(extrapolated(&stdout) > 0, "{stdout}");
    // The same limits from a cluster of two instances on the bundle: still one line.
    let (_, err) = run_with(&["--num-instances", "2"]);
    assert_eq!(err.matches("profiled up to").count(), 1, "{err}");
    // Pinned to the profiled range: nothing to say.
    let (_, err) = run_with(&["--max-num-batched-tokens", "2048", "--max-num-seqs", "256"]);
    assert!(!err.contains("profiled up to"), "{err}");
}
