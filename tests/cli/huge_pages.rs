//! The binary's main thread marks its heap for transparent huge pages where the system serves
//! them on request (`src/runner/huge_pages.rs`): seen from outside, in the kernel's view of the
//! running process, as the `hg` flag (`MADV_HUGEPAGE`) on a `[heap]` mapping.

use crate::binary::BIN;
use blis_cosim::runner::huge_pages::marking_helps;
use std::process::{Command, Stdio};

/// Whether `smaps` (a `/proc/<pid>/smaps` text) shows a `[heap]` mapping marked `hg`.
fn heap_marked(smaps: &str) -> bool {
    let mut in_heap = false;
    for line in smaps.lines() {
        if let Some(flags) = line.strip_prefix("VmFlags:") {
            if in_heap && flags.split_whitespace().any(|f| f == "hg") {
                return true;
            }
        } else if line.split_whitespace().count() >= 5 {
            // A mapping's header line, `start-end perms offset dev inode [path]` (the other
            // lines are `Key: value [kB]`).
            in_heap = line.trim_end().ends_with("[heap]");
        }
    }
    false
}

#[test]
fn the_smaps_reader_finds_a_marked_heap() {
    let header = "55d0c0000000-55d0d0000000 rw-p 00000000 00:00 0                          [heap]";
    let other = "7f0000000000-7f0000200000 rw-p 00000000 00:00 0 ";
    let marked = format!("{header}\nSize: 262144 kB\nVmFlags: rd wr mr mw me ac hg\n");
    let plain = format!("{header}\nSize: 4 kB\nVmFlags: rd wr mr mw me ac\n");
    let elsewhere = format!("{other}\nSize: 2048 kB\nVmFlags: rd wr mr mw me ac hg\n");
    assert!(heap_marked(&marked));
    assert!(!heap_marked(&plain));
    assert!(!heap_marked(&elsewhere));
    assert!(heap_marked(&format!("{elsewhere}{plain}{marked}")));
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn the_running_binary_marks_its_heap_for_huge_pages() {
    let read = |path| std::fs::read_to_string(path).unwrap_or_default();
    let (thp, overcommit) = (
        read("/sys/kernel/mm/transparent_hugepage/enabled"),
        read("/proc/sys/vm/overcommit_memory"),
    );
    if !marking_helps(&thp, &overcommit) {
        eprintln!(
            "skipped: huge pages are not served on request here (THP `{}`, overcommit `{}`), so \
             the binary leaves its heap unmarked",
            thp.trim(),
            overcommit.trim()
        );
        return;
    }
    let mut child = Command::new(BIN)
        .args([
            "--rate",
            "2000",
            "--num-prompts",
            "200000",
            "--prompt-tokens",
            "64",
        ])
        .args(["--output-tokens", "64", "--output", "/dev/null"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let smaps = format!("/proc/{}/smaps", child.id());
    let mut seen = false;
    // Until the process ends: the heap is marked as the run starts, long before its end.
    while child.try_wait().expect("the child's status").is_none() {
        if heap_marked(&read(&smaps)) {
            seen = true;
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        seen,
        "no [heap] mapping of the running binary was marked `hg`"
    );
}
