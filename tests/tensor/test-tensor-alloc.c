/* Allocation-failure sweeps over tensor creation, copies, casts and views: the n-th allocation
 * fails for every n the operation reaches; each such run must return NX_ERR_NOMEM, leak nothing,
 * leave *out NULL, and leave the source tensor (geometry, data, reference count) exactly as it
 * was. Runs that complete check their result. */
#include <string.h>

#include "testutil.h"
#include "tensor.h"

typedef enum op_kind {
    OP_COPY,
    OP_CONTIGUOUS_COPY, /* source not contiguous: a copy */
    OP_CONTIGUOUS_VIEW, /* source contiguous: one more reference */
    OP_CAST,
    OP_RESHAPE,
    OP_PERMUTE,
    OP_SLICE,
} op_kind;

typedef struct sweep_case {
    const char *name;
    op_kind op;
    int layout; /* 0: the (3,4) base itself; 1: its transpose; 2: rows reversed, columns 3..0:-2 */
} sweep_case;

/* What the caller owns, to compare after the operation. */
typedef struct snapshot {
    nx_tensor view;
    nx_storage storage;
    double data[12];
} snapshot;

static void take(snapshot *s, const nx_tensor *src)
{
    memcpy(&s->view, src, sizeof s->view);
    memcpy(&s->storage, src->storage, sizeof s->storage);
    memcpy(s->data, src->storage->data, sizeof s->data);
}

static void expect_unchanged(const snapshot *s, const nx_tensor *src, int64_t extra_refs)
{
    assert_memory_equal(&s->view, src, sizeof s->view);
    assert_ptr_equal(s->storage.data, src->storage->data);
    assert_int_equal(s->storage.bytes, src->storage->bytes);
    assert_int_equal(s->storage.refs + extra_refs, src->storage->refs);
    assert_memory_equal(s->data, src->storage->data, sizeof s->data);
}

static nx_status make_source(nx_ctx *ctx, int layout, nx_tensor **base, nx_tensor **src)
{
    int64_t shape[2] = {3, 4};
    *base = NULL;
    *src = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, shape, base);
    if (st != NX_OK)
        return st;
    double *x = nx_tensor_data(*base);
    for (int i = 0; i < 12; i++)
        x[i] = 1.5 * i - 4.0;
    if (layout == 0)
        return NX_OK;
    nx_tensor *a = NULL;
    int perm[2] = {1, 0};
    if (layout == 1)
        st = nx_tensor_permute(*base, perm, src);
    else if ((st = nx_tensor_slice(*base, 0, -1, INT64_MIN, -1, &a)) == NX_OK)
        st = nx_tensor_slice(a, 1, 3, INT64_MIN, -2, src);
    nx_tensor_free(a);
    if (st != NX_OK) {
        nx_tensor_free(*base);
        *base = NULL;
    }
    return st;
}

/* Element i (C order) of layout's source, computed from the layout's definition. */
static double expected(int layout, int i)
{
    if (layout == 0)
        return 1.5 * i - 4.0;
    if (layout == 1) /* transpose (4,3): [r][c] = base[c][r] */
        return 1.5 * ((i % 3) * 4 + i / 3) - 4.0;
    /* (3,2): [r][c] = base[2-r][3-2c] */
    return 1.5 * ((2 - i / 2) * 4 + 3 - 2 * (i % 2)) - 4.0;
}

static nx_status apply(const sweep_case *c, const nx_tensor *src, nx_tensor **out)
{
    int64_t flat[1] = {-1};
    int perm[2] = {1, 0};
    switch (c->op) {
    case OP_COPY:
        return nx_tensor_copy(src, out);
    case OP_CONTIGUOUS_COPY:
    case OP_CONTIGUOUS_VIEW:
        return nx_tensor_contiguous(src, out);
    case OP_CAST:
        return nx_tensor_cast(src, NX_DTYPE_F16, out);
    case OP_RESHAPE:
        return nx_tensor_reshape(src, 1, flat, out);
    case OP_PERMUTE:
        return nx_tensor_permute(src, perm, out);
    default:
        return nx_tensor_slice(src, 0, 1, INT64_MAX, 1, out);
    }
}

static void check_result(const sweep_case *c, const nx_tensor *src, const nx_tensor *out)
{
    int64_t n = nx_tensor_numel(src);
    if (c->op == OP_PERMUTE || c->op == OP_SLICE || c->op == OP_RESHAPE ||
        c->op == OP_CONTIGUOUS_VIEW)
        assert_ptr_equal(out->storage, src->storage);
    else
        assert_ptr_not_equal(out->storage, src->storage);
    if (c->op == OP_PERMUTE) {
        assert_int_equal(nx_tensor_shape(out)[0], nx_tensor_shape(src)[1]);
        return;
    }
    if (c->op == OP_SLICE) {
        assert_int_equal(nx_tensor_shape(out)[0], nx_tensor_shape(src)[0] - 1);
        return;
    }
    assert_int_equal(nx_tensor_numel(out), n);
    for (int64_t i = 0; i < n; i++) {
        double want = expected(c->layout, (int)i), got;
        if (c->op == OP_CAST)
            got = nx_f16_to_f32(((const uint16_t *)nx_tensor_data(out))[i]);
        else
            got = ((const double *)nx_tensor_data(out))[i];
        assert_true(got == want); /* halves below 16 are exact in f16 too */
    }
}

static nx_status body(nx_ctx *ctx, void *user)
{
    const sweep_case *c = user;
    nx_tensor *base = NULL, *src = NULL;
    nx_status st = make_source(ctx, c->layout, &base, &src);
    if (st != NX_OK)
        return st;
    const nx_tensor *s = src ? src : base;
    snapshot before;
    take(&before, s);
    nx_tensor *out = (nx_tensor *)&before; /* must come back NULL on failure */
    st = apply(c, s, &out);
    if (st != NX_OK) {
        assert_null(out);
        expect_unchanged(&before, s, 0);
    } else {
        bool view = out->storage == s->storage;
        expect_unchanged(&before, s, view ? 1 : 0);
        check_result(c, s, out);
        nx_tensor_free(out);
        expect_unchanged(&before, s, 0);
    }
    nx_tensor_free(src);
    nx_tensor_free(base);
    return st;
}

static void test_sweeps(void **state)
{
    (void)state;
    static const sweep_case cases[] = {
        {"copy (contiguous)", OP_COPY, 0},
        {"copy (transpose)", OP_COPY, 1},
        {"copy (reversed, strided)", OP_COPY, 2},
        {"contiguous (transpose)", OP_CONTIGUOUS_COPY, 1},
        {"contiguous (reversed, strided)", OP_CONTIGUOUS_COPY, 2},
        {"contiguous (already)", OP_CONTIGUOUS_VIEW, 0},
        {"cast (contiguous)", OP_CAST, 0},
        {"cast (transpose)", OP_CAST, 1},
        {"cast (reversed, strided)", OP_CAST, 2},
        {"reshape", OP_RESHAPE, 0},
        {"permute", OP_PERMUTE, 0},
        {"permute (view of a view)", OP_PERMUTE, 2},
        {"slice", OP_SLICE, 0},
        {"slice (view of a view)", OP_SLICE, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t n = nx_test_alloc_sweep(body, (void *)&cases[i], 100);
        printf("%-32s %lld allocations, each failed once\n", cases[i].name, (long long)n);
        assert_true(n >= 2);
    }
}

/* nx_tensor_new and nx_tensor_wrap on their own, including the 0-d and empty cases. */
static nx_status new_body(nx_ctx *ctx, void *user)
{
    int ndim = *(const int *)user;
    int64_t shape[3] = {2, 0, 5};
    if (ndim == 2)
        shape[1] = 3;
    nx_tensor *t = (nx_tensor *)user;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_I16, ndim, shape, &t);
    if (st != NX_OK) {
        assert_null(t);
        return st;
    }
    assert_int_equal(nx_tensor_ndim(t), ndim);
    nx_tensor_free(t);
    return NX_OK;
}

static nx_status wrap_body(nx_ctx *ctx, void *user)
{
    (void)user;
    static int32_t buf[6] = {1, 2, 3, 4, 5, 6};
    int64_t shape[2] = {2, 3}, strides[2] = {-3, 1};
    nx_tensor *t = (nx_tensor *)buf;
    nx_status st = nx_tensor_wrap(ctx, buf + 3, NX_DTYPE_I32, 2, shape, strides, &t);
    if (st != NX_OK) {
        assert_null(t);
        return st;
    }
    assert_int_equal(((int32_t *)nx_tensor_data(t))[0], 4);
    nx_tensor_free(t);
    static const int32_t orig[6] = {1, 2, 3, 4, 5, 6};
    assert_memory_equal(buf, orig, sizeof orig); /* borrowed memory is never written or freed */
    return NX_OK;
}

static void test_new_wrap(void **state)
{
    (void)state;
    static const int ndims[3] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        int64_t n = nx_test_alloc_sweep(new_body, (void *)&ndims[i], 100);
        printf("new (%d-d): %lld allocations\n", ndims[i], (long long)n);
        assert_true(n >= 3); /* handle, storage, data */
    }
    int64_t n = nx_test_alloc_sweep(wrap_body, NULL, 100);
    printf("wrap: %lld allocations\n", (long long)n);
    assert_true(n >= 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweeps),
        cmocka_unit_test(test_new_wrap),
    };
    return cmocka_run_group_tests_name("tensor-alloc", tests, NULL, NULL);
}
