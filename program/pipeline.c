/* The pass pipeline from a program's graph to kernel IR for the loop backends.
 *
 *     program store (verified graph, only what the outputs need)
 *        |
 *        |  verify ........ the graph verifier (ir/verify.c): structure and re-derived shapes
 *        v
 *     fuse ............... role per node: LEAF (slot bound at run time), ROOT (a kernel writes
 *        |                 a slot), INLINE (computed inside consumers), DEAD
 *        |  check ........ every output is a ROOT or a LEAF; operands of library nodes are slots
 *        v
 *     lower .............. one kernel per ROOT, in id order: LOOP kernels from expressions at
 *        |                 symbolic indices, LIBRARY kernels for scatter/sort/scan/extern/custom
 *        |  validate ..... nx_kernel_validate on every kernel (invalid IR never reaches a backend)
 *        v
 *     prologue ........... where the backend takes it, a loop kernel that only one library
 *        |                 kernel reads becomes that kernel's prologue (codegen/prologue.c)
 *        v
 *     plan (slots + kernels), handed to the backend's supports() and compile()
 *
 * verify: the graph a program holds is the user's graph after copying; verifying it again is cheap
 * and catches a broken copy before any pass relies on its shapes.
 *
 * fuse (passes/fuse.c): partitions the program into kernels. Elementwise and movement ops inline
 * into their consumers, a reduction absorbs its producer expression (the K-loop fusion: a
 * max-plus or log-sum-exp contraction is one kernel that never builds the M x K x N operand), a
 * gather becomes an indexed load, a small reduction read once by a reduction or a same-shaped
 * elementwise op nests inside it; values read by several nodes are materialised once.
 *
 * lower (codegen/lower.c): turns each root into kernel IR (docs/kernel-ir.md).
 *
 * Simplification (passes/simplify.c) runs on the caller's graph in compile.c before the program
 * is copied, for the cpu and cuda backends; autodiff (passes/autodiff.c) runs when the graph is
 * built. This pipeline sees the program as compiled.
 *
 * The checks after each pass always run: they are linear in the program and a bad plan would
 * otherwise surface as wrong numbers. NITRIX_DUMP=fuse prints the roles, NITRIX_DUMP=kernel the
 * plan (stderr). */

#include "codegen/lower.h"
#include "program/program.h"

static nx_status check_roles(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                             const nx_node *outputs, const uint8_t *role)
{
    for (int i = 0; i < noutputs; i++)
        if (role[outputs[i]] != NX_FUSE_ROOT && role[outputs[i]] != NX_FUSE_LEAF)
            return nx_rt_error(ctx, NX_ERR_INTERNAL, "fuse: output %d (%%%u) is not materialised",
                               i, (unsigned)outputs[i]);
    for (nx_node id = 1; id <= s->n; id++) {
        const nx_ir_node *n = nx_ir_node_at(s, id);
        if (role[id] == NX_FUSE_DEAD || !nx_fuse_is_library(n->op))
            continue;
        const nx_node *ops = nx_ir_node_ops(s, n);
        for (int k = 0; k < nx_ir_num_valops(n); k++)
            if (role[ops[k]] != NX_FUSE_ROOT && role[ops[k]] != NX_FUSE_LEAF)
                return nx_rt_error(ctx, NX_ERR_INTERNAL,
                                   "fuse: operand %d of %s %%%u is not materialised", k,
                                   nx_ir_prim_name(n->op), (unsigned)id);
    }
    return NX_OK;
}

static void dump_roles(const nx_ir_store *s, const uint8_t *role)
{
    static const char *const names[] = {"dead", "inline", "root", "leaf"};
    fprintf(stderr, "nitrix: dump fuse\n");
    for (nx_node id = 1; id <= s->n; id++)
        if (role[id] != NX_FUSE_DEAD)
            fprintf(stderr, "%%%u %s: %s\n", (unsigned)id, nx_ir_prim_name(s->nodes[id].op),
                    names[role[id]]);
}

static nx_status validate_plan(const nx_kplan *p)
{
    for (int i = 0; i < p->nkernels; i++) {
        nx_status st = nx_kernel_validate(p->kernels[i]);
        if (st != NX_OK)
            return st;
    }
    return NX_OK;
}

nx_status nx_pass_pipeline(nx_ctx *ctx, const nx_ir_store *s, int noutputs, const nx_node *outputs,
                           nx_kplan **out)
{
    return nx_pass_pipeline_for(ctx, s, noutputs, outputs, NULL, out);
}

nx_status nx_pass_pipeline_for(nx_ctx *ctx, const nx_ir_store *s, int noutputs,
                               const nx_node *outputs, bool (*supports)(const nx_kernel *),
                               nx_kplan **out)
{
    *out = NULL;
    nx_status st = nx_ir_verify_store(ctx, s, "pipeline");
    if (st != NX_OK)
        return st;
    for (int i = 0; i < noutputs; i++)
        if (outputs[i] == NX_NONE || outputs[i] > s->n)
            return nx_rt_error(
                ctx, NX_ERR_INVALID_ARG,
                "pipeline: output %d is %s; expected a "
                "node of the program (1..%u)",
                i, outputs[i] == NX_NONE ? "NX_NONE (a failed builder)" : "out of range",
                (unsigned)s->n);
    size_t slots = (size_t)s->n + 1;
    uint8_t *role = nx_rt_calloc(ctx, slots, 1);
    if (!role)
        return nx_rt_nomem(ctx, "pipeline", slots);
    st = nx_pass_fuse(ctx, s, noutputs, outputs, role);
    if (st == NX_OK)
        st = check_roles(ctx, s, noutputs, outputs, role);
    if (st == NX_OK && nx_rt_dump_requested(ctx, "fuse"))
        dump_roles(s, role);
    nx_kplan *plan = NULL;
    if (st == NX_OK)
        st = nx_lower_plan(ctx, s, noutputs, outputs, role, &plan);
    nx_rt_free(ctx, role, slots);
    if (st == NX_OK)
        st = validate_plan(plan);
    if (st == NX_OK)
        st = nx_prologue_fuse(plan, supports);
    if (st != NX_OK) {
        nx_kplan_free(plan);
        return st;
    }
    if (nx_rt_dump_requested(ctx, "kernel")) {
        fprintf(stderr, "nitrix: dump kernel\n");
        nx_kplan_print(plan, stderr);
    }
    *out = plan;
    return NX_OK;
}
