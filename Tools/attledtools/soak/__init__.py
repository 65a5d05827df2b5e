"""make soak: many runs in a row (soak), the gateway under restarts (gatewaysoak,
with its model, helper processes and figures beside it)."""
