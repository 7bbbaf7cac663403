//! A line diff: the longest common subsequence of two texts' lines, shown as unified hunks.

use std::fmt::Write as _;

use serde::Serialize;

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

/// Beyond this many cells the quadratic table is not built; the differing middle is shown
/// as removed then added.
const MAX_CELLS: usize = 16_000_000;

/// Every line of `old` and `new`, each marked same, removed or added, in order.
pub fn diff_lines<'a>(old: &'a str, new: &'a str) -> Vec<Line<'a>> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let prefix = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (am, bm) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops = Vec::with_capacity(a.len() + b.len());
    ops.extend(std::iter::repeat_n(Op::Same, prefix));
    ops.extend(middle(am, bm));
    ops.extend(std::iter::repeat_n(Op::Same, suffix));

    let (mut i, mut j) = (0, 0);
    ops.into_iter()
        .map(|op| {
            let line = match op {
                Op::Same => Line {
                    op,
                    old: Some(i + 1),
                    new: Some(j + 1),
                    text: a[i],
                },
                Op::Removed => Line {
                    op,
                    old: Some(i + 1),
                    new: None,
                    text: a[i],
                },
                Op::Added => Line {
                    op,
                    old: None,
                    new: Some(j + 1),
                    text: b[j],
                },
            };
            if op != Op::Added {
                i += 1;
            }
            if op != Op::Removed {
                j += 1;
            }
            line
        })
        .collect()
}

/// The edit ops turning `a` into `b`, by a longest common subsequence.
fn middle(a: &[&str], b: &[&str]) -> Vec<Op> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 || (n + 1) * (m + 1) > MAX_CELLS {
        let mut ops = vec![Op::Removed; n];
        ops.extend(std::iter::repeat_n(Op::Added, m));
        return ops;
    }
    // lcs[i][j]: length of the LCS of a[i..] and b[j..].
    let w = m + 1;
    let mut lcs = vec![0u32; (n + 1) * w];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * w + j] = if a[i] == b[j] {
                lcs[(i + 1) * w + j + 1] + 1
            } else {
                lcs[(i + 1) * w + j].max(lcs[i * w + j + 1])
            };
        }
    }
    let mut ops = Vec::with_capacity(n + m);
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            ops.push(Op::Same);
            i += 1;
            j += 1;
        } else if lcs[(i + 1) * w + j] >= lcs[i * w + j + 1] {
            ops.push(Op::Removed);
            i += 1;
        } else {
            ops.push(Op::Added);
            j += 1;
        }
    }
    ops.extend(std::iter::repeat_n(Op::Removed, n - i));
    ops.extend(std::iter::repeat_n(Op::Added, m - j));
    ops
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
