"""Triton launchers: allocate outputs, pick a tuned config per architecture, compute the grid.

Imported lazily by ``backends/triton_backend.py`` (Triton is optional at package import).
"""
