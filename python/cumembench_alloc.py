"""cumembench_alloc - the suite's allocation policies inside PyTorch and CuPy programs.

Standard library only (ctypes) over libcmb_pluggable.so:

    import cumembench_alloc as cmb
    cmb.install_torch("bfc@cuda")        # before the program's first CUDA allocation
    ...                                  # the program, unchanged
    print(cmb.memory_stats())            # requested / allocated / reserved, current and peak

The spec is the one `cumembench --allocator` takes (NAME[:key=value...][@cuda|@vmm]).
install_cupy() does the same for CuPy. stats(), reset_peaks(), empty_cache(),
trace_start() / trace_stop() work under either; docs/pluggable.md has the details.

The library is found at $CMB_PLUGGABLE_LIB, else beside this file, else in the
build tree next to it (build/pluggable/), else by the dynamic loader.
"""
import ctypes
import os
import re

__all__ = ["PluggableError", "library_path", "load", "configure", "set_capacity",
           "install_torch", "torch_mem_pool", "torch_hooks", "install_cupy", "stats", "memory_stats",
           "reset_peaks", "empty_cache", "set_memory_fraction", "trace_start", "trace_stop", "spec"]

ABI_VERSION = 1
LIB_NAME = "libcmb_pluggable.so"
# PyTorch's pair throwing c10::OutOfMemoryError (pluggable/torch), built
# against the running PyTorch where one is: found beside the library.
OOM_SHIM_NAME = "libcmb_torch_oom.so"

# The hooks of PyTorch's CUDAPluggableAllocator (torch/csrc/cuda/Module.cpp,
# PyTorch 2.11: the setters of CUDAPluggableAllocator(...).allocator(), each
# taking a function's address), and the library's function for each.
TORCH_HOOKS = (
    ("set_init_fn", "cmb_torch_init_fn"),
    ("set_reset_fn", "cmb_torch_reset_fn"),
    ("set_memory_fraction_fn", "cmb_torch_memory_fraction_fn"),
    ("set_record_stream_fn", "cmb_torch_record_stream_fn"),
    ("set_begin_allocate_to_pool", "cmb_torch_begin_allocate_to_pool_fn"),
    ("set_end_allocate_to_pool_fn", "cmb_torch_end_allocate_to_pool_fn"),
    ("set_release_pool", "cmb_torch_release_pool_fn"),
)

# torch.cuda.memory_stats() names for the library's counters. PyTorch's
# "all" pool is every block; the large/small pools, which are its own
# caching allocator's, have no counterpart.
TORCH_STAT_NAMES = (
    ("requested_bytes.all.current", "requested_current"), ("requested_bytes.all.peak", "requested_peak"),
    ("allocated_bytes.all.current", "allocated_current"), ("allocated_bytes.all.peak", "allocated_peak"),
    ("active_bytes.all.current", "allocated_current"), ("active_bytes.all.peak", "allocated_peak"),
    ("reserved_bytes.all.current", "reserved_current"), ("reserved_bytes.all.peak", "reserved_peak"),
    ("active.all.current", "blocks_current"), ("active.all.peak", "blocks_peak"),
    ("allocation.all.current", "blocks_current"), ("allocation.all.peak", "blocks_peak"),
    ("allocation.all.allocated", "allocs"), ("allocation.all.freed", "frees"),
    ("segment.all.current", "segments_current"), ("num_alloc_retries", "oom_retries"),
    ("num_ooms", "ooms"), ("num_device_alloc", "upstream_allocs"), ("num_device_free", "upstream_frees"),
)

# The counters of cmb_pluggable_memstats after its four 32-bit fields, in order
# (pluggable/cmb_pluggable.h); all int64.
COUNTERS = (
    "requested_current", "requested_peak", "allocated_current", "allocated_peak",
    "reserved_current", "reserved_peak", "blocks_current", "blocks_peak",
    "segments_current", "largest_free", "upstream_allocs", "upstream_frees",
    "oom_retries", "allocs", "frees", "ooms", "bad_frees", "streams",
    "device_used_peak", "device_free_at_create", "device_total",
)


class MemStats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("valid", ctypes.c_uint32),
                ("device", ctypes.c_int32), ("active", ctypes.c_int32)] + \
               [(name, ctypes.c_int64) for name in COUNTERS]


class PluggableError(RuntimeError):
    """A policy that cannot be used: bad spec, library missing or too old, too late to install."""


_lib = None
_lib_path = None
_current_device = None   # set by install_*: the framework's current device
_keep = []               # objects the frameworks hold only by address
_hooks = {}              # install_torch: hook -> "wired" or why not


def library_path():
    """Where the library is looked for first (an existing file), or its bare name."""
    env = os.environ.get("CMB_PLUGGABLE_LIB")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, LIB_NAME),
                      os.path.join(here, "..", "build", "pluggable", LIB_NAME)):
        if os.path.exists(candidate):
            return os.path.normpath(candidate)
    return LIB_NAME


def _declare(lib):
    c = ctypes
    table = {
        "cmb_pluggable_abi_version": ([], c.c_int),
        "cmb_pluggable_memstats_size": ([], c.c_size_t),
        "cmb_pluggable_configure": ([c.c_char_p], c.c_int),
        "cmb_pluggable_set_capacity": ([c.c_uint64], c.c_int),
        "cmb_pluggable_set_torch_oom": ([c.c_int], c.c_int),
        "cmb_pluggable_spec": ([], c.c_char_p),
        "cmb_pluggable_last_error": ([], c.c_char_p),
        "cmb_pluggable_malloc": ([c.c_size_t, c.c_int, c.c_void_p], c.c_void_p),
        "cmb_pluggable_free": ([c.c_void_p, c.c_size_t, c.c_int, c.c_void_p], None),
        "cmb_pluggable_stats": ([c.c_int, c.POINTER(MemStats)], c.c_int),
        "cmb_pluggable_reset_peaks": ([c.c_int], c.c_int),
        "cmb_pluggable_empty_cache": ([c.c_int], c.c_int),
        "cmb_pluggable_trace_start": ([c.c_char_p], c.c_int),
        "cmb_pluggable_trace_stop": ([], c.c_int),
        "cmb_pluggable_set_memory_fraction": ([c.c_double, c.c_int], c.c_int),
        "cmb_pluggable_record_stream": ([c.c_void_p, c.c_int, c.c_void_p], c.c_int),
        "cmb_torch_malloc": ([c.c_size_t, c.c_int, c.c_void_p], c.c_void_p),
        "cmb_torch_free": ([c.c_void_p, c.c_size_t, c.c_int, c.c_void_p], None),
        "cmb_cupy_malloc": ([c.c_void_p, c.c_size_t, c.c_int], c.c_void_p),
        "cmb_cupy_free": ([c.c_void_p, c.c_void_p, c.c_int], None),
    }
    for name, (args, res) in table.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise PluggableError(f"{_lib_path}: no symbol {name}: not libcmb_pluggable, or too old") from None
        fn.argtypes = args
        fn.restype = res


def _cudart_candidates(soname):
    """Where a CUDA runtime may be when the framework linked its own statically
    and the toolkit is not where the library was built: pip's nvidia-* packages,
    $CUDA_HOME, /usr/local/cuda."""
    import glob
    import importlib.util
    dirs = []
    spec = importlib.util.find_spec("nvidia")
    for base in (spec.submodule_search_locations or []) if spec else []:
        dirs += sorted(glob.glob(os.path.join(base, "*", "lib")))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            dirs += [os.path.join(os.environ[var], d) for d in ("lib64", "lib")]
    dirs += ["/usr/local/cuda/lib64", "/usr/local/cuda/lib"]
    return [os.path.join(d, soname) for d in dirs if os.path.exists(os.path.join(d, soname))]


def _open(path, cdll, preload=None):
    try:
        return cdll(path)
    except OSError as e:
        import re
        missing = re.search(r"(libcudart\.so\.\d+)", str(e))
        if not missing:
            raise
        # The dynamic loader matches the library's DT_NEEDED against the
        # SONAME of what is loaded: load a runtime first, then retry.
        for candidate in _cudart_candidates(missing.group(1)):
            try:
                (preload or ctypes.CDLL)(candidate, mode=ctypes.RTLD_GLOBAL)
                return cdll(path)
            except OSError:
                continue
        raise


def load(path=None, cdll=None):
    """Loads (once) and checks the library; returns the ctypes handle.

    cdll: a replacement for ctypes.CDLL (tests give a fake)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    path = path or library_path()
    try:
        lib = _open(path, cdll or ctypes.CDLL)
    except OSError as e:
        raise PluggableError(f"cannot load {path}: {e} (build it with make build, or set "
                             "CMB_PLUGGABLE_LIB)") from None
    _lib_path = path
    _declare(lib)
    abi = lib.cmb_pluggable_abi_version()
    size = lib.cmb_pluggable_memstats_size()
    if abi != ABI_VERSION or size != ctypes.sizeof(MemStats):
        raise PluggableError(f"{path}: ABI version {abi} (stats {size} B), this module speaks "
                             f"{ABI_VERSION} ({ctypes.sizeof(MemStats)} B)")
    _lib = lib
    return lib


def _error(lib):
    msg = lib.cmb_pluggable_last_error()
    return msg.decode(errors="replace") if msg else "unknown error"


def _check(lib, rc):
    if rc != 0:
        raise PluggableError(_error(lib))


def configure(spec, path=None):
    """Chooses the policy for every device not yet used (the spec is checked now)."""
    lib = load(path)
    if not isinstance(spec, str) or not spec:
        raise PluggableError("the allocator spec must be a non-empty string, e.g. 'bfc@cuda'")
    _check(lib, lib.cmb_pluggable_configure(spec.encode()))
    return lib


def set_capacity(nbytes, path=None):
    """Caps what each policy created later may hold (bytes; 0 = the device as it is)."""
    lib = load(path)
    if int(nbytes) < 0:
        raise PluggableError("capacity must be >= 0")
    _check(lib, lib.cmb_pluggable_set_capacity(int(nbytes)))


def spec():
    """The spec in use, '' before configure/install."""
    return load().cmb_pluggable_spec().decode()


def _import(name, why):
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise PluggableError(f"{why}: {e}") from None


def _abandon_trace(trace):
    if trace:
        try:
            trace_stop()
        except PluggableError:
            pass


def _prepare(spec_text, capacity, trace, path):
    lib = configure(spec_text, path)
    if capacity is not None:
        set_capacity(capacity)
    if trace:
        trace_start(trace)
    return lib


def _address(lib, name):
    return ctypes.cast(getattr(lib, name), ctypes.c_void_p).value


def _oom_shim():
    """The c10::OutOfMemoryError shim beside the library, or None."""
    path = os.path.join(os.path.dirname(os.path.abspath(_lib_path)), OOM_SHIM_NAME)
    return path if os.path.exists(path) else None


def _wire_hooks(lib, allocator):
    """Gives PyTorch every hook its allocator object has a setter for; records
    which ones it has not (an older PyTorch)."""
    _hooks.clear()
    native = allocator.allocator() if hasattr(allocator, "allocator") else None
    for setter, symbol in TORCH_HOOKS:
        fn = getattr(native, setter, None) if native is not None else None
        if fn is None:
            _hooks[setter] = "not in this PyTorch"
            continue
        fn(_address(lib, symbol))
        _hooks[setter] = "wired"


def torch_hooks():
    """Which of PyTorch's allocator hooks install_torch wired: {setter: "wired" or why not}."""
    return dict(_hooks)


def install_torch(spec_text, capacity=None, trace=None, oom="raise", path=None, torch_module=None,
                  patch_stats=True, hooks=True):
    """Makes PyTorch allocate CUDA memory through the policy `spec_text`.

    Call it before the program's first CUDA allocation (PyTorch refuses to
    swap an allocator that has allocated). capacity: a cap in bytes; trace:
    record the traffic to this file (trace_stop() writes it, or exit does);
    oom: "raise" (default: an allocation the policy cannot serve raises
    torch.OutOfMemoryError where libcmb_torch_oom.so lies beside the library,
    else RuntimeError, both starting "CUDA out of memory.") or "null"
    (cmb_torch_malloc returns NULL, which PyTorch does not check).

    Every hook this PyTorch offers is wired (torch_hooks() says which):
    Tensor.record_stream, torch.cuda.empty_cache, set_per_process_memory_fraction,
    CUDA graph capture into private pools. patch_stats: torch.cuda.memory_stats,
    memory_allocated, max_memory_allocated, memory_reserved,
    max_memory_reserved and reset_peak_memory_stats answer from the library
    (PyTorch's own raise for a pluggable allocator). hooks=False wires malloc
    and free only (what a pluggable allocator had before; the GPU check's
    control run). Returns PyTorch's allocator object."""
    global _current_device
    if oom not in ("null", "raise"):
        raise PluggableError(f"oom must be 'null' or 'raise', not {oom!r}")
    torch = torch_module or _import("torch", "install_torch needs PyTorch")
    lib = _prepare(spec_text, capacity, trace, path)
    try:
        _check(lib, lib.cmb_pluggable_set_torch_oom(1 if oom == "raise" else 0))
        shim = _oom_shim() if oom == "raise" else None
        if shim:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(shim, "cmb_torch_oom_malloc", "cmb_torch_oom_free")
        else:
            allocator = torch.cuda.memory.CUDAPluggableAllocator(_lib_path, "cmb_torch_malloc", "cmb_torch_free")
        if hooks:
            _wire_hooks(lib, allocator)
        else:
            _hooks.clear()
            _hooks.update({setter: "not wired (hooks=False)" for setter, _ in TORCH_HOOKS})
        try:
            torch.cuda.memory.change_current_allocator(allocator)
        except RuntimeError as e:
            raise PluggableError(f"install_torch must run before the first CUDA allocation: {e}") from None
    except BaseException:
        _abandon_trace(trace)
        raise
    _current_device = torch.cuda.current_device
    _keep.append(allocator)
    if patch_stats:
        _patch_torch_stats(torch)
    return allocator


def torch_mem_pool(spec_text, capacity=None, path=None, torch_module=None, **mempool_args):
    """A torch.cuda.MemPool whose segments come from the policy `spec_text`:
    PyTorch's own caching allocator stays in charge (its statistics,
    record_stream, CUDA graphs, empty_cache), and asks the policy only for
    the segments of this pool (use it with torch.cuda.use_mem_pool(pool)).
    The policy then sees PyTorch's segment requests (2 MiB, 20 MiB, larger
    ones rounded), not the tensors. Needs a PyTorch with MemPool(allocator)
    (2.6 and later). mempool_args go to MemPool (use_on_oom, no_split)."""
    torch = torch_module or _import("torch", "torch_mem_pool needs PyTorch")
    if not hasattr(torch.cuda, "MemPool"):
        raise PluggableError("this PyTorch has no torch.cuda.MemPool (2.6 or later)")
    lib = _prepare(spec_text, capacity, None, path)
    # PyTorch's caching allocator reads NULL as cudaErrorMemoryAllocation:
    # it frees its cached blocks, retries, and raises its own OutOfMemoryError.
    _check(lib, lib.cmb_pluggable_set_torch_oom(0))
    allocator = torch.cuda.memory.CUDAPluggableAllocator(_lib_path, "cmb_torch_malloc", "cmb_torch_free")
    _keep.append(allocator)
    return torch.cuda.MemPool(allocator.allocator(), **mempool_args)


def _torch_device(torch, device):
    """An ordinal from what torch.cuda's memory functions accept."""
    if device is None:
        return int(torch.cuda.current_device())
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        index = int(device.split(":")[1]) if ":" in device else None
    else:
        index = getattr(device, "index", None)
    return int(torch.cuda.current_device()) if index is None else int(index)


def _patch_torch_stats(torch):
    """torch.cuda's statistics functions, answered from the library. Patched
    in Python because PyTorch 2.11's CUDAPluggableAllocator::getDeviceStats
    raises and no hook replaces it; the library keeps no libtorch. C++ code
    that calls getDeviceStats itself still sees PyTorch's refusal."""
    def memory_stats(device=None):
        return memory_stats_of(_torch_device(torch, device))

    def memory_allocated(device=None):
        return stats(_torch_device(torch, device))["allocated_current"]

    def max_memory_allocated(device=None):
        return stats(_torch_device(torch, device))["allocated_peak"]

    def memory_reserved(device=None):
        return stats(_torch_device(torch, device))["reserved_current"]

    def max_memory_reserved(device=None):
        return stats(_torch_device(torch, device))["reserved_peak"]

    def reset_peak_memory_stats(device=None):
        reset_peaks(_torch_device(torch, device))

    patched = {f.__name__: f for f in (memory_stats, memory_allocated, max_memory_allocated, memory_reserved,
                                       max_memory_reserved, reset_peak_memory_stats)}
    for module in (getattr(torch.cuda, "memory", None), torch.cuda):
        for name, fn in patched.items():
            if module is not None:
                setattr(module, name, fn)


def install_cupy(spec_text, capacity=None, trace=None, path=None, cupy_module=None):
    """Makes CuPy allocate device memory through the policy `spec_text`.

    Each allocation goes to CuPy's current stream (one CFunctionAllocator per
    stream, the stream being its param); an allocation the policy cannot
    serve raises cupy.cuda.memory.OutOfMemoryError, as CuPy's own pool does.
    Returns the allocator function given to cupy.cuda.set_allocator."""
    global _current_device
    cupy = cupy_module or _import("cupy", "install_cupy needs CuPy")
    lib = _prepare(spec_text, capacity, trace, path)
    malloc_fn = ctypes.cast(lib.cmb_cupy_malloc, ctypes.c_void_p).value
    free_fn = ctypes.cast(lib.cmb_cupy_free, ctypes.c_void_p).value
    memory = cupy.cuda.memory
    current_stream = cupy.cuda.get_current_stream
    by_stream = {}

    def malloc(size):
        stream = current_stream().ptr
        allocator = by_stream.get(stream)
        if allocator is None:
            allocator = by_stream[stream] = memory.CFunctionAllocator(stream, malloc_fn, free_fn, lib)
        mem = allocator.malloc(size)
        if size and not mem.ptr:
            raise memory.OutOfMemoryError(size, -1)
        return mem

    cupy.cuda.set_allocator(malloc)
    _current_device = cupy.cuda.runtime.getDevice
    _keep.append(malloc)
    return malloc


def _device(device):
    if device is not None:
        return int(device)
    return int(_current_device()) if _current_device else 0


def stats(device=None):
    """The device's counters as a dict (names of cmb_pluggable_memstats).

    device: an ordinal; None is the framework's current device (0 before install)."""
    lib = load()
    out = MemStats()
    out.struct_size = ctypes.sizeof(MemStats)
    _check(lib, lib.cmb_pluggable_stats(_device(device), ctypes.byref(out)))
    result = {name: getattr(out, name) for name in COUNTERS}
    result.update(device=out.device, active=bool(out.active), valid=out.valid, allocator=spec())
    return result


def memory_stats_of(device):
    s = stats(device)
    return dict(sorted((torch_name, s[ours]) for torch_name, ours in TORCH_STAT_NAMES))


def memory_stats(device=None):
    """The same counters under the names torch.cuda.memory_stats() uses, where it has them
    (after install_torch, torch.cuda.memory_stats() itself answers this)."""
    return memory_stats_of(_device(device))


def reset_peaks(device=None):
    """Peaks := current values on `device`, or on every device when None."""
    lib = load()
    _check(lib, lib.cmb_pluggable_reset_peaks(-1 if device is None else int(device)))


def empty_cache(device=None):
    """Returns the policy's cached memory to the GPU (every device when None)."""
    lib = load()
    _check(lib, lib.cmb_pluggable_empty_cache(-1 if device is None else int(device)))


def set_memory_fraction(fraction, device=None):
    """What the policy of `device` may hold: fraction x the device's bytes (as
    torch.cuda.set_per_process_memory_fraction, which install_torch wires here)."""
    lib = load()
    _check(lib, lib.cmb_pluggable_set_memory_fraction(float(fraction), _device(device)))


def trace_start(path):
    """Records every later allocation and free in the suite's trace format
    ("{device}" in the path: one file per device; else device N > 0 writes PATH.devN)."""
    lib = load()
    _check(lib, lib.cmb_pluggable_trace_start(os.fspath(path).encode()))


def trace_stop():
    """Writes the trace files into place."""
    lib = load()
    _check(lib, lib.cmb_pluggable_trace_stop())


# --- python3 -m cumembench_alloc run SETTING -- PROGRAM ARGS ----------------------------------------
# A program run unchanged under an allocator setting (cumembench tune --verify,
# scripts/gpu-tune.sh): the setting is installed before the program's first
# CUDA allocation, and at exit peak reserved, peak allocated and wall time are
# written as JSON.

RUN_USAGE = """usage: python3 -m cumembench_alloc run SETTING [--out FILE] [--capacity BYTES] [--snapshot FILE]
                                      -- [python3] PROGRAM.py [ARGS...]
  SETTING  native:CONF[;fraction=F]  PyTorch's own allocator, PYTORCH_CUDA_ALLOC_CONF=CONF (empty: the
                                     default); fraction: torch.cuda.set_per_process_memory_fraction(F)
           NAME[:k=v...][@cuda|@vmm] a policy of the suite through libcmb_pluggable (install_torch)
  --capacity BYTES  a GPU of this size: native, the memory fraction BYTES / total (PyTorch's own cap);
                    a policy, its capacity
  --snapshot FILE   record PyTorch's memory history and dump the snapshot at exit (native only)
  --out FILE        the JSON (default: stdout)"""


def _run_die(message):
    """Bad usage, no GPU, no PyTorch: one line, exit 2, before the program runs."""
    import sys
    print(f"cumembench_alloc run: {message}", file=sys.stderr)
    raise SystemExit(2)


def _run_parse(argv):
    if "--" not in argv or argv.index("--") < 1 or argv.index("--") == len(argv) - 1:
        _run_die("expected SETTING [options] -- PROGRAM.py [ARGS...] (python3 -m cumembench_alloc run for help)")
    cut = argv.index("--")
    head, program = argv[:cut], argv[cut + 1:]
    opts = {"setting": head[0], "out": None, "capacity": None, "snapshot": None}
    rest = head[1:]
    while rest:
        key = rest.pop(0)
        if key not in ("--out", "--capacity", "--snapshot") or not rest:
            _run_die(f"unknown or incomplete option {key!r}")
        opts[key[2:]] = rest.pop(0)
    if opts["capacity"] is not None:
        if not opts["capacity"].isdigit() or int(opts["capacity"]) <= 0:
            _run_die(f"--capacity {opts['capacity']}: expected bytes")
        opts["capacity"] = int(opts["capacity"])
    if len(program) > 1 and re.fullmatch(r"python[0-9.]*", os.path.basename(program[0])):
        program = program[1:]  # `-- python3 train.py`: the program runs in this interpreter, the setting installed
    if program[0].startswith("-"):
        _run_die(f"{program[0]}: interpreter options are not taken; give the program's file")
    if not os.path.isfile(program[0]):
        _run_die(f"{program[0]}: no such program")
    return opts, program


def _run_install(opts):
    """Installs the setting; returns (torch, native)."""
    setting = opts["setting"]
    native = setting.startswith("native:") or setting == "native"
    fraction = None
    if native:
        conf, _, extra = setting[len("native:"):].partition(";")
        if extra:
            if not extra.startswith("fraction="):
                _run_die(f"{setting!r}: expected native:CONF;fraction=F")
            fraction = float(extra[len("fraction="):])
        if conf:
            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
        else:
            os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    try:
        import torch
    except ImportError:
        _run_die("needs PyTorch (import torch failed)")
    if not torch.cuda.is_available():
        _run_die("no usable GPU")
    if native:
        total = torch.cuda.get_device_properties(0).total_memory
        if opts["capacity"]:
            fraction = min(fraction or 1.0, opts["capacity"] / total)
        if fraction is not None:
            torch.cuda.set_per_process_memory_fraction(fraction)
        if opts["snapshot"]:
            torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python",
                                                     max_entries=10**7)
    else:
        if opts["snapshot"]:
            _run_die("--snapshot records PyTorch's own allocator (native:) only")
        try:
            install_torch(setting, capacity=opts["capacity"], oom="raise")
        except PluggableError as e:
            _run_die(str(e))
    return torch, native


def _run_measure(torch, native, opts, wall, status, error):
    torch.cuda.synchronize()
    if native:
        s = torch.cuda.memory_stats()
        reserved, allocated = s.get("reserved_bytes.all.peak", 0), s.get("allocated_bytes.all.peak", 0)
        ooms = s.get("num_ooms", 0)
        if opts["snapshot"]:
            import pickle
            with open(opts["snapshot"], "wb") as f:
                pickle.dump(torch.cuda.memory._snapshot(), f)
    else:
        s = stats()
        reserved, allocated, ooms = s["reserved_peak"], s["allocated_peak"], s["ooms"]
    return {"setting": opts["setting"], "capacity_bytes": opts["capacity"],
            "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "peak_reserved_bytes": reserved,
            "peak_allocated_bytes": allocated, "ooms": ooms, "wall_s": wall, "exit_status": status,
            "error": error, "device": torch.cuda.get_device_name(), "torch": torch.__version__}


def run_main(argv):
    """python3 -m cumembench_alloc run SETTING [...] -- PROGRAM ARGS: see RUN_USAGE. The exit status
    is the program's (1 when it raised)."""
    import json
    import runpy
    import sys
    import time
    opts, program = _run_parse(argv)
    torch, native = _run_install(opts)
    sys.argv = program
    sys.path.insert(0, os.path.dirname(os.path.abspath(program[0])))  # as `python3 PROGRAM.py` would
    status, error = 0, None
    t0 = time.perf_counter()
    try:
        runpy.run_path(program[0], run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException as e:  # noqa: BLE001 - an OOM is a result, written like the others
        status, error = 1, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        import traceback
        traceback.print_exc()  # as python3 PROGRAM.py would show it; the result is written all the same
    result = _run_measure(torch, native, opts, time.perf_counter() - t0, status, error)
    text = json.dumps(result, indent=1)
    if opts["out"]:
        with open(opts["out"], "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    return status


if __name__ == "__main__":
    import sys as _sys
    if len(_sys.argv) < 2 or _sys.argv[1] != "run":
        print(RUN_USAGE, file=_sys.stderr)
        raise SystemExit(2)
    raise SystemExit(run_main(_sys.argv[2:]))
