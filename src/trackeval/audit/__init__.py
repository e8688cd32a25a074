"""Data audits run before every evaluation: leakage between splits and duplicate images."""
