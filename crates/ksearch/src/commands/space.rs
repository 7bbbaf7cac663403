//! `ksearch space check TASK`: render points of a task's template space and check each one the
//! way a candidate is checked before it reaches a worker (the contract and the knowledge rules),
//! plus a compile where this machine can compile the task's code, and for a torch or MLX task with
//! an NVIDIA device named (or found), its Triton or CUDA kernels compiled ahead of time for that
//! device (`ksearch_eval::KernelCompiler`).
//! The decisions live in `ksearch_engine::builtin::space`; this module supplies the checks that
//! need the machine.
//!
//! Exit codes: 0 when every checked point passed (points excluded by a constraint are fine), 1
//! when one failed, 3 for input errors (no such task, a task without a space, a broken space).

use std::io::Write;

use clap::{Args, Subcommand};
use ksearch_core::platform::Target;
use ksearch_core::task::Task;
use ksearch_engine::builtin::space::{FileSpace, PointError, PointOutcome, knobs_of};
use ksearch_eval::{CompiledPoints, KernelCompiler};
use ksearch_knowledge::Hardware;

use crate::exit_codes;

#[derive(Debug, Args)]
pub(crate) struct SpaceArgs {
    #[command(subcommand)]
    pub(crate) command: SpaceCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SpaceCommand {
    /// Render points of a task's template space (every point of a small space, a stated sample
    /// of a large one) and check each: constraints, the contract, the knowledge rules, and a
    /// compile where this machine can. Exit code 1 when a point fails.
    Check {
        /// A built-in task name (e.g. `mlx/attention`) or a task directory.
        task: String,
        /// Most points to render and check.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        limit: u32,
        /// The device whose limits the constraints and the rules read (a name from `ksearch
        /// knowledge hardware`); the GPU found here when unset.
        #[arg(long)]
        hardware: Option<String>,
        /// Skip the compile (the contract and the rules are still checked).
        #[arg(long)]
        no_compile: bool,
        /// Also write each rendered point to this directory, named by its knobs, to read or
        /// to try by hand (`ksearch eval TASK FILE`), and beside it the machine code of each
        /// GPU kernel compiled for it (`POINT.KERNEL.WORKLOAD.sass`).
        #[arg(long, value_name = "DIR")]
        write: Option<std::path::PathBuf>,
        /// Hold a knob at one of its values in every point checked (repeatable), e.g.
        /// `--set mma=1 --set warps=4`: to render and try the points near one you have in mind.
        #[arg(long = "set", value_name = "KNOB=VALUE")]
        set: Vec<String>,
    },
}

pub(crate) fn run(args: &SpaceArgs) -> anyhow::Result<i32> {
    let SpaceCommand::Check {
        task,
        limit,
        hardware,
        no_compile,
        write,
        set,
    } = &args.command;
    let task = match crate::commands::load_task(task) {
        Ok(t) => t,
        Err(e) => return input_error(&e),
    };
    let Some(space) = &task.space else {
        return input_error(&format!(
            "task `{}` ships no template space (a `[space] file = \"space/space.toml\"` in its task.toml; see docs/spaces.md)",
            task.id
        ));
    };
    let k = ksearch_eval::knowledge();
    let hw = match k.select_hardware(hardware.as_deref()) {
        Ok(h) => h.cloned(),
        Err(e) => return input_error(&e),
    };
    let family = match FileSpace::new(&task.spec, space, hw.as_ref()) {
        Ok(f) => f,
        Err(e) => return input_error(&e),
    };
    let pinned = match family.pin(set) {
        Ok(p) => p,
        Err(e) => return input_error(&format!("--set {e}")),
    };
    if !*no_compile {
        // Every point would fail its compile, each blaming itself.
        ksearch_eval::dependencies::require_compiler(&task)?;
    }
    let tmp = tempfile::tempdir()?;
    if let Some(dir) = write {
        fs_err::create_dir_all(dir)?;
    }
    let extension = family.spec().extension();
    // A Python task's GPU kernels, compiled for the NVIDIA device the check is for.
    let kernels = KernelCompiler::kernels(task.spec.backend);
    let mut compiler = match (&hw, kernels, *no_compile) {
        (Some(h), Some(_), false) if h.compute_capability.is_some() => Some(KernelCompiler::start(
            task.spec.backend,
            std::path::Path::new(ksearch_eval::DEFAULT_PYTHON),
            &task.spec,
            h,
            write.is_some(),
        )),
        _ => None,
    };
    // The device's target's kernels are checked on every point; another target's only where
    // the space allows the point there, as it sees that target's first device in the knowledge
    // base (an MLX point for an H200 with 64 KB tiles carries a Metal kernel Apple GPUs never run).
    let others: Vec<(Target, FileSpace, String)> = hw
        .as_ref()
        .map(|device| {
            task.spec
                .backend
                .backend()
                .targets()
                .iter()
                .filter(|&&t| t != device.target)
                .filter_map(|&t| {
                    let other = k.hardware.iter().find(|h| h.target == t)?;
                    let space = FileSpace::new(&task.spec, space, Some(other)).ok()?;
                    Some((t, space, other.id.clone()))
                })
                .collect()
        })
        .unwrap_or_default();
    let mut unchecked = vec![0usize; others.len()];
    let mut compiled = CompiledPoints::default();
    let report = family.check(*limit as usize, &pinned, |config, source| {
        let mut file = tmp.path().join(format!("point.{extension}"));
        if let Some(dir) = write {
            let name = knobs_of(config).replace([' ', '='], "_");
            let written = dir.join(format!("{name}.{extension}"));
            fs_err::write(&written, source).map_err(|e| e.to_string())?;
            // A Python module is compiled where it was written, so that its GPU kernels'
            // machine code lands beside it (a C point's library stays out of the directory).
            if kernels.is_some() {
                file = written;
            }
        }
        let mut skip = Vec::new();
        for (i, (target, other, _)) in others.iter().enumerate() {
            if let Err(PointError::Constraint { .. }) = other.check_point(config) {
                unchecked[i] += 1;
                skip.push(*target);
            }
        }
        checks(&task, source, hw.as_ref(), &skip)?;
        if *no_compile {
            return Ok(());
        }
        ksearch_eval::build_only(task.spec.backend, source, &file)?;
        match compiler
            .as_mut()
            .map(|started| started.as_mut().map(|c| c.compile(&file)))
        {
            Some(Ok(Ok(outcome))) => compiled.add(&knobs_of(config), outcome),
            Some(Ok(Err(why))) => {
                compiled.unavailable = Some(why);
                compiler = None;
                Ok(())
            }
            Some(Err(_)) | None => Ok(()),
        }
    });
    if let Some(Err(why)) = compiler {
        compiled.unavailable = Some(why);
    }
    let mut out = std::io::stdout().lock();
    write!(out, "{}", report.render(&task.id, &space.file))?;
    // The space reads the device's limits, and none was named or found here.
    if hw.is_none()
        && report.points.iter().any(|(_, o)| {
            matches!(o, PointOutcome::Failed(m) if m.contains("`hw.") && m.contains("undefined"))
        })
    {
        writeln!(
            out,
            "(the points that failed read the device's limits (`hw.…`), and no GPU was found here: name the device to check them for with `--hardware NAME`; `ksearch knowledge hardware` lists the devices known)"
        )?;
    }
    for ((target, _, device), n) in others.iter().zip(&unchecked) {
        if *n > 0 {
            writeln!(
                out,
                "({n} of these points {} `{target}` kernels that the space excludes on {device}: those kernels were not checked against the `{target}` rules)",
                if *n == 1 { "carries" } else { "carry" }
            )?;
        }
    }
    match hw
        .as_ref()
        .filter(|_| compiled.points > 0 || compiled.unavailable.is_some())
    {
        Some(h) => {
            write!(out, "{}", compiled.render(kernels.unwrap_or("kernels"), h))?;
            if let Some(dir) = write.as_ref().filter(|_| compiled.points > 0) {
                writeln!(
                    out,
                    "(each compiled kernel's machine code is beside its point in {}: POINT.KERNEL.WORKLOAD.sass, or .cubin where no nvdisasm was found)",
                    dir.display()
                )?;
            }
            // The backend's other GPU targets: a check compiles for the NVIDIA device alone.
            let metal = ksearch_core::platform::Target::Metal;
            if task.spec.backend.backend().targets().contains(&metal) {
                writeln!(
                    out,
                    "(their Metal kernels were not compiled: Metal compiles only on an Apple GPU)"
                )?;
            }
        }
        None => {
            if !*no_compile && let Some(caveat) = ksearch_eval::build_only_caveat(task.spec.backend)
            {
                writeln!(out, "({caveat})")?;
            }
        }
    }
    Ok(if report.failed() > 0 {
        exit_codes::CHECK_FAILED
    } else {
        exit_codes::OK
    })
}

/// The checks every candidate meets before a worker sees it: the contract and the knowledge
/// rules of every target of the backend but those in `skip` (an mlx module carries the kernels
/// of both GPUs).
fn checks(task: &Task, source: &str, hw: Option<&Hardware>, skip: &[Target]) -> Result<(), String> {
    let mut violations = ksearch_core::static_check::check_candidate(&task.spec, source);
    let backend = task.spec.backend.backend();
    for &target in backend.targets().iter().filter(|t| !skip.contains(t)) {
        let device = hw.filter(|h| h.target == target);
        violations.extend(ksearch_eval::check_rules(
            source,
            backend.language(),
            target,
            device,
        ));
    }
    if violations.is_empty() {
        return Ok(());
    }
    Err(violations
        .iter()
        .map(|v| match v.line {
            Some(line) => format!("rule `{}` (line {line}): {}", v.rule, v.message),
            None => format!("rule `{}`: {}", v.rule, v.message),
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

fn input_error(e: &dyn std::fmt::Display) -> anyhow::Result<i32> {
    writeln!(std::io::stderr().lock(), "error: {e}")?;
    Ok(exit_codes::INPUT)
}
