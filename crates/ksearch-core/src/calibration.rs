//! How well did the proposer predict? Every solved node has a predicted speedup over its parent
//! (`action.expected_speedup`) and a measured one; this summarises the pairs.

use serde::{Deserialize, Serialize};

use crate::tree::{NodeId, Tree};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationPoint {
    pub node: NodeId,
    pub title: String,
    pub predicted: f64,
    pub measured: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub points: Vec<CalibrationPoint>,
    /// Spearman rank correlation of predicted and measured (needs 3 points).
    pub spearman: Option<f64>,
    /// Geometric mean of measured / predicted: below 1, predictions were optimistic.
    pub bias: Option<f64>,
    /// Mean |ln(measured / predicted)|: 0 is perfect, 0.69 means off by 2× on average.
    pub mean_abs_log_error: Option<f64>,
}

fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0;
        for k in i..=j {
            r[idx[k]] = avg;
        }
        i = j + 1;
    }
    r
}

fn pearson(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let cov: f64 = a.iter().zip(b).map(|(x, y)| (x - ma) * (y - mb)).sum();
    let va: f64 = a.iter().map(|x| (x - ma).powi(2)).sum();
    let vb: f64 = b.iter().map(|y| (y - mb).powi(2)).sum();
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

pub fn calibration(tree: &Tree) -> Calibration {
    let points: Vec<CalibrationPoint> = tree
        .nodes()
        .filter(|n| n.parent.is_some())
        .filter_map(|n| {
            let measured = n.solution.as_ref()?.speedup_vs_parent?;
            Some(CalibrationPoint {
                node: n.id,
                title: n.action.title.clone(),
                predicted: n.action.expected_speedup,
                measured,
            })
        })
        .collect();
    let logs: Vec<f64> = points
        .iter()
        .map(|p| (p.measured / p.predicted).ln())
        .collect();
    let n = points.len();
    let spearman = if n >= 3 {
        let p: Vec<f64> = points.iter().map(|p| p.predicted).collect();
        let m: Vec<f64> = points.iter().map(|p| p.measured).collect();
        pearson(&ranks(&p), &ranks(&m))
    } else {
        None
    };
    Calibration {
        spearman,
        bias: (n > 0).then(|| (logs.iter().sum::<f64>() / n as f64).exp()),
        mean_abs_log_error: (n > 0).then(|| logs.iter().map(|l| l.abs()).sum::<f64>() / n as f64),
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_average_ties() {
        assert_eq!(ranks(&[3.0, 1.0, 3.0, 2.0]), vec![2.5, 0.0, 2.5, 1.0]);
    }

    #[test]
    fn perfect_order_is_one_and_reversed_is_minus_one() {
        let a = ranks(&[1.0, 2.0, 3.0, 4.0]);
        let b = ranks(&[10.0, 20.0, 30.0, 40.0]);
        assert!((pearson(&a, &b).unwrap() - 1.0).abs() < 1e-12);
        let c = ranks(&[4.0, 3.0, 2.0, 1.0]);
        assert!((pearson(&a, &c).unwrap() + 1.0).abs() < 1e-12);
    }
}
