/* Border/interior split of a kernel's innermost space loop (emit.h, nx_x86_borders_find): the
 * analysis of codegen/borders.c on the innermost axis, with the interiors shorter than
 * NX_X86_BORDERS_MIN (too short to vectorise) left out.
 *
 * Index rules (pad modes, clamps, a concat's selects) put a mod, a clamp or a select into the
 * load offsets of the innermost loop; LLVM then loads lane by lane (scalar gathers), about 5x
 * slower than an affine, vectorised loop. The emitter runs [0, A) and [B, n) with the rules and
 * [A, B) with the aliases, where the loads are then affine. */
#include <string.h>

#include "codegen/x86/emit.h"
#include "codegen/borders.h"

_Static_assert((int)NX_X86_ALIAS_SELF == (int)NX_KALIAS_SELF &&
                   (int)NX_X86_ALIAS_TO == (int)NX_KALIAS_TO &&
                   (int)NX_X86_ALIAS_CONST == (int)NX_KALIAS_CONST,
               "the x86 alias kinds are the analysis's");

nx_status nx_x86_borders_find(const nx_kernel *k, const uint32_t *mask, nx_x86_borders *s)
{
    memset(s, 0, sizeof *s);
    s->loop = -1;
    nx_kborders kb;
    nx_status st = nx_kborders_find(k, mask, k->ndim - 1, NX_X86_BORDERS_MIN, &kb);
    if (st != NX_OK || kb.loop < 0)
        return st;
    size_t n = (size_t)kb.ninst + 1;
    nx_x86_alias *al = nx_rt_alloc(k->ctx, n * sizeof *al);
    if (!al) {
        nx_kborders_free(k->ctx, &kb);
        return nx_rt_nomem(k->ctx, "x86 borders", n * sizeof *al);
    }
    for (int id = 0; id < kb.ninst; id++)
        al[id] = (nx_x86_alias){kb.alias[id].kind, kb.alias[id].to, kb.alias[id].c};
    al[kb.ninst] = (nx_x86_alias){NX_X86_ALIAS_SELF, -1, 0};
    s->loop = kb.loop;
    s->lo = kb.lo;
    s->hi = kb.hi;
    s->ninst = kb.ninst;
    s->alias = al;
    nx_kborders_free(k->ctx, &kb);
    return NX_OK;
}

void nx_x86_borders_free(nx_ctx *ctx, nx_x86_borders *s)
{
    nx_rt_free(ctx, s->alias, ((size_t)s->ninst + 1) * sizeof *s->alias);
    s->alias = NULL;
    s->loop = -1;
}
