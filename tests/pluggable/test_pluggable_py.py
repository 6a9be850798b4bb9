#!/usr/bin/env python3
"""test_pluggable_py.py - python/cumembench_alloc.py and the library behind it,
with no GPU and no PyTorch or CuPy: stand-ins call the library's entry points
the way PyTorch's CUDAPluggableAllocator and CuPy's CFunctionAllocator do, over
the sim upstream. Also: the environment-driven set-up (one stderr line per bad
setting, NULL returns), a trace recorded by the library replayed by
cumembench with the same peak, and the module over a fake CDLL.

Each case runs in a fresh Python process: the library's instances live for the
process. Environment (set by CTest): CMB_PLUGGABLE_LIB, CMB_BIN, CMB_SRC,
CMB_TEST_TMP."""
import csv
import ctypes
import os
import subprocess
import sys
import tempfile
import threading
import types
import unittest

SRC = os.environ.get("CMB_SRC", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "python"))
import cumembench_alloc as cmb  # noqa: E402

LIB = os.environ.get("CMB_PLUGGABLE_LIB", "")
TMP = os.environ.get("CMB_TEST_TMP") or tempfile.gettempdir()
MiB = 1 << 20

TORCH_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
TORCH_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
CUPY_MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
CUPY_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


# --- stand-ins for the frameworks ------------------------------------------------------

# The C hooks' types as torch/csrc/cuda/Module.cpp casts the addresses it is given.
TORCH_HOOK_TYPES = {
    "set_init_fn": ctypes.CFUNCTYPE(None, ctypes.c_int),
    "set_reset_fn": ctypes.CFUNCTYPE(None),
    "set_memory_fraction_fn": ctypes.CFUNCTYPE(None, ctypes.c_double, ctypes.c_int),
    "set_record_stream_fn": ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p),
}


def fake_torch(refuse=False, hooks=True):
    """torch.cuda.memory as CUDAPluggableAllocator uses it: the .so is opened
    with ctypes and the functions are called by address; the allocator object
    (allocator()) has PyTorch 2.11's hook setters (hooks=False: an older one's
    none); torch.cuda has the statistics functions that raise for a pluggable
    allocator."""
    calls = {}

    class Native:
        pass

    def setter(name):
        def set_fn(address):
            assert isinstance(address, int) and address, address
            kind = TORCH_HOOK_TYPES.get(name)
            calls.setdefault("hooks", {})[name] = kind(address) if kind else address
        return set_fn

    class CUDAPluggableAllocator:
        def __init__(self, path, alloc_name, free_name):
            lib = ctypes.CDLL(path)
            calls["new"] = (path, alloc_name, free_name)
            self.malloc = TORCH_MALLOC(ctypes.cast(getattr(lib, alloc_name), ctypes.c_void_p).value)
            self.free = TORCH_FREE(ctypes.cast(getattr(lib, free_name), ctypes.c_void_p).value)
            self.native = Native()
            if hooks:
                for name, _ in cmb.TORCH_HOOKS:
                    setattr(self.native, name, setter(name))

        def allocator(self):
            return self.native

    def change_current_allocator(allocator):
        if refuse:
            raise RuntimeError("Can't swap an already initialized allocator")
        calls["current"] = allocator

    def refuses(device=None):
        raise RuntimeError("CUDAPluggableAllocator does not yet support getDeviceStats")

    memory = types.SimpleNamespace(CUDAPluggableAllocator=CUDAPluggableAllocator,
                                   change_current_allocator=change_current_allocator,
                                   memory_stats=refuses, memory_allocated=refuses)
    cuda = types.SimpleNamespace(memory=memory, current_device=lambda: 0, memory_stats=refuses,
                                 max_memory_allocated=refuses)
    return types.SimpleNamespace(cuda=cuda), calls


def fake_cupy():
    """cupy.cuda as install_cupy uses it; CFunctionAllocator calls malloc
    only for size > 0, keeps the pointer unchecked, frees it when dropped."""
    state = {"stream": 0, "allocator": None}

    class OutOfMemoryError(MemoryError):
        def __init__(self, size, total, limit=0):
            super().__init__(f"Out of memory allocating {size:,} bytes")
            self.size = size

    class MemoryPointer:
        def __init__(self, ptr, param, free_fn):
            self.ptr, self._param, self._free = ptr or 0, param, free_fn

        def __del__(self):
            if self.ptr:
                self._free(self._param, self.ptr, 0)

    class CFunctionAllocator:
        def __init__(self, param, malloc_func, free_func, owner):
            self.param, self.owner = param, owner
            self._malloc, self._free = CUPY_MALLOC(malloc_func), CUPY_FREE(free_func)

        def malloc(self, size):
            ptr = self._malloc(self.param, size, 0) if size > 0 else 0
            return MemoryPointer(ptr, self.param, self._free)

    def set_allocator(fn):
        state["allocator"] = fn

    stream = lambda: types.SimpleNamespace(ptr=state["stream"])  # noqa: E731
    memory = types.SimpleNamespace(CFunctionAllocator=CFunctionAllocator, OutOfMemoryError=OutOfMemoryError)
    cuda = types.SimpleNamespace(memory=memory, get_current_stream=stream, set_allocator=set_allocator,
                                 runtime=types.SimpleNamespace(getDevice=lambda: 0))
    return types.SimpleNamespace(cuda=cuda), state


def replay_peak(trace, allocator):
    """cumembench's sim replay of `trace`: its peak_reserved_bytes."""
    out = tempfile.mkdtemp(dir=TMP)
    rc = subprocess.run([os.environ["CMB_BIN"], "--mode", "sim", "--scenario", "replay", "--allocator", allocator,
                         "--param", f"trace={trace}", "--param", "find_min_capacity=false",
                         "--param", "capacity=80GiB", "--out", out],
                        capture_output=True, text=True)
    assert rc.returncode == 0, rc.stderr
    with open(os.path.join(out, "results.csv")) as f:
        for row in csv.DictReader(f):
            if row["metric"] == "peak_reserved_bytes" and row["status"] == "ok":
                return int(float(row["value"]))
    raise AssertionError("no peak_reserved_bytes in the replay's results")


# --- the cases (each in its own process) ------------------------------------------------

def case_torch_traffic():
    torch, calls = fake_torch()
    trace = os.path.join(TMP, f"py-torch-{os.getpid()}.trace")
    alloc = cmb.install_torch("torch-caching@sim", trace=trace, torch_module=torch)
    path, a, f = calls["new"]
    assert os.path.samefile(path, LIB), path
    assert (a, f) == ("cmb_torch_malloc", "cmb_torch_free"), (a, f)
    assert calls["current"] is alloc
    assert cmb.spec() == "torch-caching@sim"

    # autograd frees and allocates from several threads
    def worker(seed, out):
        live = []
        for i in range(3000):
            if live and (i * 7 + seed) % 3 == 0:
                p, n, s = live.pop((i + seed) % len(live))
                alloc.free(p, n, 0, s)
            else:
                n = 512 * (1 + (i * 31 + seed * 17) % 9000)
                s = None if i % 2 else 0x7000 + 0x100 * seed
                p = alloc.malloc(n, 0, s)
                assert p, cmb.stats()
                live.append((p, n, s))
        out.append(live)

    lives = []
    threads = [threading.Thread(target=worker, args=(k, lives)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    held = sum(n for live in lives for _, n, _ in live)
    s = cmb.stats()
    assert s["active"] and s["device"] == 0
    assert s["requested_current"] == held, (s["requested_current"], held)
    assert s["blocks_current"] == sum(len(live) for live in lives)
    assert s["streams"] == 5, s["streams"]
    assert s["ooms"] == 0 and s["bad_frees"] == 0
    assert s["reserved_peak"] >= s["allocated_peak"] >= s["requested_peak"] >= held
    m = cmb.memory_stats()
    assert m["reserved_bytes.all.peak"] == s["reserved_peak"]
    assert m["num_device_alloc"] == s["upstream_allocs"] > 0
    peak = s["reserved_peak"]
    for live in lives:
        for p, n, st in live:
            alloc.free(p, n, 0, st)
    cmb.trace_stop()
    assert cmb.stats()["requested_current"] == 0
    # The sim replay of the recorded trace holds what the library held.
    predicted = replay_peak(trace, "torch-caching")
    assert predicted == peak, (predicted, peak)
    cmb.reset_peaks(None)
    s = cmb.stats(0)
    assert s["requested_peak"] == 0 and s["reserved_peak"] == s["reserved_current"]
    cmb.empty_cache()
    assert cmb.stats(0)["reserved_current"] == 0


def case_torch_hooks():
    """The hooks as PyTorch calls them: record_stream defers a block's reuse
    while the other stream's work runs (the sim's held stream), empty_cache
    trims, the memory fraction caps; torch.cuda's statistics answer."""
    torch, calls = fake_torch()
    lib = cmb.load()
    lib.cmb_pluggable_sim_hold_stream.argtypes = [ctypes.c_void_p, ctypes.c_int]
    alloc = cmb.install_torch("bfc@sim", capacity=64 * MiB, oom="null", torch_module=torch)  # no C++ frame to throw through
    assert cmb.torch_hooks() == {name: "wired" for name, _ in cmb.TORCH_HOOKS}, cmb.torch_hooks()
    hooks = calls["hooks"]
    a, b = 0x7100, 0x7200
    p = alloc.malloc(MiB, 0, a)
    hooks["set_record_stream_fn"](p, b)          # Tensor.record_stream(b)
    lib.cmb_pluggable_sim_hold_stream(b, 1)      # b's kernels still read p
    alloc.free(p, MiB, 0, a)
    q = alloc.malloc(MiB, 0, a)
    assert q != p, "reused while the other stream's work is pending"
    lib.cmb_pluggable_sim_hold_stream(b, 0)
    r = alloc.malloc(MiB, 0, a)
    assert r == p, (r, p)
    # torch.cuda's statistics, from the library
    s = cmb.stats(0)
    assert torch.cuda.memory_stats()["allocated_bytes.all.current"] == s["allocated_current"] == 2 * MiB
    assert torch.cuda.memory.memory_allocated(0) == s["allocated_current"]
    assert torch.cuda.max_memory_allocated() == s["allocated_peak"]
    assert torch.cuda.memory_reserved() == s["reserved_current"] > 0
    alloc.free(q, MiB, 0, a)
    alloc.free(r, MiB, 0, a)
    torch.cuda.reset_peak_memory_stats()
    assert torch.cuda.max_memory_allocated("cuda:0") == 0
    hooks["set_reset_fn"]()                       # torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() == 0, torch.cuda.memory_reserved()
    hooks["set_memory_fraction_fn"](0.25, 1)      # set_per_process_memory_fraction(0.25, 1), before its first use
    assert alloc.malloc(20 * MiB, 1, a) is None
    assert "out of memory on device 1" in lib.cmb_pluggable_last_error().decode()
    assert alloc.malloc(MiB, 1, None)
    assert torch.cuda.memory_stats(1)["num_ooms"] == 1
    assert cmb.stats(1)["device_total"] == 16 * MiB


def case_torch_mem_pool():
    """torch_mem_pool: a MemPool over the library's pair, NULL (not a throw)
    on out of memory, since PyTorch's caching allocator retries on NULL."""
    torch, calls = fake_torch()
    made = []
    torch.cuda.MemPool = lambda allocator, **kw: made.append((allocator, kw)) or "pool"
    assert cmb.torch_mem_pool("bfc@sim", capacity=64 * MiB, torch_module=torch, use_on_oom=True) == "pool"
    (native, kw), = made
    assert kw == {"use_on_oom": True}
    assert calls["new"][1:] == ("cmb_torch_malloc", "cmb_torch_free"), calls["new"]
    assert "current" not in calls  # PyTorch's allocator stays current
    malloc = TORCH_MALLOC(ctypes.cast(getattr(ctypes.CDLL(LIB), "cmb_torch_malloc"), ctypes.c_void_p).value)
    assert malloc(2 * MiB, 0, None)          # a segment from the policy
    assert malloc(128 * MiB, 0, None) is None  # beyond the capacity: NULL, no exception
    del torch.cuda.MemPool
    try:
        cmb.torch_mem_pool("bfc@sim", torch_module=torch)
    except cmb.PluggableError as e:
        assert "MemPool" in str(e)
    else:
        raise AssertionError("a PyTorch without MemPool accepted")


def case_torch_old_hooks():
    """A PyTorch without the hook setters: malloc and free only, said so."""
    torch, _ = fake_torch(hooks=False)
    cmb.install_torch("bfc@sim", torch_module=torch, oom="null")
    assert set(cmb.torch_hooks().values()) == {"not in this PyTorch"}, cmb.torch_hooks()


def case_torch_too_late():
    torch, _ = fake_torch(refuse=True)
    try:
        cmb.install_torch("bfc@sim", torch_module=torch)
    except cmb.PluggableError as e:
        assert "before the first CUDA allocation" in str(e), e
        return
    raise AssertionError("no error")


def case_torch_absent():
    sys.modules["torch"] = None  # import torch raises ImportError
    try:
        cmb.install_torch("bfc@sim")
    except cmb.PluggableError as e:
        assert "needs PyTorch" in str(e), e
        return
    raise AssertionError("no error")


def case_bad_spec():
    torch, calls = fake_torch()
    for spec, words in [("nope@cuda", "unknown allocator 'nope'"), ("bfc:oops@cuda", "not key=value"),
                        ("bfc:memory_limit=huge@cuda", "memory_limit"), ("bfc@sim", "sim upstream")]:
        if spec == "bfc@sim":
            os.environ.pop("CMB_PLUGGABLE_ALLOW_SIM", None)
        try:
            cmb.install_torch(spec, torch_module=torch)
        except cmb.PluggableError as e:
            assert words in str(e), (spec, str(e))
        else:
            raise AssertionError(f"{spec}: accepted")
    assert not calls, "PyTorch was touched for a refused spec"
    try:
        cmb.install_torch("bfc@cuda", oom="explode", torch_module=torch)
    except cmb.PluggableError as e:
        assert "oom" in str(e)
    else:
        raise AssertionError("oom='explode' accepted")


def case_cupy():
    cupy, state = fake_cupy()
    malloc = cmb.install_cupy("cupy@sim", capacity=64 * MiB, cupy_module=cupy)
    assert state["allocator"] is malloc
    a = malloc(3 * MiB)
    state["stream"] = 0x4400
    b = malloc(1000)
    assert a.ptr and b.ptr
    s = cmb.stats()
    assert s["streams"] == 2 and s["allocs"] == 2
    assert s["requested_current"] == 3 * MiB + 1000
    assert s["device_total"] == 64 * MiB
    assert malloc(0).ptr == 0
    try:
        malloc(1 << 30)
    except cupy.cuda.memory.OutOfMemoryError as e:
        assert e.size == 1 << 30
    else:
        raise AssertionError("no OutOfMemoryError")
    assert cmb.stats()["ooms"] == 1
    del a, b  # CuPy frees when the pointer dies
    s = cmb.stats()
    assert s["frees"] == 2 and s["requested_current"] == 0 and s["bad_frees"] == 0


def case_e2e_table():
    """scripts/e2e-torch.py's table over a work directory as scripts/gpu-e2e.sh
    leaves it: a library run (its trace recorded here over the sim upstream),
    a native run, a crash, a job the time budget skipped, a probe that died."""
    import json
    torch, _ = fake_torch()
    work, out = tempfile.mkdtemp(dir=TMP), tempfile.mkdtemp(dir=TMP)
    for d in ("runs", "traces", "replay"):
        os.mkdir(os.path.join(work, d))
    trace = os.path.join(work, "traces", "torch-lib.trace")
    alloc = cmb.install_torch("torch-caching@sim", trace=trace, torch_module=torch)
    live = [alloc.malloc(n, 0, None) for n in (3 * MiB, 700, 25 * MiB, 9000)]
    alloc.free(live[1], 700, 0, None)
    alloc.free(live[2], 25 * MiB, 0, None)
    live += [alloc.malloc(n, 0, None) for n in (12 * MiB, 5 * MiB)]
    cmb.trace_stop()
    s = cmb.stats()

    def put(name, rc, data=None):
        with open(os.path.join(work, "runs", name + ".status"), "w") as f:
            f.write(f"{rc}\n")
        if data is not None:
            with open(os.path.join(work, "runs", name + ".json"), "w") as f:
                json.dump(data, f)

    put("torch-lib", 0, {"kind": "torch", "mode": "library", "policy": "torch-caching@cuda", "trace": trace,
                         "reserved_peak": s["reserved_peak"], "requested_peak": s["requested_peak"],
                         "free_at_create": s["device_free_at_create"], "device": "stand-in",
                         "timed": {"median_ms": 11.0, "p10_ms": 10.0, "p90_ms": 12.0, "spread": 0.18}})
    put("torch-native-default", 0, {"kind": "torch", "mode": "native", "conf": "", "device": "stand-in",
                                    "reserved_peak": s["reserved_peak"] - 2 * MiB,
                                    "timed": {"median_ms": 10.0, "p10_ms": 9.5, "p90_ms": 10.5, "spread": 0.1}})
    put("torch-crashed", 139)
    put("torch-late", "skipped")
    put("torchoom-null", 134, {"kind": "torch-oom", "mode": "null", "policy": "bfc@cuda", "outcome": "started"})
    r = subprocess.run([sys.executable, os.path.join(SRC, "scripts", "e2e-torch.py"), "table", "--work", work,
                        "--bin", os.environ["CMB_BIN"], "--out", out, "--kind", "torch"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(os.path.join(out, "e2e-torch.json")) as f:
        summary = json.load(f)
    lib = next(x for x in summary["runs"] if x["name"] == "torch-lib")
    assert lib["predicted_reserved_peak"] == s["reserved_peak"], (lib["predicted_reserved_peak"], s)
    assert lib["prediction_error_pct"] == 0.0
    (c,) = summary["native_vs_library"]
    assert c["policy"] == "torch-caching@cuda" and abs(c["step_time_overhead_pct"] - 10.0) < 1e-9, c
    assert c["reserved_diff_pct"] > 0
    with open(os.path.join(out, "e2e-torch.md")) as f:
        md = f.read()
    for words in ("crashed (exit 139)", "not run: the time budget was spent", "+0.00%", "+10.00%",
                  "started; crashed (exit 134)"):
        assert words in md, (words, md)


def _load_raw():
    lib = ctypes.CDLL(LIB)
    lib.cmb_torch_malloc.restype = ctypes.c_void_p
    lib.cmb_torch_malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    lib.cmb_cupy_malloc.restype = ctypes.c_void_p
    lib.cmb_cupy_malloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.cmb_cupy_free.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
    return lib


def case_env_calls():
    """The allocation entry points with whatever environment the parent gave."""
    lib = _load_raw()
    results = [lib.cmb_torch_malloc(4096 * (i + 1) if i < 3 else 1 << 34, 0, None) for i in range(4)]
    print("RESULTS", " ".join("null" if r is None else "ptr" for r in results))


def case_env_trace():
    lib = _load_raw()
    ptrs = [lib.cmb_cupy_malloc(None, n, 0) for n in (100, 200000, 3 * MiB)]
    lib.cmb_cupy_free(None, ptrs[1], 0)
    assert all(ptrs)
    # no trace_stop: the library writes the trace at exit


def case_env_error_install():
    """A bad setting in the environment is not overridden by install_*: refused."""
    torch, calls = fake_torch()
    try:
        cmb.install_torch("bfc@sim", torch_module=torch)
    except cmb.PluggableError as e:
        assert "CMB_CAPACITY='12 parsecs' is not a size" in str(e), e
    else:
        raise AssertionError("installed despite CMB_CAPACITY")
    assert not calls


def case_env_trace_fork():
    """A forked child that exits normally must leave the parent's trace alone."""
    lib = _load_raw()
    first = lib.cmb_cupy_malloc(None, 4096, 0)
    pid = os.fork()
    if pid == 0:
        sys.exit(0)  # runs the C destructors, unlike os._exit
    os.waitpid(pid, 0)
    second = lib.cmb_cupy_malloc(None, 8192, 0)
    lib.cmb_cupy_free(None, first, 0)
    lib.cmb_cupy_free(None, second, 0)


# --- the module over a fake CDLL ------------------------------------------------------

class FakeCDLL:
    """Just enough of the library for the module's own logic."""

    def __init__(self, path, abi=1, missing=()):
        self.path, self.calls = path, []
        counters = {name: i + 1 for i, name in enumerate(cmb.COUNTERS)}

        def fn(name, result=0):
            def call(*args):
                self.calls.append((name, args))
                return result(*args) if callable(result) else result
            return call

        def stats(device, ref):
            out = ref._obj
            if out.struct_size != ctypes.sizeof(cmb.MemStats):
                return -1
            for name, value in counters.items():
                setattr(out, name, value * 1000 + device)
            out.device, out.active = device, 1
            return 0

        table = {"cmb_pluggable_abi_version": abi, "cmb_pluggable_memstats_size": ctypes.sizeof(cmb.MemStats),
                 "cmb_pluggable_stats": stats, "cmb_pluggable_spec": b"bfc@cuda",
                 "cmb_pluggable_last_error": b"fake failure",
                 "cmb_pluggable_configure": lambda spec: 0 if spec == b"bfc@cuda" else -1}
        for name in ("cmb_pluggable_set_capacity", "cmb_pluggable_set_torch_oom", "cmb_pluggable_malloc",
                     "cmb_pluggable_free", "cmb_pluggable_reset_peaks", "cmb_pluggable_empty_cache",
                     "cmb_pluggable_trace_start", "cmb_pluggable_trace_stop", "cmb_torch_malloc",
                     "cmb_torch_free", "cmb_cupy_malloc", "cmb_cupy_free", "cmb_pluggable_set_memory_fraction",
                     "cmb_pluggable_record_stream"):
            table.setdefault(name, 0)
        for name, result in table.items():
            if name not in missing:
                setattr(self, name, fn(name, result))


class FakeLibrary(unittest.TestCase):
    def setUp(self):
        cmb._lib = None
        cmb._current_device = None
        sys.modules["torch"] = None  # PyTorch is absent

    def test_install_and_stats(self):
        lib = cmb.load("/fake/libcmb_pluggable.so", cdll=FakeCDLL)
        torch, calls = types.SimpleNamespace(), {}
        torch.cuda = types.SimpleNamespace(current_device=lambda: 3, memory=types.SimpleNamespace(
            CUDAPluggableAllocator=lambda *a: calls.setdefault("new", a),
            change_current_allocator=lambda a: calls.setdefault("current", a)))
        cmb.install_torch("bfc@cuda", capacity=5 * MiB, oom="raise", torch_module=torch)
        self.assertEqual(calls["new"], ("/fake/libcmb_pluggable.so", "cmb_torch_malloc", "cmb_torch_free"))
        names = [c[0] for c in lib.calls]
        self.assertIn(("cmb_pluggable_set_capacity", (5 * MiB,)), lib.calls)
        self.assertIn(("cmb_pluggable_set_torch_oom", (1,)), lib.calls)
        self.assertLess(names.index("cmb_pluggable_configure"), names.index("cmb_pluggable_set_torch_oom"))
        s = cmb.stats()  # the framework's current device: 3
        self.assertEqual(s["device"], 3)
        self.assertEqual(s["reserved_peak"], (cmb.COUNTERS.index("reserved_peak") + 1) * 1000 + 3)
        self.assertEqual(s["allocator"], "bfc@cuda")
        m = cmb.memory_stats(1)
        self.assertEqual(m["allocated_bytes.all.peak"], (cmb.COUNTERS.index("allocated_peak") + 1) * 1000 + 1)
        self.assertEqual(m["num_ooms"], (cmb.COUNTERS.index("ooms") + 1) * 1000 + 1)
        cmb.reset_peaks()
        cmb.empty_cache(2)
        self.assertIn(("cmb_pluggable_reset_peaks", (-1,)), lib.calls)
        self.assertIn(("cmb_pluggable_empty_cache", (2,)), lib.calls)

    def test_refusals(self):
        cmb.load("/fake/lib.so", cdll=FakeCDLL)
        with self.assertRaisesRegex(cmb.PluggableError, "fake failure"):
            cmb.configure("other@cuda")
        with self.assertRaisesRegex(cmb.PluggableError, "non-empty string"):
            cmb.configure("")
        with self.assertRaisesRegex(cmb.PluggableError, "needs PyTorch"):
            cmb.install_torch("bfc@cuda")

    def test_abi_mismatch(self):
        with self.assertRaisesRegex(cmb.PluggableError, "ABI version 2"):
            cmb.load("/fake/lib.so", cdll=lambda p: FakeCDLL(p, abi=2))
        self.assertIsNone(cmb._lib)

    def test_missing_symbol(self):
        with self.assertRaisesRegex(cmb.PluggableError, "no symbol cmb_pluggable_stats"):
            cmb.load("/fake/lib.so", cdll=lambda p: FakeCDLL(p, missing=("cmb_pluggable_stats",)))

    def test_cudart_found_elsewhere(self):
        """libcudart.so.13 not where the library was built: one from a known place is loaded first."""
        tries, preloaded = [], []

        def cdll(path):
            tries.append(path)
            if not preloaded:
                raise OSError("libcudart.so.13: cannot open shared object file: No such file or directory")
            return FakeCDLL(path)

        saved = cmb._cudart_candidates
        cmb._cudart_candidates = lambda soname: [f"/nowhere/{soname}", f"/pip/nvidia/cu13/lib/{soname}"]
        try:
            def preload(path, mode):
                if path.startswith("/nowhere"):
                    raise OSError("no such file")
                preloaded.append((path, mode))
            lib = cmb._open("/fake/libcmb_pluggable.so", cdll, preload)
        finally:
            cmb._cudart_candidates = saved
        self.assertEqual(preloaded, [("/pip/nvidia/cu13/lib/libcudart.so.13", ctypes.RTLD_GLOBAL)])
        self.assertEqual(tries, ["/fake/libcmb_pluggable.so"] * 2)
        self.assertEqual(lib.path, "/fake/libcmb_pluggable.so")

    def test_missing_library(self):
        with self.assertRaisesRegex(cmb.PluggableError, "cannot load /nonexistent/lib.so"):
            cmb.load("/nonexistent/lib.so")


# --- the cases in their own processes -------------------------------------------------------

def run_case(name, **env):
    full = dict(os.environ, CMB_PLUGGABLE_ALLOW_SIM="1", **env)
    for k, v in list(full.items()):
        if v is None:
            del full[k]
    return subprocess.run([sys.executable, os.path.abspath(__file__), "--case", name],
                          capture_output=True, text=True, env=full, timeout=240)


@unittest.skipUnless(os.path.exists(LIB), "CMB_PLUGGABLE_LIB is not built")
class RealLibrary(unittest.TestCase):
    def check(self, name, **env):
        r = run_case(name, **env)
        self.assertEqual(r.returncode, 0, f"{name}:\n{r.stdout}\n{r.stderr}")
        return r

    def test_torch_traffic(self):
        self.check("torch_traffic", CMB_ALLOCATOR=None, CMB_TRACE=None)

    def test_torch_hooks(self):
        self.check("torch_hooks", CMB_ALLOCATOR=None)

    def test_torch_mem_pool(self):
        self.check("torch_mem_pool", CMB_ALLOCATOR=None)

    def test_torch_old_hooks(self):
        self.check("torch_old_hooks", CMB_ALLOCATOR=None)

    def test_torch_too_late(self):
        self.check("torch_too_late")

    def test_torch_absent(self):
        self.check("torch_absent")

    def test_bad_spec(self):
        self.check("bad_spec", CMB_ALLOCATOR=None)

    def test_e2e_table(self):
        self.check("e2e_table", CMB_ALLOCATOR=None)

    def test_cupy(self):
        self.check("cupy", CMB_ALLOCATOR=None)

    def lines(self, r):
        return [line for line in r.stderr.splitlines() if line.startswith("cumembench pluggable:")]

    def test_env_bad_allocator(self):
        r = self.check("env_calls", CMB_ALLOCATOR="nope@cuda")
        self.assertIn("RESULTS null null null null", r.stdout)
        lines = self.lines(r)
        self.assertEqual(len(lines), 1, r.stderr)  # one line, not one per call
        self.assertIn("CMB_ALLOCATOR: allocator 'nope@cuda': unknown allocator 'nope'", lines[0])

    def test_env_unset(self):
        r = self.check("env_calls", CMB_ALLOCATOR=None)
        self.assertIn("RESULTS null null null null", r.stdout)
        lines = self.lines(r)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("CMB_ALLOCATOR is not set", lines[0])

    def test_env_bad_capacity(self):
        r = self.check("env_calls", CMB_ALLOCATOR="bfc@sim", CMB_CAPACITY="lots")
        self.assertEqual(len(self.lines(r)), 1, r.stderr)
        self.assertIn("CMB_CAPACITY='lots' is not a size", r.stderr)

    def test_env_profile(self):
        """CMB_PROFILE=1: at exit, one line per device with the policy's calls and their host time."""
        r = self.check("env_calls", CMB_ALLOCATOR="cmb@sim", CMB_CAPACITY="1GiB", CMB_TORCH_OOM="null",
                       CMB_PROFILE="1")
        self.assertIn("RESULTS ptr ptr ptr null", r.stdout)
        lines = [ln for ln in r.stderr.splitlines() if ln.startswith("cumembench profile:")]
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertRegex(lines[0], r"^cumembench profile: device 0, cmb@sim: allocate 3 calls [0-9.]+ ms, "
                                   r"free 0 calls [0-9.]+ ms, device sampling after a growth 0 calls")
        self.assertIn("in the driver: cuMemCreate 0 calls 0.000 ms,", lines[0])  # sim makes no driver call
        self.assertRegex(lines[0], r"; upstream ops: (.*, )?map [1-9][0-9]* calls [0-9.]+ ms")  # cmb grows by maps
        r = self.check("env_calls", CMB_ALLOCATOR="cmb@sim", CMB_CAPACITY="1GiB", CMB_TORCH_OOM="null",
                       CMB_PROFILE="0")
        self.assertNotIn("cumembench profile:", r.stderr)

    def test_env_bad_profile(self):
        r = self.check("env_calls", CMB_ALLOCATOR="bfc@sim", CMB_PROFILE="yes")
        self.assertIn("RESULTS null null null null", r.stdout)
        self.assertEqual(len(self.lines(r)), 1, r.stderr)
        self.assertIn("CMB_PROFILE='yes': expected 0 or 1", r.stderr)

    def test_env_error_beats_configure(self):
        self.check("env_error_install", CMB_CAPACITY="12 parsecs")

    def test_env_oom(self):
        r = self.check("env_calls", CMB_ALLOCATOR="bfc@sim", CMB_CAPACITY="1GiB", CMB_TORCH_OOM="null")
        self.assertIn("RESULTS ptr ptr ptr null", r.stdout)
        lines = self.lines(r)
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("out of memory on device 0: 16.00 GiB under bfc@sim", lines[0])

    def test_env_trace_fork(self):
        trace = os.path.join(TMP, f"py-fork-{os.getpid()}.trace")
        self.check("env_trace_fork", CMB_ALLOCATOR="cupy@sim", CMB_TRACE=trace)
        with open(trace) as f:
            ops = [line.split()[0] for line in f if not line.startswith("#")]
        self.assertEqual(ops, ["a", "a", "f", "f"])
        os.remove(trace)

    def test_env_trace_written_at_exit(self):
        trace = os.path.join(TMP, f"py-env-{os.getpid()}.trace")
        self.check("env_trace", CMB_ALLOCATOR="buddy@sim", CMB_TRACE=trace)
        with open(trace) as f:
            text = f.read().splitlines()
        self.assertEqual(text[0], "# cumembench-trace 1")
        self.assertEqual([line.split()[0] for line in text if not line.startswith("#")], ["a", "a", "a", "f"])
        self.assertGreater(replay_peak(trace, "buddy"), 0)
        os.remove(trace)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        globals()["case_" + sys.argv[2]]()
        sys.exit(0)
    unittest.main()
