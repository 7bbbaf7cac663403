//! `ksearch.toml`: models, base URLs, budgets, timeouts and price overrides. Read from the
//! project (`./ksearch.toml`) and the user's (`$XDG_CONFIG_HOME/ksearch/config.toml`, else
//! `~/.config/ksearch/config.toml`); the project's values win, command-line flags win over both.
//! Unknown keys are errors with file, line and column.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ksearch_core::location::{FieldPath, FileError, locate, parse_toml};
use serde::Deserialize;

mod slurm;
pub(crate) use slurm::SlurmDefaults;

/// The longest `timeout_s` a model call may have, in seconds (a day): a call that long has
/// failed. A larger, negative or non-finite value is refused where the file says it, rather
/// than panicking where it becomes a `Duration`.
pub(crate) const MAX_CALL_TIMEOUT_S: f64 = 86_400.0;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KsearchToml {
    #[serde(default)]
    pub(crate) models: Models,
    #[serde(default)]
    pub(crate) budget: BudgetDefaults,
    /// Defaults for every provider.
    #[serde(default)]
    pub(crate) llm: ProviderDefaults,
    /// Per provider: `openai`, `openai-responses`, `gemini`, `anthropic`.
    #[serde(default)]
    pub(crate) providers: BTreeMap<String, ProviderDefaults>,
    /// Price overrides by model spec, USD per million tokens.
    #[serde(default)]
    pub(crate) prices: BTreeMap<String, PriceOverride>,
    /// How `--executor slurm` submits jobs.
    #[serde(default)]
    pub(crate) slurm: SlurmDefaults,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Models {
    /// Both roles, e.g. `openai:gpt-5` or `builtin`.
    pub(crate) model: Option<String>,
    pub(crate) reasoning: Option<String>,
    pub(crate) codegen: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetDefaults {
    pub(crate) iterations: Option<u64>,
    /// e.g. `"2h"`.
    pub(crate) time: Option<String>,
    pub(crate) max_cost_usd: Option<f64>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ProviderDefaults {
    pub(crate) base_url: Option<String>,
    /// Prefer the environment variable; a key here is read but never printed or stored.
    pub(crate) api_key: Option<String>,
    pub(crate) timeout_s: Option<f64>,
    pub(crate) max_retries: Option<u32>,
    pub(crate) reasoning_effort: Option<String>,
    pub(crate) max_output_tokens: Option<u32>,
    /// Send the key over plain http to a host other than this machine.
    pub(crate) allow_plain_http: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PriceOverride {
    pub(crate) input_per_mtok: f64,
    pub(crate) output_per_mtok: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cached_input_per_mtok: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cache_write_per_mtok: Option<f64>,
}

fn or<T: Clone>(a: &Option<T>, b: &Option<T>) -> Option<T> {
    a.clone().or_else(|| b.clone())
}

impl ProviderDefaults {
    /// `self`'s values, falling back to `under`'s.
    pub(crate) fn over(&self, under: &ProviderDefaults) -> ProviderDefaults {
        ProviderDefaults {
            base_url: or(&self.base_url, &under.base_url),
            api_key: or(&self.api_key, &under.api_key),
            timeout_s: or(&self.timeout_s, &under.timeout_s),
            max_retries: or(&self.max_retries, &under.max_retries),
            reasoning_effort: or(&self.reasoning_effort, &under.reasoning_effort),
            max_output_tokens: or(&self.max_output_tokens, &under.max_output_tokens),
            allow_plain_http: or(&self.allow_plain_http, &under.allow_plain_http),
        }
    }
}

impl KsearchToml {
    /// `self`'s values, falling back to `under`'s, field by field.
    pub(crate) fn over(self, under: KsearchToml) -> KsearchToml {
        let mut providers = under.providers;
        for (name, p) in self.providers {
            let merged = match providers.get(&name) {
                Some(u) => p.over(u),
                None => p,
            };
            providers.insert(name, merged);
        }
        let mut prices = under.prices;
        prices.extend(self.prices);
        KsearchToml {
            models: Models {
                model: or(&self.models.model, &under.models.model),
                reasoning: or(&self.models.reasoning, &under.models.reasoning),
                codegen: or(&self.models.codegen, &under.models.codegen),
            },
            budget: BudgetDefaults {
                iterations: or(&self.budget.iterations, &under.budget.iterations),
                time: or(&self.budget.time, &under.budget.time),
                max_cost_usd: or(&self.budget.max_cost_usd, &under.budget.max_cost_usd),
            },
            llm: self.llm.over(&under.llm),
            providers,
            prices,
            slurm: self.slurm.over(under.slurm),
        }
    }

    /// Settings for one provider: its own section over the `[llm]` defaults.
    pub(crate) fn provider(&self, name: &str) -> ProviderDefaults {
        self.providers
            .get(name)
            .map_or_else(|| self.llm.clone(), |p| p.over(&self.llm))
    }

    pub(crate) fn parse(text: &str, file: &str) -> Result<KsearchToml, FileError> {
        let c: KsearchToml = parse_toml(text, file)?;
        c.check().map_err(|(path, message)| FileError {
            file: file.to_owned(),
            location: locate(text, &path),
            field: path.to_string(),
            message,
        })?;
        Ok(c)
    }

    /// Every value in its range: providers known, numbers finite and in range, the time
    /// budget a duration. The field at fault and why.
    fn check(&self) -> Result<(), (FieldPath, String)> {
        let root = FieldPath::root();
        let range = |path: FieldPath, value: f64, lo_open: bool, hi: f64, unit: &str| {
            ksearch_engine::check_range("", value, 0.0, lo_open, hi, unit)
                .map_err(|e| (path, format!("it is {value}; it must be {}", e.allowed)))
        };
        let timeout = |path: FieldPath, p: &ProviderDefaults| match p.timeout_s {
            Some(t) => range(
                path.key("timeout_s"),
                t,
                true,
                MAX_CALL_TIMEOUT_S,
                "seconds",
            ),
            None => Ok(()),
        };
        timeout(root.key("llm"), &self.llm)?;
        for (name, p) in &self.providers {
            let path = root.key("providers").key(name);
            if !["openai", "openai-responses", "gemini", "anthropic"].contains(&name.as_str()) {
                return Err((
                    path,
                    "unknown provider; expected one of openai, openai-responses, gemini, anthropic"
                        .into(),
                ));
            }
            timeout(path, p)?;
        }
        let budget = root.key("budget");
        if let Some(usd) = self.budget.max_cost_usd {
            range(
                budget.key("max_cost_usd"),
                usd,
                true,
                f64::MAX,
                "US dollars",
            )?;
        }
        if let Some(time) = &self.budget.time {
            humantime::parse_duration(time).map_err(|e| {
                (
                    budget.key("time"),
                    format!("`{time}` is not a duration: {e}"),
                )
            })?;
        }
        self.slurm.check(&root.key("slurm"))?;
        for (spec, price) in &self.prices {
            let path = root.key("prices").key(spec);
            let per_mtok = [
                ("input_per_mtok", Some(price.input_per_mtok)),
                ("output_per_mtok", Some(price.output_per_mtok)),
                ("cached_input_per_mtok", price.cached_input_per_mtok),
                ("cache_write_per_mtok", price.cache_write_per_mtok),
            ];
            for (field, value) in per_mtok {
                if let Some(value) = value {
                    range(path.key(field), value, false, f64::MAX, "US dollars")?;
                }
            }
        }
        Ok(())
    }
}

fn user_file_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("ksearch").join("config.toml"))
}

fn read(path: &Path) -> anyhow::Result<Option<KsearchToml>> {
    use ksearch_tasks::{MAX_TOML_BYTES, ReadError, read_text};
    match read_text(path, MAX_TOML_BYTES, "a configuration file") {
        Ok(text) => Ok(Some(KsearchToml::parse(
            &text,
            &path.display().to_string(),
        )?)),
        Err(ReadError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// The project's file over the user's; empty when neither exists.
pub(crate) fn load() -> anyhow::Result<KsearchToml> {
    let user = match user_file_path() {
        Some(p) => read(&p)?,
        None => None,
    };
    let project = read(Path::new("ksearch.toml"))?;
    Ok(match (project, user) {
        (Some(p), Some(u)) => p.over(u),
        (Some(c), None) | (None, Some(c)) => c,
        (None, None) => KsearchToml::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const USER: &str = r#"
[models]
model = "openai:gpt-5"

[llm]
timeout_s = 120
max_retries = 3

[providers.openai]
base_url = "http://localhost:8000/v1"

[budget]
max_cost_usd = 5.0
"#;

    const PROJECT: &str = r#"
[models]
codegen = "openai:gpt-5-mini"

[providers.openai]
timeout_s = 60

[prices."openai:local"]
input_per_mtok = 0.0
output_per_mtok = 0.0
"#;

    #[test]
    fn project_values_win_field_by_field() {
        let c = KsearchToml::parse(PROJECT, "ksearch.toml")
            .unwrap()
            .over(KsearchToml::parse(USER, "config.toml").unwrap());
        assert_eq!(c.models.model.as_deref(), Some("openai:gpt-5"));
        assert_eq!(c.models.codegen.as_deref(), Some("openai:gpt-5-mini"));
        let p = c.provider("openai");
        assert_eq!(p.base_url.as_deref(), Some("http://localhost:8000/v1"));
        assert_eq!(p.timeout_s, Some(60.0));
        assert_eq!(p.max_retries, Some(3), "inherited from [llm]");
        assert_eq!(c.provider("gemini").timeout_s, Some(120.0));
        assert_eq!(c.budget.max_cost_usd, Some(5.0));
        assert!(c.prices.contains_key("openai:local"));
    }

    #[test]
    fn unknown_keys_name_line_and_column() {
        let text = "[models]\nmodle = \"x\"\n";
        let e = KsearchToml::parse(text, "ksearch.toml").unwrap_err();
        assert_eq!(
            e.to_string().split(": field").next().unwrap(),
            "ksearch.toml:2:1"
        );
        assert_eq!(e.field, "models.modle");
        let e =
            KsearchToml::parse("[providers.openia]\ntimeout_s = 1\n", "ksearch.toml").unwrap_err();
        assert!(e.message.contains("unknown provider"), "{e}");
        assert_eq!(e.location.unwrap().line, 1);
    }

    /// A number out of range is refused where the file says it: `timeout_s = -1` had panicked
    /// when it became a `Duration`.
    #[test]
    fn numbers_out_of_range_name_the_file_line_and_field() {
        for (table, field, value) in [
            ("llm", "timeout_s", "-1"),
            ("llm", "timeout_s", "0"),
            ("llm", "timeout_s", "nan"),
            ("llm", "timeout_s", "inf"),
            ("llm", "timeout_s", "-inf"),
            ("llm", "timeout_s", "1e308"),
            ("llm", "timeout_s", "18446744073709551615.0"),
            ("llm", "timeout_s", "86401"),
            ("providers.anthropic", "timeout_s", "-0.5"),
            ("budget", "max_cost_usd", "nan"),
            ("budget", "max_cost_usd", "0"),
            ("budget", "max_cost_usd", "-3"),
            ("prices.\"openai:m\"", "input_per_mtok", "-1"),
            ("prices.\"openai:m\"", "output_per_mtok", "inf"),
            ("prices.\"openai:m\"", "cached_input_per_mtok", "nan"),
            ("prices.\"openai:m\"", "cache_write_per_mtok", "-1e-9"),
        ] {
            let mut text = format!("[models]\nmodel = \"exec:true\"\n\n[{table}]\n");
            if table.starts_with("prices") {
                for f in ["input_per_mtok", "output_per_mtok"] {
                    if f != field {
                        text.push_str(&format!("{f} = 1.0\n"));
                    }
                }
            }
            text.push_str(&format!("{field} = {value}\n"));
            let line = text.lines().count();
            let e = KsearchToml::parse(&text, "ksearch.toml").unwrap_err();
            let table_path = table.replace('"', "");
            assert_eq!(e.field, format!("{table_path}.{field}"), "{e}");
            assert_eq!(e.location.map(|l| l.line), Some(line), "{e}");
            assert!(
                e.to_string().starts_with(&format!("ksearch.toml:{line}:")),
                "{e}"
            );
            assert!(e.message.contains("it must be"), "{e}");
        }
        let e =
            KsearchToml::parse("[budget]\ntime = \"2 fortnights\"\n", "ksearch.toml").unwrap_err();
        assert_eq!(e.field, "budget.time", "{e}");
        assert_eq!(e.location.map(|l| l.line), Some(2), "{e}");
        // In range: a fraction of a second, a day, integers, prices of 0.
        let ok = "[llm]\ntimeout_s = 0.5\n[providers.openai]\ntimeout_s = 86400\n\
                  [budget]\nmax_cost_usd = 1\ntime = \"2h\"\n\
                  [prices.\"openai:m\"]\ninput_per_mtok = 0\noutput_per_mtok = 0.0\n";
        KsearchToml::parse(ok, "ksearch.toml").unwrap();
    }
}
