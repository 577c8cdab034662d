"""The input formats dashgen reads a run from, each mapped onto verl's step log and the catalog's
names: verl_log (verl's JSONL step log), trl (TRL's and Unsloth's trainer_state.json), and
trl_callback (a TRL callback that writes verl's step log from inside the trainer)."""
