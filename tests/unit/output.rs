//! Unit tests of `blis_cosim::output`.

use blis_cosim::output::*;
use std::fs::{self};
use std::path::Path;

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn write_atomically_replaces_the_file_only_when_fill_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.json");
    write_atomically(&path, |w| w.write_all(b"first")).unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "first");

    let failed = write_atomically(&path, |w| {
        w.write_all(b"partial")?;
        Err(std::io::Error::other("disk on fire"))
    });
    let message = format!("{:#}", failed.unwrap_err());
    assert!(message.contains("summary.json"), "{message}");
    assert!(message.contains("disk on fire"), "{message}");
    assert_eq!(fs::read_to_string(&path).unwrap(), "first");
    assert_eq!(entries(dir.path()), ["summary.json"]);
}

#[test]
fn bare_file_name_uses_the_current_directory() {
    assert_eq!(parent_dir(Path::new("out.csv")), Path::new("."));
    assert_eq!(parent_dir(Path::new("runs/out.csv")), Path::new("runs"));
}

#[test]
fn targets_tell_files_from_devices_and_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.csv");
    assert_eq!(target(&file), Target::File(file.clone()));
    fs::write(&file, "x").unwrap();
    assert_eq!(target(&file), Target::File(file.clone()));
    assert_eq!(
        target(Path::new("/dev/null")),
        Target::Special("/dev/null".into())
    );
    assert_eq!(target(Path::new("-")), Target::Descriptor(1));
    assert_eq!(target(Path::new("/dev/stdout")), Target::Descriptor(1));
    assert_eq!(target(Path::new("/dev/fd/2")), Target::Descriptor(2));
    assert!(is_stdout(Path::new("/proc/self/fd/1")));
    assert!(!is_stdout(&file));
}

#[test]
fn a_link_is_followed_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.json");
    let link = dir.path().join("link.json");
    fs::write(&real, "old").unwrap();
    std::os::unix::fs::symlink("real.json", &link).unwrap();
    assert_eq!(target(&link), Target::File(dir.path().join("real.json")));
    write_atomically(&link, |w| w.write_all(b"new")).unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::read_to_string(&real).unwrap(), "new");
    assert_eq!(entries(dir.path()), ["link.json", "real.json"]);
}

#[test]
fn a_device_is_written_in_place() {
    write_atomically(Path::new("/dev/null"), |w| w.write_all(b"discarded")).unwrap();
    let meta = fs::metadata("/dev/null").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &meta.file_type()
    ));
    let full = write_atomically(Path::new("/dev/full"), |w| w.write_all(&[0; 1 << 16]));
    let message = format!("{:#}", full.unwrap_err());
    assert!(message.contains("/dev/full"), "{message}");
    let meta = fs::metadata("/dev/full").unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_char_device(
        &meta.file_type()
    ));
}

#[test]
fn a_fifo_is_written_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || fs::read_to_string(fifo).unwrap())
    };
    write_atomically(&fifo, |w| w.write_all(b"through the pipe")).unwrap();
    assert_eq!(reader.join().unwrap(), "through the pipe");
    let meta = fs::metadata(&fifo).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
    assert_eq!(entries(dir.path()), ["pipe"]);
}

#[test]
fn a_staged_folder_appears_only_when_committed() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("a").join("plots");
    let staged = StagedDir::create(&dest).unwrap();
    assert!(staged.path().starts_with(dir.path()));
    fs::write(staged.path().join("one.svg"), "1").unwrap();
    assert!(
        !dir.path().join("a").exists(),
        "no folder before the commit"
    );
    drop(staged);
    assert!(entries(dir.path()).is_empty(), "dropped: nothing left");

    let staged = StagedDir::create(&dest).unwrap();
    fs::write(staged.path().join("one.svg"), "1").unwrap();
    staged.commit().unwrap();
    assert_eq!(entries(&dest), ["one.svg"]);
    assert_eq!(entries(dir.path()), ["a"]);
}

#[test]
fn a_staged_folder_merges_into_an_existing_one() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("et");
    fs::create_dir_all(dest.join("step0")).unwrap();
    fs::write(dest.join("keep.txt"), "mine").unwrap();
    fs::write(dest.join("step0").join("llm.0.et"), "old").unwrap();
    let staged = StagedDir::create(&dest).unwrap();
    fs::create_dir(staged.path().join("step0")).unwrap();
    fs::write(staged.path().join("step0").join("llm.0.et"), "new").unwrap();
    fs::write(staged.path().join("step0").join("llm.1.et"), "new").unwrap();
    staged.commit().unwrap();
    assert_eq!(entries(&dest), ["keep.txt", "step0"]);
    assert_eq!(entries(&dest.join("step0")), ["llm.0.et", "llm.1.et"]);
    assert_eq!(
        fs::read_to_string(dest.join("step0").join("llm.0.et")).unwrap(),
        "new"
    );
    assert_eq!(entries(dir.path()), ["et"]);
}
