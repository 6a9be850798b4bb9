/* cmb_objpool.h - a pool of fixed-size host objects.
 *
 * Policies keep one small struct per chunk or block; calling malloc for each
 * would dominate a cache hit. The pool hands objects out of slabs and keeps
 * returned ones on an intrusive free list (LIFO, so a hot object stays in
 * cache). Objects are never returned to malloc until the pool is destroyed.
 * O(1) get and put; a new slab doubles the previous one, up to 64 Ki objects.
 */
#ifndef CMB_OBJPOOL_H
#define CMB_OBJPOOL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cmb_objpool {
    size_t obj_size;   /* rounded up to hold a free-list link */
    void *free_list;   /* returned objects, linked through their first word */
    char *bump;        /* next never-used object of the newest slab */
    char *bump_end;
    void **slabs;      /* every slab, for destroy */
    size_t n_slabs, cap_slabs;
    size_t next_slab_objs;
} cmb_objpool;

void cmb_objpool_init(cmb_objpool *p, size_t obj_size);
void cmb_objpool_destroy(cmb_objpool *p);

/* Slow path of cmb_objpool_get: adds a slab. NULL on host OOM. */
void *_cmb_objpool_grow(cmb_objpool *p);

/* An uninitialised object, or NULL when host memory runs out. */
static inline void *cmb_objpool_get(cmb_objpool *p)
{
    void *o = p->free_list;
    if (o) {
        p->free_list = *(void **)o;
        return o;
    }
    if (p->bump < p->bump_end) {
        o = p->bump;
        p->bump += p->obj_size;
        return o;
    }
    return _cmb_objpool_grow(p);
}

static inline void cmb_objpool_put(cmb_objpool *p, void *o)
{
    *(void **)o = p->free_list;
    p->free_list = o;
}

#ifdef __cplusplus
}
#endif

#endif /* CMB_OBJPOOL_H */
