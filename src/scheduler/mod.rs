//! Per-instance continuous batching (vLLM V1 semantics).
