//! ksearch-llm against loopback servers that speak each provider's wire format.

mod fixtures;
mod provider_rules;
mod reliability;
mod secrets;
mod spec_prices;
mod support;
mod wire;
