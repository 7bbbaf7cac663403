//! A client that never reaches the network: replays answer every call from the journal, and a
//! call the journal lacks must fail loudly instead of spending money.

use ksearch_llm::{Completion, CompletionRequest, LlmClient, LlmError, ModelSpec};

#[derive(Debug)]
pub struct OfflineClient {
    spec: ModelSpec,
}

impl OfflineClient {
    pub fn new(spec: ModelSpec) -> Self {
        Self { spec }
    }
}

impl LlmClient for OfflineClient {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn complete(&self, _request: &CompletionRequest) -> Result<Completion, LlmError> {
        Err(LlmError::Settings {
            provider: self.spec.provider,
            detail: "this client is offline (a replay); the request is not in the journal".into(),
        })
    }
}
