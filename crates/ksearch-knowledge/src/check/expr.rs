//! Constants a candidate defines (`#define`, `constexpr`, MLX `template=` values, Python
//! module constants) and a small integer expression evaluator, so sizes like
//! `threadgroup float tile[BM][BK + 1]` can be computed.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::text::matching;

/// Which language's type sizes apply (`float3` is 16 bytes in Metal, 12 in CUDA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Metal,
    Cuda,
    C,
}

/// Named integer expressions and type aliases.
#[derive(Debug, Default)]
pub(crate) struct Env {
    ints: HashMap<String, String>,
    types: HashMap<String, String>,
}

static DEFINE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+(.+)$").expect("regex")
});
static CONST_DECL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?-u:\b)(?:constexpr|const|constant)[ \t\r\n]+(?:(?:constexpr|const|constant|static)[ \t\r\n]+)*(?:unsigned[ \t\r\n]+)?(?:int|uint|short|ushort|long|size_t|int16_t|uint16_t|int32_t|uint32_t|int64_t|uint64_t|auto)[ \t\r\n]+([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*=[ \t\r\n]*([^;{}]+);",
    )
    .expect("regex")
});
static USING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)using[ \t\r\n]+([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*=[ \t\r\n]*([A-Za-z_][[A-Za-z0-9_]:]*)[ \t\r\n]*;").expect("regex")
});
static TYPEDEF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u:\b)typedef[ \t\r\n]+([A-Za-z_][[A-Za-z0-9_]:]*)[ \t\r\n]+([A-Za-z_][A-Za-z0-9_]*)[ \t\r\n]*;").expect("regex")
});
static PY_ASSIGN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[ \t]*([A-Za-z_][A-Za-z0-9_]*)[ \t]*(?::[^=\n]*)?=[ \t]*([^=[ \t\r\n]].*)$")
        .expect("regex")
});
static TEMPLATE_ARG: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"\([ \t\r\n]*["']([A-Za-z_][A-Za-z0-9_]*)["'][ \t\r\n]*,[ \t\r\n]*([^()]+?)[ \t\r\n]*\)"#,
    )
    .expect("regex")
});
static TEMPLATE_KW: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)template[ \t\r\n]*=[ \t\r\n]*\[").expect("regex"));

impl Env {
    /// `#define`, `constexpr`/`constant` integers and type aliases of C-like code.
    pub(crate) fn add_c(&mut self, code: &str) {
        for c in DEFINE.captures_iter(code) {
            let value = c[2].trim();
            if !value.is_empty() {
                self.ints
                    .entry(c[1].to_owned())
                    .or_insert_with(|| value.to_owned());
            }
        }
        for c in CONST_DECL.captures_iter(code) {
            self.ints
                .entry(c[1].to_owned())
                .or_insert_with(|| c[2].trim().to_owned());
        }
        for c in USING.captures_iter(code) {
            self.types.insert(c[1].to_owned(), c[2].to_owned());
        }
        for c in TYPEDEF.captures_iter(code) {
            self.types.insert(c[2].to_owned(), c[1].to_owned());
        }
    }

    /// Python assignments `NAME = value` (the value as text, continued across lines while
    /// brackets are open) and MLX `template=[("NAME", value), …]` arguments. `code` is the
    /// masked Python, `text` the original (template names are string literals).
    pub(crate) fn add_python(&mut self, code: &str, text: &str) {
        // Only lines that start outside brackets: keyword arguments of a call spread over
        // lines (`grid=(n, 1, 1),`) are not assignments.
        let mut depth = 0i32;
        let mut line_start = 0;
        for line in code.split_inclusive('\n') {
            if depth <= 0
                && let Some(c) = PY_ASSIGN.captures(line.trim_end_matches('\n'))
            {
                let name = c.get(1).expect("group");
                let value = c.get(2).expect("group");
                let value =
                    continued_value(code, line_start + value.start(), line_start + value.end());
                self.ints.insert(name.as_str().to_owned(), value);
            }
            for b in line.bytes() {
                match b {
                    b'(' | b'[' | b'{' => depth += 1,
                    b')' | b']' | b'}' => depth -= 1,
                    _ => {}
                }
            }
            line_start += line.len();
        }
        for m in TEMPLATE_KW.find_iter(code) {
            let open = m.end() - 1;
            let Some(close) = matching(code, open) else {
                continue;
            };
            for c in TEMPLATE_ARG.captures_iter(&text[open..=close]) {
                let value = c[2].trim();
                if let Some(size) = mlx_dtype_size(value) {
                    self.types.insert(c[1].to_owned(), format!("__bytes{size}"));
                } else {
                    self.ints.insert(c[1].to_owned(), value.to_owned());
                }
            }
        }
    }

    /// The text a name stands for, if any.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.ints.get(name).map(String::as_str)
    }

    /// Evaluate an integer expression; `None` when any part is unknown.
    pub(crate) fn eval(&self, expr: &str) -> Option<i64> {
        self.eval_depth(expr, 0)
    }

    fn eval_depth(&self, expr: &str, depth: usize) -> Option<i64> {
        if depth > 8 {
            return None;
        }
        let tokens = tokenize(expr)?;
        let mut p = Parser {
            tokens: &tokens,
            pos: 0,
            env: self,
            depth,
        };
        let v = p.shift()?;
        (p.pos == tokens.len()).then_some(v)
    }

    /// Size in bytes of a type name, aliases resolved.
    pub(crate) fn type_size(&self, name: &str, dialect: Dialect) -> Option<u64> {
        let mut name = name.trim().trim_start_matches("metal::").to_owned();
        for _ in 0..8 {
            if let Some(n) = name.strip_prefix("__bytes") {
                return n.parse().ok();
            }
            match self.types.get(&name) {
                Some(t) => name = t.trim_start_matches("metal::").to_owned(),
                None => break,
            }
        }
        type_size(&name, dialect)
    }
}

/// A Python value from `start`, extended over lines while brackets are open.
fn continued_value(code: &str, start: usize, line_end: usize) -> String {
    let mut depth = 0i32;
    let b = code.as_bytes();
    let mut i = start;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b'\n' if depth <= 0 => break,
            _ => {}
        }
        i += 1;
    }
    code[start..i.max(line_end)].trim().to_owned()
}

/// Bytes per element of an MLX dtype written as `mx.float16`.
pub(crate) fn mlx_dtype_size(value: &str) -> Option<u64> {
    let name = value.trim().strip_prefix("mx.")?;
    Some(match name {
        "bool_" | "int8" | "uint8" => 1,
        "float16" | "bfloat16" | "int16" | "uint16" => 2,
        "float32" | "int32" | "uint32" => 4,
        "float64" | "int64" | "uint64" | "complex64" => 8,
        _ => return None,
    })
}

/// Bytes of a scalar or vector type.
pub(crate) fn type_size(name: &str, dialect: Dialect) -> Option<u64> {
    let scalar = |n: &str| -> Option<u64> {
        Some(match n {
            "bool" | "char" | "uchar" | "int8_t" | "uint8_t" | "signed char" => 1,
            "short" | "ushort" | "int16_t" | "uint16_t" | "half" | "bfloat" | "bfloat16_t"
            | "float16_t" | "__half" | "__nv_bfloat16" | "bfloat16" => 2,
            "int" | "uint" | "unsigned" | "float" | "int32_t" | "uint32_t" | "atomic_int"
            | "atomic_uint" | "atomic_float" => 4,
            "long" | "ulong" | "double" | "int64_t" | "uint64_t" | "size_t" => 8,
            _ => return None,
        })
    };
    let name = name.trim();
    if let Some(s) = scalar(name) {
        return Some(s);
    }
    match name {
        "__half2" | "__nv_bfloat162" => return Some(4),
        "unsigned int" => return Some(4),
        "unsigned short" => return Some(2),
        "unsigned char" => return Some(1),
        "long long" | "unsigned long long" | "unsigned long" => return Some(8),
        _ => {}
    }
    // Vector types: float4, half2, packed_float3, uint3 …
    let (packed, rest) = match name.strip_prefix("packed_") {
        Some(r) => (true, r),
        None => (false, name),
    };
    let digits = rest.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits == rest.len() {
        return None;
    }
    let (base, n) = rest.split_at(rest.len() - digits);
    let n: u64 = n.parse().ok()?;
    if !(2..=4).contains(&n) {
        return None;
    }
    let s = scalar(base)?;
    let lanes = if n == 3 && dialect == Dialect::Metal && !packed {
        4
    } else {
        n
    };
    Some(s * lanes)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(i64),
    Ident(String),
    Op(&'static str),
}

fn tokenize(s: &str) -> Option<Vec<Tok>> {
    const OPS: [&str; 12] = [
        "<<", ">>", "//", "+", "-", "*", "/", "%", "(", ")", ",", "::",
    ];
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let lit = s[start..i].replace('_', "");
            let lit = lit.trim_end_matches(['u', 'U', 'l', 'L']);
            let v = if let Some(hex) = lit.strip_prefix("0x").or(lit.strip_prefix("0X")) {
                i64::from_str_radix(hex, 16).ok()?
            } else {
                lit.parse().ok()?
            };
            out.push(Tok::Num(v));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
            out.push(Tok::Ident(s[start..i].to_owned()));
        } else {
            let op = OPS.iter().find(|op| s[i..].starts_with(**op))?;
            out.push(Tok::Op(op));
            i += op.len();
        }
    }
    Some(out)
}

struct Parser<'a> {
    tokens: &'a [Tok],
    pos: usize,
    env: &'a Env,
    depth: usize,
}

impl Parser<'_> {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Tok::Op(op)) => Some(op),
            _ => None,
        }
    }

    fn shift(&mut self) -> Option<i64> {
        let mut v = self.additive()?;
        while let Some(op @ ("<<" | ">>")) = self.peek_op() {
            self.pos += 1;
            let r = self.additive()?;
            let r = u32::try_from(r).ok().filter(|r| *r < 63)?;
            v = if op == "<<" {
                v.checked_shl(r)?
            } else {
                v >> r
            };
        }
        Some(v)
    }

    fn additive(&mut self) -> Option<i64> {
        let mut v = self.term()?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let r = self.term()?;
            v = if op == "+" {
                v.checked_add(r)?
            } else {
                v.checked_sub(r)?
            };
        }
        Some(v)
    }

    fn term(&mut self) -> Option<i64> {
        let mut v = self.unary()?;
        while let Some(op @ ("*" | "/" | "//" | "%")) = self.peek_op() {
            self.pos += 1;
            let r = self.unary()?;
            v = match op {
                "*" => v.checked_mul(r)?,
                "%" => v.checked_rem(r)?,
                _ => v.checked_div(r)?,
            };
        }
        Some(v)
    }

    fn unary(&mut self) -> Option<i64> {
        match self.peek_op() {
            Some("-") => {
                self.pos += 1;
                self.unary()?.checked_neg()
            }
            Some("+") => {
                self.pos += 1;
                self.unary()
            }
            _ => self.primary(),
        }
    }

    fn primary(&mut self) -> Option<i64> {
        let tok = self.tokens.get(self.pos)?.clone();
        self.pos += 1;
        match tok {
            Tok::Num(v) => Some(v),
            Tok::Op("(") => {
                // A cast such as `(int)` or `(uint)` is skipped.
                if let (Some(Tok::Ident(t)), Some(Tok::Op(")"))) =
                    (self.tokens.get(self.pos), self.tokens.get(self.pos + 1))
                    && type_size(t, Dialect::C).is_some()
                {
                    self.pos += 2;
                    return self.unary();
                }
                let v = self.shift()?;
                (self.peek_op() == Some(")")).then(|| self.pos += 1)?;
                Some(v)
            }
            Tok::Ident(name) => {
                if self.peek_op() == Some("(") {
                    return self.call(&name);
                }
                let text = self.env.get(&name)?;
                self.env.eval_depth(text, self.depth + 1)
            }
            Tok::Op(_) => None,
        }
    }

    fn call(&mut self, name: &str) -> Option<i64> {
        self.pos += 1; // `(`
        if name == "sizeof" {
            let Some(Tok::Ident(t)) = self.tokens.get(self.pos).cloned() else {
                return None;
            };
            self.pos += 1;
            (self.peek_op() == Some(")")).then(|| self.pos += 1)?;
            let size = self.env.type_size(&t, Dialect::Metal)?;
            return i64::try_from(size).ok();
        }
        let mut args = vec![self.shift()?];
        while self.peek_op() == Some(",") {
            self.pos += 1;
            args.push(self.shift()?);
        }
        (self.peek_op() == Some(")")).then(|| self.pos += 1)?;
        match name {
            "max" | "std::max" | "metal::max" => args.into_iter().max(),
            "min" | "std::min" | "metal::min" => args.into_iter().min(),
            "int" | "uint" if args.len() == 1 => args.pop(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_evaluate() {
        let mut env = Env::default();
        env.add_c(
            "#define BM 64\nconstexpr int BK = 16;\nconstant constexpr uint PAD = 16 / sizeof(half);\nusing T = half;\n",
        );
        assert_eq!(env.eval("BM * (BK + 1)"), Some(64 * 17));
        assert_eq!(env.eval("PAD"), Some(8));
        assert_eq!(env.eval("(n + 255) / 256"), None);
        assert_eq!(env.eval("1 << 10"), Some(1024));
        assert_eq!(env.eval("max(BM, 128u)"), Some(128));
        assert_eq!(env.eval("0x20 // 2"), Some(16));
        assert_eq!(env.type_size("T", Dialect::Metal), Some(2));
        assert_eq!(env.type_size("float3", Dialect::Metal), Some(16));
        assert_eq!(env.type_size("float3", Dialect::Cuda), Some(12));
        assert_eq!(env.type_size("half4", Dialect::Metal), Some(8));
    }

    #[test]
    fn python_constants_and_templates() {
        let text = "BLOCK = 256\nTG = (BLOCK,\n      1, 1)\nk(\n  grid=(1, 1, 1),\n  template=[(\"T\", mx.float16), (\"N\", BLOCK * 2)])\n";
        let code = super::super::text::mask_python(text).code;
        let code = code.as_str();
        let mut env = Env::default();
        env.add_python(code, text);
        assert_eq!(env.eval("N"), Some(512));
        assert_eq!(env.get("TG"), Some("(BLOCK,\n      1, 1)"));
        assert_eq!(env.type_size("T", Dialect::Metal), Some(2));
        assert_eq!(env.get("grid"), None);
    }
}
