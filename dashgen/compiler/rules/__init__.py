"""Alert and recording rule definitions (alerts/*.py) -> typed rule files: the alert vocabulary compiled to
PromQL, windows in steps, the checks of a rule as stated and as Prometheus' loader reads it, and what each
alert needs of a run's log."""
