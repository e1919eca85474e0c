/* Typed option values: parsing and validation shared by every subcommand and every op. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Control characters (a newline in a file name or in a value) are shown as '?' so that every
 * error stays one line, which scripts and the tests rely on. */
void cli_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *p = msg; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    }
    fprintf(stderr, "nitrix: %s\n", msg);
}

const char *cli_type_hint(const cli_opt *o)
{
    switch (o->type) {
    case CLI_INT:
        return "int";
    case CLI_FLOAT:
        return "float";
    case CLI_INTS:
        return "int,int,...";
    case CLI_FLOATS:
        return "float,float,...";
    case CLI_ENUM:
        return o->allowed ? o->allowed : "?";
    case CLI_DTYPE:
        return "dtype";
    case CLI_BOOL:
        return "bool";
    }
    return "?";
}

bool cli_split_long(const char *arg, char *buf, size_t buflen, const char **value)
{
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0' || arg[2] == '=')
        return false;
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t n = eq ? (size_t)(eq - name) : strlen(name);
    if (n >= buflen)
        n = buflen - 1; /* a name this long matches no option, which is the error we want */
    memcpy(buf, name, n);
    buf[n] = '\0';
    *value = eq ? eq + 1 : NULL;
    return true;
}

/* Strict whole-string numbers: no empty text, no trailing characters, no overflow. */
static bool parse_i64(const char *s, size_t len, int64_t *out)
{
    char tmp[64];
    if (len == 0 || len >= sizeof tmp)
        return false;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    char *end = NULL;
    errno = 0;
    long long v = strtoll(tmp, &end, 10);
    if (errno != 0 || *end != '\0' || tmp[0] == ' ' || tmp[0] == '\t')
        return false;
    *out = (int64_t)v;
    return true;
}

static bool parse_f64(const char *s, size_t len, double *out)
{
    char tmp[64];
    if (len == 0 || len >= sizeof tmp)
        return false;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    char *end = NULL;
    errno = 0;
    double v = strtod(tmp, &end);
    if (errno == ERANGE || *end != '\0' || !isfinite(v) || tmp[0] == ' ' || tmp[0] == '\t')
        return false;
    *out = v;
    return true;
}

/* The inclusive range "lo:hi" of allowed (NULL or an empty side: unbounded). */
static bool range_of(const char *allowed, double *lo, double *hi)
{
    *lo = -INFINITY;
    *hi = INFINITY;
    if (!allowed)
        return true;
    const char *colon = strchr(allowed, ':');
    if (!colon)
        return false;
    size_t nlo = (size_t)(colon - allowed), nhi = strlen(colon + 1);
    if (nlo > 0 && !parse_f64(allowed, nlo, lo))
        return false;
    if (nhi > 0 && !parse_f64(colon + 1, nhi, hi))
        return false;
    return *lo <= *hi;
}

static void range_text(const cli_opt *o, char *buf, size_t len)
{
    double lo, hi;
    const char *what = (o->type == CLI_INT || o->type == CLI_INTS) ? "an integer" : "a number";
    if (!o->allowed || !range_of(o->allowed, &lo, &hi))
        snprintf(buf, len, "%s", what);
    else if (isinf(lo))
        snprintf(buf, len, "%s <= %g", what, hi);
    else if (isinf(hi))
        snprintf(buf, len, "%s >= %g", what, lo);
    else
        snprintf(buf, len, "%s in %g..%g", what, lo, hi);
}

/* One number of an INT/FLOAT/INTS/FLOATS option, range-checked. */
static bool parse_number(const cli_opt *o, const char *s, size_t len, int64_t *i, double *f)
{
    double lo, hi, x;
    if (!range_of(o->allowed, &lo, &hi))
        return false;
    if (o->type == CLI_INT || o->type == CLI_INTS) {
        if (!parse_i64(s, len, i))
            return false;
        x = (double)*i;
    } else {
        if (!parse_f64(s, len, f))
            return false;
        x = *f;
    }
    return x >= lo && x <= hi;
}

static bool parse_list(const cli_opt *o, const char *text, cli_value *v)
{
    const char *p = text;
    v->n = 0;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (v->n == CLI_MAX_LIST)
            return false;
        if (!parse_number(o, p, len, &v->ints[v->n], &v->floats[v->n]))
            return false;
        v->n++;
        if (!comma)
            return true;
        p = comma + 1;
    }
}

static bool parse_enum(const cli_opt *o, const char *text, cli_value *v)
{
    const char *p = o->allowed;
    size_t n = strlen(text);
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && n > 0 && strncmp(p, text, n) == 0) {
            v->choice = text;
            return true;
        }
        p = bar ? bar + 1 : NULL;
    }
    return false;
}

static bool parse_bool(const char *text, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strcmp(text, yes[i]) == 0)
            return (*out = true);
        if (strcmp(text, no[i]) == 0) {
            *out = false;
            return true;
        }
    }
    return false;
}

static void expected_text(const cli_opt *o, char *buf, size_t len)
{
    char range[96];
    switch (o->type) {
    case CLI_INT:
    case CLI_FLOAT:
        range_text(o, buf, len);
        break;
    case CLI_INTS:
    case CLI_FLOATS:
        range_text(o, range, sizeof range);
        snprintf(buf, len, "1 to %d comma-separated values, each %s", CLI_MAX_LIST, range);
        break;
    case CLI_ENUM:
        snprintf(buf, len, "one of %s", o->allowed ? o->allowed : "(none)");
        break;
    case CLI_DTYPE:
        snprintf(buf, len, "a dtype: f32 f64 f16 bf16 i8 i16 i32 i64 u8 bool");
        break;
    case CLI_BOOL:
        snprintf(buf, len, "true or false (1/0, yes/no, on/off)");
        break;
    }
}

bool cli_parse_value(const cli_opt *o, const char *text, cli_value *v, char *err, size_t errlen)
{
    memset(v, 0, sizeof *v);
    bool ok = false;
    if (!text) {
        ok = o->type == CLI_BOOL;
        v->b = true;
        if (!ok) {
            char exp[160];
            expected_text(o, exp, sizeof exp);
            snprintf(err, errlen, "--%s needs a value (--%s=VALUE); expected %s", o->name, o->name,
                     exp);
            return false;
        }
    } else {
        switch (o->type) {
        case CLI_INT:
        case CLI_FLOAT:
            ok = parse_number(o, text, strlen(text), &v->i, &v->f);
            break;
        case CLI_INTS:
        case CLI_FLOATS:
            ok = parse_list(o, text, v);
            break;
        case CLI_ENUM:
            ok = parse_enum(o, text, v);
            break;
        case CLI_DTYPE:
            ok = nx_dtype_from_name(text, &v->dtype);
            break;
        case CLI_BOOL:
            ok = parse_bool(text, &v->b);
            break;
        }
    }
    if (!ok) {
        char exp[160];
        expected_text(o, exp, sizeof exp);
        snprintf(err, errlen, "--%s=%.64s is not valid; expected %s", o->name, text, exp);
        return false;
    }
    v->set = true;
    return true;
}
