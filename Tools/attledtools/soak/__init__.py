"""make soak: many runs in a row (soak), the gateway under restarts (gatewaysoak)."""
