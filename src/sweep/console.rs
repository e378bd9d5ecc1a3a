//! While points run, stderr (what each run says: detected formats, warnings) goes to the
//! sweep's log file; the progress bar, and the message of an interruption, go to the terminal
//! stderr was before.

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};
use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Mutex;

/// Stderr sent to a log file until dropped.
#[derive(Debug)]
pub struct Quiet {
    /// The stderr of before.
    saved: OwnedFd,
}

impl Quiet {
    /// Sends stderr to the end of `log` (created if missing).
    pub fn start(log: &Path) -> anyhow::Result<Quiet> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let saved = rustix::io::dup(std::io::stderr().as_fd()).context("saving stderr")?;
        rustix::stdio::dup2_stderr(&file).context("sending stderr to the log")?;
        crate::interrupt::set_console(saved.as_raw_fd());
        Ok(Quiet { saved })
    }

    /// A progress bar of `total` points on the terminal of before; hidden when that is not a
    /// terminal.
    pub fn progress(&self, total: u64) -> ProgressBar {
        let console = self.saved.try_clone().map(File::from);
        let target = match console {
            Ok(file) if file.is_terminal() => {
                ProgressDrawTarget::term_like(Box::new(Console(Mutex::new(file))))
            }
            _ => ProgressDrawTarget::hidden(),
        };
        let bar = ProgressBar::with_draw_target(Some(total), target);
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:40} {pos}/{len} points  {elapsed} (eta {eta})  {msg}",
            )
            .expect("valid template"),
        );
        bar
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        let _ = rustix::stdio::dup2_stderr(&self.saved);
        crate::interrupt::set_console(2);
    }
}

/// The terminal as indicatif draws on it (ANSI cursor moves).
#[derive(Debug)]
struct Console(Mutex<File>);

impl Console {
    fn put(&self, s: &str) -> std::io::Result<()> {
        let mut f = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f.write_all(s.as_bytes())
    }
}

impl TermLike for Console {
    fn width(&self) -> u16 {
        100
    }
    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}A"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}B"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}C"))
        } else {
            Ok(())
        }
    }
    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        if n > 0 {
            self.put(&format!("\x1b[{n}D"))
        } else {
            Ok(())
        }
    }
    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.put(&format!("{s}\n"))
    }
    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.put(s)
    }
    fn clear_line(&self) -> std::io::Result<()> {
        self.put("\r\x1b[2K")
    }
    fn flush(&self) -> std::io::Result<()> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .flush()
    }
}
