"""Launching Triton kernels with little host time: ``launch(fn, grid, device, args, constexprs, options)``.

``fn[grid](...)`` costs tens of microseconds of host time per launch for kernels with ~40
arguments (Triton binds and specialises every argument, then hashes the specialisation). On
GPUs this module keeps each compiled kernel under a key (``launch_key``) that holds everything
Triton 3.6 specialises a launch on, and launches a kernel it has seen directly
(``CompiledKernel.run``, what ``JITFunction.run`` itself ends with). The first launch of a
key goes through ``fn[grid]`` (compiling, or Triton's own cache).

What Triton 3.6 specialises on (``triton/runtime/jit.py: create_function_from_signature`` and
the native ``specialize_impl``), and what the key holds for it:

- an int: its type by range (i32 / i64 / u64), ``== 1`` (a constant) and ``% 16 == 0``; a
  ``do_not_specialize`` parameter only its range. Key: the value itself, or only the range for
  ``do_not_specialize`` parameters (the dropout seed changes every call and must not miss).
- a bool / float: the type only (never specialised). Key: the type.
- a tensor: its dtype and ``data_ptr() % 16 == 0``; on AMD with ``knobs.amd.use_buffer_ops``
  also whether its storage is at most 2**31 - 1 bytes (``HIPBackend.get_tensor_specialization``
  adds "S"). Key: the same three facts.
- a TMA ``TensorDescriptor``: its dtype and block shape. Key: those (and its padding).
- None: a constant. A tuple: each element as above, always specialised (even for a
  ``do_not_specialize`` parameter). Key: the same, element by element.
- constexprs and launch options by value; Triton's ``debug`` and ``instrumentation_mode``
  knobs (part of its own kernel cache key); the current device.

Verified on the CPU (tests/test_launch_runtime.py): for random arguments of the real kernels,
equal keys always mean equal specialisations by Triton 3.6's own binder, built for the CUDA
(sm90) and the HIP (gfx942, buffer ops on and off) backends. The direct path is therefore on
for CUDA and ROCm; it has run on an H100, never on AMD hardware.

Only with the Triton versions these rules and the C launchers' argument lists were read from
(``DIRECT_TRITON``): under any other installed Triton (ROCm's ``pytorch-triton-rocm`` and newer
torch releases ship their own) every launch goes through Triton's public ``fn[grid]`` path, which is
right whatever Triton specialises on, at its host cost (``direct_launch_reason`` says why; explain()
prints it).
"""
from __future__ import annotations

import functools

import torch

FAST_LAUNCH = True  # False: every launch through fn[grid] (benchmarks time Triton's own path)
DIRECT_TRITON = ("3.6",)  # the Triton versions (major.minor) whose launch rules this module replays
_direct_ok: list = []  # [bool]: whether the installed Triton is one of them, read once
_KEY_LIMIT = 4096
_kernels: dict = {}  # launch key -> CompiledKernel
_fn_info: dict = {}  # id(JITFunction) -> (do_not_specialize flags of its non-constexpr params, their number, fn)
_MAX_I32 = 2**31 - 1
_Tensor = torch.Tensor
_hooks = None


def _triton():
    global _hooks
    if _hooks is None:
        from triton import knobs
        from triton.runtime.driver import driver

        _hooks = (knobs, driver.active.get_current_stream)
    return _hooks


def current_stream(index: int) -> int:
    """The raw handle of this thread's current stream on CUDA device ``index``: the stream launches use."""
    return _triton()[1](index)


def _int_range(x: int) -> int:
    return 0 if -2**31 <= x <= _MAX_I32 else 1 if -2**63 <= x < 2**63 else 2


class Unkeyable(Exception):
    """An argument of a kind the key does not cover: launch through Triton."""


def _key(x, dns: bool, buffer_ops: bool):
    t = type(x)
    if t is int:
        return (t, _int_range(x)) if dns else x
    if t is _Tensor or (t is not float and t is not tuple and hasattr(x, "data_ptr")):
        if buffer_ops:
            size = x.ptr_range() if hasattr(x, "ptr_range") else x.untyped_storage().size()
            return x.dtype, x.data_ptr() & 15 == 0, size <= _MAX_I32
        return x.dtype, x.data_ptr() & 15 == 0
    if t is float or t is bool:
        return t
    if x is None:
        return None
    if t is tuple:
        return tuple([_key(e, False, buffer_ops) for e in x])
    if hasattr(x, "block_shape") and hasattr(x, "base"):  # triton.tools.tensor_descriptor.TensorDescriptor
        return "desc", x.base.dtype, tuple(x.block_shape), getattr(x, "padding", None)
    raise Unkeyable(t)


def fn_info(fn) -> tuple[tuple[bool, ...], int]:
    """(do_not_specialize flag of each non-constexpr parameter, their number) of a JITFunction."""
    info = _fn_info.get(id(fn))
    if info is None:
        params = [p for p in fn.params if not p.is_constexpr]
        info = _fn_info[id(fn)] = (tuple(p.do_not_specialize for p in params), len(params), fn)
    return info[:2]


def launch_key(fn, args: tuple, constexprs: dict, options: dict, device_index: int, buffer_ops: bool,
               debug, instrumentation) -> tuple:
    """The key of a launch (see the module docstring); raises Unkeyable for other argument kinds."""
    dns, _ = fn_info(fn)
    # id(fn): a JITFunction hashes its source's hash; the kernels are module-level, never freed
    return (id(fn), device_index, tuple(options.items()), tuple(constexprs.values()), debug, instrumentation,
            buffer_ops, _keys(args, dns, buffer_ops))


def _keys(args, dns, buffer_ops: bool) -> tuple:
    """tuple(_key(a, d, buffer_ops) for each argument), with the common kinds inlined (the same
    values as _key: a tensor -> (dtype, 16-byte aligned); None; an int -> itself unless
    do_not_specialize; a float -> float)."""
    if buffer_ops:
        return tuple([_key(a, d, True) for a, d in zip(args, dns)])
    out = []
    for a, d in zip(args, dns):
        t = type(a)
        if t is _Tensor:
            out.append((a.dtype, a.data_ptr() & 15 == 0))
        elif a is None:
            out.append(None)
        elif t is int and not d:
            out.append(a)
        elif t is float:
            out.append(float)
        else:
            out.append(_key(a, d, False))
    return tuple(out)


def launch_through_triton(fn, grid, device, args, constexprs, options):
    """fn[grid](...) on the device's own current-device context: Triton's own launch path."""
    if device.type == "cuda" and device.index is not None and device.index != torch.cuda.current_device():
        with torch.cuda.device(device):
            return fn[grid](*args, **constexprs, **options)
    return fn[grid](*args, **constexprs, **options)


def _device_index(device: torch.device) -> int | None:
    """The current CUDA device when it is ``device``'s (None: launch through Triton). Reads the
    thread's device without ``torch.cuda.current_device``'s lazy-init check (a device tensor of
    this call exists, so CUDA is initialised): ~5 us less per launch in autograd's device thread."""
    if not FAST_LAUNCH or device.type != "cuda" or not (_direct_ok[0] if _direct_ok else _read_version()):
        return None
    index = _get_device()
    return index if device.index is None or device.index == index else None


def triton_version() -> tuple[str, str]:
    """(the installed Triton's version, its "major.minor"), e.g. ("3.6.0", "3.6")."""
    import triton

    return triton.__version__, ".".join(triton.__version__.split(".")[:2])


def direct_launch_reason() -> str | None:
    """None when launches may take the direct path, else why every launch goes through Triton's own."""
    version, minor = triton_version()
    if minor not in DIRECT_TRITON:
        return (f"Triton {version} is installed; the direct launch replays Triton {', '.join(DIRECT_TRITON)}'s "
                "launch rules, so kernels launch through Triton's own path (right, with more host time per call)")
    return None


def _read_version() -> bool:
    _direct_ok[:] = [direct_launch_reason() is None]
    return _direct_ok[0]


def _get_device() -> int:
    get = getattr(torch._C, "_cuda_getDevice", None)
    return get() if get is not None else torch.cuda.current_device()


def _direct(kernel):
    """The compiled kernel's C launch function with the arguments that come before the kernel's own
    (its launcher object's ``__call__`` without the Python frame): ``(launch, kind, extra)``, or None
    when the launcher is of another kind or needs profile scratch memory (then ``kernel.run``
    launches). Triton 3.6's CudaLauncher / HIPLauncher pass exactly these (triton/backends/*/driver.py).
    A CUDA kernel with global scratch memory (device-side TMA descriptors, kernels/fwd_ws.py) gets
    its buffer here, sized as CudaLauncher sizes it (grid x CTAs x the kernel's bytes a program).
    kind: 0 CUDA, 1 HIP, 2 CUDA with host-made TMA descriptors, whose launch function Triton wraps in
    Python that encodes each descriptor per call: the C function under it is taken, and ``_descriptor_args``
    expands the descriptors (extra then also holds their positions and metadata)."""
    run = kernel.run  # loads the module
    launch = getattr(run, "launch", None)
    kind = type(run).__name__
    if launch is None or getattr(run, "profile_scratch_size", 1):
        return None
    if kind == "CudaLauncher":
        scratch = getattr(run, "global_scratch_size", None)
        if scratch is None or (scratch and getattr(run, "global_scratch_align", 1 << 20) > 256):
            return None  # torch's allocations are 256-byte aligned at least
        extra = (run.launch_cooperative_grid, run.launch_pdl, scratch * getattr(run, "num_ctas", 1))
        unwrapped = unwrap_descriptors(launch)
        if unwrapped is not None:  # host-made TMA descriptors: expanded here (``_descriptor_args``)
            return unwrapped[0], 2, (*extra, *unwrapped[1:])
        return launch, 0, extra
    if kind == "HIPLauncher":
        return launch, 1, run.launch_cooperative_grid
    return None


def unwrap_descriptors(launch):
    """A launch function that Triton 3.6 wrapped to expand host-made TMA descriptors (``wrap_handle_tensordesc``
    in triton/backends/nvidia/driver.py: per call, per descriptor, Python that reads its metadata and encodes a
    CUtensorMap) -> (the C launch function it wraps, the descriptors' positions among the kernel's arguments, their
    metadata as tuples (swizzle, element bytes, host dtype, block, fp4 padded)), or None (no descriptors, or
    descriptors the frontend decomposes: Triton's own wrapper stays)."""
    code = getattr(launch, "__code__", None)
    if code is None or "tensordesc_indices" not in code.co_freevars or launch.__closure__ is None:
        return None
    cells = dict(zip(code.co_freevars, (c.cell_contents for c in launch.__closure__)))
    positions, metas = sorted(cells["tensordesc_indices"]), cells.get("tensordesc_meta")
    if not metas or any(m is None for m in metas) or len(metas) != len(positions):
        return None
    from triton.backends.nvidia import driver as nv

    host_dtype = nv.TMA_DTYPE_DEVICE_TO_HOST
    metas = tuple((m["swizzle"], m["elem_size"], host_dtype[m["elem_type"]], tuple(m["block_size"]),
                   bool(m["fp4_padded"])) for m in metas)
    return cells["launcher"], tuple(positions), metas


def _encoder():
    """The active driver's CUtensorMap encoder (Triton's ``fill_tma_descriptor``), as make_tensordesc_arg calls it."""
    from triton.runtime import driver

    return driver.active.utils.fill_tma_descriptor


_TMA: dict = {}  # (base address, shape, strides, padding, metadata) -> the descriptor's launch arguments
_TMA_LIMIT = 1024


def _descriptor_args(desc, meta: tuple) -> tuple:
    """A host-made TensorDescriptor's launch arguments as Triton 3.6's ``make_tensordesc_arg`` makes them
    (CUtensorMap, shape, strides), encoded once per (base address, shape, strides, padding, metadata): a
    CUtensorMap is a pure function of those, and the launch copies it into the kernel's parameters, so one
    object serves every launch over the same memory."""
    key = (desc.base.data_ptr(), *desc.shape, *desc.strides, desc.padding, meta)
    hit = _TMA.get(key)
    if hit is None:
        swizzle, elem_size, dtype, block, fp4_padded = meta
        shape = list(desc.shape)
        if fp4_padded:
            shape[-1] *= 2
        padding = 1 if desc.padding == "nan" else 0
        tensor_map = _encoder()(key[0], swizzle, elem_size, dtype, list(block), shape, desc.strides, padding)
        hit = (tensor_map, *shape, *desc.strides)
        if len(_TMA) >= _TMA_LIMIT:
            _TMA.clear()
        _TMA[key] = hit
    return hit


def _no_hook(hook) -> bool:
    """A launch hook that does nothing: None, or Triton 3.6's empty HookChain."""
    return hook is None or (type(hook).__name__ == "HookChain" and not hook.calls)


def _run(fn, grid, device, index, key, cache, args, constexprs, options):
    """Launch the kernel cached under key, else through fn[grid] (and cache what it compiled)."""
    knobs, current_stream = _triton()
    entry = cache.get(key)
    if entry is None:
        kernel = fn[grid](*args, **constexprs, **options)
        # keep only what the direct path replays exactly: every parameter passed in order, no hooks,
        # a finished (not asynchronous) compile
        if (kernel is not None and not fn.pre_run_hooks and not hasattr(kernel, "result")
                and list(fn.arg_names) == list(fn.arg_names[:len(args)]) + list(constexprs)
                and fn_info(fn)[1] == len(args)):
            if len(cache) >= _KEY_LIMIT:
                cache.clear()
            cache[key] = (kernel, _direct(kernel))
        return
    if _launch_direct(entry, grid, index, args, tuple(constexprs.values())):
        return
    kernel = entry[0]
    stream = current_stream(index)
    enter, leave = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    meta = kernel.launch_metadata(grid, stream, *args, *constexprs.values())
    kernel.run(grid[0], grid[1], grid[2], stream, kernel.function, kernel.packed_metadata, meta,
               enter, leave, *args, *constexprs.values())


def _launch_direct(entry, grid, index: int, args, cvals: tuple) -> bool:
    """Launch a cached (kernel, _direct(kernel)) entry through its C launch function when no launch
    hook is set (then Triton builds no launch metadata and passes None for the hooks) -> launched."""
    kernel, direct = entry
    if direct is None:
        return False
    knobs, current_stream = _hooks or _triton()
    rt = knobs.runtime
    if not (_no_hook(rt.launch_enter_hook) and _no_hook(rt.launch_exit_hook)):
        return False
    launch, kind, extra = direct
    if kind != 1:  # CUDA: grid, stream, function, cooperative, pdl, two scratch buffers, metadata, hooks
        scratch = None
        if extra[2]:  # bytes a program: one buffer for the grid, on the launch's device and stream
            scratch = torch.empty(grid[0] * grid[1] * grid[2] * extra[2], dtype=torch.int8,
                                  device=_cuda_device(index))
        if kind == 2:  # host-made TMA descriptors (every one among args, before the constexprs): expanded
            args = list(args)
            _, _, _, positions, metas = extra
            for i in range(len(positions) - 1, -1, -1):
                p = positions[i]
                args[p:p + 1] = _descriptor_args(args[p], metas[i])
        launch(grid[0], grid[1], grid[2], current_stream(index), kernel.function, extra[0], extra[1], scratch,
               None, kernel.packed_metadata, None, None, None, *args, *cvals)
    else:  # HIP: cooperative, grid, stream, function, profile scratch, metadata, hooks
        launch(extra, grid[0], grid[1], grid[2], current_stream(index), kernel.function, None,
               kernel.packed_metadata, None, None, None, *args, *cvals)
    return True


_DEVICES: dict = {}


def _cuda_device(index: int) -> torch.device:
    device = _DEVICES.get(index)
    if device is None:
        device = _DEVICES[index] = torch.device("cuda", index)
    return device


def _scratch(size: int, alignment: int, stream) -> torch.Tensor:
    """Triton's allocator protocol: global scratch memory on the current CUDA device (torch's caching
    allocator, stream-ordered like the launch that uses it)."""
    return torch.empty(size, dtype=torch.int8, device="cuda")


def scratch_allocator_set():
    """Make ``_scratch`` Triton's allocator in this context when none is set (a kernel launched
    through Triton's own path that needs global scratch memory reads it there) -> a token for
    ``scratch_allocator_reset``, or None when the caller's own allocator stays."""
    from triton.runtime import _allocation  # Triton 3.6: the allocator is a ContextVar there

    var = _allocation._allocator
    return var.set(_scratch) if isinstance(var.get(), _allocation.NullAllocator) else None


def scratch_allocator_reset(token) -> None:
    if token is not None:
        from triton.runtime import _allocation

        _allocation._allocator.reset(token)


def launch_with_scratch(slot: KernelSlot, grid: tuple, device: torch.device, args: tuple, fast) -> None:
    """``slot.launch`` for a kernel that makes its TMA descriptors on the device: Triton's allocator is
    set for the launch when the caller has none (a launch through Triton's own path reads it; the
    direct path allocates the scratch itself)."""
    token = scratch_allocator_set()
    try:
        slot.launch(grid, device, args, fast=fast)
    finally:
        scratch_allocator_reset(token)


def _knob_key(index: int) -> tuple:
    knobs, _ = _triton()
    buffer_ops = torch.version.hip is not None and bool(knobs.amd.use_buffer_ops)
    return index, buffer_ops, knobs.runtime.debug, knobs.compilation.instrumentation_mode


def launch_context(device: torch.device) -> tuple | None:
    """What every direct launch on ``device`` from this thread reads (the device index and the
    Triton knobs of the key), for a launcher that starts several kernels of one call: read once,
    passed to each ``KernelSlot.launch``. None: launch through Triton."""
    index = _device_index(device)
    return None if index is None else _knob_key(index)


def launch(fn, grid: tuple, device: torch.device, args: tuple, constexprs: dict, options: dict) -> None:
    """fn[grid](*args, **constexprs, **options): args are the kernel's non-constexpr parameters in
    order (tensors, None, ints, floats, tuples), constexprs its constexpr parameters in order
    (the kernels declare them last). grid has three entries."""
    context = launch_context(device)
    if context is None:
        launch_through_triton(fn, grid, device, args, constexprs, options)
        return
    index, buffer_ops, debug, instrumentation = context
    try:
        key = launch_key(fn, args, constexprs, options, index, buffer_ops, debug, instrumentation)
    except Unkeyable:
        launch_through_triton(fn, grid, device, args, constexprs, options)
        return
    _run(fn, grid, device, index, key, _kernels, args, constexprs, options)


class KernelSlot:
    """One kernel of one call plan: fixed constexprs and options, and arguments of which only those
    at ``dynamic`` positions may change between calls (tensors, seeds, dout's strides); every
    other argument must be the plan's same value on each call. The key of a launch is then
    ``launch_key`` restricted to the dynamic positions (the rest is the same for the slot), and
    the compiled kernels live in the slot."""

    __slots__ = ("fn", "constexprs", "options", "dynamic", "kernels", "fast", "_dns", "_cvals", "_tensor_pos")

    def __init__(self, fn, constexprs: dict, options: dict, dynamic: tuple[int, ...]):
        # in the kernel's parameter order: the direct launch passes their values after the arguments (``_run``)
        names = getattr(fn, "arg_names", None)
        if names is not None and set(constexprs) <= set(names):
            constexprs = {name: constexprs[name] for name in names if name in constexprs}
        self.fn, self.constexprs, self.options, self.dynamic = fn, constexprs, options, dynamic
        self.kernels: dict = {}
        self.fast: dict = {}  # (launch context, the launcher's fast key) -> a kernels entry
        self._dns = None  # (position, do_not_specialize) of the dynamic arguments, on first launch
        self._cvals = tuple(constexprs.values())
        self._tensor_pos = ()  # positions of the tensor parameters among them (set with _dns)

    def _dynamic_kinds(self) -> tuple:
        """(position, do_not_specialize, kind) of each dynamic argument; kind: 0 a tensor parameter
        (a capitalised name: Q, DO, CuSeqlensQ), 1 a tuple of strides (stride_*), 2 anything else."""
        flags, _ = fn_info(self.fn)
        names = self.fn.arg_names
        return tuple((i, flags[i], 0 if names[i][:1].isupper() else 1 if names[i].startswith("stride") else 2)
                     for i in self.dynamic)

    def _pointers(self, args: tuple) -> list:
        """args with each plain tensor at a tensor position replaced by its ``data_ptr()`` (see launch)."""
        out = list(args)
        for i in self._tensor_pos:
            x = out[i]
            if type(x) is _Tensor:
                out[i] = x.data_ptr()
        return out

    def launch(self, grid: tuple, device: torch.device, args: tuple, context=False, fast=None,
               pointers=None) -> None:
        """context: ``launch_context(device)`` read once by a launcher starting several kernels
        (False: read it here).

        fast: a launcher's cheap summary of every fact of ``args`` that can change between the calls
        of its plan and that the launch key depends on (for the forward: whether every tensor is
        16-byte aligned; dtypes, None-ness and the rest are fixed by the call plan's key). The
        launcher guarantees that equal ``fast`` values mean equal launch keys; the first launch of a
        ``fast`` value computes the full key, later ones skip it. None: the full key every time.

        pointers: args with the tensors given as their ``data_ptr()`` ints, from a launcher that reads
        them anyway (else made here). A direct launch passes those: Triton 3.6's C launchers (CUDA and
        HIP, ``getPointer`` in triton/backends/*/driver.py) take an int as the device pointer as it is,
        while for a tensor they call its ``data_ptr`` and then ask the driver whether the pointer is a
        device one (``cuPointerGetAttribute``), 0.1-0.4 us per tensor on the H100 hosts measured
        (benchmarks/launch_ptr_probe.py, benchmarks/results/run18/). That query only catches tensors
        on the wrong device, which the callers' validation has already ruled out (every tensor of a
        call is on q's device, and the launchers allocate theirs there). The first launch of a key goes
        through Triton with the tensors, which it specialises on."""
        knob_key = launch_context(device) if context is False else context
        if knob_key is None:
            launch_through_triton(self.fn, grid, device, args, self.constexprs, self.options)
            return
        if fast is not None:
            entry = self.fast.get((knob_key, fast))
            if entry is not None and _launch_direct(entry, grid, knob_key[0],
                                                    self._pointers(args) if pointers is None else pointers,
                                                    self._cvals):
                return
        dns = self._dns
        if dns is None:
            dns = self._dns = self._dynamic_kinds()
            self._tensor_pos = tuple(i for i, _, kind in dns if kind == 0)
        try:
            if knob_key[1]:  # AMD buffer ops: the storage size too
                key = (knob_key, *[_key(args[i], d, True) for i, d, _ in dns])
            else:  # _key inlined by kind: 0 tensors / None (dtype, 16-byte alignment), 1 stride tuples
                key = [knob_key]  # (by value), 2 other (_key)
                for i, d, kind in dns:
                    x = args[i]
                    if kind == 0 and type(x) is _Tensor:
                        key.append((x.dtype, x.data_ptr() & 15 == 0))
                    elif kind == 1 and type(x) is tuple and all(type(e) is int for e in x):
                        key.append(x)  # _key of a tuple of ints is the tuple
                    else:
                        key.append(None if x is None else _key(x, d, False))
                key = tuple(key)
        except Unkeyable:
            launch_through_triton(self.fn, grid, device, args, self.constexprs, self.options)
            return
        entry = self.kernels.get(key)
        if entry is not None and fast is not None:
            if len(self.fast) >= _KEY_LIMIT:
                self.fast.clear()
            self.fast[(knob_key, fast)] = entry
        if entry is not None and _launch_direct(entry, grid, knob_key[0],
                                                self._pointers(args) if pointers is None else pointers, self._cvals):
            return
        _run(self.fn, grid, device, knob_key[0], key, self.kernels, args, self.constexprs, self.options)


def clear() -> None:
    """Forget every cached compiled kernel (tests)."""
    _kernels.clear()


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    """The device's multiprocessors (4 off CUDA: the interpreter's grids)."""
    if device.type != "cuda":
        return 4
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())
