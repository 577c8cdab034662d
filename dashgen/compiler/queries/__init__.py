"""PromQL as definitions write it, checked at build: parsed and walked against the metric catalog, named
selectors expanded, references between definitions resolved, queries put in the metric source's names."""
