/* The property: any text given to nx_semiring_parse either defines a semiring whose matmul then
 * runs, or is refused with NX_ERR_PARSE / NX_ERR_INVALID_ARG / NX_ERR_DTYPE and a message naming a
 * line and column inside the text (parse errors). The same text as a pairwise formula is refused
 * cleanly or runs. Nothing leaks: every allocation goes through a counting allocator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formula-fuzz.h"
#include "nitrix-ops.h"

typedef struct counter {
    int64_t live;
} counter;

static void *count_alloc(void *user, size_t size, size_t align)
{
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1))
        return NULL;
    ((counter *)user)->live++;
    return p;
}

static void count_free(void *user, void *ptr, size_t size)
{
    (void)size;
    if (ptr)
        ((counter *)user)->live--;
    free(ptr);
}

static formula_fuzz_result broken(char *why, size_t cap, const char *what, const char *detail)
{
    snprintf(why, cap, "%s: %s", what, detail);
    return FORMULA_FUZZ_BROKEN;
}

/* "semiring formula:L:C: ..." with 1 <= L <= lines and 1 <= C. */
static bool located(const char *msg, const char *who, int lines)
{
    size_t n = strlen(who);
    if (strncmp(msg, who, n) || msg[n] != ':')
        return false;
    int line = 0, col = 0, used = 0;
    if (sscanf(msg + n, ":%d:%d:%n", &line, &col, &used) != 2 || used == 0)
        return false;
    return line >= 1 && line <= lines && col >= 1;
}

static nx_status run_matmul(nx_ctx *ctx, const nx_semiring *sr)
{
    int64_t s[2] = {2, 2};
    nx_tensor *a = NULL, *out = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F64, 2, s, &a);
    if (st != NX_OK)
        return st;
    double *v = nx_tensor_data(a);
    v[0] = 0.5, v[1] = -1.0, v[2] = 2.0, v[3] = 0.0;
    nx_semiring_opts o = {.backend = NX_BACKEND_REF};
    st = nx_semiring_matmul(ctx, sr, a, a, &o, &out);
    nx_tensor_free(out);
    nx_tensor_free(a);
    return st;
}

static formula_fuzz_result semiring_case(nx_ctx *ctx, const char *text, int lines, char *why,
                                         size_t cap)
{
    nx_semiring *sr = NULL;
    nx_status st = nx_semiring_parse(ctx, "fuzz", text, &sr);
    const char *msg = nx_ctx_last_error(ctx);
    if (st == NX_OK) {
        if (!sr)
            return broken(why, cap, "parse", "NX_OK without a semiring");
        st = run_matmul(ctx, sr);
        nx_semiring_free(sr);
        if (st != NX_OK)
            return broken(why, cap, "an accepted semiring's matmul failed", nx_ctx_last_error(ctx));
        return FORMULA_FUZZ_ACCEPTED;
    }
    if (sr)
        return broken(why, cap, "parse", "an error left a semiring in *out");
    if (st != NX_ERR_PARSE && st != NX_ERR_INVALID_ARG && st != NX_ERR_DTYPE)
        return broken(why, cap, "parse returned", nx_status_str(st));
    if (!msg[0])
        return broken(why, cap, "parse", "an error without a message");
    if (st == NX_ERR_PARSE && !located(msg, "semiring formula", lines))
        return broken(why, cap, "parse error without a line and column in the text", msg);
    return FORMULA_FUZZ_REJECTED;
}

static formula_fuzz_result pairwise_case(nx_ctx *ctx, const char *text, int lines, char *why,
                                         size_t cap)
{
    int64_t s[2] = {2, 3}, one = 1, two = 2;
    nx_tensor *x = NULL, *b = NULL, *p = NULL, *out = NULL;
    nx_status st = nx_tensor_new(ctx, NX_DTYPE_F32, 2, s, &x);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 1, &two, &b);
    if (st == NX_OK)
        st = nx_tensor_new(ctx, NX_DTYPE_F32, 1, &one, &p);
    if (st != NX_OK)
        return broken(why, cap, "setup", nx_ctx_last_error(ctx));
    nx_pairwise_opts o = {.backend = NX_BACKEND_REF, .formula = text};
    st = nx_pairwise_reduce(ctx, x, x, b, p, &o, &out, NULL);
    const char *msg = nx_ctx_last_error(ctx);
    formula_fuzz_result r = st == NX_OK ? FORMULA_FUZZ_ACCEPTED : FORMULA_FUZZ_REJECTED;
    if (st == NX_OK && !out)
        r = broken(why, cap, "pairwise", "NX_OK without a result");
    else if (st == NX_ERR_PARSE && !located(msg, "pairwise formula", lines))
        r = broken(why, cap, "pairwise parse error without a line and column", msg);
    else if (st != NX_OK && st != NX_ERR_PARSE && st != NX_ERR_INVALID_ARG && st != NX_ERR_DTYPE &&
             st != NX_ERR_SHAPE)
        r = broken(why, cap, "pairwise returned", nx_status_str(st));
    nx_tensor_free(out), nx_tensor_free(x), nx_tensor_free(b), nx_tensor_free(p);
    return r;
}

formula_fuzz_result formula_fuzz_one(const uint8_t *data, size_t size, char *why, size_t cap)
{
    if (size > 4096)
        return FORMULA_FUZZ_REJECTED; /* long inputs only slow the search down */
    char *text = malloc(size + 1);
    if (!text)
        return broken(why, cap, "setup", "malloc");
    memcpy(text, data, size);
    text[size] = '\0';
    int lines = 1;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    counter cnt = {0};
    nx_allocator al = {.alloc = count_alloc, .free = count_free, .user = &cnt};
    nx_ctx_opts co = {.allocator = &al, .ignore_env = true};
    nx_ctx *ctx = NULL;
    if (nx_ctx_new(&co, &ctx) != NX_OK) {
        free(text);
        return broken(why, cap, "setup", "nx_ctx_new");
    }
    formula_fuzz_result r = semiring_case(ctx, text, lines, why, cap);
    if (r != FORMULA_FUZZ_BROKEN) {
        formula_fuzz_result q = pairwise_case(ctx, text, lines, why, cap);
        if (q == FORMULA_FUZZ_BROKEN)
            r = q;
    }
    nx_ctx_free(ctx);
    free(text);
    if (r != FORMULA_FUZZ_BROKEN && cnt.live != 0) {
        char n[32];
        snprintf(n, sizeof n, "%lld allocations", (long long)cnt.live);
        return broken(why, cap, "leak", n);
    }
    return r;
}
