"""Herding: for panes a person opted in, type a nudge when an agent has stalled and every safety
gate agrees. ``rules`` (YAML rule sets), ``gate`` (pure decisions), ``llmrule`` (rules that ask
the LLM), ``step`` (what the watcher calls once per tick)."""
