//! Unit tests of [`AstraProcess`] on small shell scripts: lines and the remembered tail,
//! answers, the output budget, deadlines, and a process that does not read its stdin.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use blis_cosim::astra::process::AstraProcess;
use blis_cosim::astra::{Fault, OutputLimits};

fn sh(script: &str, max_bytes: u64, tail_lines: usize) -> AstraProcess {
    let args = [OsString::from("-c"), OsString::from(script)];
    let limits = OutputLimits {
        max_bytes_per_step: max_bytes,
        tail_lines,
    };
    AstraProcess::spawn(
        Path::new("sh"),
        &args,
        Path::new("."),
        limits,
        Duration::from_secs(1),
    )
    .unwrap()
}

fn soon(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

fn line(p: &mut AstraProcess) -> Option<String> {
    p.next_line(soon(5000)).unwrap().map(str::to_owned)
}

#[test]
fn stdout_lines_come_in_order_and_the_tail_keeps_the_last_ones_with_stderr() {
    let mut p = sh(
        "echo one; sleep 0.05; echo oops >&2; sleep 0.05; echo two; printf three",
        1 << 20,
        3,
    );
    assert_eq!(line(&mut p).as_deref(), Some("one"));
    assert_eq!(line(&mut p).as_deref(), Some("two"));
    assert_eq!(
        line(&mut p).as_deref(),
        Some("three"),
        "an unterminated last line"
    );
    assert_eq!(line(&mut p), None);
    assert!(p.wait(soon(5000)).unwrap().success());
    assert_eq!(p.last_lines(), ["[stderr] oops", "two", "three"]);
}

#[test]
fn answers_reach_the_process_in_lock_step() {
    let mut p = sh(
        "read a; echo \"got $a\"; read b; echo \"got $b\"",
        1 << 20,
        5,
    );
    p.send("x").unwrap();
    assert_eq!(line(&mut p).as_deref(), Some("got x"));
    p.send("y").unwrap();
    assert_eq!(line(&mut p).as_deref(), Some("got y"));
    assert_eq!(line(&mut p), None);
    assert!(p.wait(soon(5000)).unwrap().success());
}

/// Reads until `next_line` fails, within 5 s.
fn fault_of(p: &mut AstraProcess, deadline: Instant) -> Fault {
    let started = Instant::now();
    loop {
        match p.next_line(deadline) {
            Ok(Some(_)) => assert!(started.elapsed() < Duration::from_secs(5)),
            Ok(None) => panic!("the output ended"),
            Err(fault) => return fault,
        }
    }
}

#[test]
fn runaway_output_is_cut_at_the_limit_on_stdout_and_on_stderr() {
    for (script, last) in [
        ("exec yes spam", "spam"),
        (
            // fd 3 keeps stdout open.
            "exec 3>&1; exec yes err >&2",
            "[stderr] err",
        ),
    ] {
        let mut p = sh(script, 100_000, 2);
        match fault_of(&mut p, soon(5000)) {
            Fault::Runaway { bytes, limit } => {
                assert_eq!(limit, 100_000);
                assert!(bytes > limit, "{bytes}");
            }
            other => panic!("{script}: {other:?}"),
        }
        assert_eq!(p.last_lines(), [last, last], "{script}");
        // The budget is per batch: counting starts again.
        p.reset_budget();
        match fault_of(&mut p, soon(5000)) {
            Fault::Runaway { bytes, .. } => assert!(bytes < 200_000, "{script}: {bytes}"),
            other => panic!("{script}: {other:?}"),
        }
        p.kill();
    }
}

#[test]
fn a_silent_process_runs_into_the_deadline_and_its_last_lines_are_kept() {
    let mut p = sh(
        "echo before; sleep 0.1; echo oops >&2; exec sleep 10",
        1 << 20,
        5,
    );
    assert_eq!(line(&mut p).as_deref(), Some("before"));
    let started = Instant::now();
    let fault = p.next_line(soon(300)).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(fault, Fault::Stalled(_)), "{fault:?}");
    assert!(
        took >= Duration::from_millis(250) && took < Duration::from_secs(2),
        "{took:?}"
    );
    assert_eq!(p.last_lines(), ["before", "[stderr] oops"]);
    let started = Instant::now();
    drop(p);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "killed, not awaited"
    );
}

#[test]
fn a_process_that_does_not_read_its_stdin_cannot_block_the_driver() {
    let mut p = sh("exec sleep 10", 1 << 20, 5);
    let answer = "x".repeat(1023);
    let started = Instant::now();
    // 256 KiB: several times what a pipe holds.
    for _ in 0..256 {
        p.send(&answer).unwrap();
    }
    let fault = p.next_line(soon(200)).unwrap_err();
    assert!(matches!(fault, Fault::Stalled(_)), "{fault:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn answers_queued_beyond_the_pipe_are_written_before_stdin_closes() {
    // `cat` echoes while the driver still has answers to write: neither side may block.
    let mut p = sh("exec cat", 1 << 30, 5);
    let n = 20_000;
    for i in 0..n {
        p.send(&format!("answer {i}")).unwrap();
    }
    p.close_stdin();
    let mut count = 0;
    let mut last = String::new();
    while let Some(l) = p.next_line(soon(5000)).unwrap() {
        count += 1;
        last = l.to_owned();
    }
    assert_eq!((count, last.as_str()), (n, "answer 19999"));
    assert!(p.wait(soon(5000)).unwrap().success());
}

#[test]
fn an_answer_to_a_process_that_closed_its_stdin_reports_its_exit() {
    let mut p = sh("exec 0<&-; echo bye; exit 3", 1 << 20, 5);
    assert_eq!(line(&mut p).as_deref(), Some("bye"));
    match p.send("x") {
        Err(fault @ Fault::Exited(_)) => assert_eq!(
            fault.to_string(),
            "the process ended unexpectedly (exit status: 3)"
        ),
        // The write may still have fit in the pipe if the process had not closed it yet;
        // then the end of its output tells.
        Ok(()) => assert_eq!(line(&mut p), None),
        Err(other) => panic!("{other:?}"),
    }
}

/// Whether `pid` is still running (a zombie waiting for a parent other than this process, the
/// grandchild of a killed wrapper, counts as ended). Linux's `/proc`.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat.rsplit_once(") ")?.1.chars().next()?;
            Some(state != 'Z' && state != 'X')
        })
        .unwrap_or(false)
}

/// Runs `script` as a wrapper that starts a long-sleeping grandchild (its pid written to a
/// file) and then ends as `end`; returns the grandchild's pid once the process is dropped.
fn grandchild_after(end: impl FnOnce(&mut AstraProcess)) -> u32 {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    let script = format!(
        "sleep 600 & echo $! > {}; echo started; wait",
        pid_file.display()
    );
    let mut p = sh(&script, 1 << 20, 5);
    assert_eq!(line(&mut p).as_deref(), Some("started"));
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(running(pid), "the grandchild runs");
    end(&mut p);
    drop(p);
    pid
}

/// Waits up to 5 s for `pid` to stop running.
fn assert_ends(pid: u32, case: &str) {
    let until = Instant::now() + Duration::from_secs(5);
    while running(pid) {
        assert!(Instant::now() < until, "{case}: grandchild {pid} survives");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_wrappers_grandchild_ends_with_it_on_a_timeout_a_fault_and_a_drop() {
    let timeout = grandchild_after(|p| {
        assert!(matches!(p.next_line(soon(100)), Err(Fault::Stalled(_))));
    });
    assert_ends(timeout, "timeout");
    let waited = grandchild_after(|p| {
        assert!(matches!(p.wait(soon(100)), Err(Fault::Stalled(_))));
    });
    assert_ends(waited, "wait past its deadline");
    let dropped = grandchild_after(|_| {});
    assert_ends(dropped, "drop");
}

#[test]
fn a_wrapper_that_exits_leaves_no_background_job() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("grandchild");
    let script = format!("sleep 600 & echo $! > {}; exit 0", pid_file.display());
    let mut p = sh(&script, 1 << 20, 5);
    // The background job holds the output pipes open: the exit, not their end, tells.
    assert!(p.wait(soon(5000)).unwrap().success());
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_ends(pid, "normal exit");
}
