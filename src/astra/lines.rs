//! Splitting a process's output, received in chunks, into lines of bounded length.

/// Bytes of one line kept; the rest of the line is dropped.
pub const MAX_LINE: usize = 4096;

/// What replaces the dropped part of a cut line.
const CUT_MARK: &str = " [...]";

/// Splits a byte stream fed in chunks into lines (without `\n` or a trailing `\r`), each cut
/// to [`MAX_LINE`] bytes. Holds at most the unread lines of the last chunk plus one partial
/// line.
#[derive(Debug, Default)]
pub struct LineSplitter {
    buf: Vec<u8>,
    /// Start of the unread part of `buf`.
    pos: usize,
    /// Dropping the rest of an over-long line, up to its newline.
    skipping: bool,
}

impl LineSplitter {
    /// Appends a chunk of output.
    pub fn push(&mut self, mut chunk: &[u8]) {
        if self.skipping {
            match chunk.iter().position(|&b| b == b'\n') {
                None => return,
                Some(i) => {
                    self.skipping = false;
                    chunk = &chunk[i..];
                }
            }
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(chunk);
        let partial = self
            .buf
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        if self.buf.len() - partial > MAX_LINE {
            self.buf.truncate(partial + MAX_LINE);
            self.buf.extend_from_slice(CUT_MARK.as_bytes());
            self.skipping = true;
        }
    }

    /// Writes the next complete line into `out` and returns `true`; `false` when no complete
    /// line is buffered. With `at_end` (the stream is closed), an unterminated last line
    /// counts as complete.
    pub fn next_line(&mut self, out: &mut String, at_end: bool) -> bool {
        let rest = &self.buf[self.pos..];
        let (mut line, used) = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => (&rest[..i], i + 1),
            None if at_end && !rest.is_empty() => (rest, rest.len()),
            None => return false,
        };
        if let [head @ .., b'\r'] = line {
            line = head;
        }
        let cut = line.len() > MAX_LINE;
        out.clear();
        out.push_str(&String::from_utf8_lossy(&line[..line.len().min(MAX_LINE)]));
        if cut {
            out.push_str(CUT_MARK);
        }
        self.pos += used;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        true
    }
}
