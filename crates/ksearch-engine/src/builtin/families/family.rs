//! What a template family is: its knobs, a point of its space (a [`Point`]), and the trait
//! every family implements.

use std::collections::BTreeMap;

use ksearch_core::task::{TaskSpec, Workload};
use ksearch_core::tree::Impacts;

use super::Machine;

/// A point in a family's template space: knob name -> chosen value.
pub type Point = BTreeMap<String, i64>;

/// One value of a knob, with a short label for titles ("64×64 tiles").
#[derive(Debug, Clone)]
pub struct KnobValue {
    pub value: i64,
    pub label: String,
}

/// A tunable dimension of a template: changing it is one tactic.
#[derive(Debug, Clone)]
pub struct Knob {
    /// Its key in a point, e.g. "loop_order".
    pub name: String,
    /// Tactic name, e.g. "loop interchange".
    pub tactic: String,
    /// The knowledge layer's pattern this tactic instantiates (`knowledge/patterns/<id>.toml`),
    /// if there is one.
    pub pattern: Option<String>,
    /// One or two sentences: what changes in the code and why it can help.
    pub description: String,
    /// 1..=5
    pub difficulty: u8,
    pub values: Vec<KnobValue>,
    /// Whether neighbouring values are worth trying as refinements of the same tactic
    /// (true for sizes such as tile widths; false for on/off switches).
    pub ordered: bool,
}

/// The analytical estimate of one candidate on one workload.
#[derive(Debug, Clone, Copy)]
pub struct Cost {
    pub cycles: f64,
    pub bytes: f64,
    pub flops: f64,
}

pub trait Family: Send + Sync + std::fmt::Debug {
    /// "matmul"
    fn name(&self) -> &str;
    /// Name, inputs, outputs, axes and dtypes match the built-in task.
    fn matches(&self, spec: &TaskSpec) -> bool;
    /// Reproduces seed.c's algorithm.
    fn seed(&self) -> Point;
    fn knobs(&self) -> &[Knob];
    /// Whether the combination can be rendered.
    fn valid(&self, point: &Point) -> bool;
    /// Complete source satisfying the candidate contract; a header comment lists the point.
    /// Fails only for a file-defined space whose template cannot be rendered.
    fn render(&self, point: &Point) -> Result<String, String>;
    /// The candidate's file extension.
    fn extension(&self) -> &str {
        "c"
    }
    /// What `cost` is, for the rationale of an action.
    fn cost_model(&self) -> &str {
        "cost model"
    }
    /// What the cost model weighs, said when nothing has been measured yet.
    fn cost_basis(&self) -> &str {
        "bytes moved and operations per element against this machine's bandwidth and vector width"
    }
    /// Deterministic.
    fn cost(&self, point: &Point, workload: &Workload, machine: &Machine) -> Cost;
    /// Expected effect of setting `knob` to `value` from `from`, on the tree's three impact axes
    /// (ratings 0-10, risk, notes).
    fn impacts(&self, from: &Point, knob: &str, value: i64) -> Impacts;
}
