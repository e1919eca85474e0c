/* Shared test helpers: a counting allocator that can fail the n-th allocation and reports leaks,
 * and an allocation-failure sweep. */
#ifndef NX_TESTUTIL_H
#define NX_TESTUTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include "nitrix.h"

typedef struct nx_test_alloc {
    int64_t fail_at;     /* 1-based index of the allocation to fail; 0: never fail */
    int64_t count;       /* allocations attempted so far */
    int64_t live;        /* allocations not yet freed */
    int64_t live_bytes;  /* bytes not yet freed */
    int64_t size_errors; /* frees whose size did not match the allocation */
} nx_test_alloc;

/* An allocator over ta (malloc-backed, with a header recording the size). */
nx_allocator nx_test_allocator(nx_test_alloc *ta);

/* A context using ta, ignoring the environment except NITRIX_CACHE_DIR (the suite's own cache
 * directory). Fails the test if creation fails. */
nx_ctx *nx_test_ctx(nx_test_alloc *ta);

/* Runs body(ctx, user) with allocation n failing, for n = 1, 2, ... until a run completes without
 * reaching the failing allocation (at most max_n runs). Each run gets a fresh context. Every run
 * where the failure fired must return NX_ERR_NOMEM; every run must leave no live allocation after
 * the context is freed. Returns the number of allocations a full run makes. */
typedef nx_status (*nx_test_body)(nx_ctx *ctx, void *user);
int64_t nx_test_alloc_sweep(nx_test_body body, void *user, int64_t max_n);

/* Scale-free closeness: |a - b| <= atol + rtol * |b|, NaN equal to NaN, inf equal to same inf. */
int nx_test_close(double a, double b, double rtol, double atol);

/* Directory holding committed test fixtures (set by meson as NX_TEST_DATA_DIR). */
const char *nx_test_data_dir(void);

/* The fixture <data dir>/<family>/<name>_<key>.npy read into ctx (fails the test if it cannot be
 * read). */
nx_tensor *nx_test_load_npy(nx_ctx *ctx, const char *family, const char *name, const char *key);

/* The golden corpus (<source root>/golden, docs/fidelity.md): one folder per case,
 * golden/<family>/<case>/manifest.txt and its .npy files. */
const char *nx_test_golden_dir(void);

/* golden/<family>/<name>/<key>.npy read into ctx (fails the test if it cannot be read). */
nx_tensor *nx_test_golden_npy(nx_ctx *ctx, const char *family, const char *name, const char *key);

/* The cases of golden/<family>/ whose manifest's op is one of ops ("dilate|erode"), sorted by
 * name, into names (64 bytes each); their count. Fails the test past max. */
int nx_test_golden_cases(const char *family, const char *ops, char (*names)[64], int max);

/* The value of `key = value` in the case's manifest into buf; false when the key is absent. */
bool nx_test_golden_field(const char *family, const char *name, const char *key, char *buf,
                          size_t len);

/* The value of option opt in the manifest's `options = a=1 b=2` line; false when absent. */
bool nx_test_golden_option(const char *family, const char *name, const char *opt, char *buf,
                           size_t len);

#endif
