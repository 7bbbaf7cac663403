//! Worker protocol, version [`PROTOCOL_VERSION`]: JSON lines between the orchestrator and a
//! worker process. `docs/protocol.md` is the prose version of this file; keep them together.
//! `harness/ksearch_harness/protocol.schema.json` is its JSON Schema, generated from these types
//! (a test below fails while it is stale, and says how to regenerate it).
//!
//! Every line carries `"protocol"` (the version) and a `"type"`. The orchestrator writes
//! [`Request`]s to the worker's request descriptor (fd 3); the worker writes
//! [`WorkerMessage`]s to its message descriptor (fd 4), both named in `KSEARCH_PROTOCOL_FDS`.
//! Neither is stdin or stdout, which candidate code may read or write, and runners never get
//! them.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::stats::TimingStats;
use crate::task::{Source, TaskSpec, Workload};

pub const PROTOCOL_VERSION: u32 = 2;

/// A message with its protocol version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "{T}Line")]
pub struct Envelope<T> {
    #[schemars(extend("const" = PROTOCOL_VERSION))]
    pub protocol: u32,
    #[serde(flatten)]
    pub message: T,
}

impl<T> Envelope<T> {
    pub fn new(message: T) -> Self {
        Self {
            protocol: PROTOCOL_VERSION,
            message,
        }
    }
}

/// Orchestrator → worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Request {
    Evaluate(Box<EvaluateRequest>),
    /// Finish and exit.
    Shutdown,
}

/// Worker → orchestrator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkerMessage {
    /// First line a worker writes.
    Hello {
        backend: String,
        version: String,
        pid: u32,
    },
    /// Written before each phase that runs candidate code, so a crash can be placed.
    Progress {
        id: u64,
        phase: Phase,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workload: Option<String>,
    },
    Result(Box<EvaluateResult>),
    /// The request could not be carried out for a reason that is not the candidate's fault
    /// (a malformed request, a reference that does not build). Not an evaluation outcome.
    Error {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<u64>,
        message: String,
        /// The task's own code is at fault (its reference, baseline or a comparison does not
        /// build, crashes or reads past an input), not the worker.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        task_fault: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Compile,
    Check,
    Timing,
    Recheck,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Compile => "compile",
            Phase::Check => "check",
            Phase::Timing => "timing",
            Phase::Recheck => "recheck",
        })
    }
}

/// Evaluate one candidate: build it, check it against the reference on every workload and
/// seed, time it interleaved with the contenders in `compare`, check it once more.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvaluateRequest {
    pub id: u64,
    pub task: TaskSpec,
    /// The trusted implementation outputs are checked against.
    pub reference: Source,
    pub candidate: Source,
    /// Implementations timed alongside the candidate: the baseline, the parent and the
    /// incumbent when there are such.
    #[serde(rename = "compare")]
    pub contenders: Vec<Contender>,
    pub workloads: Vec<Workload>,
    pub check: CheckPlan,
    /// `None`: check only.
    pub timing: Option<TimingPlan>,
}

impl EvaluateRequest {
    /// What a `passed` result of this request says: what was checked, and whether it was
    /// timed. The orchestrator writes it into every passed result, whichever worker made it.
    pub fn passed_message(&self) -> String {
        let checked = format!(
            "passed {} workload(s) × {} seed(s)",
            self.workloads.len(),
            self.check.seeds.len()
        );
        match self.timing {
            Some(_) => format!("{checked}, every timed call checked, and a re-check after timing"),
            None => format!("{checked} and a re-check on fresh inputs (not timed)"),
        }
    }
}

#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Candidate,
    Baseline,
    /// The solution of the node whose action the candidate implements.
    Parent,
    /// The best candidate of the current cycle, which an improvement must beat.
    Incumbent,
    /// Another implementation the task asks to report against (e.g. a second baseline).
    Comparison,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Candidate => "candidate",
            Role::Baseline => "baseline",
            Role::Parent => "parent",
            Role::Incumbent => "incumbent",
            Role::Comparison => "comparison",
        })
    }
}

/// Another implementation to time in the same worker, interleaved with the candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Contender {
    pub role: Role,
    pub label: String,
    pub source: Source,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub libs: Vec<String>,
    /// Set in the worker before the contender is loaded.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckPlan {
    /// One fresh set of random inputs per seed and workload; at least three.
    pub seeds: Vec<u64>,
    /// Seed of the final check after timing, on inputs the candidate has never seen.
    pub recheck_seed: u64,
    /// The tolerance of every output dtype, resolved (task override or default), so workers
    /// in other languages need no copy of the defaults.
    #[serde(default)]
    pub tolerances: BTreeMap<crate::Dtype, crate::task::Tolerance>,
}

impl CheckPlan {
    pub fn from_base_seed(base: u64, count: usize) -> Self {
        Self {
            seeds: (0..count as u64).map(|i| base.wrapping_add(i)).collect(),
            recheck_seed: base.wrapping_add(0x5EED_0000),
            tolerances: BTreeMap::new(),
        }
    }

    /// With the tolerance of every output dtype of `spec`.
    #[must_use]
    pub fn with_tolerances(mut self, spec: &TaskSpec) -> Self {
        self.tolerances = spec
            .outputs
            .iter()
            .map(|o| (o.dtype, spec.tolerance_for(o.dtype)))
            .collect();
        self
    }
}

/// How long and how often to time. Samples are taken until every contender has at least
/// `min_runs` samples and `min_time_ms` of measured time, or the workload's `max_time_ms` is
/// spent (and every contender has at least three samples).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TimingPlan {
    pub warmup_ms: f64,
    pub min_runs: u32,
    pub min_time_ms: f64,
    pub max_time_ms: f64,
    /// Calls shorter than this are batched so that one sample lasts about this long.
    pub target_sample_ms: f64,
    /// Bytes of distinct input sets to rotate through; 0 picks twice the last-level cache.
    pub rotate_bytes: u64,
}

impl TimingPlan {
    /// How an evaluation is timed unless told otherwise. The one home of these defaults: the
    /// command line's flags, the evaluator's and a run's settings all take them from here.
    pub const DEFAULT: TimingPlan = TimingPlan {
        warmup_ms: 50.0,
        min_runs: 10,
        min_time_ms: 300.0,
        max_time_ms: 10_000.0,
        target_sample_ms: 1.0,
        rotate_bytes: 0,
    };
}

impl Default for TimingPlan {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Input seeds checked per workload unless told otherwise (`--seeds`).
pub const DEFAULT_SEEDS: usize = 3;
/// The first input seed unless told otherwise (`--input-seed`).
pub const DEFAULT_BASE_SEED: u64 = 1;
/// The wall-clock limit, in seconds, of an evaluation nothing else sets: `ksearch eval`'s, a
/// run's seed's (`--timeout`).
pub const DEFAULT_TIMEOUT_S: u64 = 300;

/// The outcome of an evaluation. Every status is data the proposer reads, never a Rust error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    CompileError,
    Incorrect,
    RuntimeError,
    Timeout,
    Crashed,
    Rejected,
}

impl Status {
    pub const ALL: [Status; 7] = [
        Status::Passed,
        Status::CompileError,
        Status::Incorrect,
        Status::RuntimeError,
        Status::Timeout,
        Status::Crashed,
        Status::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::CompileError => "compile_error",
            Status::Incorrect => "incorrect",
            Status::RuntimeError => "runtime_error",
            Status::Timeout => "timeout",
            Status::Crashed => "crashed",
            Status::Rejected => "rejected",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EvaluateResult {
    pub id: u64,
    pub status: Status,
    /// One line saying what happened, e.g. where the first wrong element is.
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compile: Option<CompileReport>,
    pub workloads: Vec<WorkloadReport>,
    pub phases: Phases,
    /// What candidate code printed on stdout/stderr.
    pub output: CapturedOutput,
    /// How the candidate was confined while it ran (absent when it never ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Confinement>,
    /// What the task's own implementations (baseline, comparisons) said they ran, where they
    /// describe themselves (`ksearch_describe` on the c backend: an OpenBLAS baseline names its
    /// build and the kernels it picked for this CPU).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub described: Vec<Described>,
}

impl EvaluateResult {
    /// What the contender of `role` said it ran, if it said.
    pub fn description_of(&self, role: Role) -> Option<&str> {
        self.described
            .iter()
            .find(|d| d.role == role)
            .map(|d| d.text.as_str())
    }

    /// The median latency (ms) of the contender of `role` on each workload it was timed on.
    pub fn medians(&self, role: Role) -> BTreeMap<String, f64> {
        self.workloads
            .iter()
            .filter_map(|w| Some((w.name.clone(), w.timing(role)?.median_ms)))
            .collect()
    }
}

/// A contender's description of itself, as it reported it when loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Described {
    pub role: Role,
    pub label: String,
    pub text: String,
}

/// Longest description of a contender kept, in bytes.
pub const MAX_DESCRIPTION: usize = 512;

impl Described {
    /// `text` as one line of at most [`MAX_DESCRIPTION`] bytes: control characters and runs of
    /// white space become one space.
    pub fn clean(text: &str) -> String {
        let mut out = String::new();
        for word in text
            .split(|c: char| c.is_whitespace() || c.is_control())
            .filter(|w| !w.is_empty())
        {
            let needed = word.len() + usize::from(!out.is_empty());
            if out.len() + needed > MAX_DESCRIPTION {
                break;
            }
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
        out
    }
}

/// What confinement a sandboxed program really got. Where the kernel refused something, the
/// field says so and `missing` explains; evaluation results carry this, so a user sees when a
/// candidate ran less confined than documented.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Confinement {
    /// Its own user namespace (another uid outside).
    pub user_namespace: bool,
    /// Its own PID namespace: it sees no other process, and all its processes die with it.
    pub pid_namespace: bool,
    /// Its own network namespace: no network at all.
    pub network_namespace: bool,
    /// A private root: only system directories (read-only) and its own temp dir exist.
    pub private_root: bool,
    /// A seccomp filter (no new processes for runners, no ptrace, no IPv4/IPv6 sockets).
    pub seccomp: bool,
    /// The uid it runs as, seen from outside.
    pub uid: u32,
    /// What could not be applied, in words.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

impl Confinement {
    /// Every layer applied.
    pub fn is_full(&self) -> bool {
        self.pid_namespace && self.network_namespace && self.private_root && self.seccomp
    }

    /// One line for a result message.
    pub fn summary(&self) -> String {
        if self.is_full() {
            format!(
                "sandboxed (user, pid, network and mount namespaces{}, seccomp; uid {})",
                if self.user_namespace {
                    ""
                } else {
                    " without a user namespace"
                },
                self.uid
            )
        } else {
            format!("partly sandboxed: {}", self.missing.join("; "))
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompileReport {
    pub command: String,
    /// `cc --version`, first line.
    pub compiler: String,
    pub seconds: f64,
    /// Compiler diagnostics, trimmed.
    pub log: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadReport {
    pub name: String,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Worst errors over every seed checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<ErrorStats>,
    /// One entry per timed contender, the candidate first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timings: Vec<ContenderTiming>,
}

impl WorkloadReport {
    pub fn timing(&self, role: Role) -> Option<&TimingStats> {
        self.timings
            .iter()
            .find(|t| t.role == role)
            .map(|t| &t.stats)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ErrorStats {
    pub max_abs_err: f64,
    pub max_rel_err: f64,
    /// `||out - ref||₂ / ||ref||₂`.
    pub norm_rel_err: f64,
    pub seeds_checked: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ContenderTiming {
    pub role: Role,
    pub label: String,
    pub stats: TimingStats,
}

/// Seconds spent in each phase inside the worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Phases {
    pub compile_s: f64,
    pub check_s: f64,
    pub timing_s: f64,
}

/// The start and end of what candidate code printed, and how much it printed in all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CapturedOutput {
    pub bytes: u64,
    pub head: String,
    pub tail: String,
}

/// Keep a log readable in a prompt: at most `max_lines` lines and `max_bytes` bytes, cut at the
/// end with a note saying how much was left out.
pub fn trim_log(log: &str, max_lines: usize, max_bytes: usize) -> String {
    let total_lines = log.lines().count();
    let mut out = String::new();
    for (i, line) in log.lines().enumerate() {
        if i >= max_lines || out.len() + line.len() + 1 > max_bytes {
            out.push_str(&format!("… ({} more lines)\n", total_lines - i));
            return out;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::tests_support::matmul_spec;

    fn request() -> Request {
        let spec = matmul_spec();
        Request::Evaluate(Box::new(EvaluateRequest {
            id: 42,
            workloads: spec.workloads.clone(),
            task: spec,
            reference: Source {
                file: "reference.c".into(),
                text: "void matmul() {}".into(),
            },
            candidate: Source {
                file: "candidate.c".into(),
                text: "/* c */".into(),
            },
            contenders: vec![Contender {
                role: Role::Baseline,
                label: "blas".into(),
                source: Source {
                    file: "baseline.c".into(),
                    text: "".into(),
                },
                libs: vec!["openblas".into()],
                env: [("OPENBLAS_NUM_THREADS".to_owned(), "1".to_owned())].into(),
            }],
            check: CheckPlan::from_base_seed(1, 3),
            timing: Some(TimingPlan::default()),
        }))
    }

    fn result() -> WorkerMessage {
        WorkerMessage::Result(Box::new(EvaluateResult {
            id: 42,
            status: Status::Passed,
            message: "ok".into(),
            compile: Some(CompileReport {
                command: "cc -O3".into(),
                compiler: "gcc 12".into(),
                seconds: 0.1,
                log: String::new(),
            }),
            workloads: vec![WorkloadReport {
                name: "small".into(),
                status: Status::Passed,
                message: None,
                errors: Some(ErrorStats {
                    max_abs_err: 1e-7,
                    max_rel_err: 1e-6,
                    norm_rel_err: 1e-8,
                    seeds_checked: 3,
                }),
                timings: vec![ContenderTiming {
                    role: Role::Candidate,
                    label: "candidate".into(),
                    stats: TimingStats::from_samples(vec![1.0, 2.0, 3.0], 1),
                }],
            }],
            phases: Phases {
                compile_s: 0.1,
                check_s: 0.2,
                timing_s: 0.3,
            },
            output: CapturedOutput {
                bytes: 5,
                head: "hello".into(),
                tail: String::new(),
            },
            sandbox: Some(Confinement {
                pid_namespace: true,
                uid: 65534,
                missing: vec!["no seccomp filter".into()],
                ..Confinement::default()
            }),
            described: vec![Described {
                role: Role::Baseline,
                label: "blas".into(),
                text: "OpenBLAS 0.3.21 DYNAMIC_ARCH; core Haswell".into(),
            }],
        }))
    }

    /// One message of each type.
    fn messages() -> Vec<WorkerMessage> {
        vec![
            result(),
            WorkerMessage::Hello {
                backend: "c".into(),
                version: "0.1.0".into(),
                pid: 7,
            },
            WorkerMessage::Progress {
                id: 1,
                phase: Phase::Timing,
                workload: Some("small".into()),
            },
            WorkerMessage::Error {
                id: None,
                message: "bad".into(),
                task_fault: true,
            },
        ]
    }

    /// A request the Python harness can carry out on its `numpy` target: an mlx task whose
    /// reference, baseline and candidate are numpy modules.
    fn numpy_request() -> Request {
        let mut spec = matmul_spec();
        spec.backend = crate::task::BackendKind::Mlx;
        spec.reference.file = "reference.py".into();
        spec.seed.file = "seed.py".into();
        let module = |file: &str, extra: &str| Source {
            file: file.into(),
            text: format!(
                "import numpy as np\n\n\ndef run(a, b, *, m, n, k):\n    return (a @ b).astype(np.float32)\n{extra}"
            ),
        };
        Request::Evaluate(Box::new(EvaluateRequest {
            id: 1,
            workloads: spec.workloads.clone(),
            check: CheckPlan::from_base_seed(DEFAULT_BASE_SEED, DEFAULT_SEEDS)
                .with_tolerances(&spec),
            task: spec,
            reference: module("reference.py", ""),
            candidate: module("candidate.py", ""),
            contenders: vec![Contender {
                role: Role::Baseline,
                label: "numpy matmul".into(),
                source: module(
                    "baseline.py",
                    "\n\ndef ksearch_describe():\n    return \"numpy \" + np.__version__\n",
                ),
                libs: Vec::new(),
                env: BTreeMap::new(),
            }],
            timing: Some(TimingPlan {
                warmup_ms: 1.0,
                min_runs: 3,
                min_time_ms: 1.0,
                max_time_ms: 1000.0,
                target_sample_ms: 1.0,
                rotate_bytes: 1 << 16,
            }),
        }))
    }

    /// The committed JSON Schema of every line, and the committed samples of each (the Python
    /// harness's tests validate them and carry out the numpy request), relative to the
    /// repository's root.
    const SCHEMA_FILE: &str = "harness/ksearch_harness/protocol.schema.json";
    const SAMPLES_FILE: &str = "harness/tests/protocol_samples.json";

    fn schema() -> serde_json::Value {
        let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
        let lines = [
            generator.subschema_for::<Envelope<Request>>(),
            generator.subschema_for::<Envelope<WorkerMessage>>(),
        ];
        serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": format!("ksearch worker protocol, version {PROTOCOL_VERSION}"),
            "description": "Every line of the worker protocol: a request (RequestLine) or a worker's message (WorkerMessageLine). Generated from crates/ksearch-core/src/protocol.rs; do not edit: KSEARCH_BLESS=1 cargo test -p ksearch-core committed_schema rewrites it.",
            "oneOf": lines,
            "$defs": generator.take_definitions(true),
        })
    }

    fn samples() -> serde_json::Value {
        let requests = [request(), numpy_request(), Request::Shutdown].map(Envelope::new);
        let messages: Vec<_> = messages().into_iter().map(Envelope::new).collect();
        serde_json::json!({"requests": requests, "messages": messages})
    }

    #[test]
    fn committed_schema_and_samples_are_what_the_types_make() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let bless = std::env::var_os("KSEARCH_BLESS").is_some();
        for (file, want) in [(SCHEMA_FILE, schema()), (SAMPLES_FILE, samples())] {
            let path = root.join(file);
            if bless {
                let text = serde_json::to_string_pretty(&want).unwrap() + "\n";
                std::fs::write(&path, text).unwrap_or_else(|e| panic!("{file}: {e}"));
                continue;
            }
            let committed = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
            assert!(
                committed.as_ref() == Some(&want),
                "{file} is not what the protocol types in crates/ksearch-core/src/protocol.rs make; \
                 after changing them, regenerate it with `KSEARCH_BLESS=1 cargo test -p ksearch-core \
                 committed_schema` and commit it"
            );
        }
    }

    #[test]
    fn every_message_round_trips_as_one_json_line() {
        let req = Envelope::new(request());
        let line = serde_json::to_string(&req).unwrap();
        assert!(!line.contains('\n'));
        assert!(
            line.starts_with(&format!(
                "{{\"protocol\":{PROTOCOL_VERSION},\"type\":\"evaluate\""
            )),
            "{line}"
        );
        assert_eq!(
            serde_json::from_str::<Envelope<Request>>(&line).unwrap(),
            req
        );

        let shutdown = serde_json::to_string(&Envelope::new(Request::Shutdown)).unwrap();
        assert_eq!(
            shutdown,
            format!(r#"{{"protocol":{PROTOCOL_VERSION},"type":"shutdown"}}"#)
        );

        for msg in messages() {
            let env = Envelope::new(msg);
            let line = serde_json::to_string(&env).unwrap();
            assert_eq!(
                serde_json::from_str::<Envelope<WorkerMessage>>(&line).unwrap(),
                env
            );
        }
    }

    #[test]
    fn statuses_serialize_as_documented() {
        let names: Vec<String> = Status::ALL
            .iter()
            .map(|s| serde_json::to_string(s).unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "\"passed\"",
                "\"compile_error\"",
                "\"incorrect\"",
                "\"runtime_error\"",
                "\"timeout\"",
                "\"crashed\"",
                "\"rejected\""
            ]
        );
        for s in Status::ALL {
            assert_eq!(format!("\"{s}\""), serde_json::to_string(&s).unwrap());
        }
    }

    #[test]
    fn descriptions_are_cleaned_to_one_bounded_line() {
        assert_eq!(
            Described::clean("OpenBLAS 0.3.21\n DYNAMIC_ARCH\t\u{7}x "),
            "OpenBLAS 0.3.21 DYNAMIC_ARCH x"
        );
        let long = "word ".repeat(400);
        let clean = Described::clean(&long);
        assert!(clean.len() <= MAX_DESCRIPTION && clean.ends_with("word"));
    }

    #[test]
    fn trim_log_says_what_it_cut() {
        let log = (1..=10)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let t = trim_log(&log, 3, 1000);
        assert_eq!(t, "line 1\nline 2\nline 3\n… (7 more lines)\n");
        assert_eq!(trim_log("a\nb", 10, 1000), "a\nb\n");
    }
}
