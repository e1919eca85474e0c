/* The op program cache: an op's compiled program under the key of everything that determines it,
 * in the context's cache (runtime/cache.h, which stores objects by key and knows nothing of
 * programs). */
#include "program/program.h"

static void destroy_program(void *user, void *obj)
{
    (void)user;
    nx_program_free(obj);
}

nx_status nx_program_cached(nx_ctx *ctx, nx_rt_cache_blob *b, const char *what,
                            nx_program_build_fn build, const void *user, nx_program **out)
{
    *out = NULL;
    nx_rt_cache_key k;
    nx_rt_cache *cache = NULL;
    nx_status st = nx_rt_cache_blob_key(b, &k);
    if (st != NX_OK)
        st = nx_rt_nomem(ctx, what, b->len);
    else
        st = nx_rt_cache_of(ctx, &cache);
    nx_program *p = st == NX_OK ? nx_rt_cache_find(cache, &k) : NULL;
    if (st == NX_OK && !p && (st = build(ctx, user, &p)) == NX_OK) {
        void *winner = NULL;
        st = nx_rt_cache_insert(cache, &k, p, destroy_program, NULL, &winner);
        if (st != NX_OK)
            nx_program_free(p);
        p = winner;
    }
    nx_rt_cache_blob_free(b);
    *out = st == NX_OK ? p : NULL;
    return st;
}

typedef struct graph_call {
    nx_backend backend;
    nx_program_graph_build_fn build;
    void *user;
} graph_call;

static nx_status compile_graph(nx_ctx *ctx, const void *user, nx_program **out)
{
    const graph_call *c = user;
    nx_graph *g = NULL;
    nx_status st = nx_graph_new(ctx, &g);
    if (st != NX_OK)
        return st;
    nx_node outs[NX_PROGRAM_GRAPH_OUTPUTS] = {0};
    int n = 0;
    st = c->build(g, c->user, outs, &n);
    if (st == NX_OK && nx_graph_status(g) != NX_OK)
        st = nx_graph_status(g);
    if (st == NX_OK && (n < 1 || n > NX_PROGRAM_GRAPH_OUTPUTS))
        st = nx_rt_error(ctx, NX_ERR_INTERNAL,
                         "op program: a builder gave %d outputs; expected "
                         "1..%d",
                         n, NX_PROGRAM_GRAPH_OUTPUTS);
    if (st == NX_OK) {
        nx_compile_opts co = {.backend = c->backend, .n_outputs = n, .outputs = outs};
        st = nx_graph_compile(g, &co, out);
    }
    nx_graph_free(g);
    return st;
}

nx_status nx_program_graph_cached(nx_ctx *ctx, nx_rt_cache_blob *b, const char *what,
                                  nx_backend backend, nx_program_graph_build_fn build, void *user,
                                  nx_program **out)
{
    nx_rt_cache_blob_i64(b, "backend", backend);
    nx_rt_cache_blob_i64(b, "reproducible", nx_ctx_reproducible(ctx));
    graph_call c = {.backend = backend, .build = build, .user = user};
    return nx_program_cached(ctx, b, what, compile_graph, &c, out);
}
