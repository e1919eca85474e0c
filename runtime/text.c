/* The growing text buffer of internal.h (nx_rt_text): what the kernel emitters write into. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

void nx_rt_text_vput(nx_rt_text *t, const char *fmt, va_list ap0)
{
    if (t->failed)
        return;
    for (;;) {
        va_list ap;
        va_copy(ap, ap0);
        int n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            t->failed = true;
            return;
        }
        if (t->p && t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        size_t cap = t->cap ? t->cap : 4096;
        while (cap <= t->len + (size_t)n)
            cap *= 2;
        char *q = nx_rt_alloc(t->ctx, cap);
        if (!q) {
            t->failed = true;
            return;
        }
        if (t->len)
            memcpy(q, t->p, t->len);
        q[t->len] = 0;
        nx_rt_free(t->ctx, t->p, t->cap);
        t->p = q;
        t->cap = cap;
    }
}

void nx_rt_text_put(nx_rt_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nx_rt_text_vput(t, fmt, ap);
    va_end(ap);
}
