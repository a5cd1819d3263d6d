"""Screen classifiers: YAML regex packs (default) and an optional LLM."""
