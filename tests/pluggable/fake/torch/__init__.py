"""A stand-in for PyTorch, just large enough to run scripts/e2e-torch.py and
scripts/record_torch_transformer.py on a machine with no GPU and no PyTorch
(tests/pluggable/test_gpu_e2e_smoke.py). Tensors are byte counts; their
memory comes from a toy caching allocator, or, once
torch.cuda.memory.change_current_allocator installed one, from the
pluggable allocator's functions called by address as PyTorch calls them.
Like PyTorch, it does not check the pointer malloc returns; a NULL fails the
next "kernel" that uses it."""
import ctypes
import types

__version__ = "0.0+fake"
version = types.SimpleNamespace(cuda="13.0")
TOTAL = 80 << 30

MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)


class _Native:
    """PyTorch's own allocator, as a toy: 512 B rounding, 2 MiB segments, no reuse across sizes."""

    def __init__(self):
        self.cap = TOTAL
        self.next_ptr = 1 << 40
        self.cache = {}
        self.stats = dict.fromkeys(["reserved", "reserved_peak", "allocated", "allocated_peak", "requested",
                                    "requested_peak", "device_alloc"], 0)

    def malloc(self, size):
        rounded = (size + 511) // 512 * 512
        s = self.stats
        if self.cache.get(rounded):
            ptr = self.cache[rounded].pop()
        else:
            seg = (rounded + (2 << 20) - 1) // (2 << 20) * (2 << 20)
            if s["reserved"] + seg > self.cap:
                raise cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {size} bytes (fake)")
            s["reserved"] += seg
            s["device_alloc"] += 1
            ptr, self.next_ptr = self.next_ptr, self.next_ptr + seg
        s["allocated"] += rounded
        s["requested"] += size
        for k in ("reserved", "allocated", "requested"):
            s[k + "_peak"] = max(s[k + "_peak"], s[k])
        return ptr, (rounded, size)

    def free(self, ptr, info):
        rounded, size = info
        self.cache.setdefault(rounded, []).append(ptr)
        self.stats["allocated"] -= rounded
        self.stats["requested"] -= size


class _Pluggable:
    def __init__(self, malloc, free):
        self.malloc_fn, self.free_fn = malloc, free

    def malloc(self, size):
        return self.malloc_fn(size, 0, None), size

    def free(self, ptr, size):
        self.free_fn(ptr, size, 0, None)


_allocator = _Native()


class Tensor:
    def __init__(self, nbytes, saved=()):
        self.nbytes, self.saved, self.grad = nbytes, list(saved), None
        self.ptr, self.info = _allocator.malloc(nbytes)
        self.owner = _allocator
        if not self.ptr:
            raise RuntimeError("CUDA error: an illegal memory access was encountered (fake: a NULL data pointer)")

    def __del__(self):
        if getattr(self, "ptr", None):
            self.owner.free(self.ptr, self.info)

    def reshape(self, *shape):
        return self

    def backward(self):
        for t in self.saved:
            t.backward_through()
        self.saved = []

    def backward_through(self):
        Tensor(self.nbytes)  # a gradient temporary, freed at once
        for p in getattr(self, "params", ()):
            if p.grad is None:
                p.grad = Tensor(p.nbytes)
        for t in self.saved:
            t.backward_through()
        self.saved = []

    def sum(self):
        return self.nbytes / 4


def manual_seed(seed):
    return seed


def randn(*shape, device=None):
    n = 4
    for d in shape:
        n *= d
    return Tensor(n)


def randint(lo, hi, shape, device=None):
    n = 8
    for d in shape:
        n *= d
    return Tensor(n)


def ones(n, device=None):
    return Tensor(4 * n)


class _Module:
    def __init__(self, nbytes):
        self.nbytes, self.params = nbytes, []

    def to(self, dev):
        self.params = [Tensor(self.nbytes)]
        return self

    def parameters(self):
        return list(self.params)


class _Encoder(_Module):
    def __init__(self, layer, n, enable_nested_tensor=True):
        super().__init__(4 << 20)
        self.n = n

    def __call__(self, x):
        saved = []
        for _ in range(self.n):
            tmp = Tensor(2 * x.nbytes)  # an intermediate, freed within the layer
            out = Tensor(x.nbytes)
            out.params = self.params
            saved.append(out)
            del tmp
        return Tensor(x.nbytes, saved)


class _Linear(_Module):
    def __init__(self, i, o):
        super().__init__(i * o * 4)

    def __call__(self, x):
        out = Tensor(x.nbytes * 2, [x])
        out.params = self.params
        return out


def _cross_entropy(logits, target):
    return Tensor(4, [logits])


class _AdamW:
    def __init__(self, params, lr=0.0):
        self.params, self.state = params, []

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def step(self):
        if not self.state:
            self.state = [Tensor(2 * p.nbytes) for p in self.params]


nn = types.SimpleNamespace(TransformerEncoderLayer=lambda *a, **k: None, TransformerEncoder=_Encoder,
                           Linear=_Linear, functional=types.SimpleNamespace(cross_entropy=_cross_entropy))
optim = types.SimpleNamespace(AdamW=_AdamW)


class _PluggableAllocator:
    def __init__(self, path, alloc_name, free_name):
        lib = ctypes.CDLL(path)
        self.malloc = MALLOC(ctypes.cast(getattr(lib, alloc_name), ctypes.c_void_p).value)
        self.free = FREE(ctypes.cast(getattr(lib, free_name), ctypes.c_void_p).value)


def _change_current_allocator(a):
    global _allocator
    if not isinstance(_allocator, _Native) or _allocator.stats["device_alloc"]:
        raise RuntimeError("Can't swap an already initialized allocator")
    _allocator = _Pluggable(a.malloc, a.free)


class _OutOfMemoryError(RuntimeError):
    pass


def _memory_stats():
    s = _allocator.stats
    return {"reserved_bytes.all.peak": s["reserved_peak"], "allocated_bytes.all.peak": s["allocated_peak"],
            "requested_bytes.all.peak": s["requested_peak"], "num_alloc_retries": 0, "num_ooms": 0,
            "num_device_alloc": s["device_alloc"], "num_device_free": 0, "segment.all.peak": s["device_alloc"]}


def _set_fraction(fraction):
    _allocator.cap = int(fraction * TOTAL)


cuda = types.SimpleNamespace(
    OutOfMemoryError=_OutOfMemoryError, get_device_name=lambda: "fake GPU", current_device=lambda: 0,
    mem_get_info=lambda: (TOTAL - (1 << 30), TOTAL), synchronize=lambda: None, memory_stats=_memory_stats,
    set_per_process_memory_fraction=_set_fraction,
    memory=types.SimpleNamespace(CUDAPluggableAllocator=_PluggableAllocator,
                                 change_current_allocator=_change_current_allocator))
