/* Copies, casts and views against NumPy fixtures (tests/data/tensor/fixtures.h, written by
 * tools/gen-tensor-fixtures.py): view chains of transposes, slices and reshapes with NumPy's
 * verdict on whether a reshape needs a copy, Python's slice arithmetic, and astype for every
 * dtype pair. Each view chain runs for every dtype; casts run on contiguous, reversed and
 * permuted/strided sources. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tensor.h"

#include "../data/tensor/fixtures.h"

#define NFX(a) ((int)(sizeof(a) / sizeof *(a)))

static const nx_dtype all_dtypes[NX_DTYPE_COUNT] = {
    NX_DTYPE_F32, NX_DTYPE_F64, NX_DTYPE_F16, NX_DTYPE_BF16, NX_DTYPE_I8,
    NX_DTYPE_I16, NX_DTYPE_I32, NX_DTYPE_I64, NX_DTYPE_U8,   NX_DTYPE_BOOL,
};

/* ---- helpers ---- */

typedef struct fixture {
    nx_test_alloc ta;
    nx_ctx *ctx;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->ctx = nx_test_ctx(&f->ta);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    nx_ctx_free(f->ctx);
    assert_int_equal(f->ta.live, 0); /* every tensor freed, nothing leaked */
    assert_int_equal(f->ta.size_errors, 0);
    free(f);
    return 0;
}

/* Distinct bytes for element k < 256 of any dtype (bool holds only 0/1). */
static void pattern(nx_dtype d, int64_t k, unsigned char *out)
{
    size_t es = nx_dtype_size(d);
    for (size_t j = 0; j < es; j++)
        out[j] = (unsigned char)(k + 31 * (int64_t)j);
    if (d == NX_DTYPE_BOOL)
        out[0] = (unsigned char)(k & 1);
}

/* Address of element idx of t, computed here from the public geometry. */
static const unsigned char *elem_at(const nx_tensor *t, const int64_t *idx)
{
    const unsigned char *p = nx_tensor_data(t);
    int64_t off = 0;
    for (int i = 0; i < nx_tensor_ndim(t); i++)
        off += idx[i] * nx_tensor_strides(t)[i];
    return p + off * (int64_t)nx_dtype_size(nx_tensor_dtype(t));
}

static bool next_index(const nx_tensor *t, int64_t *idx)
{
    for (int i = nx_tensor_ndim(t) - 1; i >= 0; i--) {
        if (++idx[i] < nx_tensor_shape(t)[i])
            return true;
        idx[i] = 0;
    }
    return false;
}

/* t's elements in C order equal pattern(values[i]). */
static void expect_elements(const nx_tensor *t, const int16_t *values, int64_t n, const char *what,
                            int chain)
{
    assert_int_equal(nx_tensor_numel(t), n);
    if (n == 0)
        return;
    nx_dtype d = nx_tensor_dtype(t);
    size_t es = nx_dtype_size(d);
    int64_t idx[NX_MAX_DIMS] = {0};
    int64_t i = 0;
    do {
        unsigned char want[8];
        pattern(d, values[i], want);
        if (memcmp(elem_at(t, idx), want, es) != 0)
            fail_msg("chain %d, %s, %s: element %lld differs (expected base element %d)", chain,
                     nx_dtype_name(d), what, (long long)i, values[i]);
        i++;
    } while (next_index(t, idx));
    assert_int_equal(i, n);
}

static bool contains(const char *s, const char *part)
{
    return strstr(s, part) != NULL;
}

/* ---- view chains ---- */

static nx_tensor *apply_op(nx_ctx *ctx, nx_tensor *cur, const fx_op *op, int chain)
{
    nx_tensor *out = NULL;
    nx_status st;
    if (op->kind == FX_PERMUTE) {
        int perm[NX_MAX_DIMS];
        for (int i = 0; i < op->n; i++)
            perm[i] = (int)op->a[i];
        st = nx_tensor_permute(cur, perm, &out);
    } else if (op->kind == FX_SLICE) {
        st = nx_tensor_slice(cur, (int)op->a[0], op->a[1], op->a[2], op->a[3], &out);
    } else {
        st = nx_tensor_reshape(cur, op->n, op->a, &out);
        if (op->copy) {
            if (st != NX_ERR_SHAPE)
                fail_msg("chain %d: reshape returned %s; NumPy needs a copy here", chain,
                         nx_status_str(st));
            assert_null(out);
            assert_true(contains(nx_ctx_last_error(ctx), "nx_tensor_contiguous"));
            nx_tensor *c = NULL;
            assert_int_equal(nx_tensor_contiguous(cur, &c), NX_OK);
            assert_true(nx_tensor_is_contiguous(c));
            st = nx_tensor_reshape(c, op->n, op->a, &out);
            nx_tensor_free(c);
            assert_int_equal(st, NX_OK);
            return out;
        }
    }
    if (st != NX_OK)
        fail_msg("chain %d: op %d failed: %s", chain, op->kind, nx_ctx_last_error(ctx));
    assert_ptr_equal(out->storage, cur->storage); /* a view, no copy */
    return out;
}

static void run_chain(nx_ctx *ctx, const fx_chain *c, int ci, nx_dtype d)
{
    nx_tensor *base = NULL;
    assert_int_equal(nx_tensor_new(ctx, d, c->ndim, c->shape, &base), NX_OK);
    unsigned char *p = base->storage->data;
    int64_t n = nx_tensor_numel(base);
    for (int64_t k = 0; k < n; k++)
        pattern(d, k, p + k * (int64_t)nx_dtype_size(d));
    nx_tensor *cur = base;
    for (int i = 0; i < c->nops; i++) {
        nx_tensor *next = apply_op(ctx, cur, &c->ops[i], ci);
        if (cur != base)
            nx_tensor_free(cur);
        cur = next;
    }
    assert_int_equal(nx_tensor_ndim(cur), c->out_ndim);
    for (int i = 0; i < c->out_ndim; i++)
        assert_int_equal(nx_tensor_shape(cur)[i], c->out_shape[i]);
    expect_elements(cur, c->values, c->numel, "view", ci);

    nx_tensor *copy = NULL, *cont = NULL;
    assert_int_equal(nx_tensor_copy(cur, &copy), NX_OK);
    assert_true(nx_tensor_is_contiguous(copy));
    assert_ptr_not_equal(copy->storage, cur->storage);
    expect_elements(copy, c->values, c->numel, "copy", ci);
    assert_int_equal(nx_tensor_contiguous(cur, &cont), NX_OK);
    assert_true(nx_tensor_is_contiguous(cont));
    if (nx_tensor_is_contiguous(cur))
        assert_ptr_equal(cont->storage, cur->storage);
    else
        assert_ptr_not_equal(cont->storage, cur->storage);
    expect_elements(cont, c->values, c->numel, "contiguous", ci);
    /* a copy is independent of its source */
    if (c->numel > 0 && d != NX_DTYPE_BOOL) {
        memset(nx_tensor_data(copy), 0xee, nx_dtype_size(d));
        expect_elements(cur, c->values, c->numel, "view after writing the copy", ci);
    }
    nx_tensor_free(cont);
    nx_tensor_free(copy);
    if (cur != base)
        nx_tensor_free(cur);
    nx_tensor_free(base);
}

static void test_view_chains(void **state)
{
    fixture *f = *state;
    for (int di = 0; di < NX_DTYPE_COUNT; di++) {
        for (int ci = 0; ci < NFX(fx_chains); ci++)
            run_chain(f->ctx, &fx_chains[ci], ci, all_dtypes[di]);
    }
    printf("%d view chains x %d dtypes\n", NFX(fx_chains), NX_DTYPE_COUNT);
}

/* ---- slices: Python's arithmetic on a forward and a reversed view ---- */

static void test_slices(void **state)
{
    fixture *f = *state;
    int64_t data[5] = {0, 1, 2, 3, 4};
    for (int i = 0; i < NFX(fx_slices); i++) {
        const fx_slice *s = &fx_slices[i];
        int64_t shape[1] = {s->n}, stride[1] = {-1};
        nx_tensor *fwd = NULL, *rev = NULL;
        assert_int_equal(nx_tensor_wrap(f->ctx, data, NX_DTYPE_I64, 1, shape, NULL, &fwd), NX_OK);
        /* the same values reversed: element j is n-1-j */
        assert_int_equal(nx_tensor_wrap(f->ctx, s->n ? data + s->n - 1 : data, NX_DTYPE_I64, 1,
                                        shape, stride, &rev),
                         NX_OK);
        for (int r = 0; r < 2; r++) {
            nx_tensor *v = NULL;
            nx_status st = nx_tensor_slice(r ? rev : fwd, 0, s->start, s->stop, s->step, &v);
            if (st != NX_OK)
                fail_msg("slice %d: %s", i, nx_ctx_last_error(f->ctx));
            if (nx_tensor_shape(v)[0] != s->count)
                fail_msg("len %lld [%lld:%lld:%lld] has %lld elements, Python has %lld",
                         (long long)s->n, (long long)s->start, (long long)s->stop,
                         (long long)s->step, (long long)nx_tensor_shape(v)[0], (long long)s->count);
            int64_t idx[1] = {0};
            for (int64_t j = 0; j < s->count; j++, idx[0]++) {
                int64_t want = s->first + j * (s->count > 1 ? s->step : 0);
                if (r)
                    want = s->n - 1 - want;
                int64_t got;
                memcpy(&got, elem_at(v, idx), 8);
                assert_int_equal(got, want);
            }
            nx_tensor_free(v);
        }
        nx_tensor_free(fwd);
        nx_tensor_free(rev);
    }
    printf("%d slices\n", NFX(fx_slices));
}

/* ---- casts ---- */

static bool is_nan_bits(nx_dtype d, uint64_t b)
{
    switch (d) {
    case NX_DTYPE_F32:
        return (b & 0x7fffffff) > 0x7f800000;
    case NX_DTYPE_F64:
        return (b & INT64_MAX) > UINT64_C(0x7ff0000000000000);
    case NX_DTYPE_F16:
        return (b & 0x7fff) > 0x7c00;
    case NX_DTYPE_BF16:
        return (b & 0x7fff) > 0x7f80;
    default:
        return false;
    }
}

static uint64_t quiet_bits(nx_dtype d)
{
    switch (d) {
    case NX_DTYPE_F32:
        return 0x7fc00000;
    case NX_DTYPE_F64:
        return UINT64_C(0x7ff8000000000000);
    case NX_DTYPE_F16:
        return 0x7e00;
    default:
        return 0x7fc0;
    }
}

static uint64_t load_bits(const void *p, size_t es)
{
    uint8_t u1;
    uint16_t u2;
    uint32_t u4;
    uint64_t u8 = 0;
    switch (es) {
    case 1:
        memcpy(&u1, p, 1);
        return u1;
    case 2:
        memcpy(&u2, p, 2);
        return u2;
    case 4:
        memcpy(&u4, p, 4);
        return u4;
    default:
        memcpy(&u8, p, 8);
        return u8;
    }
}

static void store_bits(void *p, size_t es, uint64_t v)
{
    uint8_t u1 = (uint8_t)v;
    uint16_t u2 = (uint16_t)v;
    uint32_t u4 = (uint32_t)v;
    switch (es) {
    case 1:
        memcpy(p, &u1, 1);
        break;
    case 2:
        memcpy(p, &u2, 2);
        break;
    case 4:
        memcpy(p, &u4, 4);
        break;
    default:
        memcpy(p, &v, 8);
        break;
    }
}

static void expect_cast_value(const fx_cast *g, int i, uint64_t got, const char *layout)
{
    uint64_t want = g->out[i];
    size_t es = nx_dtype_size(g->dst);
    uint64_t sign = UINT64_C(1) << (8 * es - 1);
    if (is_nan_bits(g->dst, want)) {
        uint64_t q = quiet_bits(g->dst);
        if ((got & q) != q || (got & sign) != (want & sign))
            fail_msg("%s -> %s (%s) input %#llx: got %#llx, expected a quiet NaN of sign %d",
                     nx_dtype_name(g->src), nx_dtype_name(g->dst), layout,
                     (unsigned long long)g->in[i], (unsigned long long)got, (want & sign) != 0);
        return;
    }
    if (got != want)
        fail_msg("%s -> %s (%s) input %#llx: got %#llx, NumPy gives %#llx", nx_dtype_name(g->src),
                 nx_dtype_name(g->dst), layout, (unsigned long long)g->in[i],
                 (unsigned long long)got, (unsigned long long)want);
}

/* Lays the valid inputs of g out in one of three ways, casts, and compares element by element.
 * layout 0: contiguous [m]; 1: reversed (stride -2 over a 2m buffer); 2: a (1, m) view that is
 * column 1 of an (m, 3) buffer, transposed. */
static void cast_layout(nx_ctx *ctx, const fx_cast *g, int layout)
{
    static const char *names[3] = {"contiguous", "reversed stride -2", "permuted column"};
    size_t es = nx_dtype_size(g->src);
    int pick[64], m = 0;
    for (int i = 0; i < g->n; i++) {
        if (g->valid >> i & 1)
            pick[m++] = i;
    }
    unsigned char buf[64 * 3 * 8];
    memset(buf, 0xcd, sizeof buf);
    nx_tensor *src = NULL, *tmp = NULL;
    int64_t shape1[1] = {m};
    if (layout == 0) {
        for (int j = 0; j < m; j++)
            store_bits(buf + (size_t)j * es, es, g->in[pick[j]]);
        assert_int_equal(nx_tensor_wrap(ctx, buf, g->src, 1, shape1, NULL, &src), NX_OK);
    } else if (layout == 1) {
        int64_t st[1] = {-2};
        for (int j = 0; j < m; j++)
            store_bits(buf + (size_t)(2 * (m - 1 - j)) * es, es, g->in[pick[j]]);
        assert_int_equal(
            nx_tensor_wrap(ctx, buf + (size_t)(2 * (m - 1)) * es, g->src, 1, shape1, st, &src),
            NX_OK);
    } else {
        int64_t shape2[2] = {m, 3};
        int perm[2] = {1, 0};
        for (int j = 0; j < m; j++)
            store_bits(buf + (size_t)(3 * j + 1) * es, es, g->in[pick[j]]);
        assert_int_equal(nx_tensor_wrap(ctx, buf, g->src, 2, shape2, NULL, &tmp), NX_OK);
        nx_tensor *col = NULL;
        assert_int_equal(nx_tensor_slice(tmp, 1, 1, 2, 1, &col), NX_OK);
        assert_int_equal(nx_tensor_permute(col, perm, &src), NX_OK);
        nx_tensor_free(col);
        assert_false(nx_tensor_is_contiguous(src) && m > 1);
    }
    nx_tensor *out = NULL;
    if (nx_tensor_cast(src, g->dst, &out) != NX_OK)
        fail_msg("%s -> %s: %s", nx_dtype_name(g->src), nx_dtype_name(g->dst),
                 nx_ctx_last_error(ctx));
    assert_int_equal(nx_tensor_dtype(out), g->dst);
    assert_true(nx_tensor_is_contiguous(out));
    assert_int_equal(nx_tensor_ndim(out), nx_tensor_ndim(src));
    assert_int_equal(nx_tensor_numel(out), m);
    size_t des = nx_dtype_size(g->dst);
    const unsigned char *o = nx_tensor_data(out);
    for (int j = 0; j < m; j++)
        expect_cast_value(g, pick[j], load_bits(o + (size_t)j * des, des), names[layout]);
    nx_tensor_free(out);
    nx_tensor_free(src);
    nx_tensor_free(tmp);
}

static void test_cast_fixtures(void **state)
{
    fixture *f = *state;
    int64_t values = 0;
    for (int i = 0; i < NFX(fx_casts); i++) {
        for (int layout = 0; layout < 3; layout++)
            cast_layout(f->ctx, &fx_casts[i], layout);
        values += __builtin_popcountll(fx_casts[i].valid);
    }
    printf("%d dtype pairs, %lld values, 3 layouts (NumPy %s)\n", NFX(fx_casts), (long long)values,
           FX_NUMPY_VERSION);
}

/* Every value NumPy leaves undefined (NaN, integer part out of range) is an error naming the
 * value's index, with no output and nothing leaked. */
static void test_cast_invalid_fixtures(void **state)
{
    fixture *f = *state;
    int errors = 0;
    for (int i = 0; i < NFX(fx_casts); i++) {
        const fx_cast *g = &fx_casts[i];
        size_t es = nx_dtype_size(g->src);
        for (int k = 0; k < g->n; k++) {
            if (g->valid >> k & 1)
                continue;
            /* a 2x2 tensor: zeros with the bad value at [1,0] and a second bad one after it */
            unsigned char buf[4 * 8] = {0};
            store_bits(buf + 2 * es, es, g->in[k]);
            store_bits(buf + 3 * es, es, g->in[k]);
            int64_t shape[2] = {2, 2};
            nx_tensor *t = NULL, *out = (nx_tensor *)&errors;
            assert_int_equal(nx_tensor_wrap(f->ctx, buf, g->src, 2, shape, NULL, &t), NX_OK);
            assert_int_equal(nx_tensor_cast(t, g->dst, &out), NX_ERR_INVALID_ARG);
            assert_null(out);
            const char *msg = nx_ctx_last_error(f->ctx);
            if (!contains(msg, "element [1,0]") || !contains(msg, nx_dtype_name(g->dst)))
                fail_msg("message does not name the element and dtype: %s", msg);
            nx_tensor_free(t);
            errors++;
        }
    }
    printf("%d invalid float-to-int values rejected\n", errors);
    assert_true(errors > 50);
}

/* Values chosen by hand: truncation toward zero, wrap-around, bool both ways, NaN to bool. */
static void test_cast_semantics(void **state)
{
    fixture *f = *state;
    double x[8] = {-2.9, -0.5, 0.0, 0.7, 2.9, NAN, -0.0, 1e-300};
    int64_t shape[1] = {8};
    nx_tensor *t = NULL, *o = NULL;
    assert_int_equal(nx_tensor_wrap(f->ctx, x, NX_DTYPE_F64, 1, shape, NULL, &t), NX_OK);
    assert_int_equal(nx_tensor_cast(t, NX_DTYPE_BOOL, &o), NX_OK);
    const uint8_t want_b[8] = {1, 1, 0, 1, 1, 1, 0, 1};
    assert_memory_equal(nx_tensor_data(o), want_b, 8);
    nx_tensor_free(o);
    nx_tensor *head = NULL;
    assert_int_equal(nx_tensor_slice(t, 0, 0, 5, 1, &head), NX_OK);
    assert_int_equal(nx_tensor_cast(head, NX_DTYPE_I8, &o), NX_OK);
    const int8_t want_i[5] = {-2, 0, 0, 0, 2};
    assert_memory_equal(nx_tensor_data(o), want_i, 5);
    nx_tensor_free(o);
    nx_tensor_free(head);
    nx_tensor_free(t);

    int32_t w[4] = {300, -1, 65535, -129};
    int64_t s4[1] = {4};
    assert_int_equal(nx_tensor_wrap(f->ctx, w, NX_DTYPE_I32, 1, s4, NULL, &t), NX_OK);
    assert_int_equal(nx_tensor_cast(t, NX_DTYPE_U8, &o), NX_OK);
    const uint8_t want_u[4] = {44, 255, 255, 127};
    assert_memory_equal(nx_tensor_data(o), want_u, 4);
    nx_tensor_free(o);
    assert_int_equal(nx_tensor_cast(t, NX_DTYPE_I8, &o), NX_OK);
    const int8_t want_s[4] = {44, -1, -1, 127};
    assert_memory_equal(nx_tensor_data(o), want_s, 4);
    nx_tensor_free(o);
    nx_tensor_free(t);

    /* bool bytes other than 0/1 (wrapped memory) still read as true */
    uint8_t b[3] = {0, 1, 7};
    int64_t s3[1] = {3};
    assert_int_equal(nx_tensor_wrap(f->ctx, b, NX_DTYPE_BOOL, 1, s3, NULL, &t), NX_OK);
    assert_int_equal(nx_tensor_cast(t, NX_DTYPE_F32, &o), NX_OK);
    const float want_f[3] = {0.0f, 1.0f, 1.0f};
    assert_memory_equal(nx_tensor_data(o), want_f, sizeof want_f);
    nx_tensor_free(o);
    nx_tensor_free(t);
}

/* Long rows (more than one conversion chunk) through a strided, permuted source. */
static void test_cast_long_rows(void **state)
{
    fixture *f = *state;
    int64_t shape[2] = {700, 3};
    nx_tensor *t = NULL, *tt = NULL, *o = NULL;
    assert_int_equal(nx_tensor_new(f->ctx, NX_DTYPE_F64, 2, shape, &t), NX_OK);
    double *x = nx_tensor_data(t);
    for (int i = 0; i < 2100; i++)
        x[i] = i * 0.25 - 100.0;
    int perm[2] = {1, 0};
    assert_int_equal(nx_tensor_permute(t, perm, &tt), NX_OK);
    nx_dtype ds[3] = {NX_DTYPE_F32, NX_DTYPE_I32, NX_DTYPE_F16};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(nx_tensor_cast(tt, ds[k], &o), NX_OK);
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 700; c++) {
                double v = (c * 3 + r) * 0.25 - 100.0, got;
                const char *p =
                    (const char *)nx_tensor_data(o) + (size_t)(r * 700 + c) * nx_dtype_size(ds[k]);
                if (ds[k] == NX_DTYPE_F32) {
                    float g;
                    memcpy(&g, p, 4);
                    got = g;
                } else if (ds[k] == NX_DTYPE_I32) {
                    int32_t g;
                    memcpy(&g, p, 4);
                    got = g;
                    v = trunc(v);
                } else {
                    uint16_t g;
                    memcpy(&g, p, 2);
                    got = nx_f16_to_f32(g); /* quarter steps below 512 are exact in f16 */
                }
                if (got != v)
                    fail_msg("%s at [%d,%d]: %g, expected %g", nx_dtype_name(ds[k]), r, c, got, v);
            }
        }
        nx_tensor_free(o);
    }
    nx_tensor_free(tt);
    nx_tensor_free(t);
}

/* Copies of every permutation of a (3, 37, 45) tensor, plain and with a reversed axis, so the
 * tiled transpose sees full and partial tiles, a plane loop and negative strides; each element
 * of the copy is compared with the view read through its own strides. */
static void test_copy_permutations(void **state)
{
    fixture *f = *state;
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    static const nx_dtype ds[4] = {NX_DTYPE_U8, NX_DTYPE_BF16, NX_DTYPE_I32, NX_DTYPE_F64};
    int64_t shape[3] = {3, 37, 45};
    for (int di = 0; di < 4; di++) {
        nx_tensor *base = NULL;
        assert_int_equal(nx_tensor_new(f->ctx, ds[di], 3, shape, &base), NX_OK);
        size_t es = nx_dtype_size(ds[di]);
        unsigned char *p = nx_tensor_data(base);
        for (int64_t k = 0; k < 3 * 37 * 45; k++) {
            for (size_t j = 0; j < es; j++)
                p[k * (int64_t)es + (int64_t)j] = (unsigned char)((k * 7 + (int64_t)j) % 251);
        }
        for (int pi = 0; pi < 6; pi++) {
            for (int rev = 0; rev < 2; rev++) {
                nx_tensor *v = NULL, *w = NULL, *c = NULL;
                assert_int_equal(nx_tensor_permute(base, perms[pi], &v), NX_OK);
                if (rev)
                    assert_int_equal(nx_tensor_slice(v, 2, -1, INT64_MIN, -1, &w), NX_OK);
                const nx_tensor *src = rev ? w : v;
                assert_int_equal(nx_tensor_copy(src, &c), NX_OK);
                const unsigned char *o = nx_tensor_data(c);
                int64_t idx[NX_MAX_DIMS] = {0}, i = 0;
                do {
                    if (memcmp(o + i * (int64_t)es, elem_at(src, idx), es) != 0)
                        fail_msg("%s perm %d%d%d rev %d: element %lld differs",
                                 nx_dtype_name(ds[di]), perms[pi][0], perms[pi][1], perms[pi][2],
                                 rev, (long long)i);
                    i++;
                } while (next_index(src, idx));
                assert_int_equal(i, 3 * 37 * 45);
                nx_tensor_free(c);
                nx_tensor_free(w);
                nx_tensor_free(v);
            }
        }
        nx_tensor_free(base);
    }
}

/* ---- geometry edge cases ---- */

static void test_zero_strides_and_empty(void **state)
{
    fixture *f = *state;
    /* a broadcast view: every row is the same memory */
    int32_t row[3] = {7, 8, 9};
    int64_t shape[2] = {4, 3}, strides[2] = {0, 1};
    nx_tensor *b = NULL, *c = NULL, *r = NULL;
    assert_int_equal(nx_tensor_wrap(f->ctx, row, NX_DTYPE_I32, 2, shape, strides, &b), NX_OK);
    assert_false(nx_tensor_is_contiguous(b));
    assert_int_equal(nx_tensor_contiguous(b, &c), NX_OK);
    const int32_t want[12] = {7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8, 9};
    assert_memory_equal(nx_tensor_data(c), want, sizeof want);
    nx_tensor_free(c);
    int64_t flat[1] = {12}, split[3] = {2, 2, 3};
    assert_int_equal(nx_tensor_reshape(b, 1, flat, &r), NX_ERR_SHAPE);
    assert_int_equal(nx_tensor_reshape(b, 3, split, &r), NX_OK); /* splitting the 0-stride axis */
    assert_int_equal(nx_tensor_strides(r)[0], 0);
    assert_int_equal(nx_tensor_strides(r)[1], 0);
    nx_tensor_free(r);
    assert_int_equal(nx_tensor_cast(b, NX_DTYPE_F64, &c), NX_OK);
    for (int i = 0; i < 12; i++)
        assert_true(((double *)nx_tensor_data(c))[i] == want[i]);
    nx_tensor_free(c);
    nx_tensor_free(b);

    /* 0-d tensors */
    nx_tensor *s = NULL, *v = NULL;
    assert_int_equal(nx_tensor_new(f->ctx, NX_DTYPE_F32, 0, NULL, &s), NX_OK);
    *(float *)nx_tensor_data(s) = 2.75f;
    assert_int_equal(nx_tensor_cast(s, NX_DTYPE_I16, &c), NX_OK);
    assert_int_equal(nx_tensor_ndim(c), 0);
    assert_int_equal(*(int16_t *)nx_tensor_data(c), 2);
    nx_tensor_free(c);
    assert_int_equal(nx_tensor_permute(s, NULL, &v), NX_OK);
    nx_tensor_free(v);
    assert_int_equal(nx_tensor_slice(s, 0, 0, 1, 1, &v), NX_ERR_INVALID_ARG);
    int64_t ones[2] = {1, -1};
    assert_int_equal(nx_tensor_reshape(s, 2, ones, &v), NX_OK);
    assert_int_equal(nx_tensor_shape(v)[1], 1);
    nx_tensor_free(v);
    nx_tensor_free(s);

    /* empty tensors: copies and casts of nothing, -1 against zero */
    int64_t e[2] = {0, 4};
    assert_int_equal(nx_tensor_new(f->ctx, NX_DTYPE_F64, 2, e, &s), NX_OK);
    assert_int_equal(nx_tensor_cast(s, NX_DTYPE_I8, &c), NX_OK);
    assert_int_equal(nx_tensor_numel(c), 0);
    assert_null(nx_tensor_data(c));
    nx_tensor_free(c);
    int64_t amb[2] = {-1, 0}, fine[3] = {2, 0, -1};
    assert_int_equal(nx_tensor_reshape(s, 2, amb, &v), NX_ERR_SHAPE);
    assert_true(contains(nx_ctx_last_error(f->ctx), "ambiguous"));
    assert_int_equal(nx_tensor_reshape(s, 3, fine, &v), NX_ERR_SHAPE); /* 2*0*? : also ambiguous */
    nx_tensor_free(s);
}

/* ---- errors ---- */

static void test_errors(void **state)
{
    fixture *f = *state;
    int64_t shape[2] = {2, 3};
    nx_tensor *t = NULL, *tt = NULL, *out = NULL;
    assert_int_equal(nx_tensor_new(f->ctx, NX_DTYPE_F32, 2, shape, &t), NX_OK);
    const char *msg;

    /* slice: bad axis, step 0 */
    assert_int_equal(nx_tensor_slice(t, 2, 0, 1, 1, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(f->ctx), "axis 2"));
    assert_int_equal(nx_tensor_slice(t, -1, 0, 1, 1, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_slice(t, 1, 0, 3, 0, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(f->ctx), "step is 0"));
    assert_null(out);

    /* permute: out of range, repeated, NULL */
    int bad1[2] = {0, 2}, bad2[2] = {1, 1}, bad3[2] = {-1, 0};
    assert_int_equal(nx_tensor_permute(t, bad1, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(f->ctx), "perm[1] is 2"));
    assert_int_equal(nx_tensor_permute(t, bad2, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_permute(t, bad3, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_permute(t, NULL, &out), NX_ERR_INVALID_ARG);
    assert_null(out);

    /* reshape: mismatch names both shapes; -1 twice; negative extent; bad ndim; NULL shape */
    int64_t s42[2] = {4, 2}, twice[2] = {-1, -1}, neg[2] = {-2, -3}, big[2] = {INT64_MAX, 2};
    assert_int_equal(nx_tensor_reshape(t, 2, s42, &out), NX_ERR_SHAPE);
    msg = nx_ctx_last_error(f->ctx);
    if (!contains(msg, "[2,3]") || !contains(msg, "[4,2]"))
        fail_msg("reshape message must name both shapes: %s", msg);
    int64_t s5m[2] = {5, -1};
    assert_int_equal(nx_tensor_reshape(t, 2, s5m, &out), NX_ERR_SHAPE);
    assert_true(contains(nx_ctx_last_error(f->ctx), "[5,-1]"));
    assert_int_equal(nx_tensor_reshape(t, 2, twice, &out), NX_ERR_SHAPE);
    assert_int_equal(nx_tensor_reshape(t, 2, neg, &out), NX_ERR_SHAPE);
    assert_int_equal(nx_tensor_reshape(t, 2, big, &out), NX_ERR_SHAPE);
    assert_int_equal(nx_tensor_reshape(t, NX_MAX_DIMS + 1, s42, &out), NX_ERR_SHAPE);
    assert_int_equal(nx_tensor_reshape(t, -1, s42, &out), NX_ERR_SHAPE);
    assert_int_equal(nx_tensor_reshape(t, 2, NULL, &out), NX_ERR_INVALID_ARG);
    assert_null(out);

    /* reshape of a transposed view needs a copy */
    int perm[2] = {1, 0};
    int64_t flat[1] = {6};
    assert_int_equal(nx_tensor_permute(t, perm, &tt), NX_OK);
    assert_int_equal(nx_tensor_reshape(tt, 1, flat, &out), NX_ERR_SHAPE);
    msg = nx_ctx_last_error(f->ctx);
    if (!contains(msg, "[3,2]") || !contains(msg, "[6]") || !contains(msg, "without a copy"))
        fail_msg("view message: %s", msg);
    assert_null(out);

    /* casts: not a dtype */
    assert_int_equal(nx_tensor_cast(t, NX_DTYPE_COUNT, &out), NX_ERR_DTYPE);
    assert_int_equal(nx_tensor_cast(t, (nx_dtype)-1, &out), NX_ERR_DTYPE);

    /* NULL tensor or out */
    assert_int_equal(nx_tensor_copy(NULL, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(NULL), "nx_tensor_copy"));
    assert_int_equal(nx_tensor_copy(t, NULL), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_contiguous(NULL, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_cast(NULL, NX_DTYPE_F32, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_reshape(NULL, 1, flat, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_permute(NULL, perm, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_slice(NULL, 0, 0, 1, 1, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_slice(t, 0, 0, 1, 1, NULL), NX_ERR_INVALID_ARG);

    /* float to int: out of range and NaN name the first offending value and its index */
    double x[6] = {1.0, 2.0, 3.0, 70000.5, NAN, -5.0};
    int64_t s23[2] = {2, 3};
    nx_tensor *xt = NULL;
    assert_int_equal(nx_tensor_wrap(f->ctx, x, NX_DTYPE_F64, 2, s23, NULL, &xt), NX_OK);
    out = xt;
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_I16, &out), NX_ERR_INVALID_ARG);
    assert_null(out);
    msg = nx_ctx_last_error(f->ctx);
    if (!contains(msg, "[1,0]") || !contains(msg, "70000.5") || !contains(msg, "i16") ||
        !contains(msg, "-32768, 32767"))
        fail_msg("cast message: %s", msg);
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_U8, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(f->ctx), "[1,0]"));
    /* the index is the view's own: [1,0] of x is [0,1] of its transpose, and comes first there */
    nx_tensor *xp = NULL;
    assert_int_equal(nx_tensor_permute(xt, perm, &xp), NX_OK);
    assert_int_equal(nx_tensor_cast(xp, NX_DTYPE_I16, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(f->ctx), "element [0,1] is 70000.5"));
    nx_tensor_free(xp);
    x[3] = 4.0;
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_I64, &out), NX_ERR_INVALID_ARG);
    msg = nx_ctx_last_error(f->ctx);
    if (!contains(msg, "[1,1]") || !contains(msg, "nan") || !contains(msg, "9223372036854775807"))
        fail_msg("cast message: %s", msg);
    x[4] = 0x1p63;
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_I64, &out), NX_ERR_INVALID_ARG);
    x[4] = -0x1p63;
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_I64, &out), NX_OK);
    assert_true(((int64_t *)nx_tensor_data(out))[4] == INT64_MIN);
    nx_tensor_free(out);
    x[4] = -1.0;
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_U8, &out), NX_ERR_INVALID_ARG);
    x[4] = -0.99;
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_U8, &out), NX_ERR_INVALID_ARG); /* -5 at [1,2] */
    assert_true(contains(nx_ctx_last_error(f->ctx), "[1,2]"));
    x[5] = 255.99;
    assert_int_equal(nx_tensor_cast(xt, NX_DTYPE_U8, &out), NX_OK);
    assert_int_equal(((uint8_t *)nx_tensor_data(out))[5], 255);
    assert_int_equal(((uint8_t *)nx_tensor_data(out))[4], 0);
    nx_tensor_free(out);
    nx_tensor_free(xt);
    nx_tensor_free(tt);
    nx_tensor_free(t);
}

/* ---- device tensors ---- */

static void test_device_rejected(void **state)
{
    fixture *f = *state;
    float host[6] = {0};
    int64_t shape[2] = {2, 3};
    nx_tensor *t = NULL, *out = NULL, *v = NULL;
    assert_int_equal(nx_tensor_wrap(f->ctx, host, NX_DTYPE_F32, 2, shape, NULL, &t), NX_OK);
    t->storage->device = NX_DEVICE_CUDA; /* stands in for device memory: never dereferenced */
    assert_int_equal(nx_tensor_copy(t, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(f->ctx), "device memory"));
    assert_int_equal(nx_tensor_contiguous(t, &out), NX_ERR_INVALID_ARG);
    assert_int_equal(nx_tensor_cast(t, NX_DTYPE_F64, &out), NX_ERR_INVALID_ARG);
    assert_true(contains(nx_ctx_last_error(f->ctx), "nx_tensor_cast"));
    assert_null(out);
    /* views only compute geometry, so they work on device tensors and stay on the device */
    int perm[2] = {1, 0};
    assert_int_equal(nx_tensor_permute(t, perm, &v), NX_OK);
    assert_int_equal(nx_tensor_device(v), NX_DEVICE_CUDA);
    assert_int_equal(nx_tensor_copy(v, &out), NX_ERR_INVALID_ARG);
    nx_tensor_free(v);
    t->storage->device = NX_DEVICE_HOST;
    nx_tensor_free(t);
}

/* Owned storage with a release hook (device memory) is released through the hook once, when its
 * last view goes, never through the host allocator. */
static int releases;
static void release_hook(nx_storage *s)
{
    releases++;
    nx_rt_free(s->ctx, s->data, s->bytes);
}

static void test_release_hook(void **state)
{
    fixture *f = *state;
    int64_t shape[2] = {4, 5};
    nx_tensor *t = NULL, *a = NULL, *b = NULL;
    assert_int_equal(nx_tensor_new(f->ctx, NX_DTYPE_F32, 2, shape, &t), NX_OK);
    t->storage->release = release_hook;
    releases = 0;
    assert_int_equal(nx_tensor_slice(t, 0, 1, 3, 1, &a), NX_OK);
    assert_int_equal(nx_tensor_slice(a, 1, 4, 0, -2, &b), NX_OK);
    assert_int_equal(b->storage->refs, 3);
    nx_tensor_free(t);
    nx_tensor_free(b);
    assert_int_equal(releases, 0);
    nx_tensor_free(a);
    assert_int_equal(releases, 1);
    nx_tensor_free(NULL);
}

/* Views made and freed concurrently keep the storage's count exact (the default allocator is
 * thread-safe; the counting test allocator is not, so it is not used here). */
static void *view_churn(void *arg)
{
    nx_tensor *t = arg;
    int perm[2] = {1, 0};
    for (int i = 0; i < 1000000; i++) {
        nx_tensor *v = NULL;
        if (nx_tensor_permute(t, perm, &v) != NX_OK)
            return arg;
        nx_tensor_free(v);
    }
    return NULL;
}

/* nx_tensor_wrap_device: a host address is nx_tensor_wrap; a device value out of range and NULL
 * data with elements are refused; a CUDA address is taken as given (no copy, nothing read). */
static void test_wrap_device(void **state)
{
    nx_ctx *ctx = ((fixture *)*state)->ctx;
    float buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_wrap_device(ctx, buf, NX_DEVICE_HOST, NX_DTYPE_F32, 2, shape,
                                           strides, &t),
                     NX_OK);
    assert_ptr_equal(nx_tensor_data(t), buf);
    assert_int_equal(nx_tensor_device(t), NX_DEVICE_HOST);
    assert_int_equal(nx_tensor_strides(t)[1], 2);
    nx_tensor_free(t);
    assert_int_equal(nx_tensor_wrap_device(ctx, buf, (nx_device)7, NX_DTYPE_F32, 2, shape, NULL,
                                           &t),
                     NX_ERR_INVALID_ARG);
    assert_null(t);
    assert_non_null(strstr(nx_ctx_last_error(ctx), "device is 7"));
    assert_int_equal(nx_tensor_wrap_device(ctx, NULL, NX_DEVICE_CUDA, NX_DTYPE_F32, 2, shape,
                                           NULL, &t),
                     NX_ERR_INVALID_ARG);
    void *fake = (void *)(uintptr_t)0x1000; /* never dereferenced by wrapping */
    assert_int_equal(nx_tensor_wrap_device(ctx, fake, NX_DEVICE_CUDA, NX_DTYPE_F32, 2, shape,
                                           NULL, &t),
                     NX_OK);
    assert_int_equal(nx_tensor_device(t), NX_DEVICE_CUDA);
    assert_ptr_equal(nx_tensor_data(t), fake);
    nx_tensor_free(t);
}

static void test_views_across_threads(void **state)
{
    (void)state;
    nx_ctx_opts opts = {.ignore_env = true};
    nx_ctx *ctx = NULL;
    assert_int_equal(nx_ctx_new(&opts, &ctx), NX_OK);
    int64_t shape[2] = {2, 3};
    nx_tensor *t = NULL;
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F32, 2, shape, &t), NX_OK);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, view_churn, t), 0);
    for (int i = 0; i < 4; i++) {
        void *ret = t;
        assert_int_equal(pthread_join(th[i], &ret), 0);
        assert_null(ret);
    }
    assert_int_equal(t->storage->refs, 1);
    nx_tensor_free(t);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_view_chains, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cast_fixtures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cast_invalid_fixtures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cast_semantics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cast_long_rows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_permutations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_strides_and_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_device_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrap_device, setup, teardown),
        cmocka_unit_test(test_views_across_threads),
    };
    return cmocka_run_group_tests_name("tensor-ops", tests, NULL, NULL);
}
