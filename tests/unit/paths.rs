//! Unit tests of `blis_cosim::paths`.

use blis_cosim::paths::*;
use std::fs;
use std::path::Path;

fn output<'a>(flag: &'static str, path: &'a Path) -> CommandPath<'a> {
    CommandPath::new(flag, path, Role::Output)
}

fn refusal(paths: &[CommandPath<'_>]) -> String {
    format!("{:#}", check(paths).unwrap_err())
}

#[test]
fn a_name_ending_in_a_slash_is_refused_as_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["x/", "x/.", "."] {
        let path = dir.path().join(name);
        let err = refusal(&[output("--output", &path)]);
        assert!(
            err.contains("--output") && err.contains("names a folder"),
            "{err}"
        );
    }
}

#[test]
fn character_devices_may_take_several_outputs_standard_output_one() {
    let null = Path::new("/dev/null");
    check(&[output("--output", null), output("--summary-json", null)]).unwrap();
    let stdout = Path::new("-");
    let err = refusal(&[output("--output", stdout), output("--timeseries", stdout)]);
    assert!(err.contains("both write to standard output"), "{err}");
    let err = refusal(&[
        output("--output", stdout),
        output("--summary-json", Path::new("/dev/stdout")),
    ]);
    assert!(err.contains("--output and --summary-json"), "{err}");
}

#[test]
fn an_input_read_through_a_device_path_is_still_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("w.jsonl");
    fs::write(&data, "{}").unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&data, &link).unwrap();
    let err = refusal(&[
        CommandPath::new("--dataset", &data, Role::Input),
        output("--trace-output", &link),
    ]);
    assert!(err.contains("--dataset and --trace-output"), "{err}");
}

#[test]
fn stale_temporaries_of_the_output_are_found_not_removed() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.csv");
    let stale = dir.path().join(".out.csv.a1b2c3.tmp");
    fs::write(&stale, "half a CSV").unwrap();
    fs::write(dir.path().join(".other.csv.a1b2c3.tmp"), "").unwrap();
    fs::write(dir.path().join(".out.csv.tmp"), "").unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        stale_temporaries(&output("--output", &out)),
        std::slice::from_ref(&stale)
    );
    check(&[output("--output", &out)]).unwrap();
    assert!(stale.exists());
    let plots = dir.path().join("plots");
    let staging = dir.path().join(".plots.Zx9y8w.tmp");
    fs::create_dir(&staging).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    let p = CommandPath::new("--plots", &plots, Role::OutputDir);
    assert_eq!(stale_temporaries(&p), [staging]);
}

#[test]
fn an_input_read_whole_is_refused_past_its_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.yaml");
    fs::write(&path, "0123456789").unwrap();
    assert_eq!(read_text_at_most(&path, 10).unwrap(), "0123456789");
    let err = read_text_at_most(&path, 9).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    assert_eq!(
        err.to_string(),
        "larger than 9 bytes, the most this input may take"
    );
    assert_eq!(read_bytes_at_most(&path, 10).unwrap(), b"0123456789");
    let err = read_bytes_at_most(&path, 9).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
}
