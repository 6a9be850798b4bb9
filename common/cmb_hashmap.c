/* cmb_hashmap.c - open addressing with linear probing and backward-shift
 * deletion; the load factor stays at or below 1/2. */
#include "cmb_hashmap.h"

#include <stdlib.h>
#include <string.h>

static inline size_t slot_of(uint64_t key, size_t mask)
{
    /* Fibonacci hashing spreads pointers whose low bits are all zero. */
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & mask;
}

static int alloc_table(cmb_hashmap *m, size_t capacity)
{
    m->keys = calloc(capacity, sizeof *m->keys);
    m->vals = malloc(capacity * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        m->keys = m->vals = NULL;
        return -1;
    }
    m->mask = capacity - 1;
    m->count = 0;
    return 0;
}

int cmb_hashmap_init(cmb_hashmap *m, size_t expected)
{
    size_t capacity = 16;
    while (capacity < expected * 2)
        capacity <<= 1;
    return alloc_table(m, capacity);
}

void cmb_hashmap_free(cmb_hashmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

void cmb_hashmap_clear(cmb_hashmap *m)
{
    memset(m->keys, 0, (m->mask + 1) * sizeof *m->keys);
    m->count = 0;
}

static void insert_fresh(cmb_hashmap *m, uint64_t key, uint64_t val)
{
    size_t i = slot_of(key, m->mask);
    while (m->keys[i])
        i = (i + 1) & m->mask;
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
}

static int grow(cmb_hashmap *m)
{
    cmb_hashmap bigger;
    if (alloc_table(&bigger, (m->mask + 1) * 2))
        return -1;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->keys[i])
            insert_fresh(&bigger, m->keys[i], m->vals[i]);
    cmb_hashmap_free(m);
    *m = bigger;
    return 0;
}

int cmb_hashmap_put(cmb_hashmap *m, uint64_t key, uint64_t val)
{
    if (!key)
        return -1;
    size_t i = slot_of(key, m->mask);
    while (m->keys[i]) {
        if (m->keys[i] == key) {
            m->vals[i] = val;
            return 0;
        }
        i = (i + 1) & m->mask;
    }
    if ((m->count + 1) * 2 > m->mask + 1) {
        if (grow(m))
            return -1;
        insert_fresh(m, key, val);
        return 0;
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->count++;
    return 0;
}

static size_t find_slot(const cmb_hashmap *m, uint64_t key, int *found)
{
    size_t i = slot_of(key, m->mask);
    while (m->keys[i]) {
        if (m->keys[i] == key) {
            *found = 1;
            return i;
        }
        i = (i + 1) & m->mask;
    }
    *found = 0;
    return i;
}

int cmb_hashmap_get(const cmb_hashmap *m, uint64_t key, uint64_t *val)
{
    int found;
    if (!key)
        return 0;
    size_t i = find_slot(m, key, &found);
    if (found && val)
        *val = m->vals[i];
    return found;
}

int cmb_hashmap_remove(cmb_hashmap *m, uint64_t key, uint64_t *val)
{
    int found;
    if (!key)
        return 0;
    size_t i = find_slot(m, key, &found);
    if (!found)
        return 0;
    if (val)
        *val = m->vals[i];
    /* Backward shift: pull later members of the probe run into the hole
     * when their home slot does not lie cyclically in (hole, j]. */
    size_t hole = i, j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        if (!m->keys[j])
            break;
        size_t home = slot_of(m->keys[j], m->mask);
        int home_in_between = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!home_in_between) {
            m->keys[hole] = m->keys[j];
            m->vals[hole] = m->vals[j];
            hole = j;
        }
    }
    m->keys[hole] = 0;
    m->count--;
    return 1;
}

int cmb_hashmap_next(const cmb_hashmap *m, size_t *iter, uint64_t *key, uint64_t *val)
{
    for (size_t i = *iter; i <= m->mask; i++) {
        if (m->keys[i]) {
            if (key)
                *key = m->keys[i];
            if (val)
                *val = m->vals[i];
            *iter = i + 1;
            return 1;
        }
    }
    *iter = m->mask + 1;
    return 0;
}
