"""Backends: one module each. Optional backends import their SDK inside their own module."""
