/* The compiled dump scanner's shared parts: the parse's nodes and tables (frparse.c), read by
   the entries' checks (frentries.c). See frparse.c for what the scanner does and why. */

#ifndef FRSCAN_H
#define FRSCAN_H


#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FR_OK 0
#define FR_UNUSUAL 1
#define FR_MEMORY 2

enum { K_NONE, K_FALSE, K_TRUE, K_INT, K_FLOAT, K_STR, K_LIST, K_TUPLE, K_DICT };

#define MAX_TEXT 4096
#define MAX_TENSORS (1 << 16)
#define MAX_DIMS 64
#define MAX_FRAMES 4096
#define MAX_LINE (1 << 24)
#define MAX_KEYS 64 /* keys of an entry or a frame (torch writes 22 and 3) */
#define N_FIELDS 22
#define NONE_NODE 0 /* node 0: None, what an absent field reads as */

typedef struct {
    int64_t a, b;        /* INT: value; FLOAT: its bits; STR: offset, length; containers: -, items */
    int32_t first, last; /* containers: first and last run */
    uint8_t kind, plain; /* STR: printable ASCII */
} node_t;

typedef struct {
    int64_t start; /* in items */
    int32_t count, next;
} run_t;

typedef struct { /* a table of distinct byte strings: id -> (offset, length) in pool */
    uint8_t *pool;
    int64_t npool, cpool;
    int64_t *spans; /* offset, length of each */
    int64_t n, cap;
    int32_t *slots; /* open addressing: id + 1, 0 free */
    int64_t nslots;
} table_t;

typedef struct {
    const uint8_t *d;
    int64_t size, max_nodes;
    node_t *nodes;
    int64_t nn, cn;
    int32_t *items;
    int64_t ni, ci;
    run_t *runs;
    int64_t nr, cr;
    int32_t *stack;
    int64_t ns, cs;
    int64_t *marks;
    int64_t nm, cm;
    int32_t *memo;
    int64_t cmemo;
    int32_t root;
    int32_t *text_of;  /* node -> text id + 1 */
    uint8_t *seen;     /* node: a frame already checked */
    uint8_t *field_of; /* a key's node: 128 | 64 for frames' keys | its field + 1 (0: none): see field() */
    int64_t cnodes;    /* the capacity of these three */
    table_t texts, sides;
    uint8_t *enc; /* a side's encoding being built */
    int64_t nenc, cenc;
} fr_t;

typedef struct { /* where fr_columns writes (arrays of `n` the caller allocates) */
    int64_t *record_id, *seq, *created, *completed; /* completed: -1 for none */
    uint8_t *p2p;
    int32_t *name, *state, *pg, *gname, *gdesc, *in_side, *out_side; /* -1: none */
    int64_t spent;
} fr_out;

#define GROW(ptr, count, cap, need, type)                                                   \
    do {                                                                                    \
        if ((count) + (need) > (cap)) {                                                     \
            int64_t c_ = (cap) ? (cap) : 64;                                                \
            while (c_ < (count) + (need)) c_ *= 2;                                          \
            void *p_ = realloc((ptr), (size_t)c_ * sizeof(type));                           \
            if (!p_) return FR_MEMORY;                                                      \
            (ptr) = (type *)p_;                                                             \
            (cap) = c_;                                                                     \
        }                                                                                   \
    } while (0)

#define NEED(k)                                     \
    do {                                            \
        if (i + (k) > n) return FR_UNUSUAL;         \
    } while (0)
#define TRY(x)                                      \
    do {                                            \
        int rc_ = (x);                              \
        if (rc_) return rc_;                        \
    } while (0)


/* a text's id in a table of distinct byte strings (frparse.c) */
int fr_intern(table_t *t, const uint8_t *s, int64_t len, int32_t *id);

#endif
