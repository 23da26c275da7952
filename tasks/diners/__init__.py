"""The Diner's Dilemma society with punishment and metanorms (issue 6)."""
