//! A cap on how deeply YAML text nests, checked in one pass before the text reaches the YAML
//! parser: the parser's time grows with the square of the depth (a value nested 20,000 deep
//! took 3 s to refuse), while real specs, bundles and configs nest a few levels.

use std::fmt;

/// Most levels YAML text may nest (block indentation, `- ` entries on one line, and flow
/// `[`/`{`), counted together. The YAML deserializer itself stops at 128 levels, so nothing it
/// could read is refused.
pub const MAX_DEPTH: usize = 256;

/// YAML text nesting deeper than [`MAX_DEPTH`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooDeep {
    /// The line (from 1) where the text goes past the limit.
    pub line: usize,
}

impl fmt::Display for TooDeep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}: nests deeper than {MAX_DEPTH} levels (not read further)",
            self.line
        )
    }
}

impl std::error::Error for TooDeep {}

/// Refuses `text` when it nests deeper than [`MAX_DEPTH`]. The count is an upper bound of
/// the depth of every value (brackets in plain or block scalars may count too), found in
/// time linear in the text.
pub fn check_nesting(text: &str) -> Result<(), TooDeep> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (i, line) in text.lines().enumerate() {
        let content = line.trim_start_matches(' ');
        if content.is_empty() || content.starts_with('#') {
            continue;
        }
        if flow == 0 {
            let indent = line.len() - content.len();
            while indents.last().is_some_and(|&top| top > indent) {
                indents.pop();
            }
            if indents.last().is_none_or(|&top| top < indent) {
                indents.push(indent);
            }
        }
        let (dashes, rest) = leading_entries(content);
        let deepest_flow = flow_depths(rest, &mut flow);
        if indents.len() + dashes + deepest_flow > MAX_DEPTH {
            return Err(TooDeep { line: i + 1 });
        }
    }
    Ok(())
}

/// The `- ` entries that open `content` (`- - x` nests two sequences) and what follows them.
fn leading_entries(mut content: &str) -> (usize, &str) {
    let mut dashes = 0;
    while let Some(rest) = content
        .strip_prefix("- ")
        .or_else(|| (content == "-").then_some(""))
    {
        dashes += 1;
        content = rest.trim_start_matches(' ');
    }
    (dashes, content)
}

/// Follows the flow collections (`[`, `{`) opened and closed on one line, outside quoted
/// scalars and comments, from the depth `flow` the line starts at (updated to where it ends);
/// returns the deepest it reached.
fn flow_depths(line: &str, flow: &mut usize) -> usize {
    let mut deepest = *flow;
    let mut quote: Option<u8> = None;
    let mut prev = b' ';
    for &c in line.as_bytes() {
        match quote {
            Some(b'"') if c == b'"' && prev != b'\\' => quote = None,
            Some(b'\'') if c == b'\'' => quote = None,
            Some(_) => {}
            None => match c {
                b'"' | b'\'' if matches!(prev, b' ' | b'[' | b'{' | b',' | b':') => {
                    quote = Some(c);
                }
                b'#' if prev == b' ' => break,
                b'[' | b'{' => {
                    *flow += 1;
                    deepest = deepest.max(*flow);
                }
                b']' | b'}' => *flow = flow.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    deepest
}
