//! Objectives (`p99_ttft_ms:min,output_throughput:max`), SLO rules (`p99_ttft_ms<=500`) and
//! the Pareto front.

use anyhow::bail;

/// A column to minimise or maximise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Objective {
    pub column: String,
    pub maximize: bool,
}

/// Parses `COLUMN:min|max,...`.
pub fn parse_objectives(text: &str) -> anyhow::Result<Vec<Objective>> {
    let mut out: Vec<Objective> = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((column, sense)) = item.rsplit_once(':') else {
            bail!("--objectives: `{item}` is not COLUMN:min or COLUMN:max");
        };
        let maximize = match sense.trim() {
            "min" => false,
            "max" => true,
            other => bail!("--objectives: `{item}`: `{other}` is neither min nor max"),
        };
        let column = column.trim().to_owned();
        if out.iter().any(|o| o.column == column) {
            bail!("--objectives: {column} is given twice");
        }
        out.push(Objective { column, maximize });
    }
    if out.is_empty() {
        bail!("--objectives: no objective given");
    }
    Ok(out)
}

/// One SLO rule: `column op limit`.
#[derive(Debug, Clone, PartialEq)]
pub struct SloRule {
    pub column: String,
    pub op: &'static str,
    pub limit: f64,
}

impl SloRule {
    /// Whether `value` meets the rule.
    pub fn meets(&self, value: f64) -> bool {
        match self.op {
            "<=" => value <= self.limit,
            "<" => value < self.limit,
            ">=" => value >= self.limit,
            _ => value > self.limit,
        }
    }
}

impl std::fmt::Display for SloRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}{}", self.column, self.op, self.limit)
    }
}

/// Parses `COLUMN<=N,COLUMN>=N,...` (also `<` and `>`).
pub fn parse_slo(text: &str) -> anyhow::Result<Vec<SloRule>> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((at, op)) = ["<=", ">=", "<", ">"]
            .iter()
            .find_map(|op| item.find(op).map(|i| (i, *op)))
        else {
            bail!("--slo: `{item}` is not COLUMN<=N (or <, >=, >)");
        };
        let limit_text = item[at + op.len()..].trim();
        let Ok(limit) = limit_text.parse::<f64>() else {
            bail!("--slo: `{item}`: `{limit_text}` is not a number");
        };
        if !limit.is_finite() {
            bail!("--slo: `{item}`: the limit must be a finite number, got {limit}");
        }
        out.push(SloRule {
            column: item[..at].trim().to_owned(),
            op,
            limit,
        });
    }
    if out.is_empty() {
        bail!("--slo: no rule given");
    }
    Ok(out)
}

/// Which of `items` (each a vector of objective values, all to be minimised) no other item
/// dominates (is no worse in every objective and better in one). Equal items are all kept.
pub fn front(items: &[Vec<f64>]) -> Vec<bool> {
    items
        .iter()
        .map(|a| !items.iter().any(|b| dominates(b, a)))
        .collect()
}

fn dominates(a: &[f64], b: &[f64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y) && a.iter().zip(b).any(|(x, y)| x < y)
}
