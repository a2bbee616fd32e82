"""Make ``import flash_attn`` resolve to this library: code written for flash_attn 2.x runs
unchanged after one added line.

Example::

    import flash_attention_amd.compat; flash_attention_amd.compat.install()
    from flash_attn import flash_attn_func                     # this library's function
    from flash_attn.bert_padding import pad_input, unpad_input
    from flash_attn.layers.rotary import apply_rotary_emb

``install()`` puts stand-in modules into ``sys.modules`` for

- ``flash_attn``: the seven public functions (``flash_attn_func`` ... ``flash_attn_with_kvcache``),
- ``flash_attn.flash_attn_interface``: the same plus the private entry points
  (``_flash_attn_forward``, ``_flash_attn_varlen_forward``, ``_flash_attn_backward``,
  ``_flash_attn_varlen_backward``, ``_get_block_size_n``),
- ``flash_attn.bert_padding`` (``unpad_input``, ``pad_input``, ``index_first_axis``, ...),
- ``flash_attn.layers`` and ``flash_attn.layers.rotary`` (``apply_rotary_emb``, ``RotaryEmbedding``, ...).

``flash_attn.modules`` (``MHA``), ``flash_attn.ops`` and the other submodules are not provided:
importing them raises ``ModuleNotFoundError`` as for any missing module.

Each stand-in carries ``__flash_attention_amd_standin__ = True``; the package's ``__version__``
is ``STANDIN_VERSION`` ("2.8.3"), the flash_attn API level these modules follow, not a
flash_attn release (code that compares versions sees the API it gets).

When a real ``flash_attn`` is importable (installed, or already imported), ``install()``
changes nothing and warns (``CompatWarning``), naming where it is; ``install(force=True)``
replaces it (with a warning too) until ``uninstall()``. The ``flash_attn`` backend of the
dispatcher declines the stand-in (it would call this library again).

FA4 (the ``flash-attn-4`` package) installs only ``flash_attn/cute``, a namespace portion with no
flash_attn 2.x in it: that is not a real flash_attn here. ``install()`` then gives the stand-in package
the namespace's search path and leaves ``flash_attn.cute`` in place, so FA4 stays importable beside it.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types
import warnings

STANDIN_VERSION = "2.8.3"
MARK = "__flash_attention_amd_standin__"

# stand-in name -> (source module, is a package)
_SOURCES = {
    "flash_attn": ("flash_attention_amd.flash_attn_interface", True),
    "flash_attn.flash_attn_interface": ("flash_attention_amd.flash_attn_interface", False),
    "flash_attn.bert_padding": ("flash_attention_amd.bert_padding", False),
    "flash_attn.layers": ("flash_attention_amd.layers", True),
    "flash_attn.layers.rotary": ("flash_attention_amd.layers.rotary", False),
}
_TOP_LEVEL = ("flash_attn_func", "flash_attn_kvpacked_func", "flash_attn_qkvpacked_func", "flash_attn_varlen_func",
              "flash_attn_varlen_kvpacked_func", "flash_attn_varlen_qkvpacked_func", "flash_attn_with_kvcache")

_saved: dict[str, types.ModuleType] = {}  # what install(force=True) replaced, restored by uninstall()


class CompatWarning(UserWarning):
    """install() found a real flash_attn (and left it, or replaced it under force=True)."""


def _is_ours(module) -> bool:
    return bool(getattr(module, MARK, False))


def _ours(name: str) -> bool:
    return name == "flash_attn" or name.startswith("flash_attn.")


def _namespace_paths() -> list[str]:
    """The search path of a flash_attn that is only a namespace package (FA4's ``flash_attn/cute``
    portion, no flash_attn 2.x); [] when flash_attn is a regular package or absent."""
    module = _saved.get("flash_attn") or sys.modules.get("flash_attn")
    if module is not None and not _is_ours(module):
        spec = getattr(module, "__spec__", None)
    else:
        try:
            spec = importlib.util.find_spec("flash_attn")
        except (ImportError, ValueError):
            return []
    if spec is None or (spec.origin and spec.origin != "namespace"):
        return []
    return list(spec.submodule_search_locations or [])


def real_flash_attn() -> str | None:
    """Where a real (not stand-in) flash_attn 2.x is, if one is imported or importable; else None
    (a namespace package, such as FA4's ``flash_attn.cute`` alone, is none)."""
    module = sys.modules.get("flash_attn")
    if module is not None:
        if _is_ours(module):
            return _saved_location()
        if getattr(module, "__file__", None) is None and _namespace_paths():
            return None
        return getattr(module, "__file__", None) or repr(module)
    try:
        spec = importlib.util.find_spec("flash_attn")
    except (ImportError, ValueError):
        return None
    if spec is None or not (spec.origin and spec.origin != "namespace"):
        return None
    return spec.origin


def _saved_location() -> str | None:
    module = _saved.get("flash_attn")
    if module is None or (getattr(module, "__file__", None) is None and _namespace_paths()):
        return None
    return getattr(module, "__file__", None) or repr(module)


def _forwarder(name: str, source):
    def __getattr__(attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        try:
            return getattr(source, attr)
        except AttributeError:
            raise AttributeError(f"module {name!r} (flash_attention_amd's stand-in for flash_attn) has no "
                                 f"attribute {attr!r}") from None

    return __getattr__


def _standin(name: str, source_name: str, package: bool) -> types.ModuleType:
    source = importlib.import_module(source_name)
    module = types.ModuleType(name, f"flash_attention_amd's stand-in for {name} (see flash_attention_amd.compat); "
                                    f"the functions are {source_name}'s.")
    names = _TOP_LEVEL if name == "flash_attn" else tuple(getattr(source, "__all__", ()))
    for attr in names:
        setattr(module, attr, getattr(source, attr))
    module.__all__ = list(names)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=package)
    module.__package__ = name if package else name.rpartition(".")[0]
    if package:
        module.__path__ = []  # a package with no files: other submodules are simply not found
    if name != "flash_attn":
        module.__getattr__ = _forwarder(name, source)
    setattr(module, MARK, True)
    module.__standin_for__ = source_name
    return module


def installed() -> bool:
    """True while the stand-in is what ``import flash_attn`` gives."""
    return _is_ours(sys.modules.get("flash_attn"))


def install(force: bool = False) -> bool:
    """Register the stand-in flash_attn modules; True when the stand-in is in place afterwards.

    A real flash_attn (importable or imported) is left alone with a ``CompatWarning`` unless
    ``force=True``, which replaces it (also warned) until ``uninstall()``.
    """
    if installed():
        return True
    real = real_flash_attn()
    if real is not None and not force:
        warnings.warn(f"flash_attention_amd.compat.install(): a real flash_attn is importable ({real}); it is left "
                      "in place and `import flash_attn` keeps giving it. To use flash_attention_amd under the "
                      "flash_attn name anyway, call flash_attention_amd.compat.install(force=True).",
                      CompatWarning, stacklevel=2)
        return False
    namespace = [] if real is not None else _namespace_paths()
    modules = {name: _standin(name, source, package) for name, (source, package) in _SOURCES.items()}
    top, layers = modules["flash_attn"], modules["flash_attn.layers"]
    if namespace:  # FA4's flash_attn.cute (and any other namespace portion) stays importable
        top.__path__ = namespace
    top.__version__ = STANDIN_VERSION
    top.flash_attn_interface = modules["flash_attn.flash_attn_interface"]
    top.bert_padding = modules["flash_attn.bert_padding"]
    top.layers = layers
    layers.rotary = modules["flash_attn.layers.rotary"]
    if real is not None:
        warnings.warn(f"flash_attention_amd.compat.install(force=True): the real flash_attn ({real}) is replaced by "
                      "flash_attention_amd's stand-in until flash_attention_amd.compat.uninstall(); modules that "
                      "already imported it keep their reference to it.", CompatWarning, stacklevel=2)
    for name in [n for n in sys.modules if _ours(n) and (not namespace or n in _SOURCES)]:
        _saved[name] = sys.modules.pop(name)
    for name in [n for n in sys.modules if n.startswith("flash_attn.") and n.count(".") == 1]:
        setattr(top, name.partition(".")[2], sys.modules[name])  # e.g. flash_attn.cute, imported before
    sys.modules.update(modules)
    _forget_plans()
    return True


def _forget_plans() -> None:
    """Cached call plans may hold the flash_attn backend, chosen while the real package was there."""
    from . import core

    core.clear_plans()


def uninstall() -> bool:
    """Remove the stand-in modules and bring back what ``install(force=True)`` replaced; True if
    anything was removed."""
    removed = False
    for name in [n for n in sys.modules if _ours(n)]:
        if _is_ours(sys.modules[name]):
            del sys.modules[name]
            removed = True
    for name, module in _saved.items():
        sys.modules.setdefault(name, module)
    _saved.clear()
    _forget_plans()
    return removed


__all__ = ["MARK", "STANDIN_VERSION", "CompatWarning", "install", "installed", "real_flash_attn", "uninstall"]
