//! Damaged profile bundles through the real binary: a `meta.yaml` path leading out of the
//! bundle, files that are not regular files (a link to `/dev/zero`, a FIFO) and a `meta.yaml`
//! that does not list the TP degree used are refused naming the file and field.

#[path = "common/binary.rs"]
mod binary;

use binary::{run, shared_data};
use std::path::{Path, PathBuf};

const BUNDLE: &str = "RTX4090/meta-llama/Llama-3.1-8B/bf16";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A copy of the RTX4090 Llama-3.1-8B bundle under `<dir>/perf`; returns the copy's folder.
fn bundle_copy(dir: &Path) -> PathBuf {
    let ours = dir.join("perf").join(BUNDLE);
    std::fs::create_dir_all(ours.join("tp1")).unwrap();
    let theirs = shared_data::shared_path("profiler/perf").join(BUNDLE);
    std::fs::copy(theirs.join("meta.yaml"), ours.join("meta.yaml")).unwrap();
    for entry in std::fs::read_dir(theirs.join("tp1")).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), ours.join("tp1").join(entry.file_name())).unwrap();
    }
    ours
}

/// Runs one request on the bundle copy; expects failure and returns stderr.
fn refused(dir: &Path) -> String {
    let w = dir.join("w.jsonl");
    std::fs::write(
        &w,
        "{\"input_toks\":30,\"output_toks\":4,\"arrival_time_ns\":0}\n",
    )
    .unwrap();
    let perf = dir.join("perf");
    let out = run(&[
        "--dataset",
        s(&w),
        "--profile-dir",
        s(&perf),
        "--hardware",
        "RTX4090",
    ]);
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8(out.stderr).unwrap()
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
