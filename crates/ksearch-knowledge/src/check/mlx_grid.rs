//! The `mlx-grid` rule: an MLX `grid=` that looks like a threadgroup count (MLX's grid counts
//! threads).

use std::sync::LazyLock;

use ksearch_core::static_check::Violation;
use regex::Regex;

use super::analysis::Analysis;
use super::rules::{squash, violation};
use super::scan::{argument, enclosing_paren, tuple_elements, value_start};
use super::text::matching;
use super::threadgroup_size::MLX_TG;
use crate::assertion::Rule;

static GRID_KW: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u:\b)grid[ \t\r\n]*=[ \t\r\n]*[^=]").expect("regex"));
static CEIL_FORMS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        // (n + D - 1) // D, (n + (D - 1)) // D
        r"^\(?\(?(?P<x>.+)\+\(?(?P<d1>[A-Za-z0-9_]+)-1\)?\)//(?P<d>[A-Za-z0-9_]+)\)?$",
        // (n + 255) // 256
        r"^\(?\((?P<x>.+)\+(?P<dm1>\d+)\)//(?P<d>\d+)\)?$",
        // -(-n // D)
        r"^-\(-(?P<x>.+)//(?P<d>[A-Za-z0-9_]+)\)$",
        // math.ceil(n / D), int(math.ceil(n / D))
        r"ceil\((?P<x>.+)/(?P<d>[A-Za-z0-9_]+)\)\)?$",
        // cdiv(n, D)
        r"^(?:[A-Za-z0-9_]+\.)?(?:cdiv|ceil_div|ceildiv|div_up|round_up_div)\((?P<x>.+),(?P<d>[A-Za-z0-9_]+)\)$",
    ]
    .iter()
    .map(|p| Regex::new(p).expect("regex"))
    .collect()
});
static FLOOR_FORM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\(?(?P<x>.+)//(?P<d>[A-Za-z0-9_]+)\)?$").expect("regex"));

/// The divisor of a threadgroup-count expression, and whether it rounds up.
fn count_divisor(expr: &str) -> Option<(String, bool)> {
    let s: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    for re in CEIL_FORMS.iter() {
        if let Some(c) = re.captures(&s) {
            let d = c.name("d")?.as_str().to_owned();
            if let Some(d1) = c.name("d1")
                && d1.as_str() != d
            {
                continue;
            }
            if let Some(dm1) = c.name("dm1") {
                let ok = matches!((dm1.as_str().parse::<i64>(), d.parse::<i64>()), (Ok(a), Ok(b)) if a + 1 == b);
                if !ok {
                    continue;
                }
            }
            return Some((d, true));
        }
    }
    FLOOR_FORM
        .captures(&s)
        .and_then(|c| c.name("d").map(|d| (d.as_str().to_owned(), false)))
}

pub(crate) fn mlx_grid(rule: &Rule, a: &Analysis<'_>, out: &mut Vec<Violation>) {
    let Some(py) = &a.python else { return };
    for m in GRID_KW.find_iter(py) {
        // Only keyword arguments: there must be an open `(` before it in the statement.
        let Some(call_open) = enclosing_paren(py, m.start()) else {
            continue;
        };
        let call_close = matching(py, call_open).unwrap_or(py.len());
        let value_at = value_start(&m);
        let value = argument(py, value_at);
        let written = a.src.get(value_at..value_at + value.len()).unwrap_or(value);
        let Some(elements) = tuple_elements(value, &a.env) else {
            continue;
        };
        let tg: Option<Vec<String>> = MLX_TG
            .find_iter(&py[call_open..call_close])
            .next()
            .and_then(|t| {
                let v = argument(py, call_open + value_start(&t));
                tuple_elements(v, &a.env)
            });
        for (d, element) in elements.iter().enumerate() {
            // Follow a name to its value (a few steps).
            let mut expr = element.clone();
            for _ in 0..3 {
                match a.env.get(expr.trim()) {
                    Some(v) if count_divisor(&expr).is_none() => expr = v.to_owned(),
                    _ => break,
                }
            }
            let Some((divisor, rounds_up)) = count_divisor(&expr) else {
                continue;
            };
            let div_value = a.env.eval(&divisor);
            let tg_dim = tg.as_ref().and_then(|t| t.get(d));
            let matches_tg = match tg_dim {
                Some(t) => {
                    t.trim() == divisor
                        || matches!((a.env.eval(t), div_value), (Some(x), Some(y)) if x == y && x > 1)
                }
                // No threadgroup to compare with: a rounded-up division by a typical
                // threadgroup size is the tell.
                None => rounds_up && div_value.is_some_and(|v| v >= 32),
            };
            if matches_tg {
                out.push(violation(
                    rule,
                    a.line(m.start()),
                    &[
                        ("grid", squash(written)),
                        ("element", squash(element)),
                        ("divisor", divisor.clone()),
                        (
                            "threadgroup",
                            tg.as_ref()
                                .map_or("not given".to_owned(), |t| format!("({})", t.join(", "))),
                        ),
                    ],
                ));
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_divisors() {
        assert_eq!(
            count_divisor("(n + 255) // 256"),
            Some(("256".into(), true))
        );
        assert_eq!(
            count_divisor("(n + TG - 1) // TG"),
            Some(("TG".into(), true))
        );
        assert_eq!(count_divisor("-(-n // 128)"), Some(("128".into(), true)));
        assert_eq!(
            count_divisor("math.ceil(n / 256)"),
            Some(("256".into(), true))
        );
        assert_eq!(count_divisor("cdiv(n, 64)"), Some(("64".into(), true)));
        assert_eq!(count_divisor("n // 4"), Some(("4".into(), false)));
        assert_eq!(
            count_divisor("(n + 254) // 256"),
            Some(("256".into(), false))
        );
        assert_eq!(count_divisor("n * 32"), None);
    }
}
