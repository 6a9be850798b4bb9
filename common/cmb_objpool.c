/* cmb_objpool.c - slabs of fixed-size objects (see cmb_objpool.h). */
#include "cmb_objpool.h"

#include <stdlib.h>
#include <string.h>

#define OBJPOOL_FIRST_SLAB 64        /* objects in the first slab */
#define OBJPOOL_MAX_SLAB (64u << 10) /* objects in the largest slab */

void cmb_objpool_init(cmb_objpool *p, size_t obj_size)
{
    memset(p, 0, sizeof *p);
    if (obj_size < sizeof(void *))
        obj_size = sizeof(void *);
    /* keep every object aligned for any member type */
    p->obj_size = (obj_size + 15) & ~(size_t)15;
    p->next_slab_objs = OBJPOOL_FIRST_SLAB;
}

void *_cmb_objpool_grow(cmb_objpool *p)
{
    if (p->n_slabs == p->cap_slabs) {
        size_t cap = p->cap_slabs ? p->cap_slabs * 2 : 16;
        void **s = realloc(p->slabs, cap * sizeof *s);
        if (!s)
            return NULL;
        p->slabs = s;
        p->cap_slabs = cap;
    }
    size_t n = p->next_slab_objs;
    char *slab = malloc(n * p->obj_size);
    if (!slab)
        return NULL;
    p->slabs[p->n_slabs++] = slab;
    if (p->next_slab_objs < OBJPOOL_MAX_SLAB)
        p->next_slab_objs *= 2;
    p->bump = slab + p->obj_size;
    p->bump_end = slab + n * p->obj_size;
    return slab;
}

void cmb_objpool_destroy(cmb_objpool *p)
{
    for (size_t i = 0; i < p->n_slabs; i++)
        free(p->slabs[i]);
    free(p->slabs);
    memset(p, 0, sizeof *p);
}
