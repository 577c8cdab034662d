"""promtool rule tests of the default alerts (installed as `dashgen_rule_tests`); `dashgen init` copies them."""
