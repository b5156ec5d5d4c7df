"""Debug LLM inference servers from a notebook: launch, watch, benchmark, journal."""
