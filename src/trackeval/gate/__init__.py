"""Promotion gate: paired comparisons of model versions and the decision rules."""
