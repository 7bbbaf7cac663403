//! Getting JSON and code out of what a model answered: fenced blocks, tags, or the first
//! balanced object, with prose around it; then checking it against the schema.

use ksearch_core::tree::{Action, Impact, Impacts, NewNode, NodeId, Risk};
use ksearch_core::tree_edit::{EditOp, EditScript, NodeUpdate, check_numbers};
use serde::Deserialize;

/// Fenced blocks of `text`: `(language, body)` in order.
fn fences(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let Some(rest) = trimmed.strip_prefix("```") else {
            continue;
        };
        let lang = rest.trim().to_lowercase();
        let mut body = Vec::new();
        let mut closed = false;
        for l in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            body.push(l);
        }
        // An unclosed fence at the end (a truncated answer) still counts.
        let _ = closed;
        out.push((lang, body.join("\n")));
    }
    out
}

fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let start = text.find(open)? + open.len();
    let end = text[start..].find(close)? + start;
    Some(text[start..end].trim_matches('\n'))
}

/// The source code in an answer: the first fence in one of `languages` (or untagged), else
/// `<code>…</code>`.
pub(crate) fn extract_code(text: &str, languages: &[&str]) -> Option<String> {
    let fs = fences(text);
    let tagged = fs
        .iter()
        .find(|(lang, _)| languages.iter().any(|l| lang == l));
    let untagged = fs
        .iter()
        .find(|(lang, body)| lang.is_empty() && !body.trim().is_empty());
    if let Some((_, body)) = tagged.or(untagged) {
        return Some(format!("{}\n", body.trim_end()));
    }
    between(text, "<code>", "</code>").map(|b| format!("{}\n", b.trim_end()))
}

/// What a model answers instead of code when it has nothing more to try in a debug or improve
/// round: the cycle then ends.
pub(crate) const STOP_WORD: &str = "NOTHING MORE TO TRY";

/// Whether an answer declines to write more code: it holds the stop word and no source file.
pub(crate) fn says_stop(text: &str, languages: &[String]) -> bool {
    let langs: Vec<&str> = languages.iter().map(String::as_str).collect();
    text.contains(STOP_WORD)
        && extract_code(text, &langs).is_none_or(|code| code.trim().len() <= 10)
}

/// Longest account of a change kept from an answer's prose.
const PROSE_CHARS: usize = 400;

/// The prose of an answer outside its fenced blocks (what the model says it changed), on one
/// line, at most [`PROSE_CHARS`] characters.
pub(crate) fn answer_prose(text: &str) -> String {
    let mut outside = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if !in_fence {
            outside.push(line);
        }
    }
    let joined = outside.join(" ");
    let words: Vec<&str> = joined.split_whitespace().collect();
    let one_line = words.join(" ");
    if one_line.chars().count() <= PROSE_CHARS {
        return one_line;
    }
    let cut: String = one_line.chars().take(PROSE_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

/// The first balanced `{…}` in `text`, aware of JSON strings.
fn first_object(text: &str) -> Option<&str> {
    let start = text.find('{')?;
    let (mut depth, mut in_str, mut escaped) = (0usize, false, false);
    for (i, c) in text[start..].char_indices() {
        if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(&text[start..=start + i]);
                }
            }
            _ => {}
        }
    }
    None
}

/// The JSON object in an answer: a ```json fence, another fence holding an object, `<json>`
/// tags, or the first balanced object in the text.
pub(crate) fn extract_json(text: &str) -> Option<String> {
    let fs = fences(text);
    if let Some((_, body)) = fs.iter().find(|(lang, _)| lang == "json") {
        return Some(body.clone());
    }
    if let Some((_, body)) = fs
        .iter()
        .find(|(_, body)| body.trim_start().starts_with('{'))
    {
        return Some(body.clone());
    }
    if let Some(b) = between(text, "<json>", "</json>") {
        return Some(b.to_owned());
    }
    first_object(text).map(str::to_owned)
}

/// Parse the JSON of an answer into `T`, with an error a model can act on.
pub(crate) fn parse_json<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
    let json = extract_json(text)
        .ok_or("the answer contains no JSON object (put it in a ```json fenced block)")?;
    let de = &mut serde_json::Deserializer::from_str(&json);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        if path.is_empty() || path == "." {
            format!("the JSON is invalid: {}", e.inner())
        } else {
            format!("the JSON is invalid at `{path}`: {}", e.inner())
        }
    })
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ImpactJson {
    pub(crate) rating: f64,
    #[serde(default)]
    pub(crate) risk: Option<String>,
    #[serde(default)]
    pub(crate) notes: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ImpactsJson {
    pub(crate) memory_bandwidth: ImpactJson,
    pub(crate) register_pressure: ImpactJson,
    pub(crate) compute_fit: ImpactJson,
}

/// An action as models write it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ActionJson {
    pub(crate) title: String,
    pub(crate) description: String,
    pub(crate) difficulty: u8,
    pub(crate) score: f64,
    pub(crate) expected_speedup: f64,
    #[serde(default)]
    pub(crate) rationale: String,
    pub(crate) rating: f64,
    pub(crate) confidence: f64,
    #[serde(default)]
    pub(crate) impacts: Option<ImpactsJson>,
}

fn risk(r: Option<&str>) -> Risk {
    match r.map(str::to_lowercase).as_deref() {
        Some("high") => Risk::High,
        Some("medium") => Risk::Medium,
        _ => Risk::Low,
    }
}

fn impact(i: &ImpactJson) -> Impact {
    Impact {
        rating: i.rating,
        risk: risk(i.risk.as_deref()),
        notes: i.notes.clone(),
    }
}

impl ActionJson {
    pub(crate) fn into_node(self, what: &str) -> Result<NewNode, String> {
        let action = Action {
            title: self.title.trim().to_owned(),
            description: self.description,
            difficulty: self.difficulty,
            score: self.score,
            expected_speedup: self.expected_speedup,
            rationale: self.rationale,
        };
        check_numbers(&action, self.rating, self.confidence).map_err(|e| format!("{what}: {e}"))?;
        let impacts = self.impacts.map_or_else(Impacts::default, |i| Impacts {
            memory_bandwidth: impact(&i.memory_bandwidth),
            register_pressure: impact(&i.register_pressure),
            compute_fit: impact(&i.compute_fit),
        });
        for (axis, i) in [
            ("memory_bandwidth", &impacts.memory_bandwidth),
            ("register_pressure", &impacts.register_pressure),
            ("compute_fit", &impacts.compute_fit),
        ] {
            if !(0.0..=10.0).contains(&i.rating) {
                return Err(format!(
                    "{what}: impacts.{axis}.rating must be within 0–10, got {}",
                    i.rating
                ));
            }
        }
        Ok(NewNode {
            decision: action.title.clone(),
            action,
            rating: self.rating,
            confidence: self.confidence,
            impacts,
            payload: serde_json::Value::Null,
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Bottleneck {
    pub(crate) regime: String,
    pub(crate) hypothesis: String,
}

/// The initial world model as the prompt asks for it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WorldModelJson {
    pub(crate) classification: String,
    pub(crate) canonical_form: String,
    pub(crate) data_layout: String,
    pub(crate) bottlenecks: Vec<Bottleneck>,
    pub(crate) knobs: Vec<String>,
    pub(crate) skeleton: String,
    pub(crate) kernel_families: Vec<String>,
    pub(crate) actions: Vec<ActionJson>,
}

impl WorldModelJson {
    /// Root notes and actions, or what is missing.
    pub(crate) fn check(self) -> Result<(Vec<String>, Vec<NewNode>), String> {
        if self.bottlenecks.len() < 3 {
            return Err(format!(
                "`bottlenecks` needs at least 3 regimes, got {}",
                self.bottlenecks.len()
            ));
        }
        if !(2..=3).contains(&self.kernel_families.len()) {
            return Err(format!(
                "`kernel_families` needs 2 or 3 designs, got {}",
                self.kernel_families.len()
            ));
        }
        if self.actions.len() < 3 {
            return Err(format!(
                "`actions` needs at least 3 open actions, got {}",
                self.actions.len()
            ));
        }
        let mut notes = vec![
            format!("classification: {}", self.classification),
            format!("canonical form: {}", self.canonical_form),
            format!("data layout: {}", self.data_layout),
        ];
        notes.extend(
            self.bottlenecks
                .iter()
                .map(|b| format!("bottleneck ({}): {}", b.regime, b.hypothesis)),
        );
        notes.push(format!("knobs: {}", self.knobs.join(", ")));
        notes.push(format!("skeleton: {}", self.skeleton));
        notes.extend(
            self.kernel_families
                .iter()
                .map(|f| format!("kernel family: {f}")),
        );
        let actions = self
            .actions
            .into_iter()
            .enumerate()
            .map(|(i, a)| a.into_node(&format!("actions[{i}]")))
            .collect::<Result<_, _>>()?;
        Ok((notes, actions))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum EditJson {
    Insert { parent: NodeId, node: ActionJson },
    Update { node: NodeId, changes: NodeUpdate },
    Split { node: NodeId, into: Vec<ActionJson> },
    Delete { node: NodeId },
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Reflection {
    pub(crate) code_summary: String,
    pub(crate) followed_action: serde_json::Value,
    pub(crate) belief_changes: String,
    pub(crate) prediction_gap: String,
}

#[derive(Debug, Clone, Deserialize)]
pub(crate) struct RefineJson {
    pub(crate) reflection: Reflection,
    pub(crate) edits: Vec<EditJson>,
}

impl RefineJson {
    pub(crate) fn into_script(self) -> Result<(Reflection, EditScript), String> {
        let mut ops = Vec::new();
        for (i, e) in self.edits.into_iter().enumerate() {
            let what = format!("edits[{i}]");
            ops.push(match e {
                EditJson::Insert { parent, node } => EditOp::Insert {
                    parent,
                    node: node.into_node(&what)?,
                },
                EditJson::Update { node, changes } => EditOp::Update { node, changes },
                EditJson::Split { node, into } => EditOp::Split {
                    node,
                    into: into
                        .into_iter()
                        .map(|a| a.into_node(&what))
                        .collect::<Result<_, _>>()?,
                },
                EditJson::Delete { node } => EditOp::Delete { node },
            });
        }
        Ok((self.reflection, EditScript { ops }))
    }
}

/// New actions when the frontier is empty.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ProposeJson {
    pub(crate) edits: Vec<EditJson>,
}

impl ProposeJson {
    pub(crate) fn into_script(self) -> Result<EditScript, String> {
        RefineJson {
            reflection: Reflection {
                code_summary: String::new(),
                followed_action: serde_json::Value::Null,
                belief_changes: String::new(),
                prediction_gap: String::new(),
            },
            edits: self.edits,
        }
        .into_script()
        .map(|(_, script)| script)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // one per failed cycle: size does not matter
pub(crate) enum TooHardJson {
    Downgrade {
        changes: NodeUpdate,
        #[serde(default)]
        reason: String,
    },
    Split {
        into: Vec<ActionJson>,
    },
    Delete {},
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_is_found_in_fences_with_prose_around() {
        let a = "Here is the kernel:\n\n```c\n#include <stdint.h>\nvoid f(void) {}\n```\n\nIt vectorizes the loop.";
        assert_eq!(
            extract_code(a, &["c"]).unwrap(),
            "#include <stdint.h>\nvoid f(void) {}\n"
        );
        let untagged = "```\nint x;\n```";
        assert_eq!(extract_code(untagged, &["c"]).unwrap(), "int x;\n");
        let tags = "<code>\nint y;\n</code>";
        assert_eq!(extract_code(tags, &["c"]).unwrap(), "int y;\n");
        // A json fence before the code does not count as code.
        let both = "```json\n{}\n```\n```c\nint z;\n```";
        assert_eq!(extract_code(both, &["c"]).unwrap(), "int z;\n");
        assert!(extract_code("no code here", &["c"]).is_none());
        // A truncated answer with an unclosed fence still yields its code.
        assert_eq!(extract_code("```c\nint w;", &["c"]).unwrap(), "int w;\n");
    }

    #[test]
    fn the_stop_word_without_code_declines_and_with_code_does_not() {
        let c = vec!["c".to_owned()];
        assert!(says_stop(
            "NOTHING MORE TO TRY: the second exp costs more than the traffic it saves.",
            &c
        ));
        assert!(says_stop("`NOTHING MORE TO TRY`", &c));
        // Code wins: an answer with a source file is a candidate, whatever its prose says.
        let with_code =
            "```c\nvoid softmax(void) { /* body */ }\n```\nNOTHING MORE TO TRY after this one.";
        assert!(!says_stop(with_code, &c));
        assert!(
            !says_stop("nothing more to try", &c),
            "only the exact stop word"
        );
        assert!(!says_stop("no code and no stop word", &c));
    }

    #[test]
    fn the_prose_outside_fences_is_kept_on_one_line_and_bounded() {
        let a = "Here it is.\n\n```c\nint x;\n```\nThe p loop is unrolled by four,\n  so C is stored\tonce per four FMAs.";
        assert_eq!(
            answer_prose(a),
            "Here it is. The p loop is unrolled by four, so C is stored once per four FMAs."
        );
        assert_eq!(answer_prose("```c\nint x;\n```"), "");
        let long = format!("```c\nint x;\n```\n{}", "word ".repeat(200));
        let p = answer_prose(&long);
        assert_eq!(p.chars().count(), PROSE_CHARS);
        assert!(p.ends_with('…'), "{p}");
    }

    #[test]
    fn json_is_found_in_fences_tags_or_prose() {
        assert_eq!(
            extract_json("x ```json\n{\"a\": 1}\n``` y").unwrap(),
            "{\"a\": 1}"
        );
        assert_eq!(
            extract_json("<json>{\"b\": 2}</json>").unwrap(),
            "{\"b\": 2}"
        );
        assert_eq!(
            extract_json("Sure! {\"c\": \"}{\", \"d\": {\"e\": 1}} hope this helps").unwrap(),
            "{\"c\": \"}{\", \"d\": {\"e\": 1}}"
        );
        assert!(extract_json("nothing").is_none());
    }

    #[test]
    fn schema_errors_name_the_field() {
        #[derive(Debug, Deserialize)]
        #[allow(dead_code)]
        struct T {
            actions: Vec<ActionJson>,
        }
        let e = parse_json::<T>("```json\n{\"actions\": [{\"title\": \"x\"}]}\n```").unwrap_err();
        assert!(
            e.contains("actions[0]") && e.contains("missing field"),
            "{e}"
        );
        let e = parse_json::<T>("{\"actions\": 3}").unwrap_err();
        assert!(e.contains("invalid type"), "{e}");
    }

    #[test]
    fn out_of_range_numbers_are_rejected() {
        let a = ActionJson {
            title: "t".into(),
            description: String::new(),
            difficulty: 9,
            score: 0.5,
            expected_speedup: 2.0,
            rationale: String::new(),
            rating: 5.0,
            confidence: 0.5,
            impacts: None,
        };
        let e = a.into_node("actions[2]").unwrap_err();
        assert_eq!(e, "actions[2]: difficulty must be 1–5, got 9");
    }
}
