//! `ksearch run` and `ksearch resume`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use ksearch_core::record::LlmCallRecord;
use ksearch_core::task::{Task, TaskSpec};
use ksearch_core::units::time_ms;
use ksearch_engine::builtin::BuiltinProposer;
use ksearch_engine::builtin::machine;
use ksearch_engine::llm::{KnowledgeSource, LlmProposer, LlmSettings, NoKnowledge, OfflineClient};
use ksearch_engine::{
    Budget, DEFAULT_WINDOW, Engine, EngineState, EvalSettings, LlmModels, Parts, Proposer,
    RUN_FORMAT, ReplayEvaluator, ReplayPlan, RunConfig, RunSummary, StopReason, open_run,
    open_run_writer,
};
use ksearch_eval::Evaluator;
use ksearch_knowledge::{ContextRequest, HostCpu, Level, Target};
use ksearch_llm::{
    ClientSettings, LlmClient, ManualClient, ModelSpec, PriceTable, Provider, Secret,
};

use super::eval::eval_settings;
use crate::cli::{ModelFlags, OutputFlags, ResumeArgs, RunArgs};
use crate::exit_codes;
use crate::interrupt::stop_flag;
use crate::ksearch_toml::{self, KsearchToml};
use crate::progress::RunProgress;

const DEFAULT_ITERATIONS: u64 = 30;

/// Where the manual model's prompt and answer files live in a run directory.
pub(crate) fn manual_dir(run_dir: &Path) -> PathBuf {
    run_dir.join("manual")
}
const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 16_384;

/// The LLM models the flags and config ask for; `None` for the builtin proposer.
fn choose_models(
    flags: &ModelFlags,
    file_defaults: &KsearchToml,
) -> anyhow::Result<Option<LlmModels>> {
    for (flag, value) in [
        ("--model", &flags.model),
        ("--reasoning-model", &flags.reasoning_model),
        ("--codegen-model", &flags.codegen_model),
    ] {
        if let Some(value) = value {
            crate::error::check_model_flag(flag, value)?;
        }
    }
    let model = flags
        .model
        .clone()
        .or_else(|| file_defaults.models.model.clone())
        .unwrap_or_else(|| "builtin".into());
    let reasoning = flags
        .reasoning_model
        .clone()
        .or_else(|| file_defaults.models.reasoning.clone())
        .unwrap_or_else(|| model.clone());
    let codegen = flags
        .codegen_model
        .clone()
        .or_else(|| file_defaults.models.codegen.clone())
        .unwrap_or_else(|| model.clone());
    match (reasoning == "builtin", codegen == "builtin") {
        (true, true) => return Ok(None),
        (true, false) | (false, true) => {
            return crate::error::usage(
                "the builtin proposer works alone: give both roles a model, or use `--model builtin`",
            );
        }
        (false, false) => {}
    }
    for m in [&reasoning, &codegen] {
        m.parse::<ModelSpec>()
            .with_context(|| format!("invalid model `{m}`"))?;
    }
    Ok(Some(LlmModels {
        reasoning,
        codegen,
        base_url: flags.base_url.clone(),
        max_cost_usd: flags.max_cost.or(file_defaults.budget.max_cost_usd),
        reasoning_effort: flags.reasoning_effort.clone(),
        max_output_tokens: file_defaults
            .llm
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
        knowledge: flags.knowledge.clone(),
    }))
}

fn client_for(
    spec_text: &str,
    models: &LlmModels,
    file_defaults: &KsearchToml,
    offline: bool,
    run_dir: &Path,
) -> anyhow::Result<Box<dyn LlmClient>> {
    let spec: ModelSpec = spec_text
        .parse()
        .with_context(|| format!("invalid model `{spec_text}`"))?;
    if offline {
        return Ok(Box::new(OfflineClient::new(spec)));
    }
    if spec.provider == Provider::Manual {
        return Ok(Box::new(ManualClient::new(spec, manual_dir(run_dir))));
    }
    let p = file_defaults.provider(spec.provider.prefix());
    let effort = models
        .reasoning_effort
        .clone()
        .or(p.reasoning_effort.clone());
    if let Some(effort) = &effort {
        let budget = p.max_output_tokens.or(Some(models.max_output_tokens));
        if let Some(note) = ksearch_llm::reasoning_effort_note(&spec, effort, budget) {
            let _ = writeln!(std::io::stderr().lock(), "note: {note}");
        }
    }
    let defaults = ClientSettings::default();
    // `--base-url` names an OpenAI-compatible server: it is for the OpenAI-format roles only.
    // Gemini and Anthropic take a base URL from their own [providers.*] table alone, never
    // from one shared with other providers, so their key goes nowhere it was not meant for.
    let base_url = match spec.provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => models.base_url.clone().or(p.base_url),
        Provider::Gemini | Provider::Anthropic => file_defaults
            .providers
            .get(spec.provider.prefix())
            .and_then(|own| own.base_url.clone()),
        Provider::Exec | Provider::Manual => None,
    };
    let settings = ClientSettings {
        base_url,
        allow_plain_http: p.allow_plain_http.unwrap_or(false),
        api_key: p.api_key.map(Secret::new),
        // In range: ksearch.toml's values are checked when it is read.
        timeout: p
            .timeout_s
            .map_or(defaults.timeout, Duration::from_secs_f64),
        max_retries: p.max_retries.unwrap_or(defaults.max_retries),
        reasoning_effort: effort,
        // The provider's own output budget, over [llm]'s (which the engine puts in each request).
        max_output_tokens: file_defaults
            .providers
            .get(spec.provider.prefix())
            .and_then(|own| own.max_output_tokens),
        secrets: secrets(file_defaults),
        ..defaults
    };
    Ok(ksearch_llm::client(&spec, settings)?)
}

/// What no text a provider or a command writes may carry into an error, the run's record or a
/// prompt: the values of this environment's variables named like secrets (the rule that keeps
/// them from workers; a command inherits them all) and every key in ksearch.toml.
fn secrets(file_defaults: &KsearchToml) -> Vec<Secret> {
    let from_env = std::env::vars_os()
        .filter(|(name, _)| ksearch_eval::is_secret_name(name))
        .filter_map(|(_, value)| value.into_string().ok());
    let from_file = std::iter::once(&file_defaults.llm)
        .chain(file_defaults.providers.values())
        .filter_map(|p| p.api_key.clone());
    from_env.chain(from_file).map(Secret::new).collect()
}

fn prices(file_defaults: &KsearchToml) -> anyhow::Result<PriceTable> {
    let builtin = PriceTable::builtin();
    if file_defaults.prices.is_empty() {
        return Ok(builtin);
    }
    let text =
        toml::to_string(&file_defaults.prices).context("failed to read the price overrides")?;
    Ok(builtin.merged(&PriceTable::from_toml(&text, "ksearch.toml [prices]")?))
}

/// Hardware and translation context for prompts, from the knowledge layer.
#[derive(Debug)]
struct KnowledgeContext {
    target: Target,
    hardware: Option<String>,
    /// The CPU the run recorded when it started (described for CPU targets).
    host: Option<HostCpu>,
    level: Level,
}

impl KnowledgeSource for KnowledgeContext {
    fn context(&self, spec: &TaskSpec) -> String {
        let Ok(request) = ContextRequest::for_task(spec, self.target) else {
            return String::new();
        };
        let request = request.with_level(self.level);
        let request = match &self.hardware {
            Some(h) => request.with_hardware(h.clone()),
            None => request,
        };
        let request = match &self.host {
            Some(h) => request.with_host(h.clone()),
            None => request,
        };
        ksearch_eval::knowledge().render_context(&request)
    }
}

/// The knowledge the prompts of a run carry (`--knowledge`).
fn knowledge_source(
    task: &Task,
    models: &LlmModels,
    eval: &EvalSettings,
    host: Option<&HostCpu>,
) -> anyhow::Result<Box<dyn KnowledgeSource>> {
    let level = match models.knowledge.as_str() {
        "none" => return Ok(Box::new(NoKnowledge)),
        "hardware" => Level::Hardware,
        _ => Level::Full,
    };
    let k = ksearch_eval::knowledge();
    let hardware = k
        .select_hardware(eval.hardware.as_deref())?
        .map(|h| h.id.clone());
    // The target named, else the device's, else the backend's default.
    let device = hardware
        .as_deref()
        .and_then(|h| k.hardware(h))
        .map(|h| h.target);
    let target = task
        .spec
        .backend
        .backend()
        .target_for(eval.target.as_deref(), device);
    Ok(Box::new(KnowledgeContext {
        target,
        hardware,
        host: host.cloned(),
        level,
    }))
}

/// The proposer of a run. `replay`: answer every model call from these recorded calls, and
/// refuse the calls the recorded run's cost cap refused.
fn proposer_for(
    task: &Task,
    models: Option<&LlmModels>,
    file_defaults: &KsearchToml,
    eval: &EvalSettings,
    host: Option<&HostCpu>,
    replay: Option<(&[LlmCallRecord], &ReplayPlan)>,
    run_dir: &Path,
) -> anyhow::Result<Box<dyn Proposer>> {
    let Some(m) = models else {
        let hardware = ksearch_eval::knowledge()
            .select_hardware(eval.hardware.as_deref())?
            .cloned();
        return Ok(Box::new(BuiltinProposer::for_task(
            task,
            machine::detect(),
            hardware.as_ref(),
        )?));
    };
    let offline = replay.is_some();
    let contract = ksearch_core::contract::contract_for(&task.spec);
    let candidate = task.spec.backend.backend().candidate();
    let prices = prices(file_defaults)?;
    if m.max_cost_usd.is_some() && !offline {
        for model in [&m.reasoning, &m.codegen] {
            let spec: ModelSpec = model.parse()?;
            if matches!(spec.provider, Provider::Exec | Provider::Manual) {
                return Err(ksearch_llm::LlmError::Settings {
                    provider: spec.provider,
                    detail: format!(
                        "a cost cap cannot limit `{spec}`: its tokens are unknown or estimated; limit the run with --iterations or --time instead"
                    ),
                }
                .into());
            }
            if prices.get(&spec).is_none() {
                return Err(ksearch_llm::LlmError::Settings {
                    provider: spec.provider,
                    detail: format!(
                        "a cost cap needs the price of `{spec}`, which ksearch does not know (it would count as $0): give it one in ksearch.toml, [prices.\"{spec}\"] with input_per_mtok and output_per_mtok in US dollars per million tokens (0 for a local model)"
                    ),
                }
                .into());
            }
        }
    }
    let mut proposer = LlmProposer::new(LlmSettings {
        reasoning: client_for(&m.reasoning, m, file_defaults, offline, run_dir)?,
        codegen: client_for(&m.codegen, m, file_defaults, offline, run_dir)?,
        prices,
        max_cost_usd: m.max_cost_usd,
        knowledge: knowledge_source(task, m, eval, host)?,
        contract,
        code_languages: candidate.fences.iter().map(|&f| f.to_owned()).collect(),
        candidate_file: candidate.file_name.into(),
        max_output_tokens: m.max_output_tokens,
        repairs: 2,
    });
    if let Some((records, plan)) = replay {
        let path: Vec<_> = ksearch_engine::replay_path(records).cloned().collect();
        proposer.journal.restore(&path, false);
        proposer.journal.replay_only = true;
        proposer.journal.refuse_as_recorded(plan.cost_stops());
    }
    Ok(Box::new(proposer))
}

/// One line about a CPU: the run's `machine`.
fn machine_line(host: &HostCpu) -> String {
    format!("{}, {} cores", host.model, host.logical_cpus)
}

/// `20261130-091502` in UTC.
fn utc_stamp(secs: u64) -> String {
    let rfc3339 = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs));
    // `2026-11-30T09:15:02Z`, without its separators.
    rfc3339
        .to_string()
        .chars()
        .filter(char::is_ascii_digit)
        .enumerate()
        .flat_map(|(i, c)| (i == 8).then_some('-').into_iter().chain([c]))
        .collect()
}

fn time_budget(
    flag: Option<Duration>,
    file_defaults: &KsearchToml,
) -> anyhow::Result<Option<Duration>> {
    match (flag, &file_defaults.budget.time) {
        (Some(t), _) => Ok(Some(t)),
        (None, Some(text)) => Ok(Some(
            humantime::parse_duration(text)
                .with_context(|| format!("invalid budget.time `{text}` in the config"))?,
        )),
        (None, None) => Ok(None),
    }
}

/// When a time budget that starts now ends; one too long to represent is no limit at all.
fn deadline(budget: Option<Duration>) -> Option<Instant> {
    budget.and_then(|t| Instant::now().checked_add(t))
}

pub(crate) fn run(args: &RunArgs) -> anyhow::Result<i32> {
    let file_defaults = ksearch_toml::load()?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // A replay takes everything but its run directory from the recorded run.
    let replay = match &args.replay {
        Some(dir) => {
            let run = open_run(dir)?;
            let snap = run.store.snapshot()?;
            let state: EngineState =
                run.store
                    .state()?
                    .ok_or_else(|| ksearch_engine::EngineError::Incomplete {
                        dir: dir.clone(),
                        what: "no engine state".into(),
                    })?;
            Some((dir.clone(), run, snap, state))
        }
        None => None,
    };
    let (task, mut config) = match &replay {
        Some((_, run, _, _)) => {
            let mut config = run.config.clone();
            config.created_unix = now;
            (run.task.clone(), config)
        }
        None => {
            let (task, left_out) = super::eval::without_missing_dependencies(
                crate::commands::load_task(&args.task)?,
                args.eval.python.as_deref(),
            )?;
            let models = choose_models(&args.models, &file_defaults)?;
            let host = HostCpu::detect();
            let config = RunConfig {
                format: RUN_FORMAT,
                ksearch_version: env!("CARGO_PKG_VERSION").into(),
                proposer: String::new(),
                llm: models,
                seed: args.seed,
                window: args.window,
                max_cycle_attempts: 3 * args.window.max(DEFAULT_WINDOW),
                eval: EvalSettings {
                    baseline_left_out: left_out,
                    ..eval_settings(&args.eval)?
                },
                created_unix: now,
                machine: machine_line(&host),
                host_cpu: Some(host),
            };
            (task, config)
        }
    };
    let plan = match &replay {
        Some((dir, _, snap, state)) => {
            if args.iterations.is_some() || args.time.is_some() {
                return crate::error::usage(format!(
                    "--replay reproduces {} as recorded, to its end: it takes no --iterations or --time",
                    dir.display()
                ));
            }
            if args.scale.jobs != 1 || args.scale.executor != "local" {
                return crate::error::usage(format!(
                    "--replay runs each session of {} as recorded, with as many evaluations at once as it had: it takes no --jobs or --executor",
                    dir.display()
                ));
            }
            Some(ReplayPlan::of(dir, state, snap)?)
        }
        None => None,
    };
    // The round budget: for a replay, the recorded run's (it stops where the record ends).
    let iterations = match &replay {
        Some((_, _, _, state)) => state.round_budget,
        None => Some(
            args.iterations
                .or(file_defaults.budget.iterations)
                .unwrap_or(DEFAULT_ITERATIONS),
        ),
    };
    let run_dir = args.run_dir.clone().unwrap_or_else(|| {
        PathBuf::from("ksearch-runs").join(format!("{}-{}", task.spec.name, utc_stamp(now)))
    });
    let proposer = proposer_for(
        &task,
        config.llm.as_ref(),
        &file_defaults,
        &config.eval,
        config.host_cpu.as_ref(),
        replay
            .as_ref()
            .zip(plan.as_ref())
            .map(|((_, _, s, _), plan)| (s.llm_calls.as_slice(), plan)),
        &run_dir,
    )?;
    config.proposer = proposer.name();
    let stop = stop_flag();
    let mut observer = RunProgress::new(args.output.quiet, iterations);
    observer.note(&format!("run directory: {}", run_dir.display()));
    let mut local;
    let mut replayed;
    let evaluator: &mut dyn Evaluator = match (&replay, &plan) {
        (Some((_, _, snap, _)), Some(plan)) => {
            replayed =
                ReplayEvaluator::from_attempts(&snap.attempts).finishing(plan.finishing.clone());
            &mut replayed
        }
        _ => {
            local = super::scale::evaluators(
                &task,
                &config.eval,
                &args.scale,
                &run_dir,
                &file_defaults,
                false,
            )?;
            local.start(&stop, observer.phase_observer());
            for line in local.describe() {
                observer.note(&line);
            }
            local.as_dyn()
        }
    };
    let until = match &plan {
        Some(_) => None,
        None => deadline(time_budget(args.time, &file_defaults)?),
    };
    let parts = Parts {
        proposer,
        evaluator,
        observer: &mut observer,
        stop,
    };
    let budget = Budget {
        rounds: iterations,
        until,
    };
    // The outermost directory the run creates (`ksearch-runs/` on a first run).
    let created = run_dir
        .ancestors()
        .take_while(|p| !p.as_os_str().is_empty() && !p.exists())
        .last()
        .map(std::path::Path::to_path_buf);
    let held_a_run = run_dir.join(ksearch_store::DB_FILE).exists();
    let outcome: anyhow::Result<RunSummary> = Engine::create(&run_dir, task, config, budget, parts)
        .and_then(|mut engine| match &plan {
            Some(plan) => engine.replay(plan),
            None => engine.run(),
        })
        .map_err(Into::into);
    let summary = match outcome {
        Ok(summary) => summary,
        Err(e) => {
            // A run that could not start (its seed measured nothing) leaves no directory behind;
            // one that started is kept for `resume`.
            // An interrupted one is kept too: `resume` starts it again.
            let interrupted = e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<ksearch_engine::EngineError>(),
                    Some(ksearch_engine::EngineError::InterruptedDuringSetup)
                )
            });
            // A paused one too: it waits for an answer.
            let paused = super::paused(&e).is_some();
            let kept = interrupted || paused || ksearch_engine::read_summary(&run_dir).is_ok();
            if !kept {
                match created {
                    Some(dir) => {
                        let _ = fs_err::remove_dir_all(dir);
                    }
                    // A directory that was there before, and held no run: only what this run
                    // put in it goes, so that the same command can run again into it.
                    None if !held_a_run => {
                        let db = ksearch_store::DB_FILE;
                        for name in [
                            db.to_owned(),
                            format!("{db}-wal"),
                            format!("{db}-shm"),
                            ksearch_store::LOCK_FILE.to_owned(),
                        ] {
                            let _ = fs_err::remove_file(run_dir.join(name));
                        }
                        let _ = fs_err::remove_dir_all(run_dir.join(ksearch_store::ARTIFACTS_DIR));
                    }
                    None => {}
                }
                return Err(e.context(format!("failed to start the run in {}", run_dir.display())));
            }
            if paused {
                return Err(e);
            }
            // Kept: what was measured stays, and a resume goes on from there.
            let dir = run_dir.display();
            return Err(e.context(format!(
                "the run in {dir} stopped, and is kept: `ksearch resume {dir}` goes on from where it stopped"
            )));
        }
    };
    report(&summary, &args.output, args.replay.is_none())
}

/// A resume's `--model`, `--reasoning-model` and `--codegen-model`, for this session.
fn change_models(m: &mut LlmModels, args: &ResumeArgs) -> anyhow::Result<()> {
    for (flag, value) in [
        ("--model", &args.model),
        ("--reasoning-model", &args.reasoning_model),
        ("--codegen-model", &args.codegen_model),
    ] {
        if let Some(value) = value {
            crate::error::check_model_flag(flag, value)?;
        }
    }
    let both = args.model.as_ref();
    for (role, new) in [
        (&mut m.reasoning, args.reasoning_model.as_ref().or(both)),
        (&mut m.codegen, args.codegen_model.as_ref().or(both)),
    ] {
        let Some(new) = new else { continue };
        if new == "builtin" {
            return crate::error::usage(
                "a model run cannot go on with the builtin proposer: resume it with a model, or start a new run with --model builtin",
            );
        }
        new.parse::<ModelSpec>()
            .with_context(|| format!("invalid model `{new}`"))?;
        role.clone_from(new);
    }
    Ok(())
}

pub(crate) fn resume(args: &ResumeArgs) -> anyhow::Result<i32> {
    let file_defaults = ksearch_toml::load()?;
    let run = open_run_writer(&args.run_dir)?;
    ksearch_eval::dependencies::require_compiler(&run.task)?;
    // The run's speedups are quoted against its baseline: without the baseline's libraries it
    // cannot go on (the error says how to install them).
    ksearch_eval::dependencies::require_available(
        &run.task,
        run.config.eval.python.as_deref().map(std::path::Path::new),
    )?;
    let mut models = run.config.llm.clone();
    if let Some(m) = models.as_mut() {
        if args.max_cost.is_some() {
            m.max_cost_usd = args.max_cost;
        }
        if args.base_url.is_some() {
            m.base_url.clone_from(&args.base_url);
        }
        change_models(m, args)?;
    } else if args.model.is_some() || args.reasoning_model.is_some() || args.codegen_model.is_some()
    {
        return crate::error::usage(
            "this run's proposer is the builtin one, which a resume cannot give a model: start a new run with --model",
        );
    }
    let proposer = proposer_for(
        &run.task,
        models.as_ref(),
        &file_defaults,
        &run.config.eval,
        run.config.host_cpu.as_ref(),
        None,
        &args.run_dir,
    )?;
    let stop = stop_flag();
    // The round budget the progress line shows: the engine records the same.
    let snap = run.store.snapshot()?;
    let done = snap
        .attempts
        .iter()
        .filter(|a| a.round > 0 && a.evaluation.is_some())
        .count() as u64;
    let state = run.store.state::<EngineState>()?;
    let stored = state.as_ref().and_then(|s| s.round_budget);
    let shown_budget = args.iterations.map(|n| done + n).or(stored);
    let best = state
        .as_ref()
        .and_then(|s| best_so_far(&snap, s, run.config.seed));
    let mut observer = RunProgress::new(args.output.quiet, shown_budget).with_best(best);
    let mut evaluator = super::scale::evaluators(
        &run.task,
        &run.config.eval,
        &args.scale,
        &args.run_dir,
        &file_defaults,
        super::scale::run_has_several(&snap, state.as_ref()),
    )?;
    evaluator.start(&stop, observer.phase_observer());
    let budget_words = match shown_budget {
        Some(b) => format!(
            "{done} of {b} rounds done, {} to go",
            b.saturating_sub(done)
        ),
        None => format!("{done} rounds done, no round budget"),
    };
    let cost_words = models
        .as_ref()
        .and_then(|m| m.max_cost_usd)
        .map_or_else(String::new, |c| format!(", spending cap ${c:.2}"));
    let model_words = models.as_ref().map_or_else(String::new, |m| {
        if m.reasoning == m.codegen {
            format!(", model {}", m.reasoning)
        } else {
            format!(
                ", models {} (reasoning) and {} (code)",
                m.reasoning, m.codegen
            )
        }
    });
    observer.note(&format!(
        "resuming the run in {}: {budget_words}{cost_words}{model_words}",
        args.run_dir.display()
    ));
    for line in evaluator.describe() {
        observer.note(&line);
    }
    let until = deadline(time_budget(args.time, &file_defaults)?);
    let parts = Parts {
        proposer,
        evaluator: evaluator.as_dyn(),
        observer: &mut observer,
        stop,
    };
    let budget = Budget {
        rounds: args.iterations,
        until,
    };
    let mut engine = Engine::resume(run, budget, parts)
        .with_context(|| format!("failed to resume the run in {}", args.run_dir.display()))?;
    let summary = engine.run()?;
    report(&summary, &args.output, true)
}

/// The run's best speedup as `ksearch tree` shows it (a cycle under way included): what the
/// progress line of a resumed session starts from.
fn best_so_far(snap: &ksearch_store::Snapshot, state: &EngineState, seed: u64) -> Option<f64> {
    let tree = ksearch_core::tree::Tree::from_nodes(snap.nodes.clone(), state.next_node);
    // A tree that does not hang from its root is refused by the resume, with the reason.
    if tree.is_empty() || tree.check().is_err() {
        return None;
    }
    ksearch_run::with_open_cycles(&tree, &snap.attempts, &snap.cycles, seed)
        .best()
        .solution
        .as_ref()?
        .speedup
}

/// The result on stdout; the exit code says whether Ctrl-C stopped this session (`live`: not
/// a replay, which reproduces a recorded interrupt without being interrupted).
fn report(summary: &RunSummary, output: &OutputFlags, live: bool) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    if output.json {
        serde_json::to_writer(&mut out, summary)?;
        writeln!(out)?;
    } else {
        write!(
            out,
            "{}",
            ksearch_core::printable::printable(&render_summary(summary))
        )?;
    }
    // Stopped by Ctrl-C: saved, but not done; a script must not take it for a finished run.
    Ok(
        if live && summary.stop_reason == Some(StopReason::Interrupted) {
            exit_codes::INTERRUPTED
        } else {
            exit_codes::OK
        },
    )
}

fn x(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}×"))
}

pub(crate) fn render_summary(s: &RunSummary) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let dir = s.run_dir.display();
    let reason = s.stop_reason.map_or("running", crate::progress::stop_words);
    let _ = writeln!(o, "{} · {} · {reason}", s.task, s.proposer);
    if let Some(detail) = &s.stop_detail {
        let _ = writeln!(o, "{detail}");
    }
    let _ = writeln!(
        o,
        "rounds {} · nodes {} · cycles {} · wall {:.1} s (evaluating {:.1} s, orchestrator {:.2}%)",
        s.rounds,
        s.nodes,
        s.cycles,
        s.wall_s,
        s.eval_s,
        100.0 * s.orchestrator_fraction
    );
    if s.tokens > 0 {
        let _ = writeln!(o, "models: ${:.4} for {} tokens", s.cost_usd, s.tokens);
        for (who, t) in &s.llm {
            let _ = writeln!(
                o,
                "  {who}: {} calls ({} from the journal{}), {} in ({} cached) / {} out ({} reasoning) tokens{}, ${:.4}{}",
                t.calls,
                t.replayed_calls,
                ksearch_engine::asked_again(t.empty_answers, t.truncated_answers),
                t.input_tokens,
                t.cached_input_tokens,
                t.output_tokens,
                t.reasoning_tokens,
                if t.tokens_estimated {
                    " (estimated)"
                } else {
                    ""
                },
                t.cost_usd,
                if t.unpriced_calls > 0 {
                    format!(" + {} calls with no price", t.unpriced_calls)
                } else {
                    String::new()
                }
            );
        }
    }
    // Without a production baseline, the speedup over the reference flatters (the reference is
    // written to be correct, not fast): the speedup over the seed comes first.
    let over = if s.baseline_is_reference {
        format!(
            "{} over the seed ({} over {}, a deliberately simple implementation: {})",
            x(s.best.speedup_vs_seed),
            x(s.best.speedup),
            s.baseline,
            ksearch_run::no_baseline_words(s.baseline_left_out.as_ref())
        )
    } else {
        format!(
            "{} over {}, {} over the seed",
            x(s.best.speedup),
            s.baseline,
            x(s.best.speedup_vs_seed)
        )
    };
    let _ = writeln!(o, "best: node {} `{}` — {over}", s.best.node, s.best.title);
    for (w, ms) in &s.best.latency_ms {
        let seed = s
            .seed_latency_ms
            .get(w)
            .map_or_else(|| "-".into(), |v| time_ms(*v));
        let _ = writeln!(o, "  {w:<12} {:>10}   (seed {seed})", time_ms(*ms));
    }
    let c = &s.calibration;
    if !c.points.is_empty() {
        let _ = writeln!(
            o,
            "calibration: {} measured nodes · rank correlation {} · measured/predicted {}",
            c.points.len(),
            c.spearman.map_or_else(|| "-".into(), |v| format!("{v:.2}")),
            x(c.bias)
        );
    }
    let _ = writeln!(
        o,
        "see `ksearch tree {dir}`; continue with `ksearch resume {dir} --iterations N`"
    );
    o
}

#[cfg(test)]
mod tests {
    use super::utc_stamp;

    #[test]
    fn utc_stamps() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_795_971_302), "20261129-165502");
        assert_eq!(utc_stamp(951_782_400), "20000229-000000");
    }
}
