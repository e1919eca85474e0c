/* The graph IR without running it: the primitive table's self-check, every builder's error paths
 * (messages say what was wrong and what was expected), none propagation, invalid handles,
 * hash-consing, the verifier and the printer. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "ir/ir.h"
#include "program/program.h"

typedef struct fixture {
    nx_test_alloc ta;
    nx_ctx *ctx;
    nx_graph *g;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    f->ctx = nx_test_ctx(&f->ta);
    assert_int_equal(nx_graph_new(f->ctx, &f->g), NX_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    nx_graph_free(f->g);
    nx_ctx_free(f->ctx);
    assert_int_equal(f->ta.live, 0);
    assert_int_equal(f->ta.size_errors, 0);
    free(f);
    return 0;
}

/* A new empty graph in the fixture (errors are first-wins, so each error case needs its own). */
static nx_graph *fresh(void **state)
{
    fixture *f = *state;
    nx_graph_free(f->g);
    assert_int_equal(nx_graph_new(f->ctx, &f->g), NX_OK);
    return f->g;
}

static nx_node in(nx_graph *g, nx_dtype dt, int ndim, const int64_t *shape)
{
    nx_node x = nx_input(g, "x", dt, ndim, shape);
    assert_int_not_equal(x, NX_NONE);
    return x;
}

static const int64_t S23[2] = {2, 3};

/* ---- the table -----------------------------------------------------------------------------*/

static void test_selfcheck(void **state)
{
    (void)state;
    assert_int_equal(nx_ir_selfcheck(NULL), NX_OK);
    for (int i = 0; i < NX_PRIM_COUNT; i++) {
        assert_int_equal(nx_ir_prims[i].op, i);
        for (int j = 0; j < i; j++)
            assert_string_not_equal(nx_ir_prims[i].name, nx_ir_prims[j].name);
    }
    static const nx_prim nondiff[] = {
        NX_PRIM_EQ,      NX_PRIM_NE,    NX_PRIM_LT,       NX_PRIM_LE,         NX_PRIM_GT,
        NX_PRIM_GE,      NX_PRIM_ISNAN, NX_PRIM_NOT,      NX_PRIM_AND,        NX_PRIM_OR,
        NX_PRIM_FLOOR,   NX_PRIM_CEIL,  NX_PRIM_ROUND,    NX_PRIM_SIGN,       NX_PRIM_IOTA,
        NX_PRIM_ARGSORT, NX_PRIM_INPUT, NX_PRIM_CONSTANT, NX_PRIM_PLACEHOLDER};
    for (size_t i = 0; i < sizeof nondiff / sizeof *nondiff; i++)
        assert_int_equal(nx_ir_prims[nondiff[i]].adj, NX_ADJ_NONE);
    static const nx_prim diff[] = {NX_PRIM_ADD,    NX_PRIM_EXP,    NX_PRIM_REDUCE,
                                   NX_PRIM_GATHER, NX_PRIM_WINDOW, NX_PRIM_SCAN_LINEAR,
                                   NX_PRIM_SORT,   NX_PRIM_SELECT, NX_PRIM_PAD,
                                   NX_PRIM_SCAN_IIR};
    for (size_t i = 0; i < sizeof diff / sizeof *diff; i++) {
        assert_int_equal(nx_ir_prims[diff[i]].adj, NX_ADJ_SLOT);
        assert_non_null(nx_ir_prims[diff[i]].vjp); /* the adjoint rule of the row */
    }
    assert_int_equal(nx_ir_prims[NX_PRIM_CAST].adj, NX_ADJ_FLOAT);
    assert_string_equal(nx_ir_prim_name(NX_PRIM_REDUCE_CUSTOM), "reduce_custom");
    assert_string_equal(nx_ir_prim_name(-1), "?");
}

static void test_differentiable(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    int axis = 1;
    nx_node am = nx_reduce(g, x, 1, &axis, NX_MONOID_ARGMAX, false);
    nx_node sm = nx_reduce(g, x, 1, &axis, NX_MONOID_SUM, false);
    nx_node to_int = nx_cast(g, x, NX_DTYPE_I32);
    nx_node from_int = nx_cast(g, to_int, NX_DTYPE_F32);
    nx_node to_f64 = nx_cast(g, x, NX_DTYPE_F64);
    nx_node cmp = nx_lt(g, x, x);
    assert_int_equal(nx_graph_status(g), NX_OK);
    assert_false(nx_ir_differentiable(&g->s, am));
    assert_true(nx_ir_differentiable(&g->s, sm));
    assert_false(nx_ir_differentiable(&g->s, to_int));
    assert_false(nx_ir_differentiable(&g->s, from_int));
    assert_true(nx_ir_differentiable(&g->s, to_f64));
    assert_false(nx_ir_differentiable(&g->s, cmp));
}

/* ---- elementwise errors --------------------------------------------------------------------*/

static void test_binary_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node a = in(g, NX_DTYPE_F32, 2, S23);
    nx_node b = in(g, NX_DTYPE_F32, 2, (int64_t[]){4, 3});
    assert_int_equal(nx_add(g, a, b), NX_NONE);
    assert_int_equal(nx_graph_status(g), NX_ERR_SHAPE);
    assert_string_equal(nx_graph_error(g),
                        "nx_add: shapes [2,3] and [4,3] disagree at dim 0 (2 vs 4) and neither "
                        "is 1");
    assert_string_equal(nx_ctx_last_error(nx_graph_ctx(g)), nx_graph_error(g));

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    b = in(g, NX_DTYPE_F64, 2, S23);
    assert_int_equal(nx_mul(g, a, b), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_mul: dtypes f32 and f64 differ");

    g = fresh(state);
    a = in(g, NX_DTYPE_I32, 2, S23);
    assert_int_equal(nx_exp(g, a), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_exp: x is i32; expected f32 or f64");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_and(g, a, a), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_and: operands are f32; expected bool");

    g = fresh(state);
    a = in(g, NX_DTYPE_BOOL, 2, S23);
    assert_int_equal(nx_add(g, a, a), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_add: operands are bool");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    b = in(g, NX_DTYPE_F32, 1, (int64_t[]){3});
    assert_int_equal(nx_select(g, a, b, b), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_select: cond is f32; expected bool");

    g = fresh(state);
    nx_node c = in(g, NX_DTYPE_BOOL, 1, (int64_t[]){5});
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_select(g, c, a, a), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "(cond vs broadcast(a, b))");
}

static void test_broadcast_rules(void **state)
{
    nx_graph *g = fresh(state);
    nx_node a = in(g, NX_DTYPE_F64, 3, (int64_t[]){4, 1, 3});
    nx_node b = in(g, NX_DTYPE_F64, 2, (int64_t[]){5, 1});
    nx_node s = nx_scalar(g, NX_DTYPE_F64, 2.0);
    nx_node y = nx_add(g, a, b);
    int64_t shape[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, y, shape));
    assert_int_equal(nx_node_ndim(g, y), 3);
    assert_int_equal(shape[0], 4);
    assert_int_equal(shape[1], 5);
    assert_int_equal(shape[2], 3);
    nx_node z = nx_mul(g, s, y);
    assert_int_equal(nx_node_ndim(g, z), 3);
    nx_node cmp = nx_gt(g, a, b);
    assert_int_equal(nx_node_dtype(g, cmp), NX_DTYPE_BOOL);
    assert_int_equal(nx_node_dtype(g, nx_isnan(g, a)), NX_DTYPE_BOOL);
    /* each operand fits, their broadcast does not */
    nx_node wide = in(g, NX_DTYPE_F64, 2, (int64_t[]){INT64_C(1) << 31, 1});
    nx_node tall = in(g, NX_DTYPE_F64, 2, (int64_t[]){1, INT64_C(1) << 31});
    assert_int_equal(nx_graph_status(g), NX_OK);
    assert_int_equal(nx_add(g, wide, tall), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_add: the result f64[2147483648,2147483648] overflows");
    g = fresh(state);
    b = in(g, NX_DTYPE_F64, 2, (int64_t[]){5, 1});
    nx_node zero = in(g, NX_DTYPE_F64, 2, (int64_t[]){0, 3});
    assert_int_equal(nx_add(g, zero, b), NX_NONE); /* 0 is not 1: it does not stretch */
    expect_graph_error(g, NX_ERR_SHAPE, "disagree at dim 0 (0 vs 5)");
}

static void test_half_dtypes(void **state)
{
    nx_graph *g = fresh(state);
    nx_node h = in(g, NX_DTYPE_F16, 2, S23);
    nx_node f = nx_cast(g, h, NX_DTYPE_F32);
    assert_int_not_equal(f, NX_NONE);
    assert_int_not_equal(nx_cast(g, f, NX_DTYPE_BF16), NX_NONE);
    assert_int_not_equal(nx_scalar(g, NX_DTYPE_BF16, 1.5), NX_NONE);
    assert_int_equal(nx_graph_status(g), NX_OK);
    assert_int_equal(nx_add(g, h, h), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_add: operand 1 is f16, a storage type");

    g = fresh(state);
    h = in(g, NX_DTYPE_BF16, 2, S23);
    assert_int_equal(nx_reshape(g, h, 1, (int64_t[]){6}), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_reshape: operand 1 is bf16");
}

static void test_none_propagation(void **state)
{
    nx_graph *g = fresh(state);
    nx_node a = in(g, NX_DTYPE_F32, 2, S23);
    nx_node b = in(g, NX_DTYPE_F32, 2, (int64_t[]){3, 2});
    nx_node bad = nx_add(g, a, b);
    assert_int_equal(bad, NX_NONE);
    char first[600];
    snprintf(first, sizeof first, "%s", nx_graph_error(g));
    uint32_t count = nx_graph_num_nodes(g);
    /* every later builder given none returns none and keeps the first message */
    int axis = 0;
    assert_int_equal(nx_exp(g, bad), NX_NONE);
    assert_int_equal(nx_reduce(g, bad, 1, &axis, NX_MONOID_SUM, false), NX_NONE);
    assert_int_equal(nx_matmul(g, bad, a), NX_NONE);
    assert_int_equal(nx_softmax(g, bad, 0), NX_NONE);
    assert_int_equal(nx_concat(g, 2, (nx_node[]){a, bad}, 0), NX_NONE);
    nx_node v = 1, i = 1;
    nx_topk(g, bad, 1, 0, true, &v, &i);
    assert_int_equal(v, NX_NONE);
    assert_int_equal(i, NX_NONE);
    assert_int_equal(nx_graph_num_nodes(g), count);
    assert_string_equal(nx_graph_error(g), first);
    /* a later, independent error does not replace the first */
    assert_int_equal(nx_exp(g, nx_cast(g, a, NX_DTYPE_I32)), NX_NONE);
    assert_string_equal(nx_graph_error(g), first);
    assert_int_equal(nx_graph_status(g), NX_ERR_SHAPE);

    /* none given without an earlier failure is itself an error */
    g = fresh(state);
    assert_int_equal(nx_exp(g, NX_NONE), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_exp: an operand is NX_NONE");

    /* a NULL graph is not a crash */
    assert_int_equal(nx_add(NULL, 1, 2), NX_NONE);
    assert_int_equal(nx_graph_status(NULL), NX_ERR_INVALID_ARG);
}

static void test_invalid_handles(void **state)
{
    nx_graph *g = fresh(state);
    nx_node a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_add(g, a, 12345), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_add: operand 2 is handle 12345, but the graph "
                       "has only 1 nodes");
    static const nx_node garbage[] = {2, 0xFFFFFFFFu, 0x80000000u};
    for (size_t k = 0; k < sizeof garbage / sizeof *garbage; k++) {
        g = fresh(state);
        a = in(g, NX_DTYPE_F32, 2, S23);
        int axis = 0;
        assert_int_equal(nx_reduce(g, garbage[k], 1, &axis, NX_MONOID_SUM, false), NX_NONE);
        expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce: operand 1 is handle");
    }
    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_node_dtype(g, 99), NX_DTYPE_COUNT);
    assert_int_equal(nx_node_dtype(g, NX_NONE), NX_DTYPE_COUNT);
    assert_int_equal(nx_node_ndim(g, 99), -1);
    int64_t shape[NX_MAX_DIMS];
    assert_false(nx_node_shape(g, 99, shape));
    assert_int_equal(nx_node_dtype(NULL, a), NX_DTYPE_COUNT);
    assert_int_equal(nx_graph_status(g), NX_OK); /* introspection records nothing */
    nx_node v = NX_NONE;
    nx_topk(g, 77, 1, 0, true, &v, NULL);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_topk: operand 1 is handle 77");
}

/* ---- leaves --------------------------------------------------------------------------------*/

static void test_leaf_errors(void **state)
{
    nx_graph *g = fresh(state);
    int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    assert_int_equal(nx_input(g, "x", NX_DTYPE_F32, 9, big), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_input: ndim is 9; expected 0 to 8");

    g = fresh(state);
    assert_int_equal(nx_parameter(g, "w", NX_DTYPE_F32, 2, (int64_t[]){2, -1}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_parameter: extent 1 is -1; expected >= 0");

    g = fresh(state);
    assert_int_equal(nx_input(g, "x", (nx_dtype)42, 1, (int64_t[]){2}), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_input: dtype dtype(42) is not a dtype");

    g = fresh(state);
    assert_int_equal(nx_input(g, "x", NX_DTYPE_F32, 2, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_input: shape is NULL with ndim 2");

    g = fresh(state);
    assert_int_equal(nx_input(g, "x", NX_DTYPE_F64, 3, (int64_t[]){INT64_MAX / 2, 4, 4}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "overflows");

    g = fresh(state);
    assert_int_equal(nx_constant(g, NX_DTYPE_F32, 1, (int64_t[]){3}, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_constant: data is NULL for 12 bytes");

    g = fresh(state);
    assert_int_equal(nx_iota(g, NX_DTYPE_I32, 2, S23, 2), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_iota: axis 2 is out of range for 2 dims");

    g = fresh(state);
    assert_int_equal(nx_iota(g, NX_DTYPE_I32, 0, NULL, 0), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_iota: axis 0 is out of range for 0 dims");

    g = fresh(state);
    assert_int_equal(nx_placeholder(g, NX_DTYPE_F16), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_placeholder");

    g = fresh(state);
    assert_int_equal(nx_scalar(g, (nx_dtype)-1, 1.0), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_scalar: dtype -1 is not a dtype");
}

/* ---- movement ------------------------------------------------------------------------------*/

static void test_reshape_permute_broadcast_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    nx_node r = nx_reshape(g, x, 3, (int64_t[]){3, -1, 1});
    int64_t shape[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, r, shape));
    assert_int_equal(shape[1], 2);
    assert_int_equal(nx_reshape(g, x, 2, (int64_t[]){4, 2}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_reshape: x [2,3] has 6 elements but shape [4,2]");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reshape(g, x, 2, (int64_t[]){-1, -1}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_reshape: extent 1 is -1; expected >= 0 (or one -1)");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reshape(g, x, 2, (int64_t[]){4, -1}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "cannot infer extent 1");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_permute(g, x, (int[]){0, 0}), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_permute: perm[1] is 0; expected a permutation of 0..1");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_permute(g, x, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_permute: perm is NULL");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_not_equal(nx_broadcast(g, x, 3, (int64_t[]){5, 2, 3}), NX_NONE);
    assert_int_equal(nx_broadcast(g, x, 2, (int64_t[]){4, 3}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_broadcast: x [2,3] cannot broadcast to [4,3]: its dim 0 is 2; "
                       "expected 1 or 4");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_broadcast(g, x, 1, (int64_t[]){3}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "has more dims than the target");
}

static void test_slice_pad_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_slice(g, x, (int64_t[]){0, 1}, (int64_t[]){2, 4}, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_slice: axis 1: start 1, stop 4, step 1 over extent 3; expected 0 <= "
                       "start <= stop <= extent and step >= 1");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_slice(g, x, (int64_t[]){0, 0}, (int64_t[]){2, 3}, (int64_t[]){1, 0}),
                     NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "step 0");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    nx_node s = nx_slice(g, x, (int64_t[]){0, 0}, (int64_t[]){2, 3}, (int64_t[]){1, 2});
    int64_t shape[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, s, shape));
    assert_int_equal(shape[1], 2); /* columns 0 and 2 */
    s = nx_slice(g, x, (int64_t[]){1, 1}, (int64_t[]){1, 3}, (int64_t[]){INT64_MAX, INT64_MAX});
    assert_true(nx_node_shape(g, s, shape));
    assert_int_equal(shape[0], 0);
    assert_int_equal(shape[1], 1);

    assert_int_equal(nx_pad(g, x, (int64_t[]){0, -1}, (int64_t[]){0, 0}, NX_PAD_WRAP, 0), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_pad: axis 1: lo -1, hi 0; expected both >= 0");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_pad(g, x, (int64_t[]){1, 1}, (int64_t[]){1, 1}, (nx_pad_mode)9, 0),
                     NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_pad: mode 9 is not a pad mode");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, (int64_t[]){0, 3});
    assert_int_not_equal(nx_pad(g, x, (int64_t[]){1, 0}, (int64_t[]){0, 0}, NX_PAD_CONSTANT, 2),
                         NX_NONE);
    assert_int_equal(nx_pad(g, x, (int64_t[]){1, 0}, (int64_t[]){0, 0}, NX_PAD_REFLECT, 0),
                     NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_pad: axis 0 is empty; mode reflect needs at least");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_pad(g, x, NULL, NULL, NX_PAD_WRAP, 0), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_pad: lo and hi must be non-NULL");
}

static void test_window_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, (int64_t[]){7, 5});
    nx_node w = nx_window(g, x, (int64_t[]){3, 1}, (int64_t[]){2, 1}, (int64_t[]){2, 1});
    int64_t shape[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, w, shape));
    assert_int_equal(nx_node_ndim(g, w), 4);
    assert_int_equal(shape[0], 2); /* (7 - 2*2 - 1) / 2 + 1 */
    assert_int_equal(shape[1], 5);
    assert_int_equal(shape[2], 3);
    assert_int_equal(shape[3], 1);

    assert_int_equal(nx_window(g, x, (int64_t[]){0, 1}, NULL, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_window: axis 0: window 0, stride 1, dilation 1; expected all >= 1");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, (int64_t[]){7, 5});
    assert_int_equal(nx_window(g, x, (int64_t[]){-2, 1}, NULL, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "window -2");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, (int64_t[]){7, 5});
    assert_int_equal(nx_window(g, x, (int64_t[]){3, 1}, (int64_t[]){0, 1}, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "stride 0");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, (int64_t[]){7, 5});
    assert_int_not_equal(nx_window(g, x, (int64_t[]){4, 1}, NULL, (int64_t[]){2, 1}), NX_NONE);
    assert_int_equal(nx_window(g, x, (int64_t[]){5, 1}, NULL, (int64_t[]){2, 1}), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_window: axis 0 has extent 7, smaller than the dilated window (window "
                       "5, dilation 2)");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 5, (int64_t[]){2, 2, 2, 2, 2});
    assert_int_equal(nx_window(g, x, (int64_t[]){1, 1, 1, 1, 1}, NULL, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "windows over 5 axes make a 10-d view");
}

static void test_concat_reverse_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node a = in(g, NX_DTYPE_F32, 2, S23);
    nx_node b = in(g, NX_DTYPE_F32, 2, (int64_t[]){2, 4});
    nx_node c = nx_concat(g, 2, (nx_node[]){a, b}, -1);
    int64_t shape[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, c, shape));
    assert_int_equal(shape[1], 7);
    assert_int_equal(nx_concat(g, 1, &a, 0), a);
    assert_int_equal(nx_concat(g, 2, (nx_node[]){a, b}, 0), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_concat: input 1 has shape [2,4] but input 0 has [2,3]; expected equal "
                       "extents except on axis 0");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    b = in(g, NX_DTYPE_F64, 2, S23);
    assert_int_equal(nx_concat(g, 2, (nx_node[]){a, b}, 0), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_concat: input 1 is f64 but input 0 is f32");

    g = fresh(state);
    assert_int_equal(nx_concat(g, 0, NULL, 0), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_concat: 0 inputs (NULL); expected at least one");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reverse(g, a, 2, (int[]){1, -1}), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reverse: axis 1 is given twice");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reverse(g, a, 1, (int[]){5}), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_reverse: axis 5 is out of range for 2 dims; expected -2 to 1");
}

/* ---- indexing, reductions, scans, sorting --------------------------------------------------*/

static void test_index_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    nx_node fi = in(g, NX_DTYPE_F32, 1, (int64_t[]){4});
    assert_int_equal(nx_gather(g, x, fi, 1), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_gather: idx is f32; expected i32 or i64");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    nx_node idx = in(g, NX_DTYPE_I64, 2, (int64_t[]){4, 5});
    nx_node y = nx_gather(g, x, idx, 1);
    int64_t shape[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, y, shape));
    assert_int_equal(nx_node_ndim(g, y), 3);
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 4);
    assert_int_equal(shape[2], 5);
    assert_int_equal(nx_gather(g, x, idx, 2), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_gather: axis 2 is out of range for 2 dims");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    idx = in(g, NX_DTYPE_I32, 1, (int64_t[]){4});
    nx_node upd = in(g, NX_DTYPE_F32, 2, (int64_t[]){2, 3});
    assert_int_equal(nx_scatter(g, x, idx, upd, 1, NX_MONOID_SUM), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_scatter: updates have shape [2,3]; expected [2,4] (the shape "
                       "nx_gather(x, idx, axis) has)");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    idx = in(g, NX_DTYPE_I32, 1, (int64_t[]){4});
    upd = in(g, NX_DTYPE_F32, 2, (int64_t[]){2, 4});
    assert_int_not_equal(nx_scatter(g, x, idx, upd, 1, NX_MONOID_MAX), NX_NONE);
    assert_int_equal(nx_scatter(g, x, idx, upd, 1, NX_MONOID_PROD), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_scatter: monoid prod; expected SUM, MAX or MIN");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, (int64_t[]){2, 0});
    idx = in(g, NX_DTYPE_I32, 1, (int64_t[]){1});
    assert_int_equal(nx_gather(g, x, idx, 1), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "axis 1 of x is empty");
}

static void test_reduce_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    int ax2[2] = {0, 1}, neg = -1, one = 1, bad = 2;
    assert_int_equal(nx_reduce(g, x, 1, &neg, NX_MONOID_SUM, false),
                     nx_reduce(g, x, 1, &one, NX_MONOID_SUM, false));
    assert_int_equal(nx_node_ndim(g, nx_reduce(g, x, 2, ax2, NX_MONOID_MAX, false)), 0);
    assert_int_equal(nx_node_ndim(g, nx_reduce(g, x, 2, ax2, NX_MONOID_MAX, true)), 2);
    assert_int_equal(nx_node_dtype(g, nx_reduce(g, x, 1, &one, NX_MONOID_ARGMIN, false)),
                     NX_DTYPE_I64);
    assert_int_equal(nx_graph_status(g), NX_OK);
    assert_int_equal(nx_reduce(g, x, 1, &bad, NX_MONOID_SUM, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_reduce: axis 2 is out of range for 2 dims; expected -2 to 1");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reduce(g, x, 2, (int[]){1, 1}, NX_MONOID_SUM, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce: axis 1 is given twice");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reduce(g, x, 2, ax2, NX_MONOID_ARGMAX, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce: argmax takes exactly one axis; got 2");

    g = fresh(state);
    x = in(g, NX_DTYPE_I32, 2, S23);
    assert_int_equal(nx_reduce(g, x, 1, &one, NX_MONOID_LOGSUMEXP, false), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_reduce: x is i32; monoid logsumexp expects f32 or f64");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reduce(g, x, 1, &one, (nx_monoid)99, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce: monoid 99 is not a built-in monoid");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, (int64_t[]){2, 0});
    assert_int_not_equal(nx_reduce(g, x, 1, &one, NX_MONOID_MAX, false), NX_NONE);
    assert_int_equal(nx_reduce(g, x, 1, &one, NX_MONOID_ARGMAX, false), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_reduce: argmax over the empty axis 1 has no answer");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_reduce(g, x, 3, (int[]){0, 1, 0}, NX_MONOID_SUM, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce: 3 axes for 2 dims; expected 0 to 2");
}

static void test_scan_sort_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_scan(g, x, 0, NX_MONOID_ARGMAX, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_scan: monoid argmax cannot scan");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_scan(g, x, 3, NX_MONOID_SUM, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_scan: axis 3 is out of range for 2 dims");

    g = fresh(state);
    x = in(g, NX_DTYPE_I32, 2, S23);
    assert_int_equal(nx_scan_linear(g, x, x, 0, false), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_scan_linear: a and b are i32; expected f32 or f64");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    nx_node v = NX_NONE, i = NX_NONE;
    nx_topk(g, x, 2, 1, true, &v, &i);
    assert_int_equal(nx_node_dtype(g, i), NX_DTYPE_I64);
    int64_t shape[NX_MAX_DIMS];
    assert_true(nx_node_shape(g, v, shape));
    assert_int_equal(shape[1], 2);
    nx_topk(g, x, 4, 1, true, &v, &i);
    assert_int_equal(v, NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_topk: k is 4 but axis 1 has 3 elements; expected 0 <= k <= 3");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    nx_topk(g, x, -1, 1, true, &v, NULL);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_topk: k is -1; expected k >= 0");

    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_sort(g, x, -3, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_sort: axis -3 is out of range for 2 dims");
}

static void test_reduce_custom_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F64, 2, S23);
    nx_node px = nx_placeholder(g, NX_DTYPE_F64);
    nx_node a = nx_placeholder(g, NX_DTYPE_F64);
    nx_node b = nx_placeholder(g, NX_DTYPE_F64);
    nx_monoid_def m = {.ncarry = 1,
                       .x = px,
                       .a = {a},
                       .b = {b},
                       .lift = {nx_mul(g, px, px)},
                       .combine = {nx_add(g, a, b)},
                       .identity = {nx_scalar(g, NX_DTYPE_F64, 0)},
                       .finalize = nx_sqrt(g, a)};
    int one = 1;
    nx_node ok = nx_reduce_custom(g, x, 1, &one, &m, false);
    assert_int_not_equal(ok, NX_NONE);
    assert_int_equal(nx_node_ndim(g, ok), 1);
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &m, false), ok); /* hash-consed */

    nx_monoid_def bad = m;
    bad.lift[0] = nx_mul(g, a, px); /* lift may use x only */
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &bad, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_reduce_custom: monoid.lift uses placeholder %3, which is not one of "
                       "its own placeholders");

    g = fresh(state);
    x = in(g, NX_DTYPE_F64, 2, S23);
    px = nx_placeholder(g, NX_DTYPE_F64);
    a = nx_placeholder(g, NX_DTYPE_F64);
    b = nx_placeholder(g, NX_DTYPE_F64);
    m = (nx_monoid_def){.ncarry = 1,
                        .x = px,
                        .a = {a},
                        .b = {b},
                        .combine = {nx_add(g, a, x)},
                        .identity = {nx_scalar(g, NX_DTYPE_F64, 0)}};
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &m, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "monoid.combine uses %5 (add, 2-d)");

    g = fresh(state);
    x = in(g, NX_DTYPE_F64, 2, S23);
    px = nx_placeholder(g, NX_DTYPE_F64);
    a = nx_placeholder(g, NX_DTYPE_F64);
    b = nx_placeholder(g, NX_DTYPE_F64);
    nx_node y = in(g, NX_DTYPE_F64, 0, NULL);
    m = (nx_monoid_def){.ncarry = 1,
                        .x = px,
                        .a = {a},
                        .b = {b},
                        .combine = {nx_add(g, a, y)},
                        .identity = {nx_scalar(g, NX_DTYPE_F64, 0)}};
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &m, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_reduce_custom: monoid.combine uses %5 (input, 0-d); expected 0-d "
                       "constants, placeholders, elementwise ops, select and cast only");

    g = fresh(state);
    x = in(g, NX_DTYPE_F64, 2, S23);
    px = nx_placeholder(g, NX_DTYPE_F64);
    a = nx_placeholder(g, NX_DTYPE_F32);
    b = nx_placeholder(g, NX_DTYPE_F32);
    m = (nx_monoid_def){.ncarry = 1,
                        .x = px,
                        .a = {a},
                        .b = {b},
                        .combine = {nx_add(g, a, b)},
                        .identity = {nx_scalar(g, NX_DTYPE_F32, 0)}};
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &m, false), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_reduce_custom: monoid.lift[0] is f64 but a[0] is f32");

    g = fresh(state);
    x = in(g, NX_DTYPE_F64, 2, S23);
    px = nx_placeholder(g, NX_DTYPE_F64);
    a = nx_placeholder(g, NX_DTYPE_F64);
    m = (nx_monoid_def){.ncarry = 1,
                        .x = px,
                        .a = {a},
                        .b = {a},
                        .combine = {nx_add(g, a, a)},
                        .identity = {nx_scalar(g, NX_DTYPE_F64, 0)}};
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &m, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "is used twice among x, a[] and b[]");

    g = fresh(state);
    x = in(g, NX_DTYPE_F64, 2, S23);
    px = nx_placeholder(g, NX_DTYPE_F64);
    a = nx_placeholder(g, NX_DTYPE_F64);
    b = nx_placeholder(g, NX_DTYPE_F64);
    m = (nx_monoid_def){.ncarry = 2, .x = px, .a = {a, b}, .b = {b, a}};
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &m, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce_custom: monoid.lift[0] is NX_NONE");

    g = fresh(state);
    x = in(g, NX_DTYPE_F64, 2, S23);
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, NULL, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce_custom: monoid is NULL");

    g = fresh(state);
    x = in(g, NX_DTYPE_F64, 2, S23);
    px = nx_placeholder(g, NX_DTYPE_F64);
    a = in(g, NX_DTYPE_F64, 0, NULL); /* not a placeholder */
    b = nx_placeholder(g, NX_DTYPE_F64);
    m = (nx_monoid_def){.ncarry = 1,
                        .x = px,
                        .a = {a},
                        .b = {b},
                        .combine = {nx_add(g, a, b)},
                        .identity = {nx_scalar(g, NX_DTYPE_F64, 0)}};
    assert_int_equal(nx_reduce_custom(g, x, 1, &one, &m, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "monoid.a[i] is %3, a input; expected a placeholder");
}

static nx_status ext_shape(void *user, int n_in, const nx_dtype *dtypes, const int *ndims,
                           const int64_t *const *shapes, nx_dtype *out_dtype, int *out_ndim,
                           int64_t out_shape[NX_MAX_DIMS])
{
    (void)user;
    (void)shapes;
    if (n_in != 1 || ndims[0] != 2)
        return NX_ERR_SHAPE;
    *out_dtype = dtypes[0];
    *out_ndim = 1;
    out_shape[0] = shapes[0][0];
    return NX_OK;
}

static nx_status ext_ref(void *user, nx_ctx *ctx, int n_in, const nx_tensor *const *ins,
                         nx_tensor *out)
{
    (void)user;
    (void)ctx;
    (void)n_in;
    (void)ins;
    (void)out;
    return NX_OK;
}

static void test_extern_and_compose_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_extern(g, NULL, 1, &x), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_extern: def (NULL) lacks a name");

    static const nx_extern_def def = {"rowsum", ext_shape, ext_ref, NULL, NULL};
    g = fresh(state);
    x = in(g, NX_DTYPE_F32, 2, S23);
    nx_node e = nx_extern(g, &def, 1, &x);
    assert_int_equal(nx_node_ndim(g, e), 1);
    assert_int_equal(nx_extern(g, &def, 1, &x), e);
    assert_false(nx_ir_differentiable(&g->s, e)); /* no vjp */
    nx_node v = in(g, NX_DTYPE_F32, 1, (int64_t[]){3});
    assert_int_equal(nx_extern(g, &def, 1, &v), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_extern: 'rowsum': its shape rule rejected the inputs (NX_ERR_SHAPE)");

    g = fresh(state);
    nx_node a = in(g, NX_DTYPE_F32, 2, (int64_t[]){3, 4});
    nx_node b = in(g, NX_DTYPE_F32, 2, (int64_t[]){5, 2});
    assert_int_equal(nx_matmul(g, a, b), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE,
                       "nx_matmul: a is [3,4] but b is [5,2]; the inner dims differ (4 vs 5)");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, (int64_t[]){3, 4});
    assert_int_equal(nx_einsum(g, "ij,jk>ik", a, a, NX_MONOID_SUM, nx_mul), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_einsum: spec \"ij,jk>ik\" is not valid");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, (int64_t[]){3, 4});
    assert_int_equal(nx_einsum(g, "ij,jk->ik", a, a, NX_MONOID_SUM, nx_mul), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_einsum: letter 'j' is 4 in a but 3 in b");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, (int64_t[]){3, 4});
    assert_int_equal(nx_einsum(g, "ij,ji->iz", a, a, NX_MONOID_SUM, nx_mul), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "is not valid");

    g = fresh(state);
    a = in(g, NX_DTYPE_I32, 2, (int64_t[]){3, 4});
    assert_int_equal(nx_mean(g, a, 0, NULL, false), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_mean: x is i32; expected f32 or f64");

    g = fresh(state);
    a = in(g, NX_DTYPE_F64, 2, (int64_t[]){3, 4});
    assert_int_equal(nx_var(g, a, 1, (int[]){0}, -1, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_var: ddof is -1; expected >= 0");
}

/* The remaining builders' refusals, one fresh graph each. */
static void test_more_builder_errors(void **state)
{
    nx_graph *g = fresh(state);
    nx_node a = in(g, NX_DTYPE_F32, 2, S23);
    nx_node b = in(g, NX_DTYPE_F64, 2, S23);
    assert_int_equal(nx_scan_linear(g, a, b, 0, false), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_scan_linear: dtypes f32 and f64 of a and b differ");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    b = in(g, NX_DTYPE_F32, 1, (int64_t[]){2});
    assert_int_equal(nx_scan_linear(g, a, b, 1, true), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_scan_linear: shapes [2,3] and [2] disagree at dim 1");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_scan_linear(g, a, a, 2, true), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_scan_linear: axis 2 is out of range for 2 dims");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_cast(g, a, (nx_dtype)31), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_cast: target dtype(31) is not a dtype");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_cast(g, a, NX_DTYPE_F32), a); /* no node for a no-op */
    assert_int_equal(nx_where(g, a, a, a), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_select: cond is f32; expected bool");

    g = fresh(state);
    a = in(g, NX_DTYPE_I64, 2, S23);
    assert_int_equal(nx_softmax(g, a, 1), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_softmax: x is i64; expected f32 or f64");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_softmax(g, a, 2), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_reduce: axis 2 is out of range for 2 dims");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_mean(g, a, 1, (int[]){-3}, false), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_mean: axis -3 is out of range for 2 dims");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_einsum(g, "ij,ij->i", a, a, NX_MONOID_ARGMAX, nx_mul), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG,
                       "nx_einsum: monoid argmax cannot be a semiring's (+)");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_einsum(g, "ij,ij->i", a, a, NX_MONOID_SUM, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "(or times is NULL)");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 1, (int64_t[]){3});
    assert_int_equal(nx_matmul(g, a, a), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_matmul: a is [3] and b is [3]; expected 2 to 7 dims");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    static const nx_extern_def def = {"rowsum", ext_shape, ext_ref, NULL, NULL};
    assert_int_equal(nx_extern(g, &def, -1, &a), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_extern: 'rowsum' given -1 inputs");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_broadcast(g, a, 9, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_SHAPE, "nx_broadcast: ndim is 9 with shape NULL");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_slice(g, a, NULL, NULL, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_slice: start and stop must be non-NULL");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_window(g, a, NULL, NULL, NULL), NX_NONE);
    expect_graph_error(g, NX_ERR_INVALID_ARG, "nx_window: window is NULL; expected 2 extents");

    g = fresh(state);
    a = in(g, NX_DTYPE_F32, 2, S23);
    assert_int_equal(nx_scatter(g, a, a, a, 0, NX_MONOID_SUM), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_scatter: idx is f32; expected i32 or i64");

    g = fresh(state);
    a = in(g, NX_DTYPE_BOOL, 2, S23);
    nx_node i = in(g, NX_DTYPE_I32, 1, (int64_t[]){1});
    assert_int_equal(nx_scatter(g, a, i, a, 0, NX_MONOID_MAX), NX_NONE);
    expect_graph_error(g, NX_ERR_DTYPE, "nx_scatter: x is bool; expected f32, f64 or an integer");
}

/* Composed builders call builders that may grow (and move) the arena: nothing may hold a node
 * pointer across them. Fill the arena to every level around a growth (under ASan a stale read
 * is reported). */
static void test_compose_across_arena_growth(void **state)
{
    for (int fill = 0; fill < 70; fill++) {
        nx_graph *g = fresh(state);
        for (int i = 0; i < fill; i++)
            nx_input(g, "pad", NX_DTYPE_F32, 0, NULL);
        nx_node a = in(g, NX_DTYPE_F32, 3, (int64_t[]){2, 4, 3});
        nx_node b = in(g, NX_DTYPE_F32, 2, (int64_t[]){3, 5});
        nx_node m = nx_matmul(g, a, b);
        nx_node e =
            nx_einsum(g, "ij,jk->ik", b, nx_permute(g, b, (int[]){1, 0}), NX_MONOID_MAX, nx_add);
        nx_node v = nx_var(g, a, 2, (int[]){0, 2}, 0, true);
        nx_node sm = nx_softmax(g, b, 0);
        int64_t shape[NX_MAX_DIMS];
        assert_true(nx_node_shape(g, m, shape));
        assert_int_equal(nx_node_ndim(g, m), 3);
        assert_int_equal(shape[0], 2);
        assert_int_equal(shape[1], 4);
        assert_int_equal(shape[2], 5);
        assert_true(nx_node_shape(g, e, shape));
        assert_int_equal(shape[0], 3);
        assert_int_equal(shape[1], 3);
        assert_int_equal(nx_node_ndim(g, v), 3);
        assert_int_equal(nx_node_ndim(g, sm), 2);
        assert_int_equal(nx_graph_status(g), NX_OK);
        assert_int_equal(nx_graph_verify(g), NX_OK);
    }
}

/* Constant payloads are read in place as their dtype (interpreters, externs): every one starts
 * 16-byte aligned whatever the blobs before it (a name, a u8 constant) left the offset at. */
static void test_constant_alignment(void **state)
{
    nx_graph *g = fresh(state);
    int64_t one = 1, three = 3;
    uint8_t b = 7;
    double d[3] = {1.5, -2.0, 4.25};
    nx_node prev = nx_input(g, "odd-name", NX_DTYPE_U8, 1, &one);
    for (int i = 0; i < 20; i++) {
        b = (uint8_t)(b + 1);
        nx_node c8 = nx_constant(g, NX_DTYPE_U8, 1, &one, &b);
        d[0] += 1.0;
        nx_node c64 = nx_constant(g, NX_DTYPE_F64, 1, &three, d);
        assert_true(c8 && c64 && prev);
        const nx_ir_node *n = nx_ir_node_at(&g->s, c64);
        const uint8_t *p = nx_ir_node_blob(&g->s, n);
        assert_int_equal((uintptr_t)p % 16u, 0);
        double got[3];
        memcpy(got, p, sizeof got);
        assert_true(got[0] == d[0] && got[1] == -2.0 && got[2] == 4.25);
    }
    assert_int_equal(nx_graph_verify(g), NX_OK);
}

/* ---- hash-consing --------------------------------------------------------------------------*/

static void test_hash_consing(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F64, 2, S23);
    nx_node x2 = nx_input(g, "x", NX_DTYPE_F64, 2, S23);
    assert_int_not_equal(x, x2); /* inputs are never merged */
    assert_int_not_equal(nx_placeholder(g, NX_DTYPE_F64), nx_placeholder(g, NX_DTYPE_F64));

    nx_node e1 = nx_add(g, nx_exp(g, x), nx_sin(g, x));
    uint32_t n = nx_graph_num_nodes(g);
    nx_node e2 = nx_add(g, nx_exp(g, x), nx_sin(g, x));
    assert_int_equal(e1, e2);
    assert_int_equal(nx_graph_num_nodes(g), n);
    assert_int_not_equal(nx_add(g, nx_sin(g, x), nx_exp(g, x)), e1); /* operand order matters */

    double d1[3] = {1, 2, 3}, d2[3] = {1, 2, 3}, d3[3] = {1, 2, 4};
    int64_t s3[1] = {3};
    nx_node c1 = nx_constant(g, NX_DTYPE_F64, 1, s3, d1);
    assert_int_equal(nx_constant(g, NX_DTYPE_F64, 1, s3, d2), c1);
    assert_int_not_equal(nx_constant(g, NX_DTYPE_F64, 1, s3, d3), c1);
    assert_int_not_equal(nx_constant(g, NX_DTYPE_I64, 1, s3, d1), c1); /* same bytes, dtype */
    assert_int_not_equal(nx_constant(g, NX_DTYPE_F64, 2, (int64_t[]){1, 3}, d1), c1);
    double one = 1.0;
    assert_int_equal(nx_scalar(g, NX_DTYPE_F64, 1.0), nx_constant(g, NX_DTYPE_F64, 0, NULL, &one));

    int ax = 1;
    nx_node rs = nx_reduce(g, x, 1, &ax, NX_MONOID_SUM, false);
    assert_int_not_equal(nx_reduce(g, x, 1, &ax, NX_MONOID_MAX, false), rs);
    assert_int_not_equal(nx_reduce(g, x, 1, &ax, NX_MONOID_SUM, true), rs);
    assert_int_equal(nx_reduce(g, x, 1, &ax, NX_MONOID_SUM, false), rs);
    int64_t lo[2] = {1, 1};
    nx_node p1 = nx_pad(g, x, lo, lo, NX_PAD_CONSTANT, 1.0);
    assert_int_not_equal(nx_pad(g, x, lo, lo, NX_PAD_CONSTANT, 2.0), p1);
    assert_int_equal(nx_pad(g, x, lo, lo, NX_PAD_CONSTANT, 1.0), p1);
    assert_int_equal(nx_pad(g, x, lo, lo, NX_PAD_WRAP, 1.0),
                     nx_pad(g, x, lo, lo, NX_PAD_WRAP, 7.0));
    assert_int_equal(nx_graph_status(g), NX_OK);
}

/* ---- verifier and printer ------------------------------------------------------------------*/

static void test_verifier(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = in(g, NX_DTYPE_F32, 2, S23);
    nx_node y = nx_exp(g, x);
    int ax = 1;
    nx_node r = nx_reduce(g, nx_mul(g, y, x), 1, &ax, NX_MONOID_SUM, false);
    assert_int_not_equal(r, NX_NONE);
    assert_int_equal(nx_graph_verify(g), NX_OK);

    /* corrupt a shape: the rule re-derives [2,3] for exp */
    g->s.nodes[y].shape[1] = 4;
    assert_int_equal(nx_graph_verify(g), NX_ERR_INTERNAL);
    const char *msg = nx_ctx_last_error(nx_graph_ctx(g));
    if (!strstr(msg, "nx_graph_verify: %2 (exp): the node says f32[2,4] but its rule gives "
                     "f32[2,3]"))
        fail_msg("verifier message: %s", msg);
    g->s.nodes[y].shape[1] = 3;
    assert_int_equal(nx_graph_verify(g), NX_OK);

    /* a forward reference breaks topological order */
    g->s.operands[g->s.nodes[y].ops] = r;
    assert_int_equal(nx_graph_verify(g), NX_ERR_INTERNAL);
    msg = nx_ctx_last_error(nx_graph_ctx(g));
    if (!strstr(msg, "%2 (exp): operand 1 is %4; expected an earlier node"))
        fail_msg("verifier message: %s", msg);
    g->s.operands[g->s.nodes[y].ops] = x;

    /* a corrupt attribute is caught by the rule */
    int64_t *attrs = g->s.attrs + g->s.nodes[r].attrs;
    attrs[0] = 42;
    assert_int_equal(nx_graph_verify(g), NX_ERR_INVALID_ARG);
    attrs[0] = NX_MONOID_SUM;
    g->s.nodes[r].op = 999;
    assert_int_equal(nx_graph_verify(g), NX_ERR_INTERNAL);
    g->s.nodes[r].op = NX_PRIM_REDUCE;
    assert_int_equal(nx_graph_verify(g), NX_OK);
    assert_int_equal(nx_graph_verify(NULL), NX_ERR_INVALID_ARG);
}

static char *print_to_string(const nx_graph *g, nx_node root)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(nx_graph_print(g, root, f), NX_OK);
    long len = ftell(f);
    rewind(f);
    char *buf = calloc(1, (size_t)len + 1);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    return buf;
}

static void test_printer(void **state)
{
    nx_graph *g = fresh(state);
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 2, S23);
    nx_node w = nx_parameter(g, "w", NX_DTYPE_F32, 1, (int64_t[]){3});
    nx_node unused = nx_neg(g, w);
    nx_node y = nx_add(g, x, w);
    int ax = 1;
    nx_node r = nx_reduce(g, y, 1, &ax, NX_MONOID_SUM, false);
    float c[5] = {0.5f, 1, 2, 3, 4};
    nx_node k = nx_constant(g, NX_DTYPE_F32, 1, (int64_t[]){5}, c);
    nx_node s = nx_slice(g, k, (int64_t[]){0}, (int64_t[]){2}, NULL);
    nx_node out = nx_mul(g, r, s);
    nx_node p = nx_pad(g, out, (int64_t[]){1}, (int64_t[]){0}, NX_PAD_CONSTANT, -1.5);
    assert_int_not_equal(p, NX_NONE);
    (void)unused;
    char *text = print_to_string(g, p);
    assert_string_equal(text, "%1 = input[name=\"x\", index=0] : f32[2,3]\n"
                              "%2 = parameter[name=\"w\", index=1] : f32[3]\n"
                              "%4 = add %1, %2 : f32[2,3]\n"
                              "%5 = reduce[axes=(1), monoid=sum, keepdims=0] %4 : f32[2]\n"
                              "%6 = constant[0.5, 1, 2, ... 5 values] : f32[5]\n"
                              "%7 = slice[start=(0), stop=(2), step=(1)] %6 : f32[2]\n"
                              "%8 = mul %5, %7 : f32[2]\n"
                              "%9 = pad[lo=(1), hi=(0), mode=constant, cval=-1.5] %8 : f32[3]\n");
    free(text);
    text = print_to_string(g, NX_NONE); /* the whole graph includes %3 */
    assert_non_null(strstr(text, "%3 = neg %2 : f32[3]\n"));
    free(text);
    nx_node sc = nx_scalar(g, NX_DTYPE_I32, 7);
    nx_node io = nx_iota(g, NX_DTYPE_I64, 2, S23, 1);
    nx_node cs = nx_scan(g, io, 1, NX_MONOID_MAX, true);
    nx_node perm = nx_permute(
        g, nx_window(g, nx_cast(g, io, NX_DTYPE_F64), (int64_t[]){2, 2}, NULL, (int64_t[]){1, 2}),
        (int[]){1, 0, 2, 3});
    text = print_to_string(g, sc);
    assert_string_equal(text, "%10 = constant[7] : i32[]\n");
    free(text);
    text = print_to_string(g, cs);
    assert_string_equal(text, "%11 = iota[axis=1] : i64[2,3]\n"
                              "%12 = scan[axis=1, monoid=max, reverse=1] %11 : i64[2,3]\n");
    free(text);
    text = print_to_string(g, perm);
    assert_non_null(strstr(text, "window[window=(2,2), stride=(1,1), dilation=(1,2)] %13 : "
                                 "f64[1,1,2,2]\n"));
    assert_non_null(strstr(text, "permute[perm=(1,0,2,3)] %14 : f64[1,1,2,2]\n"));
    free(text);
    nx_node odd = nx_input(g, "a\"b\\c\nd", NX_DTYPE_U8, 0, NULL);
    text = print_to_string(g, odd);
    assert_string_equal(text, "%16 = input[name=\"a\\\"b\\\\c\\x0ad\", index=2] : u8[]\n");
    free(text);
    FILE *f = tmpfile();
    assert_int_equal(nx_graph_print(g, 999, f), NX_ERR_INVALID_ARG);
    fclose(f);
}

/* The pass pipeline refuses an output that is NX_NONE (a builder that failed) or out of range,
 * rather than planning a slot -1 for the runner to read. */
static void test_pipeline_bad_outputs(void **state)
{
    nx_graph *g = ((fixture *)*state)->g;
    int64_t n = 3;
    nx_node x = nx_input(g, "x", NX_DTYPE_F32, 1, &n);
    nx_node y = nx_exp(g, x);
    nx_kplan *plan = NULL;
    nx_node bad[2] = {y, NX_NONE};
    assert_int_equal(nx_pass_pipeline(nx_graph_ctx(g), &g->s, 2, bad, &plan), NX_ERR_INVALID_ARG);
    assert_null(plan);
    assert_non_null(strstr(nx_ctx_last_error(nx_graph_ctx(g)), "output 1 is NX_NONE"));
    bad[1] = (nx_node)(g->s.n + 5);
    assert_int_equal(nx_pass_pipeline(nx_graph_ctx(g), &g->s, 2, bad, &plan), NX_ERR_INVALID_ARG);
    assert_non_null(strstr(nx_ctx_last_error(nx_graph_ctx(g)), "out of range"));
    assert_int_equal(nx_pass_pipeline(nx_graph_ctx(g), &g->s, 1, bad, &plan), NX_OK);
    nx_kplan_free(plan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_selfcheck, setup, teardown),
        cmocka_unit_test_setup_teardown(test_differentiable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_half_dtypes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_none_propagation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_handles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leaf_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reshape_permute_broadcast_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_slice_pad_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_window_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concat_reverse_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_index_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scan_sort_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce_custom_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extern_and_compose_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_more_builder_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_compose_across_arena_growth, setup, teardown),
        cmocka_unit_test_setup_teardown(test_constant_alignment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hash_consing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verifier, setup, teardown),
        cmocka_unit_test_setup_teardown(test_printer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipeline_bad_outputs, setup, teardown),
    };
    return cmocka_run_group_tests_name("ir-graph", tests, NULL, NULL);
}
