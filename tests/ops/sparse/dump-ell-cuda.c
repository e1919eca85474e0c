/* Prints the kernel plan and the CUDA C of the ELL matmul programs (built, not a test): what the
 * CUDA backend would compile for the H200 rows (m = 4096, k_max = 32, 32 columns, f32, i32
 * indices), with and without the folded index-range flag, under REAL, max-plus and LOG. Needs no
 * GPU and no NVRTC: the kernels are lowered and emitted, never compiled.
 *
 *   dump-ell-cuda [real|maxplus|log] [flag] [reassoc|canonical]
 */
#include <stdio.h>
#include <string.h>

#include "codegen/ptx/emit-lib.h"
#include "ir/ir.h"
#include "nitrix-ops.h"
#include "program/program.h"
#include "testutil.h"

static nx_semiring_kind kind_of(const char *s)
{
    if (s && strcmp(s, "log") == 0)
        return NX_SEMIRING_LOG;
    if (s && strcmp(s, "maxplus") == 0)
        return NX_SEMIRING_TROPICAL_MAX_PLUS;
    return NX_SEMIRING_REAL;
}

static nx_node range_flag(nx_graph *g, nx_node idx, int64_t n_cols)
{
    nx_node q = nx_cast(g, idx, NX_DTYPE_I64);
    nx_node lo = nx_lt(g, q, nx_scalar(g, NX_DTYPE_I64, 0));
    nx_node hi = nx_ge(g, q, nx_scalar(g, NX_DTYPE_I64, (double)n_cols));
    int axes[2] = {0, 1};
    return nx_reduce(g, nx_cast(g, nx_or(g, lo, hi), NX_DTYPE_I32), 2, axes, NX_MONOID_MAX, false);
}

static const char *shape_name(nx_ptx_shape s)
{
    return s == NX_PTX_BLOCK_REDUCE ? "block-reduce" : "thread-per-point";
}

static nx_status emit_plan(nx_ctx *ctx, const nx_kplan *plan, bool reassoc)
{
    printf("// %d kernel(s)\n", plan->nkernels);
    for (int ki = 0; ki < plan->nkernels; ki++) {
        char *src = NULL;
        size_t len = 0;
        nx_ptx_launch l;
        nx_status st = nx_ptx_kernel_emit(plan->kernels[ki], "nx_kernel", reassoc, &src, &len, &l);
        if (st != NX_OK)
            return st;
        printf("// ---- kernel %d (%s): %s, points %lld, fold %lld, blocks/point %lld\n%s\n", ki,
               plan->kernels[ki]->name, shape_name(l.shape), (long long)l.points,
               (long long)l.fold_len, (long long)l.blocks_per_point, src);
        nx_rt_free(ctx, src, len);
    }
    return NX_OK;
}

int main(int argc, char **argv)
{
    const char *alg = argc > 1 ? argv[1] : "real";
    bool flag = argc > 2 && strcmp(argv[2], "flag") == 0;
    bool reassoc = !(argc > 3 && strcmp(argv[3], "canonical") == 0);
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(NULL, &ctx) != NX_OK)
        return 1;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    const int64_t vs[2] = {4096, 32}, bs[2] = {4096, 32};
    nx_node outs[2];
    if (st == NX_OK) {
        nx_node v = nx_input(g, "values", NX_DTYPE_F32, 2, vs);
        nx_node idx = nx_input(g, "indices", NX_DTYPE_I32, 2, vs);
        nx_node b = nx_input(g, "x", NX_DTYPE_F32, 2, bs);
        outs[0] = nx_ell_matmul_node(g, nx_semiring_builtin(kind_of(alg)), v, idx, b);
        outs[1] = flag ? range_flag(g, idx, bs[0]) : NX_NONE;
        st = nx_graph_status(g);
    }
    nx_kplan *plan = NULL;
    if (st == NX_OK)
        st = nx_pass_pipeline(ctx, &g->s, flag ? 2 : 1, outs, &plan);
    if (st == NX_OK)
        st = emit_plan(ctx, plan, reassoc);
    if (st != NX_OK)
        fprintf(stderr, "dump-ell-cuda: %s\n", nx_ctx_last_error(ctx));
    nx_kplan_free(plan);
    nx_graph_free(g);
    nx_ctx_free(ctx);
    return st == NX_OK ? 0 : 1;
}
