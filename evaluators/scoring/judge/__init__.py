"""The LLM judge: settings, the session of a scoring run, its HTTP client, verdict cache and prompts."""
