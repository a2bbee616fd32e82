"""Triton launchers: tile tables (tiles.py), plans and launches per kernel (fwd.py, bwd.py,
decode.py), the direct-launch runtime (runtime.py) and the compile specs check-amd reads (spec.py).

Imported lazily by ``backends/triton_backend.py`` (Triton is optional at package import).
"""
