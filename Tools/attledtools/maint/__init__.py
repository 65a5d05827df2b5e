"""Repository upkeep: the doc comment coverage of Sources/ (doccoverage), the
synthetic golden capture (make_golden)."""
