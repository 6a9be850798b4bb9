/* cmb_real_cupy.c - CuPy's own MemoryPool as real:cupy, driven from C
 * through the CPython API.
 *
 * The plug-in embeds the Python it was built against (the python3 whose
 * cupy package the build found), imports cupy and makes one
 * cupy.cuda.MemoryPool per instance. Its calls are the ones a CuPy program
 * makes (cupy/cuda/memory.pyx, CuPy 14):
 *
 *   allocate    pool.malloc(size) -> MemoryPointer; its .ptr
 *   deallocate  the last reference to that MemoryPointer dropped (Py_DECREF):
 *               PooledMemory.__dealloc__ gives the chunk back to the pool
 *   trim        pool.free_all_blocks()
 *   streams     cupy.cuda.ExternalStream(handle).use() when the stream changes,
 *               so the pool files the chunk under that stream's arena
 *
 * so the measured time includes the Python calls, as every CuPy user pays
 * them: about 60 ns of interpreter loop per call on an H100 before CuPy's
 * own work. The plug-in's own share (a C hash map from pointer to
 * MemoryPointer) is a few ns.
 *
 * Statistics. CuPy keeps the bytes in use and the bytes held
 * (used_bytes(), total_bytes()) but no peaks and no call counts. The pool is
 * therefore given an upstream allocator of the plug-in's own,
 * cupy.cuda.PythonFunctionAllocator over two C functions that call
 * cudaMalloc / cudaFree as CuPy's default (_malloc -> runtime.malloc) does,
 * and count: reserved bytes (current, peak, total) and upstream calls are
 * exact, and cost nothing on the path that serves cached blocks. A failed
 * cudaMalloc raises CUDARuntimeError(cudaErrorMemoryAllocation), the error
 * CuPy's pool catches to free its cached blocks and retry
 * (SingleDeviceMemoryPool._try_malloc), so the out-of-memory path is CuPy's
 * own; stats() makes no Python call. Left out: allocated bytes (CuPy's
 * used_bytes() has no peak), requested bytes and blocks (the harness counts
 * them), the largest free block and OOM retries (CuPy does not expose them).
 *
 * The interpreter is started once per process (no signal handlers: the
 * suite owns SIGINT) and never finalised: CuPy's atexit handlers run at
 * process exit as in any CuPy program. Everything runs on the thread that
 * created the instance, which holds the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../allocators/cmb_real_plugin.h"
#include "../../allocators/cmb_real_options.h"

#ifndef CMB_PYTHON_EXECUTABLE
#define CMB_PYTHON_EXECUTABLE "python3"
#endif
#ifndef CMB_PYTHON_LIBRARY
#define CMB_PYTHON_LIBRARY ""
#endif

#define NAME "real:cupy"
#define MAX_STREAMS 64

/* --- pointer -> object: open addressing, backward-shift delete ----------------------------- */

typedef struct slot {
    uintptr_t key; /* 0: empty */
    void *value;
} slot;

typedef struct ptr_map {
    slot *slots;
    size_t cap, n;
} ptr_map;

static size_t map_home(const ptr_map *m, uintptr_t key)
{
    return (size_t)(((uint64_t)key * 0x9E3779B97F4A7C15ull) >> 32) & (m->cap - 1);
}

static int map_put(ptr_map *m, uintptr_t key, void *value);

static int map_grow(ptr_map *m)
{
    ptr_map bigger = {calloc(m->cap ? m->cap * 2 : 1024, sizeof(slot)), m->cap ? m->cap * 2 : 1024, 0};
    if (!bigger.slots)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].key)
            map_put(&bigger, m->slots[i].key, m->slots[i].value);
    free(m->slots);
    *m = bigger;
    return 0;
}

static int map_put(ptr_map *m, uintptr_t key, void *value)
{
    if ((m->n + 1) * 2 > m->cap && map_grow(m))
        return -1;
    size_t i = map_home(m, key);
    while (m->slots[i].key)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (slot){key, value};
    m->n++;
    return 0;
}

static int map_take(ptr_map *m, uintptr_t key, void **value)
{
    if (!m->cap)
        return -1;
    size_t i = map_home(m, key);
    while (m->slots[i].key && m->slots[i].key != key)
        i = (i + 1) & (m->cap - 1);
    if (!m->slots[i].key)
        return -1;
    *value = m->slots[i].value;
    size_t hole = i;
    for (size_t j = (i + 1) & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
        size_t home = map_home(m, m->slots[j].key);
        if (((j - home) & (m->cap - 1)) >= ((j - hole) & (m->cap - 1))) {
            m->slots[hole] = m->slots[j];
            hole = j;
        }
    }
    m->slots[hole].key = 0;
    m->n--;
    return 0;
}

/* --- an instance ---------------------------------------------------------------------------- */

/* What the pool holds from CUDA. Owned by the capsule the upstream functions
 * are bound to, so it lives as long as any memory CuPy still holds (a chunk
 * CuPy frees late, after the instance, still finds it). */
typedef struct upstream_acct {
    ptr_map held; /* upstream ptr -> size (cast to void *) */
    cmb_stat_count reserved;
    uint64_t allocs, frees;
} upstream_acct;

#define ACCT_CAPSULE "cmb_real_cupy.upstream"

static void acct_release(PyObject *capsule)
{
    upstream_acct *a = PyCapsule_GetPointer(capsule, ACCT_CAPSULE);
    if (a) {
        free(a->held.slots);
        free(a);
    }
}

typedef struct cupy_state {
    PyObject *pool;                 /* cupy.cuda.MemoryPool                   */
    PyObject *upstream;             /* its PythonFunctionAllocator            */
    PyObject *streams[MAX_STREAMS]; /* ExternalStream per handle              */
    uintptr_t stream_keys[MAX_STREAMS];
    size_t n_streams;
    cmb_stream current;             /* the stream CuPy has as current         */
    int have_current;
    ptr_map live;                   /* ptr -> MemoryPointer                   */
    upstream_acct *acct;            /* valid while the pool lives             */
    int null_call;                  /* the baseline (null_call=true): see null_allocate */
    ptr_map cached;                 /* null_call: size -> null_block list     */
    cmb_stat_count null_reserved;   /* null_call: what its cudaMallocs hold   */
    uint64_t null_allocs;
    char err[320];
} cupy_state;

/* The process's Python and what it needs from cupy. */
static struct {
    int ready;
    PyObject *cupy, *memory, *external_stream, *runtime_error, *oom_error;
    PyObject *s_malloc, *s_ptr, *s_use, *s_free_all, *s_used_bytes;
} py;

/* --- the interpreter --------------------------------------------------------------------------- */

/* The pending Python exception as one line (cleared). */
static void py_error(char *out, size_t len)
{
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *value = PyErr_GetRaisedException();
    PyObject *type = value ? Py_NewRef((PyObject *)Py_TYPE(value)) : NULL, *tb = NULL;
#else
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
#endif
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *msg = text ? PyUnicode_AsUTF8(text) : NULL;
    const char *tname = type ? ((PyTypeObject *)type)->tp_name : "error";
    snprintf(out, len, "%s: %s", tname, msg ? msg : "?");
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
    PyErr_Clear();
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
}

static int start_python(char *why, size_t len)
{
    if (Py_IsInitialized())
        return 0;
    /* The plug-in is loaded RTLD_LOCAL; extension modules (numpy, cupy)
     * expect libpython's symbols in the global scope, as in python3 itself. */
    if (*CMB_PYTHON_LIBRARY && !dlopen(CMB_PYTHON_LIBRARY, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD) &&
        !dlopen(CMB_PYTHON_LIBRARY, RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(why, len, "cannot load %s: %s", CMB_PYTHON_LIBRARY, dlerror());
        return -1;
    }
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0;
    config.parse_argv = 0;
    /* paths (site-packages, a venv) as the python3 the build found sees them */
    PyStatus st = PyConfig_SetBytesString(&config, &config.program_name, CMB_PYTHON_EXECUTABLE);
    if (!PyStatus_Exception(st))
        st = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(st)) {
        snprintf(why, len, "cannot start Python (%s): %s", CMB_PYTHON_EXECUTABLE, st.err_msg ? st.err_msg : "?");
        return -1;
    }
    return 0;
}

static PyObject *attr_of(const char *module, const char *name)
{
    PyObject *m = PyImport_ImportModule(module);
    if (!m)
        return NULL;
    PyObject *a = PyObject_GetAttrString(m, name);
    Py_DECREF(m);
    return a;
}

/* Imports cupy once; 0, or -1 with the reason. */
static int import_cupy(char *why, size_t len)
{
    if (py.ready)
        return 0;
    if (start_python(why, len))
        return -1;
    py.cupy = PyImport_ImportModule("cupy");
    if (py.cupy)
        py.memory = PyImport_ImportModule("cupy.cuda.memory");
    if (py.memory) {
        py.external_stream = attr_of("cupy.cuda", "ExternalStream");
        py.oom_error = PyObject_GetAttrString(py.memory, "OutOfMemoryError");
    }
    if (py.oom_error)
        py.runtime_error = attr_of("cupy_backends.cuda.api.runtime", "CUDARuntimeError");
    if (!py.runtime_error || !py.external_stream) {
        char e[256];
        py_error(e, sizeof e);
        snprintf(why, len, "importing cupy failed: %s", e);
        return -1;
    }
    py.s_malloc = PyUnicode_InternFromString("malloc");
    py.s_ptr = PyUnicode_InternFromString("ptr");
    py.s_use = PyUnicode_InternFromString("use");
    py.s_free_all = PyUnicode_InternFromString("free_all_blocks");
    py.s_used_bytes = PyUnicode_InternFromString("used_bytes");
    py.ready = 1;
    return 0;
}

/* --- the pool's upstream: cudaMalloc / cudaFree, counted ----------------------------------------- */

/* CUDARuntimeError(status) raised: the exception CuPy's pool catches. */
static PyObject *raise_runtime_error(int status)
{
    PyObject *exc = PyObject_CallFunction(py.runtime_error, "i", status);
    if (exc) {
        PyErr_SetObject(py.runtime_error, exc);
        Py_DECREF(exc);
    }
    return NULL;
}

static PyObject *upstream_malloc(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    upstream_acct *a = PyCapsule_GetPointer(self, ACCT_CAPSULE);
    void *p = NULL;
    if (!a || nargs != 2)
        return PyErr_Format(PyExc_TypeError, "malloc(size, device_id)");
    size_t size = PyLong_AsSize_t(args[0]);
    if (PyErr_Occurred())
        return NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
        cudaGetLastError(); /* not sticky: clear it */
        return raise_runtime_error((int)e);
    }
    if (map_put(&a->held, (uintptr_t)p, (void *)(uintptr_t)size)) {
        cudaFree(p);
        return PyErr_NoMemory();
    }
    cmb_stat_increase(&a->reserved, (int64_t)size);
    a->allocs++;
    return PyLong_FromVoidPtr(p);
}

static PyObject *upstream_free(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    upstream_acct *a = PyCapsule_GetPointer(self, ACCT_CAPSULE);
    void *size;
    if (!a || nargs != 2)
        return PyErr_Format(PyExc_TypeError, "free(ptr, device_id)");
    void *p = PyLong_AsVoidPtr(args[0]);
    if (PyErr_Occurred())
        return NULL;
    if (!map_take(&a->held, (uintptr_t)p, &size)) {
        cmb_stat_decrease(&a->reserved, (int64_t)(uintptr_t)size);
        a->frees++;
    }
    cudaFree(p);
    Py_RETURN_NONE;
}

static PyMethodDef malloc_def = {"cmb_malloc", (PyCFunction)(void (*)(void))upstream_malloc, METH_FASTCALL,
                                 "cudaMalloc for the pool, counted"};
static PyMethodDef free_def = {"cmb_free", (PyCFunction)(void (*)(void))upstream_free, METH_FASTCALL,
                               "cudaFree for the pool, counted"};

/* --- building an instance ------------------------------------------------------------------------- */

static int read_options(const cmb_config *cfg, uint64_t *limit, int *has_limit, double *fraction)
{
    const char *fr = cmb_real_option(cfg, "limit_fraction");
    /* keys, values, bounds, and limit with limit_fraction (CuPy refuses both) */
    if (cmb_real_check_options(cfg, NAME, cmb_real_cupy_options) ||
        cmb_real_size_option(cfg, NAME, "limit", limit, has_limit))
        return -1;
    *fraction = -1.0;
    if (fr && cmb_real_parse_double(fr, fraction))
        return -1; /* checked above */
    return 0;
}

/* MemoryPool(allocator=PythonFunctionAllocator(cmb_malloc, cmb_free).malloc) on `device`. */
static int make_pool(cupy_state *s, int device, uint64_t limit, int has_limit, double fraction)
{
    int rc = -1;
    upstream_acct *acct = calloc(1, sizeof *acct);
    PyObject *cap = acct ? PyCapsule_New(acct, ACCT_CAPSULE, acct_release) : NULL;
    if (!cap) {
        free(acct);
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        return -1;
    }
    PyObject *m = cap ? PyCFunction_New(&malloc_def, cap) : NULL;
    PyObject *f = cap ? PyCFunction_New(&free_def, cap) : NULL;
    PyObject *dev = attr_of("cupy.cuda", "Device");
    PyObject *d = dev ? PyObject_CallFunction(dev, "i", device) : NULL;
    PyObject *used = d ? PyObject_CallMethod(d, "use", NULL) : NULL;
    PyObject *pfa = used && m && f ? PyObject_CallMethod(py.memory, "PythonFunctionAllocator", "OO", m, f) : NULL;
    PyObject *upstream = pfa ? PyObject_GetAttrString(pfa, "malloc") : NULL;
    PyObject *pool = upstream ? PyObject_CallMethod(py.memory, "MemoryPool", "O", upstream) : NULL;
    PyObject *lim = NULL;
    if (pool && has_limit)
        lim = PyObject_CallMethod(pool, "set_limit", "K", (unsigned long long)limit);
    else if (pool && fraction >= 0.0)
        lim = PyObject_CallMethod(pool, "set_limit", "Od", Py_None, fraction);
    if (pool && (lim || (!has_limit && fraction < 0.0))) {
        s->pool = pool;
        s->upstream = pfa;
        s->acct = acct;
        pool = pfa = NULL;
        rc = 0;
    }
    Py_XDECREF(lim);
    Py_XDECREF(pool);
    Py_XDECREF(upstream);
    Py_XDECREF(pfa);
    Py_XDECREF(used);
    Py_XDECREF(d);
    Py_XDECREF(dev);
    Py_XDECREF(f);
    Py_XDECREF(m);
    Py_XDECREF(cap);
    return rc;
}

/* --- the methods ------------------------------------------------------------------------------------- */

static cmb_status cupy_create(const cmb_config *cfg, cmb_upstream *up, void **out)
{
    (void)up;
    uint64_t limit = 0;
    int has_limit = 0;
    double fraction;
    if (read_options(cfg, &limit, &has_limit, &fraction))
        return CMB_ERR_INVALID;
    if (cfg->sim) {
        snprintf(cfg->error, cfg->error_len, "CuPy's MemoryPool needs a GPU");
        return CMB_ERR_UNSUPPORTED;
    }
    if (import_cupy(cfg->error, cfg->error_len))
        return CMB_ERR_UNSUPPORTED;
    const char *nc = cmb_real_option(cfg, "null_call");
    int null_call = 0;
    if (nc && cmb_real_parse_bool(nc, &null_call))
        return CMB_ERR_INVALID; /* checked by read_options */
    cupy_state *s = calloc(1, sizeof *s);
    if (!s)
        return CMB_ERR_HOST_NOMEM;
    s->null_call = null_call;
    if (make_pool(s, cfg->device, limit, has_limit, fraction)) {
        char e[256];
        py_error(e, sizeof e);
        snprintf(cfg->error, cfg->error_len, NAME ": %s", e);
        free(s);
        return CMB_ERR_CUDA;
    }
    *out = s;
    return CMB_OK;
}

/* Makes `stream` CuPy's current stream (ExternalStream(handle).use()). */
static int use_stream(cupy_state *s, cmb_stream stream)
{
    size_t i = 0;
    while (i < s->n_streams && s->stream_keys[i] != (uintptr_t)stream)
        i++;
    if (i == s->n_streams) {
        if (i == MAX_STREAMS)
            return -1;
        PyObject *ext = PyObject_CallFunction(py.external_stream, "K", (unsigned long long)(uintptr_t)stream);
        if (!ext)
            return -1;
        s->streams[i] = ext;
        s->stream_keys[i] = (uintptr_t)stream;
        s->n_streams++;
    }
    PyObject *r = PyObject_CallMethodNoArgs(s->streams[i], py.s_use);
    if (!r)
        return -1;
    Py_DECREF(r);
    s->current = stream;
    s->have_current = 1;
    return 0;
}

static cmb_status failed(cupy_state *s)
{
    int oom = PyErr_ExceptionMatches(py.oom_error);
    py_error(s->err, sizeof s->err);
    return oom ? CMB_ERR_OOM : CMB_ERR_CUDA;
}

/* --- the null-call baseline (null_call=true) ---------------------------------------------------
 *
 * What the CPython call alone costs: each allocate and each free makes the
 * same kind of call into the pool as the real path (a vectorcall of a
 * MemoryPool method, here used_bytes(), which allocates nothing), and the
 * memory comes from a free list per exact size in C (cudaMalloc on a miss,
 * kept until destroy). Real minus null is what CuPy's pool itself costs. */

typedef struct null_block {
    void *ptr;
    struct null_block *next;
} null_block;

static int null_python_call(cupy_state *s)
{
    PyObject *args[2] = {NULL, s->pool};
    PyObject *r = PyObject_VectorcallMethod(py.s_used_bytes, args + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (!r)
        return -1;
    Py_DECREF(r);
    return 0;
}

static cmb_status null_allocate(cupy_state *s, size_t size, void **ptr)
{
    void *head = NULL;
    if (null_python_call(s))
        return failed(s);
    if (!map_take(&s->cached, (uintptr_t)size, &head)) {
        null_block *b = head;
        if (b->next && map_put(&s->cached, (uintptr_t)size, b->next))
            return CMB_ERR_HOST_NOMEM;
        *ptr = b->ptr;
        free(b);
        return CMB_OK;
    }
    if (cudaMalloc(ptr, size) != cudaSuccess) {
        cudaGetLastError();
        snprintf(s->err, sizeof s->err, NAME ": cudaMalloc of %zu B failed", size);
        return CMB_ERR_OOM;
    }
    cmb_stat_increase(&s->null_reserved, (int64_t)size);
    s->null_allocs++;
    return CMB_OK;
}

static cmb_status null_deallocate(cupy_state *s, void *ptr, size_t size)
{
    void *head = NULL;
    null_block *b = malloc(sizeof *b);
    if (!b)
        return CMB_ERR_HOST_NOMEM;
    if (null_python_call(s)) {
        free(b);
        return failed(s);
    }
    map_take(&s->cached, (uintptr_t)size, &head);
    *b = (null_block){ptr, head};
    if (map_put(&s->cached, (uintptr_t)size, b)) {
        free(b);
        return CMB_ERR_HOST_NOMEM;
    }
    return CMB_OK;
}

static void null_release(cupy_state *s)
{
    for (size_t i = 0; i < s->cached.cap; i++) {
        null_block *b = s->cached.slots[i].key ? s->cached.slots[i].value : NULL;
        while (b) {
            null_block *next = b->next;
            cudaFree(b->ptr);
            free(b);
            b = next;
        }
    }
    free(s->cached.slots);
}

static cmb_status cupy_allocate(void *p, size_t size, cmb_stream stream, void **ptr)
{
    cupy_state *s = p;
    if (s->null_call)
        return null_allocate(s, size, ptr);
    if ((!s->have_current || stream != s->current) && use_stream(s, stream))
        return failed(s);
    PyObject *n = PyLong_FromSize_t(size);
    /* args[0] is free for the callee (PY_VECTORCALL_ARGUMENTS_OFFSET) */
    PyObject *args[3] = {NULL, s->pool, n};
    PyObject *mp = n ? PyObject_VectorcallMethod(py.s_malloc, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                     : NULL;
    Py_XDECREF(n);
    if (!mp)
        return failed(s);
    PyObject *addr = PyObject_GetAttr(mp, py.s_ptr);
    void *a = addr ? PyLong_AsVoidPtr(addr) : NULL;
    Py_XDECREF(addr);
    if (!a || map_put(&s->live, (uintptr_t)a, mp)) {
        Py_DECREF(mp);
        return PyErr_Occurred() ? failed(s) : CMB_ERR_HOST_NOMEM;
    }
    *ptr = a;
    return CMB_OK;
}

static cmb_status cupy_deallocate(void *p, void *ptr, size_t size, cmb_stream stream)
{
    (void)stream; /* the chunk goes back to the arena of its own stream */
    cupy_state *s = p;
    void *mp;
    if (s->null_call)
        return null_deallocate(s, ptr, size);
    if (map_take(&s->live, (uintptr_t)ptr, &mp))
        return CMB_ERR_INVALID;
    Py_DECREF((PyObject *)mp);
    return PyErr_Occurred() ? failed(s) : CMB_OK;
}

static cmb_status cupy_trim(void *p)
{
    cupy_state *s = p;
    PyObject *r = PyObject_CallMethodNoArgs(s->pool, py.s_free_all);
    if (!r)
        return failed(s);
    Py_DECREF(r);
    return CMB_OK;
}

static cmb_status cupy_stats(void *p, cmb_alloc_stats *out)
{
    cupy_state *s = p;
    memset(out, 0, sizeof *out);
    out->reserved = s->null_call ? s->null_reserved : s->acct->reserved;
    out->upstream_allocs = s->null_call ? s->null_allocs : s->acct->allocs;
    out->upstream_frees = s->null_call ? 0 : s->acct->frees;
    out->valid = CMB_STAT_RESERVED | CMB_STAT_UPSTREAM;
    return CMB_OK;
}

static cmb_status cupy_destroy(void *p)
{
    cupy_state *s = p;
    cmb_status st = CMB_OK;
    for (size_t i = 0; i < s->live.cap; i++)
        if (s->live.slots[i].key)
            Py_DECREF((PyObject *)s->live.slots[i].value);
    if (cupy_trim(s) != CMB_OK)
        st = CMB_ERR_CUDA;
    Py_XDECREF(s->pool);
    Py_XDECREF(s->upstream);
    for (size_t i = 0; i < s->n_streams; i++)
        Py_DECREF(s->streams[i]);
    /* a stream of this instance may be destroyed after it: CuPy's current
     * stream goes back to the null stream */
    PyObject *null_stream = attr_of("cupy.cuda", "Stream");
    PyObject *n = null_stream ? PyObject_GetAttrString(null_stream, "null") : NULL;
    PyObject *r = n ? PyObject_CallMethodNoArgs(n, py.s_use) : NULL;
    if (!r)
        PyErr_Clear();
    Py_XDECREF(r);
    Py_XDECREF(n);
    Py_XDECREF(null_stream);
    free(s->live.slots);
    null_release(s);
    free(s);
    return st;
}

static const char *cupy_last_error(void *p)
{
    cupy_state *s = p;
    return s->err[0] ? s->err : NULL;
}

static const cmb_allocator_methods cupy_methods = {
    .abi_version = CMB_ALLOCATOR_ABI_VERSION,
    .name = NAME,
    .summary = "CuPy MemoryPool through the CPython API (cupy)",
    .flags = CMB_ALLOC_NEEDS_GPU,
    .create = cupy_create,
    .allocate = cupy_allocate,
    .deallocate = cupy_deallocate,
    .trim = cupy_trim,
    .stats = cupy_stats,
    .destroy = cupy_destroy,
    .last_error = cupy_last_error,
    .options = cmb_real_cupy_options,
};

/* --- entry points ------------------------------------------------------------------------------------ */

CMB_REAL_EXPORT const cmb_allocator_methods *cmb_real_allocator(uint32_t abi_version, const char *name)
{
    return abi_version == CMB_ALLOCATOR_ABI_VERSION && name && !strcmp(name, NAME) ? &cupy_methods : NULL;
}

CMB_REAL_EXPORT const cmb_allocator_methods *cmb_plugin_allocator(uint32_t abi_version)
{
    return abi_version == CMB_ALLOCATOR_ABI_VERSION ? &cupy_methods : NULL;
}

/* Whether this Python finds cupy, without importing it (no GPU touched). */
CMB_REAL_EXPORT int cmb_real_probe(const char *name, char *why, size_t len)
{
    (void)name;
    if (start_python(why, len))
        return -1;
    PyObject *find = attr_of("importlib.util", "find_spec");
    PyObject *spec = find ? PyObject_CallFunction(find, "s", "cupy") : NULL;
    int found = spec && spec != Py_None;
    if (!spec)
        PyErr_Clear();
    Py_XDECREF(spec);
    Py_XDECREF(find);
    if (!found)
        snprintf(why, len, "%s (Python %d.%d) finds no cupy package", CMB_PYTHON_EXECUTABLE, PY_MAJOR_VERSION,
                 PY_MINOR_VERSION);
    return !found;
}
