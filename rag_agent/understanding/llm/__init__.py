"""The LLM layer of understanding: the chat model's resolution, the schema-constrained extractor,
the JSON Schema it asks with, the answer's shape and its grounding in the user's text."""
