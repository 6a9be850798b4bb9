/* cmb_fittree.c - address-ordered treap with subtree maximum (see cmb_fittree.h). */
#include "cmb_fittree.h"

/* --- node helpers -------------------------------------------------------- */

static inline uint64_t umax(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static inline void pull(cmb_ftnode *n)
{
    uint64_t m = n->size;
    if (n->left)
        m = umax(m, n->left->max);
    if (n->right)
        m = umax(m, n->right->max);
    n->max = m;
}

static uint64_t next_prio(cmb_fittree *t)
{
    /* xorshift64*: deterministic, cheap, never 0 */
    uint64_t x = t->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    t->rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

static cmb_ftnode *rotate_right(cmb_ftnode *r)
{
    cmb_ftnode *l = r->left;
    r->left = l->right;
    l->right = r;
    pull(r);
    pull(l);
    return l;
}

static cmb_ftnode *rotate_left(cmb_ftnode *r)
{
    cmb_ftnode *x = r->right;
    r->right = x->left;
    x->left = r;
    pull(r);
    pull(x);
    return x;
}

/* --- insert, erase, update ------------------------------------------------- */

static cmb_ftnode *insert_at(cmb_ftnode *r, cmb_ftnode *n)
{
    if (!r)
        return n;
    if (n->key < r->key) {
        r->left = insert_at(r->left, n);
        if (r->left->prio > r->prio)
            return rotate_right(r);
    } else {
        r->right = insert_at(r->right, n);
        if (r->right->prio > r->prio)
            return rotate_left(r);
    }
    pull(r);
    return r;
}

/* Joins two treaps whose keys are all ordered a < b. */
static cmb_ftnode *join(cmb_ftnode *a, cmb_ftnode *b)
{
    if (!a)
        return b;
    if (!b)
        return a;
    if (a->prio > b->prio) {
        a->right = join(a->right, b);
        pull(a);
        return a;
    }
    b->left = join(a, b->left);
    pull(b);
    return b;
}

static cmb_ftnode *erase_at(cmb_ftnode *r, const cmb_ftnode *n)
{
    if (r == n)
        return join(r->left, r->right);
    if (n->key < r->key)
        r->left = erase_at(r->left, n);
    else
        r->right = erase_at(r->right, n);
    pull(r);
    return r;
}

/* Recomputes the maxima on the path from r down to the node with `key`. */
static void repair_path(cmb_ftnode *r, uint64_t key)
{
    if (!r)
        return;
    if (key < r->key)
        repair_path(r->left, key);
    else if (key > r->key)
        repair_path(r->right, key);
    pull(r);
}

void cmb_ft_init(cmb_fittree *t)
{
    t->root = NULL;
    t->count = 0;
    t->rng = 0x9E3779B97F4A7C15ull;
}

void cmb_ft_insert(cmb_fittree *t, cmb_ftnode *n)
{
    n->left = n->right = NULL;
    n->max = n->size;
    n->prio = next_prio(t);
    t->root = insert_at(t->root, n);
    t->count++;
}

void cmb_ft_erase(cmb_fittree *t, cmb_ftnode *n)
{
    t->root = erase_at(t->root, n);
    t->count--;
}

void cmb_ft_update(cmb_fittree *t, cmb_ftnode *n, uint64_t key, uint64_t size)
{
    n->key = key;
    n->size = size;
    repair_path(t->root, key);
}

/* --- searches ---------------------------------------------------------------- */

cmb_ftnode *cmb_ft_first_fit(const cmb_fittree *t, uint64_t size)
{
    cmb_ftnode *r = t->root;
    if (!r || r->max < size)
        return NULL;
    for (;;) {
        if (r->left && r->left->max >= size)
            r = r->left;
        else if (r->size >= size)
            return r;
        else
            r = r->right; /* the max says a fit lies there */
    }
}

cmb_ftnode *cmb_ft_floor(const cmb_fittree *t, uint64_t key)
{
    cmb_ftnode *r = t->root, *best = NULL;
    while (r) {
        if (r->key <= key) {
            best = r;
            r = r->right;
        } else {
            r = r->left;
        }
    }
    return best;
}

cmb_ftnode *cmb_ft_ceil(const cmb_fittree *t, uint64_t key)
{
    cmb_ftnode *r = t->root, *best = NULL;
    while (r) {
        if (r->key >= key) {
            best = r;
            r = r->left;
        } else {
            r = r->right;
        }
    }
    return best;
}

cmb_ftnode *cmb_ft_first(const cmb_fittree *t)
{
    cmb_ftnode *r = t->root;
    while (r && r->left)
        r = r->left;
    return r;
}

/* --- teardown and checks -------------------------------------------------------- */

static void clear_at(cmb_ftnode *r, void (*fn)(cmb_ftnode *, void *), void *arg)
{
    if (!r)
        return;
    clear_at(r->left, fn, arg);
    clear_at(r->right, fn, arg);
    if (fn)
        fn(r, arg);
}

void cmb_ft_clear(cmb_fittree *t, void (*fn)(cmb_ftnode *n, void *arg), void *arg)
{
    clear_at(t->root, fn, arg);
    t->root = NULL;
    t->count = 0;
}

static long validate_at(const cmb_ftnode *r, const uint64_t *lo, const uint64_t *hi)
{
    if (!r)
        return 0;
    if ((lo && r->key <= *lo) || (hi && r->key >= *hi))
        return -1;
    if ((r->left && r->left->prio > r->prio) || (r->right && r->right->prio > r->prio))
        return -1;
    uint64_t m = r->size;
    if (r->left)
        m = umax(m, r->left->max);
    if (r->right)
        m = umax(m, r->right->max);
    if (m != r->max)
        return -1;
    long a = validate_at(r->left, lo, &r->key);
    long b = validate_at(r->right, &r->key, hi);
    return a < 0 || b < 0 ? -1 : a + b + 1;
}

long cmb_ft_validate(const cmb_fittree *t)
{
    long n = validate_at(t->root, NULL, NULL);
    return n >= 0 && (size_t)n == t->count ? n : -1;
}
