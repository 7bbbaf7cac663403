//! A Definition's constraints: `AXIS == expression` makes a derived axis, `AXIS == T[-1].item()`
//! an offsets input, and every other relation between axes (`>=`, `<`, `!=`, `%`, a tensor's
//! `.shape[i]`) a check that each workload must pass, given or generated.

use std::collections::BTreeMap;

use ksearch_core::axis_expr::AxisExpr;

use super::definition::Tensor;
use crate::import::{ImportError, Json, identifier};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rel {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A relation between axes that every workload must satisfy.
#[derive(Debug, Clone)]
pub(super) struct Check {
    /// The constraint as the definition writes it.
    pub(super) text: String,
    lhs: AxisExpr,
    rel: Rel,
    rhs: AxisExpr,
}

impl Check {
    /// Whether it holds for `axes` (every axis, derived ones included); an error names an axis
    /// without a value or a division by zero.
    pub(super) fn holds(&self, axes: &BTreeMap<String, i64>) -> Result<bool, String> {
        let (a, b) = (self.lhs.eval(axes)?, self.rhs.eval(axes)?);
        Ok(match self.rel {
            Rel::Eq => a == b,
            Rel::Ne => a != b,
            Rel::Lt => a < b,
            Rel::Le => a <= b,
            Rel::Gt => a > b,
            Rel::Ge => a >= b,
        })
    }
}

/// What the constraints make of the axes.
#[derive(Default)]
pub(super) struct Constraints {
    pub(super) derived: BTreeMap<String, String>,
    pub(super) offsets: BTreeMap<String, String>,
    pub(super) checks: Vec<Check>,
}

/// A constraint's two sides and relation: the first comparison outside parentheses (`=` alone
/// is taken for `==`).
fn relation(c: &str) -> Option<(&str, Rel, &str)> {
    let bytes = c.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    while i < bytes.len() {
        let two = bytes.get(i..i + 2).unwrap_or(&[]);
        match bytes[i] {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth -= 1,
            _ if depth != 0 => {}
            _ => {
                let found = match two {
                    b"==" => Some((Rel::Eq, 2)),
                    b"!=" => Some((Rel::Ne, 2)),
                    b"<=" => Some((Rel::Le, 2)),
                    b">=" => Some((Rel::Ge, 2)),
                    _ => match bytes[i] {
                        b'<' => Some((Rel::Lt, 1)),
                        b'>' => Some((Rel::Gt, 1)),
                        b'=' => Some((Rel::Eq, 1)),
                        _ => None,
                    },
                };
                if let Some((rel, n)) = found {
                    return Some((c[..i].trim(), rel, c[i + n..].trim()));
                }
            }
        }
        i += 1;
    }
    None
}

/// `T[-1]` or `T[-1].item()` (or `int(...)` around it): the tensor's name.
fn last_element(s: &str) -> Option<&str> {
    let s = s
        .strip_prefix("int(")
        .and_then(|s| s.strip_suffix(')'))
        .unwrap_or(s)
        .trim();
    let s = s.strip_suffix(".item()").unwrap_or(s).trim();
    let name = s.strip_suffix("[-1]")?.trim();
    (identifier(name) == name).then_some(name)
}

/// `text` with identifiers renamed (`renames`: the definition's axis names that ksearch
/// changed), const axes replaced by their values, `T.shape[i]` (and `T.shape[-i]`, `len(T)`) by
/// the axis at that place of tensor `T`'s shape, and `//` by `/` (ksearch's `/` floors). `None`
/// when a tensor's shape is indexed out of its range.
pub(super) fn substitute(
    text: &str,
    consts: &BTreeMap<String, i64>,
    renames: &BTreeMap<String, String>,
    tensors: &[&Tensor],
) -> Option<String> {
    let text = text.replace("//", "/");
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !(c.is_ascii_alphabetic() || c == '_') {
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let rest: String = chars[i..].iter().collect();
        let tensor = tensors.iter().find(|t| t.name == word);
        // `T.shape[i]`, `T.size(i)`, `len(T)`.
        if let Some(t) = tensor {
            let index = rest
                .strip_prefix(".shape[")
                .map(|r| (r, ']'))
                .or_else(|| rest.strip_prefix(".size(").map(|r| (r, ')')));
            if let Some((r, close)) = index {
                let end = r.find(close)?;
                let k: i64 = r[..end].trim().parse().ok()?;
                let n = t.shape.len() as i64;
                let k = if k < 0 { n + k } else { k };
                let axis = t.shape.get(usize::try_from(k).ok()?)?;
                out.push_str(&format!("({})", substitute(axis, consts, renames, &[])?));
                i += (if close == ']' { ".shape[" } else { ".size(" }).len() + end + 1;
                continue;
            }
        }
        if word == "len" && rest.starts_with('(') {
            let r = &rest[1..];
            if let Some(end) = r.find(')')
                && let Some(t) = tensors.iter().find(|t| t.name == r[..end].trim())
            {
                let axis = t.shape.first()?;
                out.push_str(&format!("({})", substitute(axis, consts, renames, &[])?));
                i += 1 + end + 1;
                continue;
            }
        }
        let word = renames.get(&word).cloned().unwrap_or(word);
        match consts.get(&word) {
            Some(v) => out.push_str(&format!("({v})")),
            None => out.push_str(&word),
        }
    }
    Some(out)
}

/// Read the definition's `constraints` (`list`), given its axes (`vars`, `consts`, and the
/// derived axes its shapes made, `shape_derived`) and tensors.
#[allow(clippy::too_many_arguments)]
pub(super) fn read(
    list: Option<&Json>,
    file: &str,
    vars: &[String],
    consts: &BTreeMap<String, i64>,
    renames: &BTreeMap<String, String>,
    shape_derived: &BTreeMap<String, String>,
    inputs: &[Tensor],
    outputs: &[Tensor],
) -> Result<Constraints, ImportError> {
    let list = match list {
        None | Some(Json::Null) => &[][..],
        Some(Json::Array(list)) => list.as_slice(),
        Some(other) => {
            return Err(ImportError::new(
                file,
                "constraints",
                format!("is {}, not a list", other.kind()),
            ));
        }
    };
    let tensors: Vec<&Tensor> = inputs.iter().chain(outputs).collect();
    let known = |a: &str| {
        vars.iter().any(|v| v == a) || consts.contains_key(a) || shape_derived.contains_key(a)
    };
    let mut out = Constraints {
        derived: consts
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .chain(shape_derived.clone())
            .collect(),
        ..Constraints::default()
    };
    for (i, c) in list.iter().enumerate() {
        let at = format!("constraints[{i}]");
        let c = c
            .as_str()
            .ok_or_else(|| ImportError::new(file, &at, "is not a string"))?;
        let cannot = |why: &str| {
            ImportError::new(
                file,
                &at,
                format!(
                    "`{c}` cannot be expressed ({why}): ksearch understands relations (==, !=, <, <=, >, >=) between integer expressions of axes and tensor shapes, and `AXIS == TENSOR[-1].item()`"
                ),
            )
        };
        let (l, rel, r) = relation(c).ok_or_else(|| cannot("no comparison"))?;
        // Offsets: an axis that is a 1-d integer input's last element.
        if rel == Rel::Eq
            && let Some((axis, t)) = [(l, r), (r, l)].into_iter().find_map(|(a, t)| {
                let a = renames.get(a).map_or(a, String::as_str);
                (vars.iter().any(|v| v == a))
                    .then_some(a)
                    .zip(last_element(t))
            })
        {
            let tensor = inputs
                .iter()
                .find(|x| x.name == t)
                .ok_or_else(|| cannot(&format!("`{t}` is not an input")))?;
            if tensor.shape.len() != 1 || tensor.dtype.is_float() {
                return Err(ImportError::new(
                    file,
                    &at,
                    format!(
                        "`{t}` is not a 1-d integer tensor, so its last element cannot be an axis"
                    ),
                ));
            }
            out.offsets.insert(t.to_owned(), axis.to_owned());
            continue;
        }
        let side = |s: &str| -> Result<(String, AxisExpr), ImportError> {
            let text = substitute(s, consts, renames, &tensors)
                .ok_or_else(|| cannot("a tensor's shape is indexed past its dimensions"))?;
            let e = AxisExpr::parse(&text).map_err(|e| cannot(&e))?;
            if let Some(a) = e.axes().into_iter().find(|a| !known(a)) {
                return Err(cannot(&format!("`{a}` is not an axis")));
            }
            Ok((text, e))
        };
        let ((lt, le), (rt, re)) = (side(l)?, side(r)?);
        if lt.replace(' ', "") == rt.replace(' ', "") {
            // Says what the tensors' shapes already say.
            if matches!(rel, Rel::Eq | Rel::Le | Rel::Ge) {
                continue;
            }
            return Err(ImportError::new(file, &at, format!("`{c}` can never hold")));
        }
        let check = Check {
            text: c.to_owned(),
            lhs: le.clone(),
            rel,
            rhs: re.clone(),
        };
        // Between consts only: it holds, or the definition is wrong.
        if le.axes().is_empty() && re.axes().is_empty() {
            match check.holds(&BTreeMap::new()) {
                Ok(true) => continue,
                Ok(false) => {
                    return Err(ImportError::new(
                        file,
                        &at,
                        format!(
                            "`{c}` does not hold for the const axes ({} against {})",
                            le.eval(&BTreeMap::new()).unwrap_or_default(),
                            re.eval(&BTreeMap::new()).unwrap_or_default()
                        ),
                    ));
                }
                Err(e) => return Err(cannot(&e)),
            }
        }
        // A var axis equal to an expression of other free var axes is derived from them (where
        // no derived axis reads it: a derived axis reads declared ones only).
        if rel == Rel::Eq {
            let free = |a: &str| vars.iter().any(|v| v == a) && !out.derived.contains_key(a);
            let made = [(&le, &rt), (&re, &lt)]
                .into_iter()
                .find_map(|(one, other)| {
                    let AxisExpr::Axis(a) = one else { return None };
                    let from = AxisExpr::parse(other).ok()?;
                    (free(a)
                        && from.axes().iter().all(|b| free(b) && *b != a)
                        && !out.derived.values().any(|e| mentions(e, a)))
                    .then(|| (a.clone(), other.clone()))
                });
            if let Some((axis, expr)) = made {
                out.derived.insert(axis, expr);
                continue;
            }
        }
        out.checks.push(check);
    }
    Ok(out)
}

/// Whether expression `e` reads axis `a`.
fn mentions(e: &str, a: &str) -> bool {
    AxisExpr::parse(e).is_ok_and(|x| x.axes().contains(&a))
}

/// Every axis's value: `free` (the var axes a workload gives) and the derived ones, each an
/// expression of free axes only (a derived axis never reads another).
pub(super) fn full_axes(
    derived: &BTreeMap<String, String>,
    free: &BTreeMap<String, i64>,
) -> Result<BTreeMap<String, i64>, String> {
    let mut all = free.clone();
    for (a, e) in derived {
        let v = AxisExpr::parse(e)
            .and_then(|x| x.eval(free))
            .map_err(|m| format!("`{a} = {e}`: {m}"))?;
        all.insert(a.clone(), v);
    }
    Ok(all)
}
