//! The candidate as the rules read it: device code with comments and strings masked, its
//! kernels, its Python, and the constants it defines.

use std::borrow::Cow;
use std::ops::Range;

use super::expr::{Dialect, Env};
use super::text::{self, Lines};
use crate::assertion::{Rule, Scope};
use crate::platform::{Language, Platform, Target};

/// The candidate, prepared once for all rules.
pub(crate) struct Analysis<'s> {
    pub(crate) src: &'s str,
    pub(crate) dialect: Dialect,
    lines: Lines,
    /// Device code with everything else blanked.
    pub(crate) kernel: String,
    /// One range per kernel (C-like: top-level blocks; MLX: kernel source strings).
    pub(crate) units: Vec<Range<usize>>,
    /// MLX: the Python code outside strings and comments.
    pub(crate) python: Option<String>,
    pub(crate) env: Env,
}

impl<'s> Analysis<'s> {
    pub(crate) fn new(src: &'s str, platform: Platform) -> Analysis<'s> {
        let mut env = Env::default();
        let dialect = match (platform.language, platform.target) {
            (Language::Metal, _) | (Language::Mlx, Target::Metal) => Dialect::Metal,
            (Language::Cuda, _) | (Language::Mlx, _) => Dialect::Cuda,
            (Language::C, _) => Dialect::C,
        };
        let (kernel, units, python) = if platform.language == Language::Mlx {
            let py = text::mask_python(src);
            let (kernel, units) = text::mlx_kernels(src, &py, platform.target);
            env.add_python(&py.code, src);
            (kernel, units, Some(py.code))
        } else {
            let kernel = text::mask_c(src);
            let mut units = text::c_units(&kernel);
            if units.is_empty() {
                units.push(0..kernel.len());
            }
            (kernel, units, None)
        };
        env.add_c(&kernel);
        Analysis {
            src,
            dialect,
            lines: Lines::new(src),
            kernel,
            units,
            python,
            env,
        }
    }

    pub(crate) fn scope_text(&self, rule: &Rule) -> Cow<'_, str> {
        match rule.scope() {
            Scope::Kernel => Cow::Borrowed(&self.kernel),
            Scope::Python => Cow::Borrowed(self.python.as_deref().unwrap_or("")),
            Scope::Function => match (&self.python, &rule.compiled.function_def) {
                (Some(py), Some(def)) => {
                    Cow::Owned(text::only(py, &text::python_function_bodies(py, def)))
                }
                _ => Cow::Borrowed(""),
            },
        }
    }
    pub(crate) fn line(&self, offset: usize) -> usize {
        self.lines.line(offset)
    }

    /// Byte ranges of the device code outside every unit (file-scope declarations).
    pub(crate) fn outside_units(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        let mut pos = 0;
        let mut units = self.units.clone();
        units.sort_by_key(|r| r.start);
        for u in units {
            if u.start > pos {
                out.push(pos..u.start);
            }
            pos = pos.max(u.end);
        }
        if pos < self.kernel.len() {
            out.push(pos..self.kernel.len());
        }
        out
    }
}
