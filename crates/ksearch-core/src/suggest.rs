//! "Did you mean …?": the closest of some names to a mistyped one.

/// Edits (insertions, deletions, substitutions, and swaps of two neighbours) that turn `a` into
/// `b`, counted over characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows: the one before the previous, the previous, the current.
    let mut before: Vec<usize> = Vec::new();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(before[j - 2] + 1);
            }
        }
        before = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

/// The name among `names` closest to `typed`, when it is close enough to be what was meant: at
/// most a third of its characters edited (at least one), or `typed` is a part of it. Ties go to
/// the first.
pub fn closest<'a>(typed: &str, names: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let typed_lower = typed.to_lowercase();
    let limit = (typed.chars().count() / 3).max(1);
    names
        .into_iter()
        .filter_map(|name| {
            let d = edit_distance(&typed_lower, &name.to_lowercase());
            let part = typed.chars().count() >= 3 && name.contains(typed);
            (d <= limit || part).then_some((d, name))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances_count_edits_and_swaps() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("run", "runn"), 1);
        assert_eq!(edit_distance("manul", "manual"), 1);
        assert_eq!(edit_distance("sotfmax", "softmax"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn the_closest_name_is_suggested_only_when_close() {
        let tasks = ["cpu/matmul", "cpu/softmax", "cpu/rmsnorm", "mlx/attention"];
        assert_eq!(closest("cpu/softmx", tasks), Some("cpu/softmax"));
        assert_eq!(closest("cpu/sotfmax", tasks), Some("cpu/softmax"));
        assert_eq!(closest("softmax", tasks), Some("cpu/softmax"));
        assert_eq!(closest("CPU/MATMUL", tasks), Some("cpu/matmul"));
        assert_eq!(closest("gpu/conv", tasks), None);
        assert_eq!(closest("manul", ["builtin", "manual"]), Some("manual"));
        assert_eq!(closest("runn", ["run", "resume", "tree"]), Some("run"));
        assert_eq!(closest("x", ["run", "tree"]), None);
    }
}
