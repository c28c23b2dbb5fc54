"""Engine integrations of kvrt (the vLLM KV connector, the SGLang HiCache backend)."""
