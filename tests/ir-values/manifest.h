/* The fixture manifest written by tools/gen-ir-fixtures.py (grammar in that script's docstring):
 * one case per block, arrays in one blob. */
#ifndef NX_IR_VALUES_MANIFEST_H
#define NX_IR_VALUES_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nitrix.h"

#define MF_MAX_ARRAYS 10
#define MF_MAX_VIEWS 4
#define MF_MAX_ATTRS 32
#define MF_MAX_VALS 16

typedef enum mf_view_kind { MF_SLICE, MF_PERM, MF_EXPAND } mf_view_kind;

typedef struct mf_view {
    mf_view_kind kind;
    int64_t v[NX_MAX_DIMS]; /* slice: axis, start, count, step; perm: the permutation;
                               expand: axis (of extent 1), count (stride 0) */
} mf_view;

typedef struct mf_array {
    nx_dtype dtype;
    int ndim;
    int64_t shape[NX_MAX_DIMS];
    int64_t offset; /* bytes into the blob */
    int nviews;
    mf_view views[MF_MAX_VIEWS];
} mf_array;

typedef struct mf_attr {
    char key[16];
    int nvals;
    char vals[MF_MAX_VALS][32];
} mf_attr;

typedef struct mf_case {
    char name[80];
    char op[32];
    int nattrs;
    mf_attr attrs[MF_MAX_ATTRS];
    int nin, nout;
    mf_array in[MF_MAX_ARRAYS];
    mf_array out[MF_MAX_ARRAYS];
    double rtol, atol;
    const char *known_bug; /* non-NULL: listed in known-failures.txt with this reference */
} mf_case;

typedef struct mf_manifest {
    mf_case *cases;
    int ncases, cap;
    unsigned char *blob;
    size_t blob_len;
} mf_manifest;

/* Reads dir/manifest.txt and dir/arrays.bin. On failure writes a message into err and returns
 * false. */
bool mf_load(const char *dir, mf_manifest *m, char *err, size_t errlen);
/* Marks cases named in a known-failures file ("CASE BUG-REFERENCE" per line, '#' comments).
 * A missing file is not an error. */
bool mf_load_known(const char *path, mf_manifest *m, char *err, size_t errlen);
void mf_free(mf_manifest *m);

const mf_attr *mf_attr_get(const mf_case *c, const char *key);
/* Integer values of key into v (at most max); -1 if the key is absent. */
int mf_attr_ints(const mf_case *c, const char *key, int64_t *v, int max);
/* One integer, or def when the key is absent. */
int64_t mf_attr_int(const mf_case *c, const char *key, int64_t def);
double mf_attr_double(const mf_case *c, const char *key, double def);
const char *mf_attr_word(const mf_case *c, const char *key);

bool mf_dtype(const char *name, nx_dtype *out);
/* Bytes of an array in the blob: inputs in their dtype, outputs widened (f64, i64, bool u8). */
size_t mf_bytes(const mf_array *a, bool widened);

#endif
