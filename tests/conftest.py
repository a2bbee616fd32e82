"""Shared test setup. On a machine without a GPU the Triton kernels run in Triton's
interpreter: TRITON_INTERPRET must be set before any kernel module is imported."""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA/ROCm GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fresh_env(monkeypatch):
    """Each test starts without a forced backend or debug mode."""
    monkeypatch.delenv("FLASH_ATTENTION_BACKEND", raising=False)
    monkeypatch.delenv("FLASH_ATTENTION_DEBUG", raising=False)
    torch.manual_seed(0)


@pytest.fixture
def clean_flash_attn(monkeypatch):
    """No flash_attn module of any kind before and after the test (what was imported, the real one or
    FA4's flash_attn.cute, comes back); cached call plans are dropped on both sides."""
    import sys

    from flash_attention_amd import compat, core

    before = {n: m for n, m in sys.modules.items() if n == "flash_attn" or n.startswith("flash_attn.")}
    for n in before:
        monkeypatch.delitem(sys.modules, n)
    core.clear_plans()
    yield
    compat.uninstall()
    for n in [n for n in sys.modules if n == "flash_attn" or n.startswith("flash_attn.")]:
        del sys.modules[n]
    sys.modules.update(before)
    core.clear_plans()
