"""One subpackage per planner (issue 12 layout)."""
