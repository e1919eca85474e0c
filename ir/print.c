/* The printer: one node per line, stable across runs,
 *     %7 = reduce[axes=(1), monoid=sum, keepdims=0] %5 : f32[2]
 * Attributes come from each primitive's own printer (the attrs column of ir/prims.def). */
#include <string.h>

#include "ir.h"

void nx_ir_print_axes(FILE *f, const char *name, int n, const int64_t *v)
{
    fprintf(f, "%s=(", name);
    for (int i = 0; i < n; i++)
        fprintf(f, i ? ",%lld" : "%lld", (long long)v[i]);
    fputc(')', f);
}

void nx_ir_print_flags(FILE *f, const char *name, int n, const int64_t *flags)
{
    fprintf(f, "%s=(", name);
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (flags[i]) {
            fprintf(f, first ? "%d" : ",%d", i);
            first = false;
        }
    }
    fputc(')', f);
}

static void print_node(const nx_ir_store *s, nx_node id, FILE *f)
{
    const nx_ir_node *n = &s->nodes[id];
    fprintf(f, "%%%u = %s", (unsigned)id, nx_ir_prim_name(n->op));
    nx_ir_prims[n->op].attrs(f, s, n);
    const nx_node *ops = nx_ir_node_ops(s, n);
    for (uint32_t k = 0; k < n->nops; k++)
        fprintf(f, k ? ", %%%u" : " %%%u", (unsigned)ops[k]);
    char sb[160];
    fprintf(f, " : %s%s\n", nx_dtype_name((nx_dtype)n->dtype),
            nx_shape_str(sb, sizeof sb, n->ndim, n->shape));
}

/* Marks root and everything it depends on; ids are topological, so one downward sweep does. */
static void print_reachable(const nx_ir_store *s, nx_node root, uint8_t *mark, FILE *f)
{
    mark[root] = 1;
    for (nx_node id = root; id >= 1; id--) {
        if (!mark[id])
            continue;
        const nx_ir_node *n = &s->nodes[id];
        const nx_node *ops = nx_ir_node_ops(s, n);
        for (uint32_t k = 0; k < n->nops; k++)
            mark[ops[k]] = 1;
    }
    for (nx_node id = 1; id <= root; id++) {
        if (mark[id])
            print_node(s, id, f);
    }
}

void nx_ir_print_store(const nx_ir_store *s, nx_node root, FILE *f)
{
    if (root == NX_NONE) {
        for (nx_node id = 1; id <= s->n; id++)
            print_node(s, id, f);
        return;
    }
    uint8_t *mark = nx_rt_calloc(s->ctx, (size_t)root + 1, 1);
    if (!mark) { /* the whole graph is a faithful, if longer, answer */
        for (nx_node id = 1; id <= root; id++)
            print_node(s, id, f);
        return;
    }
    print_reachable(s, root, mark, f);
    nx_rt_free(s->ctx, mark, (size_t)root + 1);
}

nx_status nx_graph_print(const nx_graph *g, nx_node root, FILE *f)
{
    if (!g || !f)
        return nx_rt_error(g ? g->s.ctx : NULL, NX_ERR_INVALID_ARG,
                           "nx_graph_print: the graph and the file must be non-NULL");
    if (root > g->s.n)
        return nx_rt_error(g->s.ctx, NX_ERR_INVALID_ARG,
                           "nx_graph_print: root is handle %u, but the graph has only %u nodes",
                           (unsigned)root, (unsigned)g->s.n);
    nx_ir_print_store(&g->s, root, f);
    return NX_OK;
}
