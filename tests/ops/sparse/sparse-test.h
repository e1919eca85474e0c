/* Helpers shared by the sparse tests: fixtures, small tensors and ELLs, closeness, and the backend
 * under test (NX_TEST_BACKEND: cpu by default, ref, or cuda, which skips without a GPU). */
#ifndef NX_SPARSE_TEST_H
#define NX_SPARSE_TEST_H

#include <stdint.h>

#include "nitrix-graph.h"
#include "nitrix-ops.h"
#include "testutil.h"

nx_ctx *st_ctx(void);
/* The backend under test; skips the calling test when it is cuda and no GPU answers. */
nx_backend st_backend(void);
nx_tensor *st_load(nx_ctx *ctx, const char *name, const char *key);
/* A built-in by name, or the user semirings of the generator ("maxtimes", "probor"), which are
 * parsed into *user (free with nx_semiring_free). */
const nx_semiring *st_semiring(nx_ctx *ctx, const char *name, nx_semiring **user);
nx_tensor *st_mat(nx_ctx *ctx, int64_t r, int64_t c, const double *v);
nx_tensor *st_index(nx_ctx *ctx, int64_t r, int64_t c, const int64_t *v, nx_dtype dt);
/* An f64 ELL with i64 indices (values, indices may be NULL when m * k == 0). */
nx_ell st_ell(nx_ctx *ctx, int64_t m, int64_t k, int64_t n_cols, const double *values,
              const int64_t *indices, double identity);
double st_at(const nx_tensor *t, int64_t i);
/* Scale-free closeness by dtype and algebra: exact for boolean and f64 tropical, 1e-12 f64,
 * 2e-5 f32. */
void st_expect_close(const char *what, nx_backend be, const nx_tensor *got, const nx_tensor *want,
                     const char *sr);
void st_expect_values(const char *what, const nx_tensor *got, const double *want, int64_t n);
/* Runs fn on every manifest line of kind, on ref and on the backend under test; returns the
 * number of lines. */
typedef void (*st_case_fn)(nx_ctx *ctx, nx_backend be, char *const *f, int nf);
int st_for_cases(const char *kind, st_case_fn fn);

#endif
