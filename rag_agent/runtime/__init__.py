"""Run-time machinery the pipeline is built on: effects (one pipeline for sync and async), the
result cache, the sliding-window rate limiter and the LLM deadline."""
