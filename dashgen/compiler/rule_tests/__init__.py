"""`dashgen test`: promtool rule tests generated from the alert vocabulary, the hand-written fixtures cut
to what they read, and what a failed test means."""
