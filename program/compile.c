/* The compile driver: nx_graph_compile and nx_program_run.
 *
 * A program is a compact copy of the nodes its outputs depend on, so the graph may be freed after
 * compile. On `cpu` and `cuda` the placement policy (placement.c) runs the pass pipeline
 * (pipeline.c) to a plan of kernels and decides which backend object runs it (registry.c); that
 * object prepares the plan once here and runs it per call. On `ref`, and for programs no backend
 * can lower, the reference interpreter (ir/interp.c) evaluates the nodes. */
#include <string.h>

#include "passes/simplify.h"
#include "program/program.h"

/* Programs with more outputs than this compile without the simplification pass. */
#define NX_COMPILE_SIMPLIFY_MAX 64

typedef struct prog_input {
    nx_ir_sig sig;
    char name[64];
} prog_input;

struct nx_program {
    nx_ctx *ctx;
    nx_backend backend; /* as resolved: what nx_program_backend reports */
    nx_ir_store s;
    int ninputs;
    prog_input *inputs;
    int noutputs;
    nx_node *outputs; /* program ids */
    uint32_t norder;
    size_t slots;       /* entries of order and last_use */
    nx_node *order;     /* value nodes to evaluate, ascending */
    uint32_t *last_use; /* by program id: position in order of the last reader */
    nx_placement place; /* place.ops NULL: the reference interpreter */
    void *state;
};

void nx_program_free(nx_program *p)
{
    if (!p)
        return;
    nx_ctx *ctx = p->ctx;
    size_t slots = p->slots;
    if (p->place.ops)
        p->place.ops->release(ctx, p->place.plan, p->state);
    nx_kplan_free(p->place.plan);
    nx_ir_store_free(&p->s);
    nx_rt_free(ctx, p->inputs, (size_t)p->ninputs * sizeof *p->inputs);
    nx_rt_free(ctx, p->outputs, (size_t)p->noutputs * sizeof *p->outputs);
    nx_rt_free(ctx, p->order, slots * sizeof *p->order);
    nx_rt_free(ctx, p->last_use, slots * sizeof *p->last_use);
    nx_rt_free(ctx, p, sizeof *p);
}

int nx_program_num_inputs(const nx_program *p)
{
    return p ? p->ninputs : -1;
}

int nx_program_num_outputs(const nx_program *p)
{
    return p ? p->noutputs : -1;
}

nx_backend nx_program_backend(const nx_program *p)
{
    return p ? p->backend : NX_BACKEND_COUNT;
}

/* ---- compile -------------------------------------------------------------------------------*/

/* Explicit request, else the context's NITRIX_BACKEND, else auto (placement.c owns the rule). */
static nx_status resolve_backend(nx_ctx *ctx, nx_backend requested, nx_backend *out)
{
    if ((unsigned)requested >= NX_BACKEND_COUNT)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_graph_compile: backend %d is not a backend; expected "
                           "NX_BACKEND_AUTO, _CPU, _CUDA or _REF",
                           (int)requested);
    return nx_program_resolve_backend(ctx, requested, out);
}

static nx_status check_opts(nx_graph *g, const nx_compile_opts *opts, nx_program **out)
{
    nx_ctx *ctx = g->s.ctx;
    if (!opts || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_graph_compile: opts and out must be "
                           "non-NULL");
    if (opts->n_outputs < 1 || !opts->outputs)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_graph_compile: %d outputs; expected at least one, with a non-NULL "
                           "outputs array",
                           opts->n_outputs);
    if (g->status != NX_OK)
        return nx_rt_error(ctx, g->status, "%s", g->msg);
    for (int i = 0; i < opts->n_outputs; i++) {
        nx_node o = opts->outputs[i];
        if (o == NX_NONE || o > g->s.n)
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "nx_graph_compile: output %d is handle %u; expected a node of "
                               "this graph (1 to %u)",
                               i, (unsigned)o, (unsigned)g->s.n);
    }
    return NX_OK;
}

/* mark[id]: 1 = copied into the program (reached through any operand), 2 = also evaluated
 * (reached through value operands only). */
static nx_status mark_needed(nx_graph *g, const nx_compile_opts *opts, uint8_t *mark)
{
    const nx_ir_store *s = &g->s;
    for (int i = 0; i < opts->n_outputs; i++)
        mark[opts->outputs[i]] = 2;
    for (nx_node id = s->n; id >= 1; id--) {
        if (!mark[id])
            continue;
        const nx_ir_node *n = &s->nodes[id];
        if (mark[id] == 2 && n->op == NX_PRIM_PLACEHOLDER)
            return nx_rt_error(s->ctx, NX_ERR_INVALID_ARG,
                               "nx_graph_compile: an output depends on placeholder %%%u outside a "
                               "custom monoid; expected placeholders only in nx_reduce_custom's "
                               "expressions",
                               (unsigned)id);
        const nx_node *ops = nx_ir_node_ops(s, n);
        int nv = mark[id] == 2 ? nx_ir_num_valops(n) : 0;
        for (uint32_t k = 0; k < n->nops; k++) {
            uint8_t m = (int)k < nv ? 2 : 1;
            if (mark[ops[k]] < m)
                mark[ops[k]] = m;
        }
    }
    return NX_OK;
}

static nx_status copy_nodes(nx_program *p, const nx_ir_store *s, const uint8_t *mark, nx_node *map)
{
    nx_node opbuf[64];
    for (nx_node id = 1; id <= s->n; id++) {
        if (!mark[id])
            continue;
        const nx_ir_node *n = &s->nodes[id];
        nx_node *ops = opbuf;
        size_t bytes = n->nops * sizeof *ops;
        if (n->nops > 64 && !(ops = nx_rt_alloc(p->ctx, bytes)))
            return nx_rt_nomem(p->ctx, "nx_graph_compile", bytes);
        const nx_node *src = nx_ir_node_ops(s, n);
        for (uint32_t k = 0; k < n->nops; k++)
            ops[k] = map[src[k]];
        map[id] = nx_ir_store_append(&p->s, n, ops, nx_ir_node_attrs(s, n), nx_ir_node_blob(s, n));
        if (ops != opbuf)
            nx_rt_free(p->ctx, ops, bytes);
        if (!map[id])
            return nx_rt_nomem(p->ctx, "nx_graph_compile", sizeof *n);
        if (mark[id] == 2)
            p->order[p->norder++] = map[id];
    }
    return NX_OK;
}

static nx_status copy_inputs(nx_program *p, const nx_graph *g)
{
    p->ninputs = (int)g->ninputs;
    size_t bytes = (size_t)p->ninputs * sizeof *p->inputs;
    if (p->ninputs && !(p->inputs = nx_rt_calloc(p->ctx, 1, bytes))) {
        p->ninputs = 0;
        return nx_rt_nomem(p->ctx, "nx_graph_compile", bytes);
    }
    for (int i = 0; i < p->ninputs; i++) {
        nx_node id = g->inputs[i];
        nx_ir_sig_of(&g->s, id, &p->inputs[i].sig);
        snprintf(p->inputs[i].name, sizeof p->inputs[i].name, "%s",
                 (const char *)nx_ir_node_blob(&g->s, &g->s.nodes[id]));
    }
    return NX_OK;
}

static nx_status build_program(nx_program *p, nx_graph *g, const nx_compile_opts *opts)
{
    nx_ctx *ctx = p->ctx;
    size_t slots = (size_t)g->s.n + 1;
    uint8_t *mark = nx_rt_calloc(ctx, slots, 1);
    nx_node *map = nx_rt_calloc(ctx, slots, sizeof *map);
    nx_status st = NX_OK;
    if (!mark || !map)
        st = nx_rt_nomem(ctx, "nx_graph_compile", slots * (1 + sizeof *map));
    if (st == NX_OK)
        st = mark_needed(g, opts, mark);
    uint32_t count = 0;
    for (size_t i = 0; st == NX_OK && i < slots; i++)
        count += mark[i] != 0;
    if (st == NX_OK) {
        p->slots = (size_t)count + 1;
        p->order = nx_rt_calloc(ctx, p->slots, sizeof *p->order);
        p->last_use = nx_rt_calloc(ctx, p->slots, sizeof *p->last_use);
        p->outputs = nx_rt_calloc(ctx, (size_t)opts->n_outputs, sizeof *p->outputs);
        if (p->outputs)
            p->noutputs = opts->n_outputs;
        if (!p->order || !p->last_use || !p->outputs)
            st = nx_rt_nomem(ctx, "nx_graph_compile", (size_t)count * 8);
    }
    if (st == NX_OK)
        st = copy_nodes(p, &g->s, mark, map);
    if (st == NX_OK) {
        for (int i = 0; i < p->noutputs; i++)
            p->outputs[i] = map[opts->outputs[i]];
        nx_ir_last_use(&p->s, p->norder, p->order, p->noutputs, p->outputs, p->last_use);
        st = copy_inputs(p, g);
    }
    nx_rt_free(ctx, mark, slots);
    nx_rt_free(ctx, map, slots * sizeof *map);
    return st;
}

/* Places the program's plan (placement.c) and prepares it on the backend object chosen. */
static nx_status prepare_backend(nx_program *p)
{
    nx_status st = nx_program_place(p->ctx, p->backend, &p->s, p->noutputs, p->outputs, &p->place);
    if (st != NX_OK)
        return st;
    if (!p->place.ops) { /* no backend could lower it: the interpreter runs it, and says so */
        p->backend = NX_BACKEND_REF;
        return NX_OK;
    }
    st = p->place.ops->prepare(p->ctx, p->place.plan, nx_program_kernel_refused, &p->state);
    if (st != NX_OK)
        p->place.ops = NULL; /* nothing to release */
    return st;
}

/* The first pass, on the caller's graph: for the compiled backends the outputs' subgraph is
 * rebuilt with the exact local rewrites of passes/simplify.c (identities, double negations and
 * movements, constant folding bit-identical to the interpreter), so what is copied, fused and
 * compiled is smaller. The graph only gains nodes (hash-consing keeps equal ones one node); its
 * existing handles stay valid. `ref` compiles the graph as built: the oracle stays the graph the
 * user wrote. A failure inside the pass (only an allocation can fail) is the compile's error,
 * and the graph's own status is left as it was so that the caller can still use it. */
static nx_status simplify_outputs(nx_graph *g, const nx_compile_opts *opts, nx_backend b,
                                  nx_node *outs, nx_compile_opts *out)
{
    if (b == NX_BACKEND_REF || opts->n_outputs > NX_COMPILE_SIMPLIFY_MAX)
        return NX_OK;
    memcpy(outs, opts->outputs, (size_t)opts->n_outputs * sizeof *outs);
    nx_status st = nx_pass_simplify(g, opts->n_outputs, outs);
    if (st != NX_OK) {
        g->status = NX_OK;
        g->msg[0] = '\0';
        return st;
    }
    out->outputs = outs;
    return NX_OK;
}

/* Everything after resolution, for backend b. */
static nx_status compile_on(nx_graph *g, const nx_compile_opts *opts, nx_backend b,
                            nx_program **out)
{
    nx_ctx *ctx = g->s.ctx;
    nx_program *p = nx_rt_calloc(ctx, 1, sizeof *p);
    if (!p)
        return nx_rt_nomem(ctx, "nx_graph_compile", sizeof *p);
    p->ctx = ctx;
    p->s.ctx = ctx;
    p->backend = b;
    nx_node outs[NX_COMPILE_SIMPLIFY_MAX];
    nx_compile_opts simplified = *opts;
    nx_status st = simplify_outputs(g, opts, b, outs, &simplified);
    if (st == NX_OK)
        st = build_program(p, g, &simplified);
    if (st == NX_OK && nx_program_backend_ops(b))
        st = prepare_backend(p);
    if (st != NX_OK) {
        nx_program_free(p);
        return st;
    }
    if (nx_rt_dump_requested(p->ctx, "graph")) {
        fprintf(stderr, "nitrix: dump graph: program of %u nodes, %d inputs, %d outputs\n",
                (unsigned)p->s.n, p->ninputs, p->noutputs);
        nx_ir_print_store(&p->s, NX_NONE, stderr);
        for (int i = 0; i < p->noutputs; i++)
            fprintf(stderr, "output %d = %%%u\n", i, (unsigned)p->outputs[i]);
    }
    *out = p;
    return NX_OK;
}

/* The checks nx_graph_compile makes before it resolves the backend. */
static nx_status check_graph(nx_graph *g, const nx_compile_opts *opts, nx_program **out)
{
    if (out)
        *out = NULL;
    if (!g)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_graph_compile: the graph is NULL");
    nx_status st = check_opts(g, opts, out);
    if (st == NX_OK)
        st = nx_ir_verify_store(g->s.ctx, &g->s, "nx_graph_compile");
    return st;
}

nx_status nx_graph_compile(nx_graph *g, const nx_compile_opts *opts, nx_program **out)
{
    nx_status st = check_graph(g, opts, out);
    nx_backend backend = NX_BACKEND_REF;
    if (st == NX_OK)
        st = resolve_backend(g->s.ctx, opts->backend, &backend);
    if (st == NX_OK)
        st = compile_on(g, opts, backend, out);
    return st;
}

nx_status nx_program_compile_on(nx_graph *g, const nx_compile_opts *opts, nx_backend backend,
                                nx_program **out)
{
    nx_status st = check_graph(g, opts, out);
    if (st == NX_OK && (backend == NX_BACKEND_AUTO || (unsigned)backend >= NX_BACKEND_COUNT))
        st = resolve_backend(g->s.ctx, backend, &backend);
    if (st == NX_OK)
        st = compile_on(g, opts, backend, out);
    return st;
}

/* ---- run -----------------------------------------------------------------------------------*/

static nx_status check_inputs(const nx_program *p, const nx_tensor *const *inputs)
{
    for (int i = 0; i < p->ninputs; i++) {
        const prog_input *in = &p->inputs[i];
        const nx_tensor *t = inputs[i];
        char want[160], have[160];
        nx_shape_str(want, sizeof want, in->sig.ndim, in->sig.shape);
        if (!t)
            return nx_rt_error(p->ctx, NX_ERR_INVALID_ARG,
                               "nx_program_run: input %d ('%s') is NULL; expected a %s%s tensor", i,
                               in->name, nx_dtype_name(in->sig.dtype), want);
        /* The CUDA runner takes device inputs in place (and strided ones through a copy of its
         * own); the interpreter and the CPU backend read host memory only. */
        if (nx_tensor_device(t) != NX_DEVICE_HOST && p->backend != NX_BACKEND_CUDA)
            return nx_rt_error(p->ctx, NX_ERR_INVALID_ARG,
                               "nx_program_run: input %d ('%s') is a device tensor; the '%s' "
                               "backend takes host tensors (nx_tensor_to_device(t, "
                               "NX_DEVICE_HOST, &h) copies it)",
                               i, in->name, nx_backend_name(p->backend));
        nx_shape_str(have, sizeof have, t->ndim, t->shape);
        bool same_shape = t->ndim == in->sig.ndim &&
                          memcmp(t->shape, in->sig.shape, (size_t)t->ndim * sizeof *t->shape) == 0;
        if (t->dtype != in->sig.dtype || !same_shape)
            return nx_rt_error(p->ctx, t->dtype != in->sig.dtype ? NX_ERR_DTYPE : NX_ERR_SHAPE,
                               "nx_program_run: input %d ('%s') is %s%s; expected %s%s", i,
                               in->name, nx_dtype_name(t->dtype), have,
                               nx_dtype_name(in->sig.dtype), want);
    }
    return NX_OK;
}

/* Contiguous views of the inputs: the caller's tensor where it already is (or a device tensor
 * for a device backend), else a copy; a plan placed on the host takes host copies of device
 * inputs. */
static nx_status bind_inputs(const nx_program *p, const nx_tensor *const *inputs,
                             const nx_tensor **bound, nx_tensor **owned)
{
    for (int i = 0; i < p->ninputs; i++) {
        bool device = nx_tensor_device(inputs[i]) != NX_DEVICE_HOST;
        nx_status st = NX_OK;
        if (device && p->place.host_for_device)
            st = nx_tensor_to_device(inputs[i], NX_DEVICE_HOST, &owned[i]);
        else if (!device && !nx_tensor_is_contiguous(inputs[i]))
            st = nx_ir_tensor_contiguous_copy(p->ctx, inputs[i], &owned[i]);
        if (st != NX_OK)
            return st;
        bound[i] = owned[i] ? owned[i] : inputs[i];
    }
    return NX_OK;
}

/* Inputs of the plan's slots: how many arguments it reads. */
static int plan_inputs(const nx_kplan *p)
{
    int n = 0;
    for (int i = 0; i < p->nslots; i++)
        if (p->slots[i].kind == NX_SLOT_INPUT && p->slots[i].arg + 1 > n)
            n = p->slots[i].arg + 1;
    return n;
}

/* A plan placed on the host for a device backend gives the caller the placement it would have
 * had on the device: device outputs when every input it reads was a device tensor. */
static nx_status outputs_to_device(const nx_program *p, const nx_tensor *const *inputs,
                                   nx_tensor **outputs)
{
    int n = plan_inputs(p->place.plan);
    for (int i = 0; i < n; i++)
        if (!inputs[i] || nx_tensor_device(inputs[i]) == NX_DEVICE_HOST)
            return NX_OK;
    for (int o = 0; n > 0 && o < p->noutputs; o++) {
        nx_tensor *d = NULL;
        nx_status st = nx_tensor_to_device(outputs[o], NX_DEVICE_CUDA, &d);
        if (st != NX_OK)
            return st;
        nx_tensor_free(outputs[o]);
        outputs[o] = d;
    }
    return NX_OK;
}

static nx_status run_bound(nx_program *p, const nx_tensor *const *inputs,
                           const nx_tensor *const *bound, nx_tensor **outputs)
{
    if (!p->place.ops)
        return nx_ir_interpret(p->ctx, &p->s, p->norder, p->order, p->last_use, p->noutputs,
                               p->outputs, bound, outputs);
    nx_status st = p->place.ops->run(p->ctx, p->place.plan, p->state, bound, outputs);
    if (st == NX_OK && p->place.host_for_device)
        st = outputs_to_device(p, inputs, outputs);
    return st;
}

nx_status nx_program_run(nx_program *p, const nx_tensor *const *inputs, nx_tensor **outputs)
{
    if (!p)
        return nx_rt_error(NULL, NX_ERR_INVALID_ARG, "nx_program_run: the program is NULL");
    if (!outputs || (p->ninputs > 0 && !inputs))
        return nx_rt_error(p->ctx, NX_ERR_INVALID_ARG,
                           "nx_program_run: %s is NULL; expected %d input tensors and room for %d "
                           "outputs",
                           outputs ? "inputs" : "outputs", p->ninputs, p->noutputs);
    for (int i = 0; i < p->noutputs; i++)
        outputs[i] = NULL;
    nx_status st = check_inputs(p, inputs);
    if (st != NX_OK)
        return st;
    size_t nin = (size_t)p->ninputs;
    const nx_tensor **bound = nx_rt_calloc(p->ctx, nin + 1, sizeof *bound);
    nx_tensor **owned = nx_rt_calloc(p->ctx, nin + 1, sizeof *owned);
    if (!bound || !owned)
        st = nx_rt_nomem(p->ctx, "nx_program_run", (nin + 1) * sizeof *bound);
    if (st == NX_OK)
        st = bind_inputs(p, inputs, bound, owned);
    if (st == NX_OK)
        st = run_bound(p, inputs, bound, outputs);
    if (st != NX_OK) {
        for (int i = 0; i < p->noutputs; i++) {
            nx_tensor_free(outputs[i]);
            outputs[i] = NULL;
        }
    }
    for (size_t i = 0; owned && i < nin; i++)
        nx_tensor_free(owned[i]);
    nx_rt_free(p->ctx, (void *)bound, (nin + 1) * sizeof *bound);
    nx_rt_free(p->ctx, owned, (nin + 1) * sizeof *owned);
    return st;
}
