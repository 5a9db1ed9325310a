"""The data: a deterministic token stream (tokens) and the batches each step reads exactly once (data)."""
