//! The builtin proposer: no LLM. It walks a task family's template space one knob at a time.
//!
//! - An action is one knob change (one tactic) from the parent's solution point.
//! - Its predicted speedup comes from the family's cost model (cycles of the parent's point over
//!   the child's, geometric mean over workloads), multiplied by a per-tactic correction learned
//!   from measurements: the geometric mean of measured/predicted over the tactic's solved nodes,
//!   shrunk towards 1 while evidence is thin. Confidence grows with accurate evidence.
//! - Improve rounds try the neighbouring values of the knob the action changed (tile sizes,
//!   widths), or, for a switch, of the sizes its repair moved; debug rounds try the nearest
//!   other value; each returns `None` when nothing is left.
//! - After a pass it proposes up to three next tactics from the new point (one per
//!   knob), and revises the predictions of open actions whose tactic it has just measured.
//!
//! Everything it needs is in the tree and the attempts (node and attempt payloads), so it keeps
//! no state of its own: a resumed run proposes exactly what an uninterrupted one would.

use std::collections::{BTreeMap, BTreeSet};

use ksearch_core::record::AttemptKind;
use ksearch_core::task::{Source, Task};
use ksearch_core::tree::{Action, NewNode, NodeId, ROOT};
use ksearch_core::tree_edit::{EditOp, EditScript, NodeUpdate};
use serde::{Deserialize, Serialize};

use super::families::{Family, Point, for_task};
use super::machine::Machine;
use super::space::FileSpace;
use crate::proposer::{
    Candidate, CycleEvidence, GenerateRequest, ProposeContext, ProposeError, Proposer, TooHard,
    WorldModel,
};

// The `Proposer` implementation: how the engine's requests are answered.
mod rounds;

/// Actions in the initial world model.
const INITIAL_ACTIONS: usize = 4;
/// Actions proposed after a pass (the tree allows at most 3 new nodes per edit).
const REFINE_ACTIONS: usize = 3;

/// Stored in a node's payload: the tactic it stands for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct NodePlan {
    knob: String,
    value: i64,
    /// The point the action leads to from its parent's solution at the time.
    #[serde(rename = "config")]
    point: Point,
    /// The cost model's speedup over the parent, before any correction.
    model_speedup: f64,
}

/// Stored in an attempt's payload: the point rendered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct AttemptPlan {
    #[serde(rename = "config")]
    point: Point,
}

#[derive(Debug)]
pub struct BuiltinProposer {
    family: Box<dyn Family>,
    machine: Machine,
}

/// A possible next step from a point.
#[derive(Debug, Clone)]
struct Step {
    knob: String,
    value: i64,
    point: Point,
    model_speedup: f64,
    predicted: f64,
}

/// Per-tactic learning from measurements.
#[derive(Debug, Clone, Copy, Default)]
struct Correction {
    /// How much stronger (above 1) or weaker the tactic's effect is than the model says:
    /// a predicted gain is multiplied by it, a predicted loss divided (`apply`).
    factor: f64,
    /// Measurements it rests on.
    n: u32,
    /// Mean |ln(measured / predicted)| of the model alone.
    error: f64,
    /// Cycles on this tactic that passed nothing.
    failures: u32,
}

impl Correction {
    /// The corrected prediction of a step the model puts at `model_speedup`. A tactic that
    /// gained more than predicted when it was taken loses more than predicted when it is undone:
    /// an H200 attention search that measured cp.async at 3.9× (hint 1.15×) went on to predict
    /// that dropping it again would gain 1.73×, while it measured 0.96×.
    fn apply(&self, model_speedup: f64) -> f64 {
        if model_speedup < 1.0 {
            model_speedup / self.factor
        } else {
            model_speedup * self.factor
        }
    }
}

/// A measured step's lesson for its tactic: ln(measured / predicted) in the direction the model
/// predicted (a predicted loss measured as a bigger loss means a stronger effect, as does a
/// predicted gain measured as a bigger gain).
fn effect_log(model_speedup: f64, measured: f64) -> f64 {
    let l = (measured / model_speedup).ln();
    if model_speedup < 1.0 { -l } else { l }
}

impl BuiltinProposer {
    /// The proposer for `task`: its own template space when it ships one (`hardware` gives the
    /// limits the space's constraints read), else the built-in family that matches it.
    pub fn for_task(
        task: &Task,
        machine: Machine,
        hardware: Option<&ksearch_knowledge::Hardware>,
    ) -> Result<Self, ProposeError> {
        if let Some(space) = &task.space {
            let family = FileSpace::new(&task.spec, space, hardware).map_err(|message| {
                ProposeError::Failed {
                    proposer: "builtin".into(),
                    message,
                }
            })?;
            return Ok(Self {
                family: Box::new(family),
                machine,
            });
        }
        match for_task(&task.spec) {
            Some(family) => Ok(Self { family, machine }),
            None => Err(ProposeError::Unsupported {
                proposer: "builtin".into(),
                task: task.id.clone(),
                reason: format!(
                    "the task ships no template space (see docs/spaces.md) and the builtin proposer has its own templates only for these task families: {} (an LLM proposer can work on any task)",
                    super::families::all()
                        .iter()
                        .map(|f| f.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    fn fail(&self, message: String) -> ProposeError {
        ProposeError::Failed {
            proposer: "builtin".into(),
            message,
        }
    }

    /// Model cycles of a point over the task's workloads (geometric mean).
    fn cycles(&self, task: &Task, point: &Point) -> f64 {
        let logs: Vec<f64> = task
            .spec
            .workloads
            .iter()
            .map(|w| {
                // Only positivity is asked of a cost: a space's hints give times around 1 (the
                // seed's), and a floor of 1 flattened every predicted gain to 1×.
                self.family
                    .cost(point, w, &self.machine)
                    .cycles
                    .max(f64::MIN_POSITIVE)
                    .ln()
            })
            .collect();
        (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp()
    }

    fn label(&self, knob: &str, value: i64) -> String {
        self.family
            .knobs()
            .iter()
            .find(|k| k.name == knob)
            .and_then(|k| k.values.iter().find(|v| v.value == value))
            .map_or_else(|| value.to_string(), |v| v.label.clone())
    }

    /// The point of a node's solution (the seed's for the root).
    fn solution_point(&self, ctx: &ProposeContext<'_>, node: NodeId) -> Option<Point> {
        if node == ROOT {
            return Some(self.family.seed());
        }
        let attempt = ctx.solution_attempt(node)?;
        serde_json::from_value::<AttemptPlan>(attempt.payload.clone())
            .ok()
            .map(|p| p.point)
    }

    /// The sources (by content hash) the run has already measured, or is measuring (with
    /// several evaluations at once, another cycle's attempt in flight): a candidate that
    /// renders to one of them would only measure the same code again. (One at a time, no
    /// attempt is in flight when one is generated.)
    fn measured<'a>(ctx: &ProposeContext<'a>) -> BTreeSet<&'a str> {
        ctx.attempts
            .iter()
            .map(|a| a.source_hash.as_str())
            .collect()
    }

    /// Whether `point` renders to a source the run has not measured yet.
    fn renders_fresh(&self, point: &Point, measured: &BTreeSet<&str>) -> bool {
        self.family.render(point).map_or(true, |text| {
            !measured.contains(ksearch_store::content_hash(&text).as_str())
        })
    }

    /// Every point already in the tree or already tried.
    fn taken(&self, ctx: &ProposeContext<'_>) -> BTreeSet<Point> {
        let mut taken: BTreeSet<Point> = ctx
            .tree
            .nodes()
            .filter_map(|n| plan_of(&n.payload))
            .map(|p| p.point)
            .collect();
        taken.extend(
            ctx.attempts
                .iter()
                .filter_map(|a| serde_json::from_value::<AttemptPlan>(a.payload.clone()).ok())
                .map(|p| p.point),
        );
        taken.insert(self.family.seed());
        taken
    }

    fn corrections(&self, ctx: &ProposeContext<'_>) -> BTreeMap<String, Correction> {
        let mut logs: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut failures: BTreeMap<String, u32> = BTreeMap::new();
        for n in ctx.tree.nodes() {
            let Some(plan) = plan_of(&n.payload) else {
                continue;
            };
            *failures.entry(plan.knob.clone()).or_default() += n.failed_cycles;
            if let Some(measured) = n.solution.as_ref().and_then(|s| s.speedup_vs_parent)
                && measured > 0.0
                && plan.model_speedup > 0.0
            {
                logs.entry(plan.knob)
                    .or_default()
                    .push(effect_log(plan.model_speedup, measured));
            }
        }
        let knobs: BTreeSet<String> = logs.keys().chain(failures.keys()).cloned().collect();
        knobs
            .into_iter()
            .map(|k| {
                let l = logs.get(&k).cloned().unwrap_or_default();
                let n = l.len() as u32;
                // Shrink towards no correction while there is one measurement or none.
                let factor = (l.iter().sum::<f64>() / (f64::from(n) + 1.0)).exp();
                let error = if n == 0 {
                    0.0
                } else {
                    l.iter().map(|x| x.abs()).sum::<f64>() / f64::from(n)
                };
                (
                    k.clone(),
                    Correction {
                        factor,
                        n,
                        error,
                        failures: failures.get(&k).copied().unwrap_or(0),
                    },
                )
            })
            .collect()
    }

    fn confidence(c: Option<&Correction>) -> f64 {
        let c = c.copied().unwrap_or(Correction {
            factor: 1.0,
            ..Correction::default()
        });
        let evidence = f64::from(c.n) / (f64::from(c.n) + 2.0);
        (0.4 + 0.5 * evidence * (-c.error).exp() - 0.15 * f64::from(c.failures)).clamp(0.05, 0.95)
    }

    /// Single-knob changes from `from` not yet taken, best predicted first, one per knob. A knob
    /// `from` lacks (a point stored before its space gained the knob) takes its seed value.
    fn steps(
        &self,
        task: &Task,
        from: &Point,
        taken: &BTreeSet<Point>,
        corr: &BTreeMap<String, Correction>,
        seed: u64,
    ) -> Vec<Step> {
        let from = &self.completed(from);
        let base = self.cycles(task, from);
        let mut best_per_knob: BTreeMap<String, Step> = BTreeMap::new();
        for knob in self.family.knobs() {
            for v in &knob.values {
                if from.get(&knob.name) == Some(&v.value) {
                    continue;
                }
                let mut point = from.clone();
                point.insert(knob.name.clone(), v.value);
                let Some(point) = self.repaired(task, point, &knob.name) else {
                    continue;
                };
                if taken.contains(&point) {
                    continue;
                }
                let model_speedup = base / self.cycles(task, &point);
                let predicted = corr
                    .get(&knob.name)
                    .map_or(model_speedup, |c| c.apply(model_speedup));
                let step = Step {
                    knob: knob.name.clone(),
                    value: v.value,
                    point,
                    model_speedup,
                    predicted,
                };
                let better = best_per_knob
                    .get(&knob.name)
                    .is_none_or(|b| step.predicted > b.predicted);
                if better {
                    best_per_knob.insert(knob.name.clone(), step);
                }
            }
        }
        let mut steps: Vec<Step> = best_per_knob.into_values().collect();
        // Best prediction first; equal predictions in a seeded but fixed order.
        steps.sort_by(|a, b| {
            b.predicted
                .total_cmp(&a.predicted)
                .then_with(|| tiebreak(seed, a).cmp(&tiebreak(seed, b)))
        });
        steps
    }

    /// `from` with every knob it lacks at its seed value.
    fn completed(&self, from: &Point) -> Point {
        let mut point = from.clone();
        for (knob, value) in self.family.seed() {
            point.entry(knob).or_insert(value);
        }
        point
    }

    fn new_node(&self, from: &Point, step: &Step, corr: &BTreeMap<String, Correction>) -> NewNode {
        let from = &self.completed(from);
        let knob = self
            .family
            .knobs()
            .iter()
            .find(|k| k.name == step.knob)
            .expect("steps come from knobs");
        let old = from
            .get(&step.knob)
            .map_or_else(|| "default".to_owned(), |v| self.label(&step.knob, *v));
        let new = self.label(&step.knob, step.value);
        let along = self.along(from, &step.knob, &step.point);
        let c = corr.get(&step.knob);
        let p = step.predicted;
        let score = (p.ln() / 4f64.ln()).clamp(0.02, 1.0);
        let model = self.family.cost_model();
        let rationale = match c {
            Some(c) if c.n > 0 => format!(
                "{model}: {:.2}× over the parent; this tactic measured {:.2}× as strong as modelled in {} measurement(s) → {p:.2}×",
                step.model_speedup, c.factor, c.n
            ),
            _ => format!(
                "{model}: {p:.2}× over the parent ({}); not yet measured",
                self.family.cost_basis()
            ),
        };
        NewNode {
            decision: format!("{}: {old} → {new}{along}", knob.tactic),
            action: Action {
                title: format!("{}: {new}{along}", knob.tactic),
                description: format!(
                    "{} Changes `{}` from {old} to {new}{}.{}",
                    knob.description,
                    knob.name,
                    if along.is_empty() {
                        String::new()
                    } else {
                        format!(" ({}: the change alone breaks a constraint)", &along[2..])
                    },
                    pattern_note(knob.pattern.as_deref())
                ),
                difficulty: knob.difficulty.clamp(1, 5),
                score,
                expected_speedup: p,
                rationale,
            },
            rating: (5.0 + 2.5 * p.log2()).clamp(0.0, 10.0),
            confidence: Self::confidence(c),
            impacts: self.family.impacts(from, &step.knob, step.value),
            payload: serde_json::to_value(NodePlan {
                knob: step.knob.clone(),
                value: step.value,
                point: step.point.clone(),
                model_speedup: step.model_speedup,
            })
            .expect("plans serialize"),
        }
    }

    fn candidate(
        &self,
        node: NodeId,
        point: Point,
        note: String,
    ) -> Result<Candidate, ProposeError> {
        let text = self.family.render(&point).map_err(|e| self.fail(e))?;
        Ok(Candidate {
            source: Source {
                file: format!("{}_n{node}.{}", self.family.name(), self.family.extension()),
                text,
            },
            note,
            payload: serde_json::to_value(AttemptPlan { point }).expect("plans serialize"),
        })
    }

    /// `point`, or where it breaks a constraint, `point` with the smallest change of one other
    /// knob than `knob` that meets them all: fewest values away, then the cheapest by the cost
    /// model; where no one knob does, of two. It is the step a kernel engineer takes with a
    /// change (a larger tile brings more warps, a deeper reduction step fewer pipeline stages,
    /// warpgroup products whole warpgroups and one row tile a warp), without which the change
    /// alone would never be proposed. `None` when no such change exists.
    fn repaired(&self, task: &Task, point: Point, knob: &str) -> Option<Point> {
        if self.family.valid(&point) {
            return Some(point);
        }
        // Every other value of every other knob, with its distance in values from the point's.
        let moves: Vec<(usize, &str, i64)> = self
            .family
            .knobs()
            .iter()
            .filter(|k| k.name != knob)
            .filter_map(|k| {
                let now = point.get(&k.name)?;
                let i = k.values.iter().position(|v| v.value == *now)?;
                Some(
                    k.values
                        .iter()
                        .enumerate()
                        .filter(move |(j, _)| *j != i)
                        .map(move |(j, v)| (i.abs_diff(j), k.name.as_str(), v.value)),
                )
            })
            .flatten()
            .collect();
        // The valid one of `candidates` fewest values away, then the cheapest.
        let pick = |candidates: Vec<(usize, Point)>| -> Option<Point> {
            candidates
                .into_iter()
                .filter(|(_, p)| self.family.valid(p))
                .map(|(d, p)| (d, self.cycles(task, &p), p))
                .min_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)))
                .map(|(_, _, p)| p)
        };
        let with = |changes: &[&(usize, &str, i64)]| {
            let mut p = point.clone();
            for (_, name, value) in changes {
                p.insert((*name).to_owned(), *value);
            }
            (changes.iter().map(|c| c.0).sum(), p)
        };
        pick(moves.iter().map(|m| with(&[m])).collect()).or_else(|| {
            let pairs = moves.iter().enumerate().flat_map(|(i, a)| {
                moves[i + 1..]
                    .iter()
                    .filter(move |b| b.1 != a.1)
                    .map(move |b| (a, b))
            });
            pick(pairs.map(|(a, b)| with(&[a, b])).collect())
        })
    }

    /// The other knobs a step changes with its own (its repair), as labels: ", with 8 warps".
    fn along(&self, from: &Point, knob: &str, point: &Point) -> String {
        point
            .iter()
            .filter(|(k, v)| k.as_str() != knob && from.get(*k) != Some(*v))
            .map(|(k, v)| format!(", with {}", self.label(k, *v)))
            .collect()
    }

    /// Values of `knob` next to `value` (for ordered knobs), nearest first.
    fn neighbours(&self, knob: &str, value: i64) -> Vec<i64> {
        let Some(k) = self.family.knobs().iter().find(|k| k.name == knob) else {
            return Vec::new();
        };
        let Some(i) = k.values.iter().position(|v| v.value == value) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for d in 1..k.values.len() {
            if let Some(v) = i.checked_sub(d).and_then(|j| k.values.get(j)) {
                out.push(v.value);
            }
            if let Some(v) = k.values.get(i + d) {
                out.push(v.value);
            }
        }
        out
    }
}

/// The knowledge layer's pattern behind a tactic, quoted in the action's description.
fn pattern_note(pattern: Option<&str>) -> String {
    pattern
        .and_then(|id| ksearch_eval::knowledge().pattern(id))
        .map_or_else(String::new, |p| {
            format!(" Pattern `{}` ({}): {}", p.id, p.title, p.summary)
        })
}

fn plan_of(payload: &serde_json::Value) -> Option<NodePlan> {
    serde_json::from_value(payload.clone()).ok()
}

fn tiebreak(seed: u64, step: &Step) -> u64 {
    let mut rng = ksearch_core::rng::Rng::for_stream(seed, &[&step.knob, &step.value.to_string()]);
    rng.next_u64()
}

fn describe(point: &Point) -> String {
    point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
