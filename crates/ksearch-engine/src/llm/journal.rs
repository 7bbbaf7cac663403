//! The journal of model calls: answers by request key, consumed in order, so a replay sees the
//! same answers in the same order and a resume reuses an answer it already paid for.

use std::collections::{BTreeMap, VecDeque};

use ksearch_core::record::LlmCallRecord;

use ksearch_llm::{Completion, CompletionRequest, ModelSpec};
use ksearch_run::CostStop;
use sha2::{Digest, Sha256};

/// Hex SHA-256 of a request to a model: the model and everything sent.
pub fn request_key(model: &ModelSpec, request: &CompletionRequest) -> String {
    let text = serde_json::to_string(&(model.to_string(), request)).expect("requests serialize");
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Debug, Default)]
pub struct Journal {
    /// Stored answers not yet used in this session, by key, oldest first.
    pool: BTreeMap<String, VecDeque<Completion>>,
    /// Calls made (or answered from the pool) since the engine last took them.
    fresh: Vec<LlmCallRecord>,
    /// Answer only from the pool: a replay makes no network call.
    pub replay_only: bool,
    /// Money spent on network calls in this run, all sessions.
    pub spent_usd: f64,
    /// Calls recorded through this journal (answered from the pool or the network).
    answered: u64,
    /// A replay: the calls the recorded run's cost cap refused, by index, oldest first.
    refusals: VecDeque<CostStop>,
}

impl Journal {
    /// Load stored calls; `spent` counts what they cost.
    pub fn restore(&mut self, records: &[LlmCallRecord], count_spend: bool) {
        for r in records {
            if let Ok(c) = serde_json::from_value::<Completion>(r.response.clone()) {
                self.pool.entry(r.key.clone()).or_default().push_back(c);
            }
            if count_spend && !r.replayed {
                self.spent_usd += r.cost_usd.unwrap_or(0.0);
            }
        }
    }

    pub(crate) fn take_answer(&mut self, key: &str) -> Option<Completion> {
        let q = self.pool.get_mut(key)?;
        let c = q.pop_front();
        if q.is_empty() {
            self.pool.remove(key);
        }
        c
    }

    /// A replay refuses the calls the recorded run's cost cap refused, at the same places.
    pub fn refuse_as_recorded(&mut self, stops: impl IntoIterator<Item = CostStop>) {
        self.refusals.extend(stops);
    }

    /// The recorded refusal due before the next call, if there is one.
    pub(crate) fn refusal_due(&mut self) -> Option<CostStop> {
        if self
            .refusals
            .front()
            .is_some_and(|r| r.call == self.answered)
        {
            self.refusals.pop_front()
        } else {
            None
        }
    }

    pub(crate) fn record(&mut self, r: LlmCallRecord) {
        self.answered += 1;
        if !r.replayed {
            self.spent_usd += r.cost_usd.unwrap_or(0.0);
        }
        self.fresh.push(r);
    }

    pub fn take_fresh(&mut self) -> Vec<LlmCallRecord> {
        std::mem::take(&mut self.fresh)
    }
}
