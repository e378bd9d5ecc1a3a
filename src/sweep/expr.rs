//! The arithmetic of derived fields and constraints: numbers, names, `+ - * /`, parentheses,
//! `min(a, b)` and `max(a, b)`, and for constraints one comparison (`<= < >= > == !=`).

use std::collections::BTreeMap;

/// A parsed arithmetic expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal number.
    Num(f64),
    /// A column (axis, derived field or numeric base flag).
    Var(String),
    /// A binary operation: one of `+ - * /`.
    Bin(char, Box<Expr>, Box<Expr>),
    /// Negation.
    Neg(Box<Expr>),
    /// `min(a, b)` (`true`) or `max(a, b)` (`false`).
    MinMax(bool, Box<Expr>, Box<Expr>),
}

/// A constraint: `left OP right`.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub left: Expr,
    pub op: &'static str,
    pub right: Expr,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(f64),
    Name(String),
    Op(&'static str),
}

const OPS: [&str; 13] = [
    "<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "(", ")", ",",
];

fn tokenize(text: &str) -> Result<Vec<Tok>, String> {
    let mut toks = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let c = rest.chars().next().unwrap_or(' ');
        if c.is_ascii_digit() || c == '.' {
            let end = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '.'))
                .unwrap_or(rest.len());
            let n = rest[..end]
                .parse::<f64>()
                .map_err(|_| format!("`{}` is not a number", &rest[..end]))?;
            toks.push(Tok::Num(n));
            rest = &rest[end..];
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .unwrap_or(rest.len());
            toks.push(Tok::Name(rest[..end].to_owned()));
            rest = &rest[end..];
        } else if let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) {
            toks.push(Tok::Op(op));
            rest = &rest[op.len()..];
        } else {
            return Err(format!("unexpected `{c}`"));
        }
        rest = rest.trim_start();
    }
    Ok(toks)
}

struct Parser {
    toks: Vec<Tok>,
    at: usize,
}

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.toks.get(self.at) {
            Some(Tok::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), String> {
        if self.peek_op() == Some(op) {
            self.at += 1;
            Ok(())
        } else {
            Err(format!("expected `{op}`"))
        }
    }

    fn sum(&mut self) -> Result<Expr, String> {
        let mut left = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.at += 1;
            let right = self.product()?;
            left = Expr::Bin(op.chars().next().unwrap_or('+'), left.into(), right.into());
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while let Some(op @ ("*" | "/")) = self.peek_op() {
            self.at += 1;
            let right = self.unary()?;
            left = Expr::Bin(op.chars().next().unwrap_or('*'), left.into(), right.into());
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
        if self.peek_op() == Some("-") {
            self.at += 1;
            return Ok(Expr::Neg(self.unary()?.into()));
        }
        let tok = self.toks.get(self.at).cloned();
        self.at += 1;
        match tok {
            Some(Tok::Num(n)) => Ok(Expr::Num(n)),
            Some(Tok::Op("(")) => {
                let inner = self.sum()?;
                self.expect(")")?;
                Ok(inner)
            }
            Some(Tok::Name(name)) if self.peek_op() == Some("(") => self.call(&name),
            Some(Tok::Name(name)) => Ok(Expr::Var(name)),
            Some(Tok::Op(op)) => Err(format!("unexpected `{op}`")),
            None => Err("the expression ends too early".into()),
        }
    }

    fn call(&mut self, name: &str) -> Result<Expr, String> {
        let is_min = match name {
            "min" => true,
            "max" => false,
            _ => return Err(format!("unknown function `{name}` (min and max exist)")),
        };
        self.expect("(")?;
        let a = self.sum()?;
        self.expect(",")?;
        let b = self.sum()?;
        self.expect(")")?;
        Ok(Expr::MinMax(is_min, a.into(), b.into()))
    }

    fn done(&self) -> Result<(), String> {
        match self.toks.get(self.at) {
            None => Ok(()),
            Some(Tok::Num(n)) => Err(format!("unexpected `{n}`")),
            Some(Tok::Name(n)) => Err(format!("unexpected `{n}`")),
            Some(Tok::Op(op)) => Err(format!("unexpected `{op}`")),
        }
    }
}

/// Parses an arithmetic expression.
pub fn parse_expr(text: &str) -> Result<Expr, String> {
    let mut p = Parser {
        toks: tokenize(text)?,
        at: 0,
    };
    let e = p.sum()?;
    p.done()?;
    Ok(e)
}

/// Parses a constraint: two expressions around one comparison.
pub fn parse_comparison(text: &str) -> Result<Comparison, String> {
    let mut p = Parser {
        toks: tokenize(text)?,
        at: 0,
    };
    let left = p.sum()?;
    let op = match p.peek_op() {
        Some(op @ ("<=" | ">=" | "==" | "!=" | "<" | ">")) => op,
        _ => return Err("expected a comparison (<=, <, >=, >, ==, !=)".into()),
    };
    p.at += 1;
    let right = p.sum()?;
    p.done()?;
    Ok(Comparison { left, op, right })
}

impl Expr {
    /// The names the expression reads.
    pub fn names(&self, out: &mut Vec<String>) {
        match self {
            Expr::Num(_) => {}
            Expr::Var(n) => out.push(n.clone()),
            Expr::Neg(e) => e.names(out),
            Expr::Bin(_, a, b) | Expr::MinMax(_, a, b) => {
                a.names(out);
                b.names(out);
            }
        }
    }

    /// The value with `vars`; a name without a numeric value is an error.
    pub fn eval(&self, vars: &BTreeMap<String, f64>) -> Result<f64, String> {
        Ok(match self {
            Expr::Num(n) => *n,
            Expr::Var(n) => *vars
                .get(n)
                .ok_or_else(|| format!("`{n}` has no numeric value"))?,
            Expr::Neg(e) => -e.eval(vars)?,
            Expr::MinMax(is_min, a, b) => {
                let (a, b) = (a.eval(vars)?, b.eval(vars)?);
                if *is_min { a.min(b) } else { a.max(b) }
            }
            Expr::Bin(op, a, b) => {
                let (a, b) = (a.eval(vars)?, b.eval(vars)?);
                match op {
                    '+' => a + b,
                    '-' => a - b,
                    '*' => a * b,
                    _ if b == 0.0 => return Err("division by zero".into()),
                    _ => a / b,
                }
            }
        })
    }
}

impl Comparison {
    /// Whether the comparison holds with `vars`.
    pub fn holds(&self, vars: &BTreeMap<String, f64>) -> Result<bool, String> {
        let (a, b) = (self.left.eval(vars)?, self.right.eval(vars)?);
        Ok(match self.op {
            "<=" => a <= b,
            ">=" => a >= b,
            "<" => a < b,
            ">" => a > b,
            "==" => a == b,
            _ => a != b,
        })
    }

    /// The names both sides read.
    pub fn names(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.left.names(&mut out);
        self.right.names(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<String, f64> {
        [("replicas".to_owned(), 4.0), ("tp".to_owned(), 2.0)]
            .into_iter()
            .collect()
    }

    #[test]
    fn arithmetic_follows_precedence() {
        let e = parse_expr("replicas * tp + 1").unwrap();
        assert_eq!(e.eval(&vars()).unwrap(), 9.0);
        let e = parse_expr("replicas * (tp + 1) - -2 / 2").unwrap();
        assert_eq!(e.eval(&vars()).unwrap(), 13.0);
        let e = parse_expr("max(tp, 3) * min(replicas, 1)").unwrap();
        assert_eq!(e.eval(&vars()).unwrap(), 3.0);
    }

    #[test]
    fn comparisons() {
        let c = parse_comparison("replicas * tp <= 8").unwrap();
        assert!(c.holds(&vars()).unwrap());
        assert_eq!(c.names(), ["replicas", "tp"]);
        let c = parse_comparison("tp != 2").unwrap();
        assert!(!c.holds(&vars()).unwrap());
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(parse_expr("tp *").unwrap_err().contains("ends too early"));
        assert!(parse_expr("tp $ 2").unwrap_err().contains("unexpected `$`"));
        assert!(
            parse_expr("sqrt(tp)")
                .unwrap_err()
                .contains("unknown function")
        );
        assert!(
            parse_comparison("tp + 1")
                .unwrap_err()
                .contains("comparison")
        );
        let e = parse_expr("gpus / 0").unwrap();
        assert!(e.eval(&vars()).unwrap_err().contains("no numeric value"));
        let e = parse_expr("tp / 0").unwrap();
        assert!(e.eval(&vars()).unwrap_err().contains("division by zero"));
    }
}
