"""The evaluation of the alerts, which no command runs: simulated runs with ground truth
(simulate), their score (scoring), and the small synthetic step logs of tests and examples
(synthetic_runs); bench/ and the tests use them."""
