//! A distinctive key must never show in an error message or a `Debug` output, whatever fails,
//! even when a server echoes it back.

use std::net::TcpListener;
use std::time::Duration;

use ksearch_llm::loopback::{Reply, ScriptedServer};
use ksearch_llm::{ClientSettings, LlmError, ModelSpec, Provider, Secret, Usage, client_with_env};

use crate::support::{request, spec, test_settings};

const SECRET: &str = "sk-test-SECRET-123";

fn assert_clean(what: &str, text: &str) {
    assert!(!text.contains(SECRET), "{what} leaks the key: {text}");
    assert!(
        !text.contains("SECRET-123"),
        "{what} leaks part of the key: {text}"
    );
}

fn assert_error_clean(what: &str, error: &LlmError) {
    assert_clean(what, &error.to_string());
    assert_clean(what, &format!("{error:?}"));
    assert_clean(what, &format!("{error:#?}"));
}

fn secret_settings(provider: Provider, server: &ScriptedServer) -> ClientSettings {
    ClientSettings {
        api_key: Some(Secret::new(SECRET)),
        max_retries: 1,
        extra_headers: vec![("x-other-token".to_string(), SECRET.to_string())],
        ..test_settings(provider, server)
    }
}

/// Every error path of one provider, against a server that echoes the key.
fn every_error_path(provider: Provider) {
    let echo = format!("Incorrect API key provided: {SECRET}. You can find your key at ...");
    let server = ScriptedServer::start(vec![
        // 401 echoing the key.
        Reply::provider_error(provider, 401, &echo),
        // 400 echoing it, in a non-JSON body.
        Reply::raw(400, format!("<html>bad request for key {SECRET}</html>")),
        // 500 twice (retries exhausted), echoing it.
        Reply::provider_error(provider, 500, &echo),
        Reply::provider_error(provider, 500, &echo),
        // Malformed 200 containing it.
        Reply::raw(200, format!("{{\"oops\": \"{SECRET}\"")),
        // Wrong shape containing it.
        Reply::ok(serde_json::json!({"key": SECRET})),
        // A redirect to a URL with the key in it.
        Reply::raw(302, "").with_header("location", &format!("http://example.com/?key={SECRET}")),
        // Hangs past the timeout, twice.
        Reply::hang(Duration::from_secs(5)),
        Reply::hang(Duration::from_secs(5)),
        // Finally a success, so the key was really sent.
        Reply::success(provider, "fine", &Usage::default()),
    ]);
    let llm = client_with_env(&spec(provider), secret_settings(provider, &server), |_| {
        None
    })
    .expect("client");
    assert_clean("client Debug", &format!("{llm:?}"));
    assert_clean(
        "config Debug",
        &format!("{:?}", secret_settings(provider, &server)),
    );

    for step in [
        "401",
        "400",
        "exhausted 500",
        "malformed",
        "shape",
        "redirect",
        "timeout",
    ] {
        let error = llm.complete(&request()).expect_err(step);
        assert_error_clean(&format!("{provider} {step}"), &error);
    }
    let answer = llm.complete(&request()).expect("success");
    assert_clean("completion Debug", &format!("{answer:?}"));
    assert_eq!(server.remaining(), 0);

    // The key did travel, in the provider's header, never in the URL or the body.
    let requests = server.requests();
    let sent = &requests[requests.len() - 1];
    let header = match provider {
        Provider::OpenAiChat | Provider::OpenAiResponses => "authorization",
        Provider::Gemini => "x-goog-api-key",
        Provider::Anthropic => "x-api-key",
        Provider::Exec | Provider::Manual => unreachable!("a command gets no key"),
    };
    assert!(
        sent.header(header).is_some_and(|v| v.contains(SECRET)),
        "{provider}"
    );
    for request in &requests {
        assert_clean("URL", &request.path);
        assert_clean("body", &request.body.to_string());
    }
}

#[test]
fn the_key_never_leaks() {
    // The providers in parallel: each one waits out two timeouts.
    std::thread::scope(|scope| {
        for provider in Provider::ALL {
            scope.spawn(move || every_error_path(provider));
        }
    });
}

#[test]
fn the_key_never_leaks_from_connection_and_settings_errors() {
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    for provider in Provider::ALL {
        let settings = ClientSettings {
            base_url: Some(format!("http://127.0.0.1:{port}")),
            api_key: Some(Secret::new(SECRET)),
            timeout: Duration::from_secs(1),
            max_retries: 0,
            ..ClientSettings::default()
        };
        let llm = client_with_env(&spec(provider), settings, |_| None).expect("client");
        let error = llm.complete(&request()).expect_err("refused");
        assert_error_clean("connection refused", &error);

        // A key that cannot be a header value (an attempt at header injection).
        let settings = ClientSettings {
            api_key: Some(Secret::new(format!("{SECRET}\r\nx-evil: 1"))),
            ..ClientSettings::default()
        };
        let error = client_with_env(&spec(provider), settings, |_| None).expect_err("bad key");
        assert!(matches!(error, LlmError::Settings { .. }), "{error:?}");
        assert_error_clean("bad header", &error);

        // A key in the environment, and a missing one.
        let ok = client_with_env(&spec(provider), ClientSettings::default(), |name| {
            (name == provider.key_variable()).then(|| SECRET.to_string())
        })
        .expect("env key");
        assert_clean("env client Debug", &format!("{ok:?}"));
        let error = client_with_env(&spec(provider), ClientSettings::default(), |_| None)
            .expect_err("none");
        assert_error_clean("missing key", &error);
    }
    assert_eq!(format!("{}", Secret::new(SECRET)), "[redacted]");
    assert_eq!(format!("{:?}", Secret::new(SECRET)), "[redacted]");
}

/// A key is never sent over plain http to another machine unless the settings say so; a local
/// server is fine, and a keyless compatible server is fine anywhere.
#[test]
fn a_key_is_not_sent_over_plain_http_to_another_machine() {
    for provider in Provider::ALL {
        let remote = ClientSettings {
            base_url: Some("http://192.0.2.7:8000/v1".into()),
            api_key: Some(Secret::new(SECRET)),
            ..ClientSettings::default()
        };
        let error =
            client_with_env(&spec(provider), remote.clone(), |_| None).expect_err("refused");
        assert!(matches!(error, LlmError::Settings { .. }), "{error:?}");
        assert!(error.to_string().contains("plain http"), "{error}");
        assert_error_clean("plain http", &error);
        client_with_env(
            &spec(provider),
            ClientSettings {
                allow_plain_http: true,
                ..remote.clone()
            },
            |_| None,
        )
        .expect("allowed explicitly");
        for local in [
            "http://localhost:8000/v1",
            "http://127.0.0.1:8000",
            "http://[::1]:8000",
        ] {
            client_with_env(
                &spec(provider),
                ClientSettings {
                    base_url: Some(local.into()),
                    ..remote.clone()
                },
                |_| None,
            )
            .unwrap_or_else(|e| panic!("{local}: {e}"));
        }
        client_with_env(
            &spec(provider),
            ClientSettings {
                base_url: Some("https://example.com/v1".into()),
                ..remote.clone()
            },
            |_| None,
        )
        .expect("https");
    }
    // No key, no risk: a compatible server on another machine over http.
    client_with_env(
        &spec(Provider::OpenAiChat),
        ClientSettings {
            base_url: Some("http://192.0.2.7:8000/v1".into()),
            ..ClientSettings::default()
        },
        |_| None,
    )
    .expect("keyless");
}

/// No form of the key: as written, in another case, or without its `sk-`.
fn assert_no_form(what: &str, text: &str) {
    assert_clean(what, text);
    assert!(
        !text.to_ascii_lowercase().contains("secret-123"),
        "{what} leaks the key in another case or without its prefix: {text}"
    );
}

/// A server may echo the key lower-cased or without its `sk-` (a proxy logging the header, a
/// server normalising it); a secret of the settings' other secrets too.
#[test]
fn an_echoed_key_is_scrubbed_in_any_case_and_without_its_prefix() {
    const OTHER: &str = "ghp_OtherSecret-123456";
    for provider in Provider::ALL {
        let server = ScriptedServer::start(vec![Reply::from_fn(move |req| {
            let key = ["authorization", "x-goog-api-key", "x-api-key"]
                .iter()
                .find_map(|h| req.header(h))
                .unwrap_or_default()
                .trim_start_matches("Bearer ")
                .to_string();
            let message = format!(
                "bad key {} / lower {} / upper {} / key-only {} / other {}",
                key,
                key.to_lowercase(),
                key.to_uppercase(),
                &key[3..],
                OTHER.to_lowercase()
            );
            Reply::provider_error(provider, 401, &message)
        })]);
        let settings = ClientSettings {
            secrets: vec![Secret::new(OTHER)],
            ..secret_settings(provider, &server)
        };
        let llm = client_with_env(&spec(provider), settings, |_| None).expect("client");
        let error = llm.complete(&request()).expect_err("401");
        for text in [
            error.to_string(),
            format!("{error:?}"),
            format!("{error:#?}"),
        ] {
            assert_no_form(&format!("{provider} 401"), &text);
            assert!(
                !text.to_ascii_lowercase().contains("othersecret"),
                "{provider}: {text}"
            );
        }
        assert!(error.to_string().contains("key-only [redacted]"), "{error}");
    }
}

/// A command inherits the environment, keys and all: what it writes on stderr (an error) or
/// on stdout (an answer, kept in the run and sent back in prompts) is scrubbed of the secrets
/// the settings name, in any case and without the key's prefix.
#[test]
fn a_command_s_words_are_scrubbed_of_the_secrets() {
    let dir = tempfile::tempdir().expect("dir");
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, SECRET).expect("key file");
    let print = format!(
        "k=$(cat {}); echo \"auth failed with key $k\"; echo \"$k\" | tr a-z A-Z; echo \"${{k#sk-}}\"",
        key_file.display()
    );
    let settings = || ClientSettings {
        timeout: Duration::from_secs(20),
        max_retries: 0,
        secrets: vec![Secret::new(SECRET)],
        ..ClientSettings::default()
    };
    let command = |cmd: String| {
        client_with_env(&ModelSpec::new(Provider::Exec, cmd), settings(), |_| None).expect("client")
    };
    // A failure (its stderr in the error), a "try again" (its stderr in the last failure), an
    // answer.
    let error = command(format!("({print}) >&2; exit 1"))
        .complete(&request())
        .expect_err("exit 1");
    assert!(
        error
            .to_string()
            .contains("auth failed with key [redacted]"),
        "{error}"
    );
    assert_no_form("exec exit 1", &format!("{error} {error:?}"));
    let error = command(format!("({print}) >&2; exit 75"))
        .complete(&request())
        .expect_err("exit 75");
    assert_no_form("exec exit 75", &format!("{error} {error:?}"));
    let answer = command(print).complete(&request()).expect("answer");
    assert_no_form("exec answer", &answer.text);
    assert_eq!(
        answer.text.matches("[redacted]").count(),
        3,
        "{}",
        answer.text
    );
}
