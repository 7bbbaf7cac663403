//! A model that never gives a usable answer ends the run after a few questions, naming the
//! cause, instead of going round empty cycles (about 150 calls before).

use ksearch_llm::Usage;
use ksearch_llm::loopback::{Reply, ScriptedServer, openai_chat_body};

use crate::support::{QUICK, ksearch};

#[test]
fn a_model_that_only_ever_runs_out_of_tokens_stops_the_run_after_three_questions() {
    let dir = tempfile::tempdir().unwrap();
    // Every answer: no text, every token spent on reasoning, cut off at the limit.
    let server = ScriptedServer::serve(|_| {
        let usage = Usage {
            input_tokens: 900,
            output_tokens: 600,
            reasoning_tokens: 600,
            ..Usage::default()
        };
        let mut body = openai_chat_body("", &usage);
        body["choices"][0]["finish_reason"] = "length".into();
        Reply::ok(body)
    });
    std::fs::write(
        dir.path().join("ksearch.toml"),
        "[llm]\nmax_retries = 0\nmax_output_tokens = 600\n",
    )
    .unwrap();
    let base = format!("{}/v1", server.url());
    let rd = dir.path().join("run");
    let mut args = vec![
        "run",
        "cpu/softmax",
        "--model",
        "openai:e2e-model",
        "--base-url",
        &base,
        "--iterations",
        "50",
        "--run-dir",
        rd.to_str().unwrap(),
    ];
    args.extend_from_slice(QUICK);
    let text = ksearch(&args).current_dir(dir.path()).output().unwrap();
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&text.stderr)
    );
    assert!(
        stdout.contains("the model's answers could not be used"),
        "{stdout}"
    );
    assert!(
        stdout.contains("no usable answer to 3 questions in a row (each asked 3 times)")
            && stdout.contains("empty (finish reason length)"),
        "{stdout}"
    );
    // The progress line's last line says why in words too.
    let stderr = String::from_utf8_lossy(&text.stderr);
    assert!(
        stderr.contains("stopped: the model's answers could not be used")
            && !stderr.contains("unusablemodel"),
        "{stderr}"
    );
    // The world model and two candidates, each asked three times: nine calls, not ~150.
    assert_eq!(server.request_count(), 9, "{stdout}");
    assert!(server.rejections().is_empty());
}
