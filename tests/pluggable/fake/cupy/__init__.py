"""A stand-in for CuPy, just large enough to run scripts/e2e-cupy.py with no
GPU (tests/pluggable/test_gpu_e2e_smoke.py). Arrays are byte counts; their
memory comes from a toy MemoryPool (512 B rounding, cached by size, memory
hooks called as CuPy calls them) or from the allocator given to
cupy.cuda.set_allocator, as CuPy's own code would call it."""
import ctypes
import types

__version__ = "0.0+fake"
float32, float64 = 4, 8
TOTAL = 80 << 30
_hooks = []


class OutOfMemoryError(MemoryError):
    def __init__(self, size, total, limit=0):
        super().__init__(f"Out of memory allocating {size:,} bytes (fake)")


class MemoryPointer:
    def __init__(self, ptr, release=None):
        self.ptr, self._release = ptr, release

    def __del__(self):
        if self._release and self.ptr:
            self._release(self.ptr)


class MemoryPool:
    def __init__(self):
        self.total, self.used, self.cache, self.next_ptr = 0, 0, {}, 1 << 40

    def total_bytes(self):
        return self.total

    def used_bytes(self):
        return self.used

    def malloc(self, size):
        rounded = (size + 511) // 512 * 512
        if self.cache.get(rounded):
            ptr = self.cache[rounded].pop()
        else:
            ptr, self.next_ptr = self.next_ptr, self.next_ptr + rounded
            self.total += rounded
            for h in _hooks:
                h.alloc_postprocess(device_id=0, mem_size=rounded, mem_ptr=ptr)
        self.used += rounded
        for h in _hooks:
            h.malloc_postprocess(device_id=0, size=size, mem_size=rounded, mem_ptr=ptr, pmem_id=ptr)

        def release(p, rounded=rounded):
            self.used -= rounded
            self.cache.setdefault(rounded, []).append(p)
            for h in _hooks:
                h.free_postprocess(device_id=0, mem_size=rounded, mem_ptr=p, pmem_id=p)
        return MemoryPointer(ptr, release)


_pool = MemoryPool()
_allocator = _pool.malloc
_stream = types.SimpleNamespace(ptr=0)

MALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)


class CFunctionAllocator:
    """As cupy/cuda/memory.pyx: malloc for size > 0, the pointer unchecked, free when it dies."""

    def __init__(self, param, malloc_func, free_func, owner):
        self.param, self.owner = param, owner
        self._malloc, self._free = MALLOC(malloc_func), FREE(free_func)

    def malloc(self, size):
        ptr = (self._malloc(self.param, size, 0) or 0) if size > 0 else 0
        return MemoryPointer(ptr, lambda p: self._free(self.param, p, 0))


class MemoryHook:
    name = "hook"

    def __enter__(self):
        _hooks.append(self)
        return self

    def __exit__(self, *exc):
        _hooks.remove(self)

    def alloc_postprocess(self, **kw):
        pass

    def malloc_postprocess(self, **kw):
        pass

    def free_postprocess(self, **kw):
        pass


def _set_allocator(fn):
    global _allocator
    _allocator = fn


class ndarray:
    def __init__(self, shape, itemsize, alloc=True):
        n = itemsize
        for d in shape:
            n *= d
        self.shape, self.itemsize, self.nbytes = shape, itemsize, n
        self.mem = _allocator(n) if alloc else None
        if alloc and n and not self.mem.ptr:
            raise RuntimeError("illegal memory access (fake: address 0)")

    def __pow__(self, k):
        return ndarray(self.shape, self.itemsize)

    def __getitem__(self, key):
        view = ndarray(self.shape, self.itemsize, alloc=False)
        view.base = self
        return view

    def sum(self, dtype=None):
        return ndarray((), dtype or self.itemsize)

    def __matmul__(self, other):
        return ndarray((self.shape[0], other.shape[1]), self.itemsize)

    def __float__(self):
        return 1.0


class RandomState:
    def __init__(self, seed):
        self.seed = seed

    def standard_normal(self, shape, dtype=float64):
        return ndarray(shape, dtype)


def abs(a):  # noqa: A001 - cupy's name
    return ndarray(a.shape, 4 if a.itemsize == 8 else a.itemsize)


def trace(a):
    return ndarray((), a.itemsize)


fft = types.SimpleNamespace(rfft=lambda x, axis=-1: ndarray((x.shape[0], x.shape[1] // 2 + 1), 8))
runtime = types.SimpleNamespace(
    getDevice=lambda: 0, getDeviceProperties=lambda d: {"name": b"fake GPU"}, runtimeGetVersion=lambda: 13000,
    memGetInfo=lambda: (TOTAL - (1 << 30), TOTAL), deviceSynchronize=lambda: None)
cuda = types.SimpleNamespace(
    memory=types.SimpleNamespace(CFunctionAllocator=CFunctionAllocator, OutOfMemoryError=OutOfMemoryError),
    MemoryHook=MemoryHook, set_allocator=_set_allocator, get_current_stream=lambda: _stream, runtime=runtime)
random = types.SimpleNamespace(RandomState=RandomState)


def get_default_memory_pool():
    return _pool
