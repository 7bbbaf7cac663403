//! The builtin proposer's answers to the engine: its world model, the actions it proposes (the
//! space's steps, ranked by their modelled gain), each attempt's candidate (implement, improve,
//! debug) and the refinement of open actions once a tactic is measured.

use super::*;

impl Proposer for BuiltinProposer {
    fn name(&self) -> String {
        "builtin".into()
    }

    fn init_world_model(&mut self, ctx: &ProposeContext<'_>) -> Result<WorldModel, ProposeError> {
        let seed = self.family.seed();
        let corr = BTreeMap::new();
        let steps = self.steps(ctx.task, &seed, &self.taken(ctx), &corr, ctx.seed);
        let notes = vec![
            format!(
                "builtin proposer: `{}` template family, {} tactics; machine model: {} B vectors, {} FMA units, LLC {} KiB",
                self.family.name(),
                self.family.knobs().len(),
                self.machine.vector_bytes,
                self.machine.fma_units,
                self.machine.llc_bytes / 1024
            ),
            format!("seed configuration: {}", describe(&seed)),
        ];
        let actions = steps
            .iter()
            .take(INITIAL_ACTIONS)
            .map(|s| self.new_node(&seed, s, &corr))
            .collect();
        Ok(WorldModel { notes, actions })
    }

    fn propose_actions(&mut self, ctx: &ProposeContext<'_>) -> Result<EditScript, ProposeError> {
        let corr = self.corrections(ctx);
        let taken = self.taken(ctx);
        // Grow from the best solved nodes first.
        let mut closed: Vec<&ksearch_core::tree::Node> =
            ctx.tree.nodes().filter(|n| !n.is_open()).collect();
        closed.sort_by(|a, b| {
            let s = |n: &ksearch_core::tree::Node| {
                n.solution.as_ref().and_then(|s| s.speedup).unwrap_or(0.0)
            };
            s(b).total_cmp(&s(a)).then(a.id.cmp(&b.id))
        });
        for node in closed {
            let Some(point) = self.solution_point(ctx, node.id) else {
                continue;
            };
            let steps = self.steps(ctx.task, &point, &taken, &corr, ctx.seed);
            if !steps.is_empty() {
                let ops = steps
                    .iter()
                    .take(REFINE_ACTIONS)
                    .map(|s| EditOp::Insert {
                        parent: node.id,
                        node: self.new_node(&point, s, &corr),
                    })
                    .collect();
                return Ok(EditScript { ops });
            }
        }
        Ok(EditScript::default())
    }

    fn generate(
        &mut self,
        ctx: &ProposeContext<'_>,
        req: &GenerateRequest<'_>,
    ) -> Result<Option<Candidate>, ProposeError> {
        let node = ctx
            .tree
            .get(req.node)
            .ok_or_else(|| self.fail(format!("node {} is not in the tree", req.node)))?;
        let parent = node.parent.unwrap_or(ROOT);
        let Some(parent_point) = self.solution_point(ctx, parent) else {
            return Err(self.fail(format!(
                "no configuration recorded for the solution of node {parent}"
            )));
        };
        let measured = Self::measured(ctx);
        let fresh = |c: &Point| self.renders_fresh(c, &measured);
        let tried: BTreeSet<Point> = req
            .cycle_attempts
            .iter()
            .filter_map(|a| serde_json::from_value::<AttemptPlan>(a.payload.clone()).ok())
            .map(|p| p.point)
            .collect();
        let Some(plan) = plan_of(&node.payload) else {
            // A node the engine added (the continuation fallback): tune the best remaining step.
            if req.kind != AttemptKind::Implement {
                return Ok(None);
            }
            let corr = self.corrections(ctx);
            let step = self
                .steps(ctx.task, &parent_point, &self.taken(ctx), &corr, ctx.seed)
                .into_iter()
                .find(|s| fresh(&s.point));
            return step
                .map(|s| {
                    let note = format!("tune: {} → {}", s.knob, self.label(&s.knob, s.value));
                    self.candidate(req.node, s.point, note)
                })
                .transpose();
        };
        // The parent's point with the knob's new value, repaired where that alone breaks a
        // constraint (an invalid point is left as it is, and filtered out below).
        let with = |value: i64| {
            let mut c = parent_point.clone();
            c.insert(plan.knob.clone(), value);
            self.repaired(ctx.task, c.clone(), &plan.knob).unwrap_or(c)
        };
        // The cheapest by the cost model of the valid, untried options (knob, value, point).
        let cheapest = |options: Vec<(String, i64, Point)>| -> Option<(String, i64, Point)> {
            let mut options: Vec<(String, i64, Point)> = options
                .into_iter()
                .filter(|(_, _, c)| self.family.valid(c) && !tried.contains(c) && fresh(c))
                .collect();
            options.sort_by(|a, b| {
                self.cycles(ctx.task, &a.2)
                    .total_cmp(&self.cycles(ctx.task, &b.2))
            });
            options.into_iter().next()
        };
        let pick = |values: Vec<i64>| {
            cheapest(
                values
                    .into_iter()
                    .map(|v| (plan.knob.clone(), v, with(v)))
                    .collect(),
            )
        };
        let ordered = |knob: &str| {
            self.family
                .knobs()
                .iter()
                .any(|k| k.name == knob && k.ordered)
        };
        // An improve round starts from the cycle's best, so that what a repair moved with the
        // action stays moved (from the parent, a repaired action's neighbour was the parent
        // again); its note says what changed from there.
        let best = req
            .best
            .and_then(|b| serde_json::from_value::<AttemptPlan>(b.attempt.payload.clone()).ok())
            .map_or_else(|| plan.point.clone(), |p| p.point);
        let chosen = match req.kind {
            AttemptKind::Implement => [with(plan.value), plan.point.clone()]
                .into_iter()
                .find(|c| self.family.valid(c) && fresh(c))
                .map(|c| (plan.knob.clone(), plan.value, c)),
            AttemptKind::Improve => {
                // Each of the two nearest values of `knob`: a neighbourhood, not a sweep.
                let near = |knob: &String, at: i64| -> Vec<(String, i64, Point)> {
                    self.neighbours(knob, at)
                        .into_iter()
                        .take(2)
                        .map(|v| {
                            let mut c = best.clone();
                            c.insert(knob.clone(), v);
                            (knob.clone(), v, c)
                        })
                        .collect()
                };
                if ordered(&plan.knob) {
                    let from = best.get(&plan.knob).copied().unwrap_or(plan.value);
                    cheapest(
                        near(&plan.knob, from)
                            .into_iter()
                            .map(|(k, v, c)| {
                                let c = self.repaired(ctx.task, c.clone(), &k).unwrap_or(c);
                                (k, v, c)
                            })
                            .collect(),
                    )
                } else {
                    // A switch has no neighbours. The sizes its repair moved (to the nearest
                    // value that meets the constraints, whatever it costs) have.
                    let mut options = Vec::new();
                    for (knob, value) in &plan.point {
                        if knob == &plan.knob
                            || !ordered(knob)
                            || parent_point.get(knob) == Some(value)
                        {
                            continue;
                        }
                        options.extend(near(knob, best.get(knob).copied().unwrap_or(*value)));
                    }
                    cheapest(options)
                }
            }
            AttemptKind::Debug => pick(self.neighbours(&plan.knob, plan.value)),
            AttemptKind::Seed => None,
        };
        chosen
            .map(|(knob, value, point)| {
                let base = match req.kind {
                    AttemptKind::Improve => &best,
                    _ => &parent_point,
                };
                let from = base
                    .get(&knob)
                    .map_or_else(|| "default".into(), |v| self.label(&knob, *v));
                let note = format!(
                    "{:?}: `{knob}` {from} → {}{}",
                    req.kind,
                    self.label(&knob, value),
                    self.along(base, &knob, &point)
                )
                .to_lowercase();
                self.candidate(req.node, point, note)
            })
            .transpose()
    }

    fn refine(
        &mut self,
        ctx: &ProposeContext<'_>,
        evidence: &CycleEvidence<'_>,
    ) -> Result<EditScript, ProposeError> {
        let corr = self.corrections(ctx);
        let mut ops = Vec::new();
        // Revise open actions whose tactic was just measured.
        if let Some(plan) = ctx
            .tree
            .get(evidence.node)
            .and_then(|n| plan_of(&n.payload))
            && let Some(c) = corr.get(&plan.knob)
        {
            for n in ctx.tree.nodes().filter(|n| n.is_open()) {
                let Some(p) = plan_of(&n.payload) else {
                    continue;
                };
                if p.knob != plan.knob {
                    continue;
                }
                let predicted = c.apply(p.model_speedup);
                if (predicted / n.action.expected_speedup).ln().abs() > 0.1 {
                    ops.push(EditOp::Update {
                        node: n.id,
                        changes: NodeUpdate {
                            expected_speedup: Some(predicted),
                            score: Some((predicted.ln() / 4f64.ln()).clamp(0.02, 1.0)),
                            confidence: Some(Self::confidence(Some(c))),
                            note: Some(format!(
                                "prediction corrected (the tactic measured {:.2}× as strong as modelled) after measuring node {}",
                                c.factor, evidence.node
                            )),
                            ..NodeUpdate::default()
                        },
                    });
                }
            }
        }
        let Some(point) = self.solution_point(ctx, evidence.node) else {
            return Err(self.fail(format!(
                "no configuration recorded for the solution of node {}",
                evidence.node
            )));
        };
        let steps = self.steps(ctx.task, &point, &self.taken(ctx), &corr, ctx.seed);
        ops.extend(steps.iter().take(REFINE_ACTIONS).map(|s| EditOp::Insert {
            parent: evidence.node,
            node: self.new_node(&point, s, &corr),
        }));
        Ok(EditScript { ops })
    }

    fn too_hard(
        &mut self,
        ctx: &ProposeContext<'_>,
        evidence: &CycleEvidence<'_>,
    ) -> Result<TooHard, ProposeError> {
        let node = ctx
            .tree
            .get(evidence.node)
            .ok_or_else(|| self.fail(format!("node {} is not in the tree", evidence.node)))?;
        if ctx.tree.children(node.id).next().is_none() {
            return Ok(TooHard::Delete);
        }
        Ok(TooHard::halved(node, "nothing passed: downgraded"))
    }
}
