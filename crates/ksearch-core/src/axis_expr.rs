//! Derived axes: an axis whose value follows from the others (`nout = "n - taps + 1"`), written
//! once in `task.toml` instead of by hand in every workload, where a slip makes the reference read
//! past its input.
//!
//! The expressions are integer arithmetic over axis names: `+ - * /` (division rounds toward
//! negative infinity), `%`, parentheses, integer literals and unary minus.

use std::collections::BTreeMap;

/// A parsed expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AxisExpr {
    Int(i64),
    Axis(String),
    Neg(Box<AxisExpr>),
    Bin(Box<AxisExpr>, Op, Box<AxisExpr>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
}

impl AxisExpr {
    /// Parse `text`; the error says what was expected and where (a character offset).
    pub fn parse(text: &str) -> Result<AxisExpr, String> {
        let tokens = tokenize(text)?;
        let mut p = Parser { tokens, at: 0 };
        let e = p.sum()?;
        match p.tokens.get(p.at) {
            None => Ok(e),
            Some((pos, t)) => Err(format!("unexpected `{t}` at character {}", pos + 1)),
        }
    }

    /// Every axis name the expression reads, in order of appearance.
    pub fn axes(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            AxisExpr::Int(_) => {}
            AxisExpr::Axis(a) => out.push(a),
            AxisExpr::Neg(e) => e.collect(out),
            AxisExpr::Bin(a, _, b) => {
                a.collect(out);
                b.collect(out);
            }
        }
    }

    /// The value for these axis values: an error on a missing axis, division by zero or
    /// overflow.
    pub fn eval(&self, axes: &BTreeMap<String, i64>) -> Result<i64, String> {
        match self {
            AxisExpr::Int(v) => Ok(*v),
            AxisExpr::Axis(a) => axes
                .get(a)
                .copied()
                .ok_or_else(|| format!("axis `{a}` has no value")),
            AxisExpr::Neg(e) => e
                .eval(axes)?
                .checked_neg()
                .ok_or_else(|| "overflow".to_owned()),
            AxisExpr::Bin(a, op, b) => {
                let (x, y) = (a.eval(axes)?, b.eval(axes)?);
                let v = match op {
                    Op::Add => x.checked_add(y),
                    Op::Sub => x.checked_sub(y),
                    Op::Mul => x.checked_mul(y),
                    Op::Div | Op::Rem if y == 0 => return Err("division by zero".into()),
                    Op::Div | Op::Rem if x == i64::MIN && y == -1 => None,
                    Op::Div => Some(floor_div(x, y)),
                    Op::Rem => Some(x - y * floor_div(x, y)),
                };
                v.ok_or_else(|| "overflow".to_owned())
            }
        }
    }
}

/// `x / y` rounded toward negative infinity (`y != 0`, and not `i64::MIN / -1`).
fn floor_div(x: i64, y: i64) -> i64 {
    let q = x / y;
    if (x % y != 0) && ((x < 0) != (y < 0)) {
        q - 1
    } else {
        q
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Int(i64),
    Name(String),
    Sym(char),
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Token::Int(v) => write!(f, "{v}"),
            Token::Name(n) => f.write_str(n),
            Token::Sym(c) => write!(f, "{c}"),
        }
    }
}

fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, String> {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len() && chars[i].1.is_ascii_digit() {
                i += 1;
            }
            let s: String = chars[start..i].iter().map(|(_, c)| c).collect();
            let v = s
                .parse()
                .map_err(|_| format!("`{s}` at character {} is too large", pos + 1))?;
            out.push((pos, Token::Int(v)));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].1.is_ascii_alphanumeric() || chars[i].1 == '_') {
                i += 1;
            }
            out.push((
                pos,
                Token::Name(chars[start..i].iter().map(|(_, c)| c).collect()),
            ));
        } else if "+-*/%()".contains(c) {
            out.push((pos, Token::Sym(c)));
            i += 1;
        } else {
            return Err(format!(
                "`{c}` at character {} is not part of an axis expression (axis names, integers, + - * / % and parentheses)",
                pos + 1
            ));
        }
    }
    Ok(out)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    at: usize,
}

impl Parser {
    fn peek_sym(&self) -> Option<char> {
        match self.tokens.get(self.at) {
            Some((_, Token::Sym(c))) => Some(*c),
            _ => None,
        }
    }

    fn sum(&mut self) -> Result<AxisExpr, String> {
        let mut e = self.product()?;
        while let Some(c @ ('+' | '-')) = self.peek_sym() {
            self.at += 1;
            let op = if c == '+' { Op::Add } else { Op::Sub };
            e = AxisExpr::Bin(Box::new(e), op, Box::new(self.product()?));
        }
        Ok(e)
    }

    fn product(&mut self) -> Result<AxisExpr, String> {
        let mut e = self.unary()?;
        while let Some(c @ ('*' | '/' | '%')) = self.peek_sym() {
            self.at += 1;
            let op = match c {
                '*' => Op::Mul,
                '/' => Op::Div,
                _ => Op::Rem,
            };
            e = AxisExpr::Bin(Box::new(e), op, Box::new(self.unary()?));
        }
        Ok(e)
    }

    fn unary(&mut self) -> Result<AxisExpr, String> {
        if self.peek_sym() == Some('-') {
            self.at += 1;
            return Ok(AxisExpr::Neg(Box::new(self.unary()?)));
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<AxisExpr, String> {
        let Some((pos, t)) = self.tokens.get(self.at).cloned() else {
            return Err("the expression ends too early".into());
        };
        self.at += 1;
        match t {
            Token::Int(v) => Ok(AxisExpr::Int(v)),
            Token::Name(n) => Ok(AxisExpr::Axis(n)),
            Token::Sym('(') => {
                let e = self.sum()?;
                if self.peek_sym() != Some(')') {
                    return Err(format!("the `(` at character {} is not closed", pos + 1));
                }
                self.at += 1;
                Ok(e)
            }
            t => Err(format!("unexpected `{t}` at character {}", pos + 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axes(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|&(k, v)| (k.to_owned(), v)).collect()
    }

    #[test]
    fn arithmetic_follows_precedence_and_floors() {
        let a = axes(&[("n", 100), ("taps", 7), ("stride", 2)]);
        let eval = |s: &str| AxisExpr::parse(s).unwrap().eval(&a).unwrap();
        assert_eq!(eval("n - taps + 1"), 94);
        assert_eq!(eval("(n - taps) / stride + 1"), 47);
        assert_eq!(eval("n - taps * 2"), 86);
        assert_eq!(eval("-7 / 2"), -4, "floor division");
        assert_eq!(eval("7 / -2"), -4, "floor division, negative divisor");
        assert_eq!(eval("-7 % 2"), 1);
        assert_eq!(eval("-(n)"), -100);
        assert_eq!(
            AxisExpr::parse("(n - taps) / stride + 1").unwrap().axes(),
            ["n", "taps", "stride"]
        );
    }

    #[test]
    fn errors_say_what_and_where() {
        let err = |s: &str| AxisExpr::parse(s).unwrap_err();
        assert_eq!(err("n - "), "the expression ends too early");
        assert_eq!(err("(n - 1"), "the `(` at character 1 is not closed");
        assert_eq!(err("n taps"), "unexpected `taps` at character 3");
        assert!(
            err("n ^ 2").starts_with("`^` at character 3"),
            "{}",
            err("n ^ 2")
        );
        let a = axes(&[("n", 1)]);
        let eval = |s: &str| AxisExpr::parse(s).unwrap().eval(&a).unwrap_err();
        assert_eq!(eval("n / (n - 1)"), "division by zero");
        assert_eq!(eval("m + 1"), "axis `m` has no value");
        assert_eq!(eval("9223372036854775807 + n"), "overflow");
    }
}
