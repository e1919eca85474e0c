/* The border/interior split of the innermost space loop in the CPU emitter (borders.c finds
 * it): the loop in three parts, the interior computed with the aliases. */
#include <stdlib.h>

#include "codegen/x86/emit-priv.h"

/* ---- border/interior split -----------------------------------------------------------------*/

/* max(x, cut) (or min) of a loop bound: a number when x is one, else a select. */
static void bound(emitter *e, const char *x, int64_t cut, bool max, char *out, size_t n)
{
    char *end;
    long long v = strtoll(x, &end, 10);
    if (cut == (max ? INT64_MIN : INT64_MAX)) {
        snprintf(out, n, "%s", x);
    } else if (*x != '%' && *end == '\0') {
        snprintf(out, n, "%lld", max ? (v > cut ? v : (long long)cut)
                                     : (v < cut ? v : (long long)cut));
    } else {
        int c = fresh(e), r = fresh(e);
        put(&e->body, "  %%v%d = icmp %s i64 %s, %lld\n", c, max ? "sgt" : "slt", x,
            (long long)cut);
        put(&e->body, "  %%v%d = select i1 %%v%d, i64 %s, i64 %lld\n", r, c, x, (long long)cut);
        snprintf(out, n, "%%v%d", r);
    }
}

/* Whether region r of the split (0: [0, lo), 1: [lo, hi), 2: [hi, n)) has points. */
bool nx_x86_region_used(const emitter *e, int r)
{
    return r == 1 || (r == 0 ? e->bd.lo > 0 : e->bd.hi < e->k->extent[e->bd.loop]);
}

/* The split loop over region r intersected with [lo, hi); the interior runs with the aliases. */
loop nx_x86_region_open(emitter *e, int r, const char *lo, const char *hi)
{
    int64_t cut_lo = r == 0 ? INT64_MIN : r == 1 ? e->bd.lo : e->bd.hi;
    int64_t cut_hi = r == 0 ? e->bd.lo : r == 1 ? e->bd.hi : INT64_MAX;
    char slo[32], shi[32];
    bound(e, lo, cut_lo, true, slo, sizeof slo);
    bound(e, hi, cut_hi, false, shi, sizeof shi);
    loop l = nx_x86_loop_open(e, slo, shi);
    e->loopvar[e->bd.loop] = l.index;
    e->alias = r == 1 ? e->bd.alias : NULL;
    return l;
}

void nx_x86_region_close(emitter *e, loop l)
{
    bool border = !e->alias;
    e->alias = NULL;
    if (border)
        nx_x86_loop_close_scalar(e, l);
    else
        nx_x86_loop_close(e, l);
}

/* Both borders as one loop over b in [0, lo + n - hi): j = b below lo, b + hi - lo above (one
 * copy of the rules' code rather than two: compile time). Only where the loop's bounds are the
 * constant [0, n), not the thread split's [begin, end). */
loop nx_x86_borders_open(emitter *e)
{
    char cnt[32];
    int64_t lo = e->bd.lo, n = e->k->extent[e->bd.loop];
    snprintf(cnt, sizeof cnt, "%lld", (long long)(lo + n - e->bd.hi));
    loop l = nx_x86_loop_open(e, "0", cnt);
    int below = op2(e, "icmp slt", "i64", l.index, i64c(e, lo));
    int j = selv(e, "i64", below, l.index, op2(e, "add", "i64", l.index, i64c(e, e->bd.hi - lo)));
    e->loopvar[e->bd.loop] = j;
    e->alias = NULL;
    return l;
}

static void split_part_stores(emitter *e, int lin_outer, const char *ext)
{
    const nx_kernel *k = e->k;
    int L = e->bd.loop;
    e->live |= 1u << L;
    int lin = op2(e, "add", "i64", op2(e, "mul", "i64", lin_outer, constv(e, "i64", ext)),
                  e->loopvar[L]);
    for (int s = 0; s < k->nstores; s++)
        nx_x86_emit_store(e, &k->stores[s], lin);
}

/* The interior of a split row as a whole number of vectors and a remainder loop of its own: the
 * loop vectoriser leaves a loop's remainder scalar (up to 15 of the interior's columns at 16
 * lanes, each costing what a vector step does), while a loop shorter than a vector it folds into
 * one masked step. 3^3 dilation at 256^3 (interior 254 = 15 * 16 + 14): 0.0248 -> 0.0212 CPU s. */
static void emit_interior_parts(emitter *e, int lin_outer, const char *ext)
{
    int64_t v = 64 / (int64_t)nx_dtype_size(e->k->bufs[e->k->stores[0].buf].dtype);
    int64_t lo = e->bd.lo, hi = e->bd.hi, cut[3] = {lo, lo + (hi - lo) / v * v, hi};
    for (int part = 0; part < 2; part++) {
        if (cut[part] >= cut[part + 1])
            continue;
        char plo[32], phi[32];
        snprintf(plo, sizeof plo, "%lld", (long long)cut[part]);
        snprintf(phi, sizeof phi, "%lld", (long long)cut[part + 1]);
        loop l = nx_x86_region_open(e, 1, plo, phi);
        split_part_stores(e, lin_outer, ext);
        nx_x86_region_close(e, l);
    }
}

/* Whether the interior gets a remainder loop: its bounds are constants (not the thread split's),
 * it is at least a vector long and not a whole number of vectors. */
static bool interior_parts(const emitter *e)
{
    const nx_kernel *k = e->k;
    if (e->bd.loop == 0 || k->nstores < 1)
        return false;
    int64_t v = 64 / (int64_t)nx_dtype_size(k->bufs[k->stores[0].buf].dtype);
    int64_t n = e->bd.hi - e->bd.lo;
    return n >= v && n % v != 0;
}

/* The innermost space loop split in three, the stores in each part. */
void nx_x86_emit_split_stores(emitter *e, int lin_outer)
{
    const nx_kernel *k = e->k;
    int L = e->bd.loop;
    char ext[32];
    snprintf(ext, sizeof ext, "%lld", (long long)k->extent[L]);
    bool merged = L != 0 && nx_x86_region_used(e, 0) && nx_x86_region_used(e, 2);
    for (int r = merged ? 1 : 0; r < 3; r++) {
        if (!nx_x86_region_used(e, r) && !(merged && r == 2))
            continue;
        if (r == 1 && interior_parts(e)) {
            emit_interior_parts(e, lin_outer, ext);
            continue;
        }
        loop l = merged && r == 2
                     ? nx_x86_borders_open(e)
                     : nx_x86_region_open(e, r, L == 0 ? "%begin" : "0", L == 0 ? "%end" : ext);
        split_part_stores(e, lin_outer, ext);
        nx_x86_region_close(e, l);
    }
}
