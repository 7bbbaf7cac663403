//! A line diff of two texts (by the `similar` crate), shown as unified hunks.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde::Serialize;
use similar::{Algorithm, DiffTag};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Same,
    Removed,
    Added,
}

/// One line of a diff with its 1-based line numbers in the old and new text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Line<'a> {
    pub op: Op,
    pub old: Option<usize>,
    pub new: Option<usize>,
    pub text: &'a str,
}

/// Consecutive changed lines with their context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hunk<'a> {
    pub old_start: usize,
    pub old_len: usize,
    pub new_start: usize,
    pub new_len: usize,
    pub lines: Vec<Line<'a>>,
}

/// How long the diff may search for the smallest edit before settling for a larger one. Two
/// large, wholly different sources are the slow case; the report must still render.
const DEADLINE: Duration = Duration::from_secs(2);

/// Every line of `old` and `new`, each marked same, removed or added, in order: a smallest set
/// of edits (Myers' algorithm, from `similar`), so one changed line in a large source reads as
/// one line removed and one added.
pub fn diff_lines<'a>(old: &'a str, new: &'a str) -> Vec<Line<'a>> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let deadline = Instant::now().checked_add(DEADLINE);
    let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &a, &b, deadline);
    let mut out = Vec::with_capacity(a.len().max(b.len()));
    for op in &ops {
        let (tag, olds, news) = op.as_tag_tuple();
        if tag == DiffTag::Equal {
            out.extend(olds.zip(news).map(|(i, j)| Line {
                op: Op::Same,
                old: Some(i + 1),
                new: Some(j + 1),
                text: a[i],
            }));
            continue;
        }
        // A replaced block reads as its old lines, then its new ones.
        out.extend(olds.map(|i| Line {
            op: Op::Removed,
            old: Some(i + 1),
            new: None,
            text: a[i],
        }));
        out.extend(news.map(|j| Line {
            op: Op::Added,
            old: None,
            new: Some(j + 1),
            text: b[j],
        }));
    }
    out
}

/// Lines added and removed.
pub fn counts(lines: &[Line<'_>]) -> (usize, usize) {
    let added = lines.iter().filter(|l| l.op == Op::Added).count();
    let removed = lines.iter().filter(|l| l.op == Op::Removed).count();
    (added, removed)
}

/// Changed lines grouped into hunks with `context` unchanged lines around each change.
pub fn hunks<'a>(lines: &[Line<'a>], context: usize) -> Vec<Hunk<'a>> {
    let changed: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.op != Op::Same)
        .map(|(i, _)| i)
        .collect();
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &i in &changed {
        let lo = i.saturating_sub(context);
        let hi = (i + context + 1).min(lines.len());
        match ranges.last_mut() {
            Some((_, end)) if lo <= *end => *end = hi,
            _ => ranges.push((lo, hi)),
        }
    }
    ranges
        .into_iter()
        .map(|(lo, hi)| {
            let slice = &lines[lo..hi];
            // Where the hunk starts in each text: the first line it has there, or (for an
            // empty side) the line before it, as `diff -u` writes it.
            let start = |pick: fn(&Line<'_>) -> Option<usize>| {
                slice
                    .iter()
                    .find_map(pick)
                    .unwrap_or_else(|| lines[..lo].iter().rev().find_map(pick).unwrap_or(0))
            };
            let old_len = slice.iter().filter(|l| l.old.is_some()).count();
            let new_len = slice.iter().filter(|l| l.new.is_some()).count();
            Hunk {
                old_start: start(|l| l.old),
                old_len,
                new_start: start(|l| l.new),
                new_len,
                lines: slice.to_vec(),
            }
        })
        .collect()
}

/// A unified diff (`diff -u` style) of two texts; empty when they are the same.
pub fn unified(old_name: &str, new_name: &str, old: &str, new: &str, context: usize) -> String {
    let lines = diff_lines(old, new);
    let hunks = hunks(&lines, context);
    if hunks.is_empty() {
        return String::new();
    }
    let mut o = String::new();
    let _ = writeln!(o, "--- {old_name}\n+++ {new_name}");
    for h in hunks {
        let _ = writeln!(
            o,
            "@@ -{},{} +{},{} @@",
            h.old_start, h.old_len, h.new_start, h.new_len
        );
        for l in h.lines {
            let mark = match l.op {
                Op::Same => ' ',
                Op::Removed => '-',
                Op::Added => '+',
            };
            let _ = writeln!(o, "{mark}{}", l.text);
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(a: &str, b: &str) -> String {
        diff_lines(a, b)
            .iter()
            .map(|l| match l.op {
                Op::Same => '=',
                Op::Removed => '-',
                Op::Added => '+',
            })
            .collect()
    }

    #[test]
    fn identical_texts_have_no_hunks() {
        let t = "a\nb\nc\n";
        assert_eq!(ops(t, t), "===");
        assert_eq!(unified("x", "y", t, t, 3), "");
    }

    #[test]
    fn the_diff_keeps_a_longest_common_subsequence() {
        assert_eq!(ops("a\nb\nc\nd", "a\nx\nc\nd\ne"), "=-+==+");
        assert_eq!(ops("", "a\nb"), "++");
        assert_eq!(ops("a\nb", ""), "--");
        // Moved block: LCS keeps the longer run.
        let (added, removed) = counts(&diff_lines("1\n2\n3\n4\n5", "4\n5\n1\n2\n3"));
        assert_eq!((added, removed), (2, 2));
    }

    #[test]
    fn applying_the_diff_gives_back_both_texts() {
        let a = "int f() {\n  int s = 0;\n  for (;;) {}\n  return s;\n}\n";
        let b = "int f() {\n  float s = 0;\n  #pragma unroll\n  for (;;) {}\n  return s;\n}\n";
        let lines = diff_lines(a, b);
        let old: Vec<&str> = lines
            .iter()
            .filter(|l| l.op != Op::Added)
            .map(|l| l.text)
            .collect();
        let new: Vec<&str> = lines
            .iter()
            .filter(|l| l.op != Op::Removed)
            .map(|l| l.text)
            .collect();
        assert_eq!(old, a.lines().collect::<Vec<_>>());
        assert_eq!(new, b.lines().collect::<Vec<_>>());
    }

    #[test]
    fn one_changed_line_in_large_sources_is_one_changed_line() {
        // Large enough that a quadratic table would not be built (old code gave up past 16M
        // cells and showed everything as changed), with a change in the middle.
        let a: String = (0..20_000)
            .map(|i| format!("  x[{i}] = y[{i}] * 2;\n"))
            .collect();
        let b = a.replace(
            "  x[10000] = y[10000] * 2;\n",
            "  x[10000] = y[10000] * 3;\n",
        );
        let lines = diff_lines(&a, &b);
        assert_eq!(counts(&lines), (1, 1));
        assert_eq!(lines.len(), 20_001);
        let changed: Vec<&Line<'_>> = lines.iter().filter(|l| l.op != Op::Same).collect();
        assert_eq!(changed[0].op, Op::Removed);
        assert_eq!(changed[0].old, Some(10_001));
        assert_eq!(changed[1].text, "  x[10000] = y[10000] * 3;");
        assert_eq!(changed[1].new, Some(10_001));
        let hunks = hunks(&lines, 3);
        assert_eq!(hunks.len(), 1);
        assert_eq!(
            (
                hunks[0].old_start,
                hunks[0].old_len,
                hunks[0].new_start,
                hunks[0].new_len
            ),
            (9_998, 7, 9_998, 7)
        );
        // Lines added at both ends of a large text, and a trailing newline that differs,
        // are only what changed.
        let c = format!("head\n{}tail", a);
        assert_eq!(counts(&diff_lines(&a, &c)), (2, 0));
        assert_eq!(counts(&diff_lines("a\nb", "a\nb\n")), (0, 0));
    }

    #[test]
    fn unified_output_matches_diff_u() {
        let a = (1..=12).map(|i| format!("l{i}\n")).collect::<String>();
        let b = a.replace("l2\n", "l2\nnew\n").replace("l11\n", "");
        assert_eq!(
            unified("a", "b", &a, &b, 2),
            "--- a\n+++ b\n@@ -1,4 +1,5 @@\n l1\n l2\n+new\n l3\n l4\n@@ -9,4 +10,3 @@\n l9\n l10\n-l11\n l12\n"
        );
        // An insertion into an empty text starts at line 0 of the old side, like diff -u.
        assert_eq!(
            unified("a", "b", "", "x\n", 3),
            "--- a\n+++ b\n@@ -0,0 +1,1 @@\n+x\n"
        );
    }
}
