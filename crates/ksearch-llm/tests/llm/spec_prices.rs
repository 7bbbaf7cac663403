//! Model specs, missing keys, and the price table.

use ksearch_llm::{
    ClientSettings, LlmError, ModelPrice, ModelSpec, PriceTable, Provider, Usage, client_with_env,
};

#[test]
fn model_spec_round_trip() {
    let cases = [
        ("openai:gpt-5", Provider::OpenAiChat, "gpt-5"),
        ("openai-responses:o3", Provider::OpenAiResponses, "o3"),
        ("gemini:gemini-2.5-pro", Provider::Gemini, "gemini-2.5-pro"),
        (
            "anthropic:claude-sonnet-4-5",
            Provider::Anthropic,
            "claude-sonnet-4-5",
        ),
        (
            "openai:qwen2.5-coder:32b",
            Provider::OpenAiChat,
            "qwen2.5-coder:32b",
        ),
        (
            "openai:meta-llama/Llama-3.3-70B-Instruct",
            Provider::OpenAiChat,
            "meta-llama/Llama-3.3-70B-Instruct",
        ),
    ];
    for (text, provider, model) in cases {
        let spec: ModelSpec = text.parse().expect(text);
        assert_eq!(spec.provider, provider);
        assert_eq!(spec.model, model);
        assert_eq!(spec.to_string(), text);
        assert_eq!(spec.to_string().parse::<ModelSpec>().expect(text), spec);
        assert_eq!(ModelSpec::new(provider, model), spec);
    }
}

#[test]
fn model_spec_errors_list_the_four_prefixes() {
    for text in ["mistral:large", "gpt-5", "claude:opus"] {
        let error = text.parse::<ModelSpec>().expect_err(text).to_string();
        for prefix in [
            "`openai:`",
            "`openai-responses:`",
            "`gemini:`",
            "`anthropic:`",
        ] {
            assert!(error.contains(prefix), "{error}");
        }
        assert!(error.contains(text), "{error}");
    }
    let error = "openai:"
        .parse::<ModelSpec>()
        .expect_err("empty")
        .to_string();
    assert!(error.contains("empty"), "{error}");
    assert!("openai:gpt 5".parse::<ModelSpec>().is_err());
}

#[test]
fn missing_key_names_the_variable() {
    let cases = [
        ("openai:gpt-5", "OPENAI_API_KEY"),
        ("openai-responses:gpt-5", "OPENAI_API_KEY"),
        ("gemini:gemini-2.5-pro", "GEMINI_API_KEY"),
        ("anthropic:claude-opus-4-5", "ANTHROPIC_API_KEY"),
    ];
    for (text, variable) in cases {
        let spec: ModelSpec = text.parse().expect(text);
        let error = client_with_env(&spec, ClientSettings::default(), |_| None).expect_err(text);
        assert!(
            matches!(error, LlmError::MissingKey { variable: v, .. } if v == variable),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.contains(&format!("set the {variable} environment variable")),
            "{message}"
        );
        // An empty variable counts as unset.
        let error = client_with_env(&spec, ClientSettings::default(), |name| {
            (name == variable).then(|| "  ".to_string())
        })
        .expect_err(text);
        assert!(matches!(error, LlmError::MissingKey { .. }), "{error:?}");
        // A key in the environment is enough.
        assert!(
            client_with_env(&spec, ClientSettings::default(), |name| {
                (name == variable).then(|| "k".to_string())
            })
            .is_ok()
        );
    }
}

fn spec(text: &str) -> ModelSpec {
    text.parse().expect(text)
}

#[test]
fn cost_arithmetic() {
    let table = PriceTable::builtin();
    let usage = Usage {
        input_tokens: 1_000_000,
        output_tokens: 100_000,
        cached_input_tokens: 400_000,
        reasoning_tokens: 60_000,
        cache_write_tokens: 0,
    };
    // gpt-5: 600k fresh × 1.25 + 400k cached × 0.125 + 100k out × 10 (reasoning is inside).
    let cost = table
        .cost_usd(&spec("openai:gpt-5"), &usage)
        .expect("priced");
    assert!((cost - (0.75 + 0.05 + 1.0)).abs() < 1e-9, "{cost}");
    // Anthropic's cache writes cost 1.25 times its input: claude-sonnet-4-5, 200k written of a
    // 1M prompt with 400k read: 400k × 3 + 400k × 0.30 + 200k × 3.75 + 100k × 15.
    let written = Usage {
        cache_write_tokens: 200_000,
        ..usage
    };
    let sonnet = table
        .cost_usd(&spec("anthropic:claude-sonnet-4-5"), &written)
        .expect("priced");
    assert!(
        (sonnet - (1.2 + 0.12 + 0.75 + 1.5)).abs() < 1e-9,
        "{sonnet}"
    );
    // Where no write price is given, writes cost the input price (OpenAI charges none extra).
    let gpt5 = table.get(&spec("openai:gpt-5")).expect("priced");
    assert_eq!(gpt5.cache_write_per_mtok, None);
    assert!((gpt5.cost_usd(&written) - (0.5 + 0.05 + 0.25 + 1.0)).abs() < 1e-9);
    // The Responses API prices like the same model on Chat Completions.
    assert_eq!(
        table.cost_usd(&spec("openai-responses:gpt-5"), &usage),
        Some(cost)
    );
    // Dated snapshots fall back to the alias.
    assert_eq!(
        table.cost_usd(&spec("anthropic:claude-sonnet-4-5-20250929"), &usage),
        table.cost_usd(&spec("anthropic:claude-sonnet-4-5"), &usage)
    );
    assert!(
        table
            .cost_usd(&spec("openai:gpt-4.1-2025-04-14"), &usage)
            .is_some()
    );
    // Unknown models: the caller decides.
    assert_eq!(table.cost_usd(&spec("openai:my-local-model"), &usage), None);
    // Zero usage costs nothing.
    assert_eq!(
        table.cost_usd(&spec("gemini:gemini-2.5-pro"), &Usage::default()),
        Some(0.0)
    );
    // More cached than input (a confused server) never bills negative fresh input.
    let odd = Usage {
        input_tokens: 10,
        cached_input_tokens: 20,
        ..Usage::default()
    };
    assert!(table.cost_usd(&spec("openai:gpt-5"), &odd).expect("priced") >= 0.0);
}

#[test]
fn from_toml_merge_and_cached_fallback() {
    let text = r#"
# local prices
["openai:gpt-5"]
input_per_mtok = 2.0
output_per_mtok = 20.0

["openai:qwen2.5-coder:32b"]
input_per_mtok = 0.0
output_per_mtok = 0.0
source = "local"
as_of = "2026-11-30"
"#;
    let overrides = PriceTable::from_toml(text, "my-prices.toml").expect("valid");
    assert_eq!(overrides.len(), 2);
    let merged = PriceTable::builtin().merged(&overrides);
    assert_eq!(merged.len(), PriceTable::builtin().len() + 1);
    let price = merged.get(&spec("openai:gpt-5")).expect("overridden");
    assert_eq!(price.input_per_mtok, 2.0);
    assert_eq!(price.cached_input_per_mtok, None);
    // No cached price: cached tokens at the input price.
    let usage = Usage {
        input_tokens: 1_000_000,
        cached_input_tokens: 500_000,
        ..Usage::default()
    };
    assert_eq!(merged.cost_usd(&spec("openai:gpt-5"), &usage), Some(2.0));
    assert_eq!(
        merged.cost_usd(&spec("openai:qwen2.5-coder:32b"), &usage),
        Some(0.0)
    );
    // Untouched entries stay.
    assert_eq!(
        merged.get(&spec("anthropic:claude-haiku-4-5")),
        PriceTable::builtin().get(&spec("anthropic:claude-haiku-4-5"))
    );
    // insert
    let mut table = PriceTable::default();
    assert!(table.is_empty());
    table.insert(
        &spec("gemini:x"),
        ModelPrice {
            input_per_mtok: 1.0,
            output_per_mtok: 1.0,
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            source: None,
            as_of: None,
        },
    );
    assert_eq!(
        table.cost_usd(
            &spec("gemini:x"),
            &Usage {
                output_tokens: 1_000_000,
                ..Usage::default()
            }
        ),
        Some(1.0)
    );
}

#[test]
fn from_toml_errors_name_file_line_and_field() {
    let unknown = "[\"openai:gpt-5\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\nreasoning_per_mtok = 3.0\n";
    let error = PriceTable::from_toml(unknown, "prices.toml").expect_err("unknown key");
    let message = error.to_string();
    assert!(message.starts_with("prices.toml:4:"), "{message}");
    assert!(message.contains("reasoning_per_mtok"), "{message}");

    let wrong_type = "[\"openai:gpt-5.4\"]\ninput_per_mtok = \"cheap\"\noutput_per_mtok = 2.0\n";
    let error = PriceTable::from_toml(wrong_type, "prices.toml").expect_err("type");
    assert_eq!(error.location.map(|l| l.0), Some(2), "{error}");
    assert_eq!(error.field, "\"openai:gpt-5.4\".input_per_mtok", "{error}");

    let missing = "[\"openai:gpt-5\"]\ninput_per_mtok = 1.0\n";
    let error = PriceTable::from_toml(missing, "prices.toml").expect_err("missing");
    assert!(error.to_string().contains("output_per_mtok"), "{error}");
    assert_eq!(error.location.map(|l| l.0), Some(1), "{error}");

    let negative = "[\"openai:gpt-5\"]\ninput_per_mtok = 1.0\noutput_per_mtok = -2.0\n";
    let error = PriceTable::from_toml(negative, "prices.toml").expect_err("negative");
    assert_eq!(error.location.map(|l| l.0), Some(3), "{error}");
    assert!(error.to_string().contains("output_per_mtok"), "{error}");

    let not_a_spec = "[\"gpt-5\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n";
    let error = PriceTable::from_toml(not_a_spec, "prices.toml").expect_err("spec");
    assert!(error.to_string().contains("model spec"), "{error}");
    assert_eq!(error.location.map(|l| l.0), Some(1), "{error}");

    let syntax = "[\"openai:gpt-5\"]\ninput_per_mtok = = 1.0\n";
    let error = PriceTable::from_toml(syntax, "prices.toml").expect_err("syntax");
    assert!(error.to_string().starts_with("prices.toml:2:"), "{error}");
}

#[test]
fn load_reads_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("prices.toml");
    std::fs::write(
        &path,
        "[\"anthropic:claude-x\"]\ninput_per_mtok = 1\noutput_per_mtok = 5\n",
    )
    .expect("write");
    let table = PriceTable::load(&path).expect("valid");
    assert!(table.get(&spec("anthropic:claude-x")).is_some());
    let error = PriceTable::load(&dir.path().join("absent.toml")).expect_err("absent");
    assert!(error.to_string().contains("absent.toml"), "{error}");
}
