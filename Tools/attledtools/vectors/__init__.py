"""Generators of test vectors from independent implementations; each script
says which packages (in a venv of its own) it needs."""
