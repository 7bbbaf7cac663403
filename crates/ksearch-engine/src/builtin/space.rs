//! A task's own template space (`space/space.toml` and its minijinja templates) as a family of
//! the builtin proposer: knobs and values from the file, constraints and the optional cost
//! expression evaluated by minijinja over the knobs, the workload's axes (`axes.*`) and the
//! hardware's published numbers (`hw.*`), candidates rendered from the templates.

use std::collections::BTreeMap;

use ksearch_core::space::{ImpactHints, SpaceSpec, TaskSpace};
use ksearch_core::static_check::MAX_SOURCE_BYTES;
use ksearch_core::task::{TaskSpec, Workload};
use ksearch_core::tree::{Impacts, Risk};
use ksearch_knowledge::Hardware;
use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior, Value};

use super::families::{Cost, Family, Knob, KnobValue, Point, impact};
use super::machine::Machine;

/// Why a point of a space cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PointError {
    /// A constraint is false on a workload.
    #[error("{message} (constraint `{check}` is false on workload `{workload}`)")]
    Constraint {
        check: String,
        message: String,
        workload: String,
    },
    /// An expression or a template could not be evaluated.
    #[error("{0}")]
    Template(String),
}

#[derive(Debug)]
pub struct FileSpace {
    name: String,
    spec: SpaceSpec,
    knobs: Vec<Knob>,
    env: Environment<'static>,
    /// Each workload's axes, by workload name.
    workloads: Vec<(String, BTreeMap<String, i64>)>,
    /// The hardware's published numbers, as `hw.<section>.<field>`.
    hw: Value,
    target: String,
}

impl FileSpace {
    /// The space of `task`, with `hardware`'s limits for its constraints (an expression that
    /// reads a limit of unknown hardware fails, naming it). Every template is parsed here, so a
    /// syntax error is found before the search starts.
    pub fn new(
        spec: &TaskSpec,
        space: &TaskSpace,
        hardware: Option<&Hardware>,
    ) -> Result<Self, String> {
        for (i, k) in space.spec.knobs.iter().enumerate() {
            if let Some(id) = &k.pattern
                && ksearch_eval::knowledge().pattern(id).is_none()
            {
                return Err(format!(
                    "{}: field `knobs[{i}].pattern`: `{id}` is not a pattern of the knowledge base (`ksearch knowledge list` shows them)",
                    space.file
                ));
            }
        }
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        for t in &space.templates {
            env.add_template_owned(t.file.clone(), t.text.clone())
                .map_err(|e| format!("{}: {}: {e:#}", space.file, t.file))?;
        }
        let knobs = space
            .spec
            .knobs
            .iter()
            .map(|k| Knob {
                name: k.name.clone(),
                tactic: k.tactic.clone(),
                pattern: k.pattern.clone(),
                description: k.description.clone(),
                difficulty: k.difficulty,
                values: k
                    .values
                    .iter()
                    .map(|v| KnobValue {
                        value: v.value,
                        label: v.label.clone(),
                    })
                    .collect(),
                ordered: k.ordered,
            })
            .collect();
        let hw = hardware.map_or_else(
            || Value::from(Serde(BTreeMap::<String, f64>::new())),
            |h| {
                let mut sections: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
                for (path, value) in h.numbers() {
                    if let Some((section, field)) = path.split_once('.') {
                        sections
                            .entry(section.to_owned())
                            .or_default()
                            .insert(field.to_owned(), value);
                    }
                }
                Value::from(Serde(&sections))
            },
        );
        let target = spec
            .backend
            .backend()
            .space_target(hardware.map(|h| h.target))
            .to_owned();
        Ok(Self {
            name: spec.name.clone(),
            spec: space.spec.clone(),
            knobs,
            env,
            workloads: spec
                .workloads
                .iter()
                .map(|w| (w.name.clone(), w.axes.clone()))
                .collect(),
            hw,
            target,
        })
    }

    pub fn spec(&self) -> &SpaceSpec {
        &self.spec
    }

    fn context(&self, point: &Point, axes: Option<&BTreeMap<String, i64>>) -> Value {
        let mut ctx: BTreeMap<String, Value> = point
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(*v)))
            .collect();
        ctx.insert("knobs".into(), Value::from(Serde(point)));
        ctx.insert("ksearch_config".into(), Value::from(knobs_of(point)));
        ctx.insert("hw".into(), self.hw.clone());
        ctx.insert("target".into(), Value::from(self.target.clone()));
        if let Some(a) = axes {
            ctx.insert("axes".into(), Value::from(Serde(a)));
        }
        Value::from(Serde(&ctx))
    }

    fn eval(&self, expr: &str, ctx: &Value, what: &str) -> Result<Value, PointError> {
        self.env
            .compile_expression(expr)
            .and_then(|e| e.eval(ctx))
            .map_err(|e| PointError::Template(format!("{what} `{expr}`: {e:#}")))
    }

    /// Whether the point meets every constraint on every workload; the first failure if not.
    pub fn check_point(&self, point: &Point) -> Result<(), PointError> {
        for (workload, axes) in &self.workloads {
            let ctx = self.context(point, Some(axes));
            for c in &self.spec.constraints {
                if !self.eval(&c.check, &ctx, "constraint")?.is_true() {
                    return Err(PointError::Constraint {
                        check: c.check.clone(),
                        message: c.message.clone(),
                        workload: workload.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// The candidate source for a point.
    pub fn render_point(&self, point: &Point) -> Result<String, PointError> {
        let template = self
            .env
            .get_template(&self.spec.template)
            .map_err(|e| PointError::Template(format!("{e:#}")))?;
        let text = template
            .render(self.context(point, None))
            .map_err(|e| PointError::Template(format!("{}: {e:#}", self.spec.template)))?;
        // The static check would refuse it, and the run store keeps no larger source.
        if text.len() > MAX_SOURCE_BYTES {
            return Err(PointError::Template(format!(
                "{} renders to {} bytes; a candidate may have at most {MAX_SOURCE_BYTES}",
                self.spec.template,
                text.len()
            )));
        }
        Ok(text)
    }

    /// The cost expression's value on a workload, or the product of the value hints.
    fn time(&self, point: &Point, workload: &Workload) -> f64 {
        match &self.spec.cost {
            Some(c) => {
                let ctx = self.context(point, Some(&workload.axes));
                self.eval(&c.time, &ctx, "cost")
                    .ok()
                    .and_then(|v| f64::try_from(v).ok())
                    .filter(|t| t.is_finite() && *t > 0.0)
                    .unwrap_or(1.0)
            }
            None => {
                let speedup: f64 = self
                    .spec
                    .knobs
                    .iter()
                    .map(|k| {
                        let at = |v: i64| {
                            k.values
                                .iter()
                                .find(|x| x.value == v)
                                .map_or(1.0, |x| x.hint)
                        };
                        at(point.get(&k.name).copied().unwrap_or(k.seed)) / at(k.seed)
                    })
                    .product();
                1.0 / speedup
            }
        }
    }

    /// Every point (a stated sample when there are more than `limit`): the seed first, then
    /// every point one knob away from it, then the rest in a fixed pseudo-random order. Knobs
    /// named in `pinned` keep the value given there in every point (see [`FileSpace::pin`]).
    pub fn points(&self, limit: usize, pinned: &Point) -> Vec<Point> {
        let values = |k: &Knob| -> Vec<i64> {
            match pinned.get(&k.name) {
                Some(v) => vec![*v],
                None => k.values.iter().map(|v| v.value).collect(),
            }
        };
        let mut seed = self.seed();
        seed.extend(pinned.iter().map(|(k, v)| (k.clone(), *v)));
        let mut out = vec![seed.clone()];
        for k in &self.knobs {
            for v in values(k) {
                if seed.get(&k.name) != Some(&v) {
                    let mut c = seed.clone();
                    c.insert(k.name.clone(), v);
                    out.push(c);
                }
            }
        }
        if self.size_with(pinned) <= limit as u128 {
            let mut all = vec![Point::new()];
            for k in &self.knobs {
                all = all
                    .into_iter()
                    .flat_map(|c| {
                        values(k).into_iter().map(move |v| {
                            let mut c = c.clone();
                            c.insert(k.name.clone(), v);
                            c
                        })
                    })
                    .collect();
            }
            for c in all {
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        } else {
            let mut rng = ksearch_core::rng::Rng::new(0x5eed);
            let mut tries = 0;
            while out.len() < limit && tries < 50 * limit {
                tries += 1;
                let c: Point = self
                    .knobs
                    .iter()
                    .map(|k| {
                        let vs = values(k);
                        let i = rng.next_u64() as usize % vs.len();
                        (k.name.clone(), vs[i])
                    })
                    .collect();
                if !out.contains(&c) {
                    out.push(c);
                }
            }
        }
        out.truncate(limit.max(1));
        out
    }

    /// How many points the space has with the knobs in `pinned` held.
    pub fn size_with(&self, pinned: &Point) -> u128 {
        self.knobs
            .iter()
            .filter(|k| !pinned.contains_key(&k.name))
            .map(|k| k.values.len() as u128)
            .product()
    }

    /// Reads `knob=value` settings (`--set` of `ksearch space check`) into the knobs they pin,
    /// refusing a knob the space lacks or a value the knob does not offer, naming both.
    pub fn pin(&self, settings: &[String]) -> Result<Point, String> {
        let mut pinned = Point::new();
        for s in settings {
            let (name, value) = s
                .split_once('=')
                .ok_or_else(|| format!("`{s}`: write a setting as KNOB=VALUE"))?;
            let knob = self
                .knobs
                .iter()
                .find(|k| k.name == name.trim())
                .ok_or_else(|| {
                    let names: Vec<&str> = self.knobs.iter().map(|k| k.name.as_str()).collect();
                    format!(
                        "`{s}`: the space has no knob `{name}` (knobs: {})",
                        names.join(", ")
                    )
                })?;
            let value: i64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v| knob.values.iter().any(|x| x.value == *v))
                .ok_or_else(|| {
                    let vs: Vec<String> = knob.values.iter().map(|v| v.value.to_string()).collect();
                    format!("`{s}`: knob `{name}` takes one of {}", vs.join(", "))
                })?;
            pinned.insert(knob.name.clone(), value);
        }
        Ok(pinned)
    }
}

impl Family for FileSpace {
    fn name(&self) -> &str {
        &self.name
    }

    fn matches(&self, _spec: &TaskSpec) -> bool {
        true
    }

    fn seed(&self) -> Point {
        self.spec
            .knobs
            .iter()
            .map(|k| (k.name.clone(), k.seed))
            .collect()
    }

    fn knobs(&self) -> &[Knob] {
        &self.knobs
    }

    fn valid(&self, point: &Point) -> bool {
        self.check_point(point).is_ok()
    }

    fn render(&self, point: &Point) -> Result<String, String> {
        self.render_point(point).map_err(|e| e.to_string())
    }

    fn extension(&self) -> &str {
        self.spec.extension()
    }

    fn cost(&self, point: &Point, workload: &Workload, _machine: &Machine) -> Cost {
        Cost {
            cycles: self.time(point, workload),
            bytes: 0.0,
            flops: 0.0,
        }
    }

    fn impacts(&self, _from: &Point, knob: &str, _value: i64) -> Impacts {
        let hints = self
            .spec
            .knobs
            .iter()
            .find(|k| k.name == knob)
            .and_then(|k| k.impacts);
        let (h, note) = match hints {
            Some(h) => (h, "as the task's space declares"),
            // What an absent `impacts` table reads as.
            None => (
                ImpactHints {
                    memory_bandwidth: 5.0,
                    register_pressure: 5.0,
                    compute_fit: 5.0,
                },
                "not declared by the space",
            ),
        };
        Impacts {
            memory_bandwidth: impact(h.memory_bandwidth, Risk::Medium, note),
            register_pressure: impact(h.register_pressure, Risk::Medium, note),
            compute_fit: impact(h.compute_fit, Risk::Medium, note),
        }
    }

    fn cost_model(&self) -> &str {
        if self.spec.cost.is_some() {
            "the space's cost expression"
        } else {
            "the space's hints"
        }
    }

    fn cost_basis(&self) -> &str {
        if self.spec.cost.is_some() {
            "the task's own model of the time of a call"
        } else {
            "the speedups the task's space expects of these values"
        }
    }
}

/// What became of one point in `ksearch space check`.
#[derive(Debug, Clone, PartialEq)]
pub enum PointOutcome {
    /// Rendered and passed every check.
    Ok,
    /// Left out of the search by a constraint (not a fault of the space).
    Excluded(String),
    /// Rendering, a rule or the compile failed: a fault the space's author must fix.
    Failed(String),
}

/// The result of checking a space's points.
#[derive(Debug, Clone)]
pub struct SpaceCheck {
    /// Points in the whole space, before constraints.
    pub total: u128,
    pub points: Vec<(Point, PointOutcome)>,
}

impl SpaceCheck {
    pub fn failed(&self) -> usize {
        self.count(|o| matches!(o, PointOutcome::Failed(_)))
    }

    pub fn excluded(&self) -> usize {
        self.count(|o| matches!(o, PointOutcome::Excluded(_)))
    }

    fn count(&self, f: impl Fn(&PointOutcome) -> bool) -> usize {
        self.points.iter().filter(|(_, o)| f(o)).count()
    }

    /// The report `ksearch space check` prints.
    pub fn render(&self, task: &str, file: &str) -> String {
        let n = self.points.len();
        let scope = if n as u128 >= self.total {
            format!("every one of its {} points", self.total)
        } else {
            format!(
                "a sample of {n} of its {} points (the seed point, the points one knob away from it, then others drawn with a fixed seed)",
                self.total
            )
        };
        let mut out = format!("{task}: the space in {file}: checked {scope}\n");
        for (point, outcome) in &self.points {
            let knobs = knobs_of(point);
            match outcome {
                PointOutcome::Ok => out.push_str(&format!("  ok        {knobs}\n")),
                PointOutcome::Excluded(why) => {
                    out.push_str(&format!("  excluded  {knobs}: {why}\n"));
                }
                PointOutcome::Failed(why) => {
                    out.push_str(&format!("  FAILED    {knobs}:\n"));
                    for line in why.lines().take(12) {
                        out.push_str(&format!("            {line}\n"));
                    }
                }
            }
        }
        out.push_str(&format!(
            "{} ok, {} excluded by constraints, {} failed\n",
            n - self.failed() - self.excluded(),
            self.excluded(),
            self.failed()
        ));
        out
    }
}

/// `block_m=64 warps=4`
pub fn knobs_of(point: &Point) -> String {
    point
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

impl FileSpace {
    /// Check up to `limit` points: constraints, rendering, then `check` on each rendered source
    /// (the contract, the knowledge rules and a compile, which the caller supplies), naming the
    /// knobs of every point that fails.
    pub fn check(
        &self,
        limit: usize,
        pinned: &Point,
        mut check: impl FnMut(&Point, &str) -> Result<(), String>,
    ) -> SpaceCheck {
        let points = self
            .points(limit, pinned)
            .into_iter()
            .map(|point| {
                let outcome = match self.check_point(&point) {
                    Err(e @ PointError::Constraint { .. }) => PointOutcome::Excluded(e.to_string()),
                    Err(e) => PointOutcome::Failed(e.to_string()),
                    Ok(()) => match self.render_point(&point) {
                        Err(e) => PointOutcome::Failed(e.to_string()),
                        Ok(source) => match check(&point, &source) {
                            Ok(()) => PointOutcome::Ok,
                            Err(e) => PointOutcome::Failed(e),
                        },
                    },
                };
                (point, outcome)
            })
            .collect();
        SpaceCheck {
            total: self.size_with(pinned),
            points,
        }
    }
}

#[cfg(test)]
#[path = "space_tests.rs"]
mod tests;
