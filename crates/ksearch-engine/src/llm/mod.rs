//! The LLM proposer: K-Search's prompts rendered from templates, answers parsed robustly, two
//! model roles, a cost cap, and a journal of every call so runs resume and replay for free.

mod journal;
mod offline;
mod parse;
#[cfg(test)]
mod prompt_tests;
mod prompts;
mod proposer;

pub use journal::{Journal, request_key};
pub use offline::OfflineClient;
pub use prompts::Prompts;
pub use proposer::{KnowledgeSource, LlmProposer, LlmSettings, NoKnowledge};
