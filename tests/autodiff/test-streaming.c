/* The backward pass of semiring contractions streams, and simplification keeps gradient graphs
 * small.
 *
 * What "no node holds an M*K*N value" means here (checked on the graph after nx_graph_vjp and
 * nx_pass_simplify, over the nodes the gradient outputs reach): every node with at least M*K*N
 * elements is (a) an elementwise op, select, cast, iota, constant or a movement op (reshape,
 * permute, broadcast, slice, pad, reverse) — something a fusion pass inlines into its consumer —
 * (b) not an output, and (c) read only by reductions or by nodes that satisfy (a)-(c) themselves.
 * Such a node is part of a reduction's producer expression, which the fusion pass evaluates inside
 * the reduction's loop; nothing else may be that large. A control graph that outputs the product
 * itself, and one that sorts it, must fail the check, so it is not vacuous. */
#include <stdlib.h>

#include "checker.h"
#include "passes/fuse.h"
#include "program/program.h"
#include "passes/simplify.h"

#define M 512
#define K 512
#define N 512

static bool fusable(int op)
{
    return nx_ir_prim_elementwise(op) || op == NX_PRIM_IOTA ||
           op == NX_PRIM_CONSTANT || op == NX_PRIM_RESHAPE || op == NX_PRIM_PERMUTE ||
           op == NX_PRIM_BROADCAST || op == NX_PRIM_SLICE || op == NX_PRIM_PAD ||
           op == NX_PRIM_REVERSE;
}

/* Number of nodes of at least `big` elements that break (a)-(c); *nbig receives how many nodes of
 * that size the outputs reach at all. */
static int count_violations(nx_graph *g, int nout, const nx_node *outs, int64_t big, int *nbig)
{
    uint32_t top = nx_graph_num_nodes(g);
    uint8_t *live = calloc(top + 1, 1), *user_bad = calloc(top + 1, 1), *ok = calloc(top + 1, 1);
    for (int i = 0; i < nout; i++)
        live[outs[i]] = 1, user_bad[outs[i]] = 1;
    int bad = 0;
    *nbig = 0;
    for (uint32_t id = top; id >= 1; id--) {
        if (!live[id])
            continue;
        const nx_ir_node *n = nx_ir_node_at(&g->s, id);
        bool is_big = nx_ir_numel(n->ndim, n->shape) >= big;
        if (is_big) {
            ok[id] = fusable(n->op) && !user_bad[id];
            bad += !ok[id];
            *nbig += 1;
        }
        bool feeds_ok = n->op == NX_PRIM_REDUCE || n->op == NX_PRIM_REDUCE_CUSTOM ||
                        (is_big && ok[id]);
        const nx_node *ops = nx_ir_node_ops(&g->s, n);
        for (int k = 0; k < nx_ir_num_valops(n); k++) {
            live[ops[k]] = 1;
            user_bad[ops[k]] |= !feeds_ok;
        }
    }
    free(live), free(user_bad), free(ok);
    return bad;
}

/* Nodes of at least big elements that the fusion pass materialises; the pipeline must lower. */
static int count_materialised(nx_ctx *ctx, nx_graph *g, int nout, const nx_node *outs, int64_t big)
{
    uint32_t top = nx_graph_num_nodes(g);
    uint8_t *role = calloc(top + 1, 1);
    assert_int_equal(nx_pass_fuse(ctx, &g->s, nout, outs, role), NX_OK);
    int bad = 0, roots = 0;
    for (uint32_t id = 1; id <= top; id++) {
        const nx_ir_node *n = nx_ir_node_at(&g->s, id);
        bool kept = role[id] == NX_FUSE_ROOT || role[id] == NX_FUSE_LEAF;
        roots += role[id] == NX_FUSE_ROOT;
        bad += kept && nx_ir_numel(n->ndim, n->shape) >= big;
    }
    free(role);
    nx_kplan *plan = NULL;
    nx_status st = nx_pass_pipeline(ctx, &g->s, nout, outs, &plan);
    if (st != NX_OK)
        fail_msg("pipeline: %s", nx_ctx_last_error(ctx));
    nx_kplan_free(plan);
    print_message("  after fusion: %d kernels, %d materialised values of M*K*N size\n", roots, bad);
    return bad;
}

static void contraction_backward(nx_monoid plus)
{
    nx_ctx *ctx = NULL;
    nx_graph *g = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node a = nx_parameter(g, "A", NX_DTYPE_F32, 2, (int64_t[]){M, K});
    nx_node b = nx_parameter(g, "B", NX_DTYPE_F32, 2, (int64_t[]){K, N});
    nx_node dc = nx_input(g, "dC", NX_DTYPE_F32, 2, (int64_t[]){M, N});
    nx_node c = nx_einsum(g, "ik,kj->ij", a, b, plus, nx_add);
    nx_node wrt[2] = {a, b}, grads[2];
    assert_int_equal(nx_graph_vjp(g, 1, &c, &dc, 2, wrt, grads), NX_OK);
    uint32_t before, after;
    assert_int_equal(nx_pass_count_live(g, 2, grads, &before), NX_OK);
    assert_int_equal(nx_pass_simplify(g, 2, grads), NX_OK);
    assert_int_equal(nx_pass_count_live(g, 2, grads, &after), NX_OK);
    int nbig = 0;
    int bad = count_violations(g, 2, grads, (int64_t)M * K * N, &nbig);
    print_message("%s contraction %dx%dx%d backward: %u nodes (%u before simplify), %d of "
                  "M*K*N size, all inside reductions' producer expressions: %s\n",
                  plus == NX_MONOID_MAX ? "max-plus" : "log-sum-exp", M, K, N, after, before, nbig,
                  bad ? "NO" : "yes");
    assert_int_equal(bad, 0);
    assert_true(nbig > 0); /* the streamed form is there: reductions over [M,K,N] expressions */
    assert_int_equal(count_materialised(ctx, g, 2, grads, (int64_t)M * K * N), 0);

    /* Controls: the product as an output, and a sort of it, are materialised. */
    nx_node prod = nx_add(g, nx_reshape(g, a, 3, (int64_t[]){M, K, 1}),
                          nx_reshape(g, b, 3, (int64_t[]){1, K, N}));
    assert_true(count_violations(g, 1, &prod, (int64_t)M * K * N, &nbig) > 0);
    nx_node sorted = nx_reduce(g, nx_sort(g, prod, 1, false), 1, (int[]){1}, NX_MONOID_SUM, false);
    assert_true(count_violations(g, 1, &sorted, (int64_t)M * K * N, &nbig) > 0);
    assert_true(count_materialised(ctx, g, 1, &sorted, (int64_t)M * K * N) > 0);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

static void test_maxplus_backward_streams(void **state)
{
    (void)state;
    contraction_backward(NX_MONOID_MAX);
}

static void test_lse_backward_streams(void **state)
{
    (void)state;
    contraction_backward(NX_MONOID_LOGSUMEXP);
}

static void test_minplus_and_matmul_backward_stream(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    nx_graph *g = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node a = nx_parameter(g, "A", NX_DTYPE_F64, 2, (int64_t[]){M, K});
    nx_node b = nx_parameter(g, "B", NX_DTYPE_F64, 2, (int64_t[]){K, N});
    nx_node c1 = nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_MIN, nx_add);
    nx_node c2 = nx_einsum(g, "ik,kj->ij", a, b, NX_MONOID_SUM, nx_mul);
    nx_node s = nx_reduce(g, nx_mul(g, c1, c2), 2, (int[]){0, 1}, NX_MONOID_SUM, false);
    nx_node wrt[2] = {a, b}, grads[2];
    assert_int_equal(nx_graph_grad(g, s, 2, wrt, grads), NX_OK);
    assert_int_equal(nx_pass_simplify(g, 2, grads), NX_OK);
    int nbig = 0;
    assert_int_equal(count_violations(g, 2, grads, (int64_t)M * K * N, &nbig), 0);
    assert_true(nbig > 0);
    assert_int_equal(count_materialised(ctx, g, 2, grads, (int64_t)M * K * N), 0);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

/* ---- simplification --------------------------------------------------------------------------*/

static nx_tensor *run_one(nx_graph *g, nx_node out, int nin, nx_tensor **in)
{
    (void)nin;
    nx_program *p = ck_compile(g, 1, &out, NX_BACKEND_REF);
    nx_tensor *r = NULL;
    nx_status st = nx_program_run(p, (const nx_tensor *const *)in, &r);
    if (st != NX_OK)
        fail_msg("run: %s", nx_ctx_last_error(nx_graph_ctx(g)));
    nx_program_free(p);
    return r;
}

static void expect_same_bits(nx_tensor *a, nx_tensor *b)
{
    assert_int_equal(nx_tensor_numel(a), nx_tensor_numel(b));
    assert_memory_equal(nx_tensor_data(a), nx_tensor_data(b),
                        (size_t)nx_tensor_numel(a) * nx_dtype_size(nx_tensor_dtype(a)));
    nx_tensor_free(a);
    nx_tensor_free(b);
}

static void test_simplify_rewrites(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    nx_graph *g = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_input(g, "x", NX_DTYPE_F64, 2, (int64_t[]){2, 3});
    nx_node one = nx_scalar(g, NX_DTYPE_F64, 1.0), mz = nx_scalar(g, NX_DTYPE_F64, -0.0);
    nx_node pz = nx_scalar(g, NX_DTYPE_F64, 0.0);
    /* x * 1 + (-0) - (+0), through a double negation and a permute pair: all fold to x. */
    nx_node e = nx_sub(g, nx_add(g, nx_mul(g, nx_neg(g, nx_neg(g, x)), one), mz), pz);
    e = nx_permute(g, nx_permute(g, e, (int[]){1, 0}), (int[]){1, 0});
    nx_node out = e;
    assert_int_equal(nx_pass_simplify(g, 1, &out), NX_OK);
    assert_int_equal(out, x);
    /* x + (+0) is kept (it would turn -0 into +0), and so is x * 0 on floats (NaN, inf). */
    nx_node keep1 = nx_add(g, x, pz), keep2 = nx_mul(g, x, pz);
    nx_node o1 = keep1, o2 = keep2;
    assert_int_equal(nx_pass_simplify(g, 1, &o1), NX_OK);
    assert_int_equal(nx_pass_simplify(g, 1, &o2), NX_OK);
    assert_int_equal(o1, keep1);
    assert_int_equal(o2, keep2);
    /* Integer x * 0 is 0; constants fold with the interpreter's semantics. */
    nx_node xi = nx_input(g, "xi", NX_DTYPE_I32, 1, (int64_t[]){3});
    nx_node zi = nx_mul(g, xi, nx_scalar(g, NX_DTYPE_I32, 0.0));
    assert_int_equal(nx_pass_simplify(g, 1, &zi), NX_OK);
    assert_int_equal(nx_ir_node_at(&g->s, zi)->op, NX_PRIM_BROADCAST);
    nx_node c = nx_exp(g, nx_add(g, nx_scalar(g, NX_DTYPE_F32, 2.0), nx_scalar(g, NX_DTYPE_F32,
                                                                                 0.5)));
    nx_node cf = c;
    assert_int_equal(nx_pass_simplify(g, 1, &cf), NX_OK);
    assert_int_equal(nx_ir_node_at(&g->s, cf)->op, NX_PRIM_CONSTANT);
    nx_tensor *in[2];
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, 2, (int64_t[]){2, 3}, &in[0]), NX_OK);
    assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_I32, 1, (int64_t[]){3}, &in[1]), NX_OK);
    expect_same_bits(run_one(g, c, 2, in), run_one(g, cf, 2, in));
    nx_tensor_free(in[0]);
    nx_tensor_free(in[1]);
    /* Broadcast of broadcast and reshape of reshape become one. */
    nx_node bb = nx_broadcast(g, nx_broadcast(g, nx_reshape(g, x, 3, (int64_t[]){1, 2, 3}), 3,
                                              (int64_t[]){1, 2, 3}),
                              3, (int64_t[]){4, 2, 3});
    nx_node rr = nx_reshape(g, nx_reshape(g, x, 1, (int64_t[]){6}), 2, (int64_t[]){3, 2});
    nx_node outs[2] = {bb, rr};
    assert_int_equal(nx_pass_simplify(g, 2, outs), NX_OK);
    assert_int_equal(nx_ir_node_ops(&g->s, nx_ir_node_at(&g->s, outs[1]))[0], x);
    uint32_t count;
    assert_int_equal(nx_pass_count_live(g, 1, &outs[1], &count), NX_OK);
    assert_int_equal(count, 2);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

/* Simplified gradients compute the same bits as the unsimplified ones, and the node counts are
 * reported. */
static void test_simplified_gradients_agree(void **state)
{
    (void)state;
    nx_ctx *ctx = NULL;
    nx_graph *g = NULL;
    assert_int_equal(nx_ctx_new(NULL, &ctx), NX_OK);
    assert_int_equal(nx_graph_new(ctx, &g), NX_OK);
    nx_node x = nx_parameter(g, "x", NX_DTYPE_F64, 2, (int64_t[]){5, 3});
    nx_node y = nx_parameter(g, "y", NX_DTYPE_F64, 2, (int64_t[]){7, 3});
    nx_node b = nx_parameter(g, "b", NX_DTYPE_F64, 1, (int64_t[]){7});
    nx_node d = nx_sub(g, nx_reshape(g, x, 3, (int64_t[]){5, 1, 3}),
                       nx_reshape(g, y, 3, (int64_t[]){1, 7, 3}));
    nx_node sq = nx_reduce(g, nx_mul(g, d, d), 1, (int[]){2}, NX_MONOID_SUM, false);
    nx_node k = nx_reduce(g, nx_mul(g, nx_exp(g, nx_neg(g, sq)), b), 1, (int[]){1},
                          NX_MONOID_SUM, false);
    nx_node l = nx_reduce(g, k, 1, (int[]){0}, NX_MONOID_SUM, false);
    uint32_t fwd;
    assert_int_equal(nx_pass_count_live(g, 1, &l, &fwd), NX_OK);
    nx_node wrt[3] = {x, y, b}, gr[3], gs[3];
    assert_int_equal(nx_graph_grad(g, l, 3, wrt, gr), NX_OK);
    memcpy(gs, gr, sizeof gs);
    uint32_t before, after;
    assert_int_equal(nx_pass_count_live(g, 3, gr, &before), NX_OK);
    assert_int_equal(nx_pass_simplify(g, 3, gs), NX_OK);
    assert_int_equal(nx_pass_count_live(g, 3, gs, &after), NX_OK);
    print_message("gaussian kernel sum: forward %u nodes, gradient %u nodes (%u before "
                  "simplify)\n",
                  fwd, after, before);
    assert_true(after <= before);
    assert_true(after <= 4 * fwd);
    nx_tensor *in[3];
    const int64_t shapes[3][2] = {{5, 3}, {7, 3}, {7, 1}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nx_tensor_new(ctx, NX_DTYPE_F64, i == 2 ? 1 : 2, shapes[i], &in[i]),
                         NX_OK);
        double *p = nx_tensor_data(in[i]);
        for (int64_t e = 0; e < nx_tensor_numel(in[i]); e++)
            p[e] = ck_uniform(-1, 1);
    }
    for (int i = 0; i < 3; i++)
        expect_same_bits(run_one(g, gr[i], 3, in), run_one(g, gs[i], 3, in));
    for (int i = 0; i < 3; i++)
        nx_tensor_free(in[i]);
    nx_graph_free(g);
    nx_ctx_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maxplus_backward_streams),
        cmocka_unit_test(test_lse_backward_streams),
        cmocka_unit_test(test_minplus_and_matmul_backward_stream),
        cmocka_unit_test(test_simplify_rewrites),
        cmocka_unit_test(test_simplified_gradients_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
