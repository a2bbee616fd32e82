"""Comparison helpers: every backend is checked against the float64 reference."""
from __future__ import annotations

import importlib.util

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
HAS_TRITON = importlib.util.find_spec("triton") is not None
POISON = float("nan")


def rel_err(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative Frobenius error ||x - ref|| / ||ref|| in float64 (inf where x has NaN/inf and ref not)."""
    x, ref = x.detach().double(), ref.detach().double()
    finite = torch.isfinite(ref)
    if not torch.equal(torch.isfinite(x), finite):
        return float("inf")
    diff = (x - ref)[finite].norm()
    den = ref[finite].norm()
    return float(diff / den) if den > 0 else float(diff)


def assert_matches(x, ref64, lowp_ref=None, *, name="out", fp32_tol=1e-5, lowp_tol=1e-2, factor=2.0):
    """x is close to the float64 oracle ref64.

    fp32: relative error < fp32_tol. fp16/bf16: when lowp_ref (the same plain math done in
    the input dtype) is given, error <= factor * its error + 1e-4 (flash_attn's rule);
    always < lowp_tol.
    """
    err = rel_err(x, ref64)
    if x.dtype in (torch.float32, torch.float64):
        assert err < fp32_tol, f"{name}: rel err {err:.3e} >= {fp32_tol:.1e}; {_where(x, ref64)}"
        return err
    assert err < lowp_tol, f"{name}: rel err {err:.3e} >= {lowp_tol:.1e}"
    if lowp_ref is not None:
        base = rel_err(lowp_ref, ref64)
        assert err <= factor * base + 1e-4, f"{name}: rel err {err:.3e} > {factor} x plain-math {base:.3e}"
    return err


def _where(x, ref64) -> str:
    """Where the worst element is and the machine's float32 settings: a failure in fp32 reports what could explain
    it (the CI machine once saw 2.7e-5 on its first call where every other machine sees 1.6e-7)."""
    diff = (x.detach().double() - ref64.detach().double()).abs().nan_to_num(float("inf"))
    idx = tuple(int(i) for i in torch.unravel_index(diff.argmax(), diff.shape))
    cpu = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "?"
    return (f"max abs err {diff.max().item():.3e} at {idx} (x {x.detach().flatten()[diff.argmax()].item():.6g}, "
            f"ref {ref64.detach().flatten()[diff.argmax()].item():.6g}); float32 matmul precision "
            f"{torch.get_float32_matmul_precision()}, cpu capability {cpu}, threads {torch.get_num_threads()}")


def randn(*shape, dtype=torch.float32, device=DEVICE, requires_grad=False):
    t = torch.randn(*shape, dtype=dtype, device=device)
    return t.requires_grad_(requires_grad)


def alibi_slopes(kind, b, h):
    """ALiBi slopes of a test case: None, "1d" (h,) or "2d" (b, h), uniform in [0, 0.5)."""
    if kind == "1d":
        return torch.rand(h, device=DEVICE) * 0.5
    if kind == "2d":
        return torch.rand(b, h, device=DEVICE) * 0.5
    return None


# the warp-specialised kernels' tests (test_fwd_ws.py, test_bwd_ws.py): where the path exists (an sm90 GPU,
# or the interpreter, which mirrors sm90's rows)
ON_SM90 = DEVICE == "cuda" and torch.version.hip is None and torch.cuda.get_device_capability() == (9, 0)
WS_SERVED = DEVICE == "cpu" or ON_SM90


def ws_any_length(monkeypatch) -> None:
    """Lift the GPU-only length rule of the warp-specialised kernels (launch/fwd_ws.py WS_MIN_SEQLEN, a
    speed choice tested in test_fwd_ws.test_min_seqlen_rule): the tests' calls are short and must reach
    the kernels on an sm90 GPU too. The Gluon forward, which would serve the same forward calls first, is
    turned off (tests/test_gluon_fwd.py tests it), and the warp-specialised dK/dV kernel's row put back."""
    from flash_attention_amd.launch import fwd_ws, tiles_bwd

    monkeypatch.setattr(fwd_ws, "WS_MIN_SEQLEN", 0)
    monkeypatch.setenv("FLASH_ATTENTION_GLUON", "0")
    # the dK/dV kernel's row, which the table leaves out (launch/tiles_bwd.py BWD_WS), for its tests
    monkeypatch.setitem(tiles_bwd.BWD_WS, "sm90", [tiles_bwd.WS_BWD_ROW])


def spied(module, name: str, fn):
    """fn() with ``module.name`` (a launcher that returns whether it launched) wrapped so that its return value
    is recorded -> (fn's result, what the launcher returned, or None when it was not called)."""
    real = getattr(module, name)
    seen = {}

    def spy(*args, **kwargs):
        seen["ret"] = real(*args, **kwargs)
        return seen["ret"]

    setattr(module, name, spy)
    try:
        return fn(), seen.get("ret")
    finally:
        setattr(module, name, real)


def run_fresh(code: str, timeout: int = 600) -> str:
    """Run Python code in a fresh process without TRITON_INTERPRET -> its stdout (the test fails on a non-zero exit,
    with the end of its stderr). For Gluon compiles: once Triton's interpreter has run a kernel in a process, a Gluon
    compile in that process fails (``'block_argument' object has no attribute 'dtype'``)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def attn_params(d=128, **kw):
    """AttnParams of a call at head dim d (softmax scale d^-1/2) with the options in kw; causal sets the right bound
    to 0, as the public API normalises it."""
    from flash_attention_amd.params import AttnParams

    opts = dict(softmax_scale=d ** -0.5, causal=False, window_left=-1, window_right=-1)
    opts.update(kw)
    if opts["causal"]:
        opts["window_right"] = 0
    return AttnParams(**opts)


def empty_process_caches(monkeypatch) -> None:
    """The library's once-per-process caches (memo.py: the backends, the launchers, the environment's keys, the
    devices' archs) emptied for one test, as in a fresh process."""
    from flash_attention_amd import backends, config, core
    from flash_attention_amd.backends import triton_backend

    for module, name in ((core, "_ARCHS"), (config, "_KEYS")):
        monkeypatch.setattr(module, name, {})
    for module, name in ((backends, "_registry"), (config, "_CALL_KEYS"), (triton_backend, "_available"),
                         (triton_backend, "_LAUNCHERS")):
        monkeypatch.setattr(module, name, [])


def poison_empty(monkeypatch) -> None:
    """torch.empty / empty_like return NaN-filled float tensors for the rest of the test (an output element a kernel
    leaves unwritten shows)."""
    import math

    empty, empty_like = torch.empty, torch.empty_like

    def poisoned(t):
        return t.fill_(math.nan) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", lambda *a, **kw: poisoned(empty(*a, **kw)))
    monkeypatch.setattr(torch, "empty_like", lambda *a, **kw: poisoned(empty_like(*a, **kw)))
