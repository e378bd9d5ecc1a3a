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

/// Why an expression does not parse or has no value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExprError {
    /// Text that starts like a number but is none.
    #[error("`{text}` is not a number")]
    NotNumber { text: String },
    /// A character, number, name or operator where none may stand.
    #[error("unexpected `{token}`")]
    Unexpected { token: String },
    /// A missing operator or parenthesis.
    #[error("expected `{op}`")]
    Expected { op: String },
    /// An expression cut short.
    #[error("the expression ends too early")]
    EndsEarly,
    /// A function other than `min` and `max`.
    #[error("unknown function `{name}` (min and max exist)")]
    UnknownFunction { name: String },
    /// A constraint without its comparison.
    #[error("expected a comparison (<=, <, >=, >, ==, !=)")]
    NoComparison,
    /// A name with no numeric value in the configuration.
    #[error("`{name}` has no numeric value")]
    NoValue { name: String },
    /// A division by zero.
    #[error("division by zero")]
    DivisionByZero,
}

/// `token` where it may not stand.
fn unexpected(token: impl std::fmt::Display) -> ExprError {
    ExprError::Unexpected {
        token: token.to_string(),
    }
}

const OPS: [&str; 13] = [
    "<=", ">=", "==", "!=", "<", ">", "+", "-", "*", "/", "(", ")", ",",
];

fn tokenize(text: &str) -> Result<Vec<Tok>, ExprError> {
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
                .map_err(|_| ExprError::NotNumber {
                    text: rest[..end].to_owned(),
                })?;
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
            return Err(unexpected(c));
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

    fn expect(&mut self, op: &str) -> Result<(), ExprError> {
        if self.peek_op() == Some(op) {
            self.at += 1;
            Ok(())
        } else {
            Err(ExprError::Expected { op: op.to_owned() })
        }
    }

    fn sum(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.product()?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.at += 1;
            let right = self.product()?;
            left = Expr::Bin(op.chars().next().unwrap_or('+'), left.into(), right.into());
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.unary()?;
        while let Some(op @ ("*" | "/")) = self.peek_op() {
            self.at += 1;
            let right = self.unary()?;
            left = Expr::Bin(op.chars().next().unwrap_or('*'), left.into(), right.into());
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
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
            Some(Tok::Op(op)) => Err(unexpected(op)),
            None => Err(ExprError::EndsEarly),
        }
    }

    fn call(&mut self, name: &str) -> Result<Expr, ExprError> {
        let is_min = match name {
            "min" => true,
            "max" => false,
            _ => {
                let name = name.to_owned();
                return Err(ExprError::UnknownFunction { name });
            }
        };
        self.expect("(")?;
        let a = self.sum()?;
        self.expect(",")?;
        let b = self.sum()?;
        self.expect(")")?;
        Ok(Expr::MinMax(is_min, a.into(), b.into()))
    }

    fn done(&self) -> Result<(), ExprError> {
        match self.toks.get(self.at) {
            None => Ok(()),
            Some(Tok::Num(n)) => Err(unexpected(n)),
            Some(Tok::Name(n)) => Err(unexpected(n)),
            Some(Tok::Op(op)) => Err(unexpected(op)),
        }
    }
}

/// Parses an arithmetic expression.
pub fn parse_expr(text: &str) -> Result<Expr, ExprError> {
    let mut p = Parser {
        toks: tokenize(text)?,
        at: 0,
    };
    let e = p.sum()?;
    p.done()?;
    Ok(e)
}

/// Parses a constraint: two expressions around one comparison.
pub fn parse_comparison(text: &str) -> Result<Comparison, ExprError> {
    let mut p = Parser {
        toks: tokenize(text)?,
        at: 0,
    };
    let left = p.sum()?;
    let op = match p.peek_op() {
        Some(op @ ("<=" | ">=" | "==" | "!=" | "<" | ">")) => op,
        _ => return Err(ExprError::NoComparison),
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
    pub fn eval(&self, vars: &BTreeMap<String, f64>) -> Result<f64, ExprError> {
        Ok(match self {
            Expr::Num(n) => *n,
            Expr::Var(n) => *vars
                .get(n)
                .ok_or_else(|| ExprError::NoValue { name: n.clone() })?,
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
                    _ if b == 0.0 => return Err(ExprError::DivisionByZero),
                    _ => a / b,
                }
            }
        })
    }
}

impl Comparison {
    /// Whether the comparison holds with `vars`.
    pub fn holds(&self, vars: &BTreeMap<String, f64>) -> Result<bool, ExprError> {
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
