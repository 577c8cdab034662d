"""The public corpus of real runs, shipped in the wheel as the package `dashgen_runs` (run.yaml and
steps.jsonl of each run folder): `dashgen review --public-corpus` reviews against it."""
