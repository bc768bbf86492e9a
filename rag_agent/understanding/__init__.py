"""Free text to conditions: the rule parser (`rules/`), the explicit conditions a caller passes,
and the LLM extractor (`llm/`), whose answers are checked and grounded before use."""
