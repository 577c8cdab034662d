"""Labelled runs judge a change of the alerts: `dashgen review`, and the public corpus' score.

runs.py            a folder per recorded run and its run.yaml (verdict, onset, split): LabelledRun
judging.py         what fired on a run, and whether that is right for its verdict: Judged
revisions.py       the rules at the base (a git revision or a rendered folder) and in the working tree
compiled_rules.py  a project's compiled rules as JSON, in a process of its own per revision
comparison.py      the runs backtested by one rule set (the score) or two in one pass (a review)
report.py          the score as text; a review as Markdown for a pull request, or JSON
corpus.py          the public corpus: bench/realruns in a clone, the package dashgen_runs when installed
"""
