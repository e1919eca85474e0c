/* The formula parser: a hand-written recursive-descent parser for semiring definitions
 * ("plus = max(a, b); times = a + b; zero = -inf") and pairwise kernels ("exp(-sqdist(x, y)) * b").
 *
 *   stmts   := stmt { (';' | newline) stmt }
 *   stmt    := name '=' expr
 *   expr    := sum [ ('<' | '<=' | '>' | '>=' | '==' | '!=') sum ]
 *   sum     := product { ('+' | '-') product }
 *   product := unary { ('*' | '/') unary }
 *   unary   := '-' unary | power
 *   power   := primary [ '^' unary ]              (right-associative: -a^2 is -(a^2))
 *   primary := number | name | name '(' expr { ',' expr } ')' | '(' expr ')'
 *
 * The input is untrusted (it is fuzzed): depth and size are bounded, and every error names the
 * line and column and what was expected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/semiring.h"

#define MAX_DEPTH 64
#define MAX_NODES 4096

typedef enum tok_kind {
    T_END,
    T_NUM,
    T_NAME,
    T_OP, /* one of + - * / ^ ( ) , ; = < > <= >= == != */
    T_BAD,
} tok_kind;

typedef struct tok {
    tok_kind kind;
    const char *s;
    size_t len;
    int line, col;
    bool newline_before;
    double num;
} tok;

typedef struct parser {
    nx_ctx *ctx;
    const char *who;
    nx_sr_dialect dialect;
    const char *p; /* next unread byte */
    int line, col;
    tok t;
    nx_sr_expr *e;
    int depth;
    nx_status st;
    char *msg;
    size_t msglen;
} parser;

/* ---- errors ----------------------------------------------------------------------------------*/

static void describe(const tok *t, char *buf, size_t len)
{
    switch (t->kind) {
    case T_END:
        snprintf(buf, len, "end of input");
        break;
    case T_NUM:
        snprintf(buf, len, "number '%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s);
        break;
    case T_NAME:
        snprintf(buf, len, "name '%.*s'", (int)(t->len > 40 ? 40 : t->len), t->s);
        break;
    case T_OP:
        snprintf(buf, len, "'%.*s'", (int)t->len, t->s);
        break;
    default: {
        unsigned char c = (unsigned char)t->s[0];
        if (c >= 0x20 && c < 0x7f)
            snprintf(buf, len, "character '%c'", c);
        else
            snprintf(buf, len, "byte 0x%02x", c);
    }
    }
}

static int32_t fail_at(parser *ps, const tok *t, const char *expected)
{
    if (ps->st == NX_OK) {
        char found[64];
        describe(t, found, sizeof found);
        snprintf(ps->msg, ps->msglen, "%s:%d:%d: expected %s, found %s", ps->who, t->line, t->col,
                 expected, found);
        ps->st = NX_ERR_PARSE;
    }
    return -1;
}

static int32_t fail_msg(parser *ps, const tok *t, nx_status st, const char *what)
{
    if (ps->st == NX_OK) {
        snprintf(ps->msg, ps->msglen, "%s:%d:%d: %s", ps->who, t->line, t->col, what);
        ps->st = st;
    }
    return -1;
}

/* ---- lexer -----------------------------------------------------------------------------------*/

static void advance_char(parser *ps)
{
    if (*ps->p == '\n') {
        ps->line++;
        ps->col = 1;
    } else {
        ps->col++;
    }
    ps->p++;
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void skip_space(parser *ps, bool *newline)
{
    for (;;) {
        char c = *ps->p;
        if (c == '\n') {
            *newline = true;
            advance_char(ps);
        } else if (c == ' ' || c == '\t' || c == '\r') {
            advance_char(ps);
        } else if (c == '#') {
            while (*ps->p && *ps->p != '\n')
                advance_char(ps);
        } else {
            return;
        }
    }
}

static size_t number_len(const char *s)
{
    size_t i = 0, digits = 0;
    while (is_digit(s[i]))
        i++, digits++;
    if (s[i] == '.') {
        i++;
        while (is_digit(s[i]))
            i++, digits++;
    }
    if (digits == 0)
        return 0;
    if (s[i] == 'e' || s[i] == 'E') {
        size_t j = i + 1;
        if (s[j] == '+' || s[j] == '-')
            j++;
        if (is_digit(s[j])) {
            while (is_digit(s[j]))
                j++;
            i = j;
        }
    }
    return i;
}

static void next(parser *ps)
{
    bool nl = false;
    skip_space(ps, &nl);
    tok *t = &ps->t;
    t->s = ps->p;
    t->line = ps->line;
    t->col = ps->col;
    t->newline_before = nl;
    t->len = 1;
    char c = *ps->p;
    if (c == '\0') {
        t->kind = T_END;
        t->len = 0;
        return;
    }
    size_t n = number_len(ps->p);
    if (n > 0) {
        char buf[64];
        t->kind = T_NUM;
        t->len = n;
        if (n >= sizeof buf) {
            t->num = NAN; /* reported by the caller: too long */
        } else {
            memcpy(buf, ps->p, n);
            buf[n] = '\0';
            t->num = strtod(buf, NULL);
        }
    } else if (is_alpha(c)) {
        t->kind = T_NAME;
        n = 0;
        while (is_alpha(ps->p[n]) || is_digit(ps->p[n]))
            n++;
        t->len = n;
    } else if (strchr("+-*/^(),;=<>!", c)) {
        t->kind = T_OP;
        if ((c == '<' || c == '>' || c == '=' || c == '!') && ps->p[1] == '=')
            t->len = 2;
        else if (c == '!')
            t->kind = T_BAD;
    } else {
        t->kind = T_BAD;
    }
    for (size_t i = 0; i < t->len; i++)
        advance_char(ps);
}

static bool is_op(const tok *t, const char *op)
{
    return t->kind == T_OP && t->len == strlen(op) && memcmp(t->s, op, t->len) == 0;
}

static bool is_name(const tok *t, const char *name)
{
    return t->kind == T_NAME && t->len == strlen(name) && memcmp(t->s, name, t->len) == 0;
}

/* ---- nodes -----------------------------------------------------------------------------------*/

static int32_t push(parser *ps, nx_sr_node n)
{
    if (ps->st != NX_OK)
        return -1;
    if (ps->e->n >= MAX_NODES)
        return fail_msg(ps, &ps->t, NX_ERR_PARSE, "formula too large (more than 4096 nodes)");
    int32_t i = nx_sr_push(ps->ctx, ps->e, &n);
    if (i < 0) {
        snprintf(ps->msg, ps->msglen, "%s: out of memory", ps->who);
        ps->st = NX_ERR_NOMEM;
    }
    return i;
}

static int32_t mk(parser *ps, int32_t op, int nops, int32_t a, int32_t b, int32_t c)
{
    if (a < 0 || (nops > 1 && b < 0) || (nops > 2 && c < 0))
        return -1;
    nx_sr_node n = {.op = op, .nops = nops, .ops = {a, b, c}, .dtype = NX_DTYPE_COUNT};
    return push(ps, n);
}

static int32_t mk_const(parser *ps, double v)
{
    nx_sr_node n = {.op = NX_SR_CONST, .dtype = NX_DTYPE_COUNT, .value = v};
    return push(ps, n);
}

static int32_t mk_var(parser *ps, int var)
{
    nx_sr_node n = {.op = NX_SR_VAR, .var = var, .dtype = NX_DTYPE_COUNT};
    return push(ps, n);
}

/* ---- functions -------------------------------------------------------------------------------*/

enum { F_SUM = -1, F_DOT = -2, F_SQDIST = -3, F_NORM2 = -4 };

typedef struct func {
    const char *name;
    int arity;
    int32_t op;
    bool pairwise_only;
} func;

static const func funcs[] = {
    {"exp", 1, NX_PRIM_EXP, false},
    {"log", 1, NX_PRIM_LOG, false},
    {"log1p", 1, NX_PRIM_LOG1P, false},
    {"expm1", 1, NX_PRIM_EXPM1, false},
    {"sqrt", 1, NX_PRIM_SQRT, false},
    {"rsqrt", 1, NX_PRIM_RSQRT, false},
    {"sin", 1, NX_PRIM_SIN, false},
    {"cos", 1, NX_PRIM_COS, false},
    {"tanh", 1, NX_PRIM_TANH, false},
    {"erf", 1, NX_PRIM_ERF, false},
    {"abs", 1, NX_PRIM_ABS, false},
    {"floor", 1, NX_PRIM_FLOOR, false},
    {"ceil", 1, NX_PRIM_CEIL, false},
    {"round", 1, NX_PRIM_ROUND, false},
    {"sign", 1, NX_PRIM_SIGN, false},
    {"neg", 1, NX_PRIM_NEG, false},
    {"max", 2, NX_PRIM_MAX, false},
    {"min", 2, NX_PRIM_MIN, false},
    {"pow", 2, NX_PRIM_POW, false},
    {"atan2", 2, NX_PRIM_ATAN2, false},
    {"mod", 2, NX_PRIM_MOD, false},
    {"logaddexp", 2, NX_SR_LOGADDEXP, false},
    {"select", 3, NX_PRIM_SELECT, false},
    {"where", 3, NX_PRIM_SELECT, false},
    {"sum", 1, F_SUM, true},
    {"dot", 2, F_DOT, true},
    {"sqdist", 2, F_SQDIST, true},
    {"norm2", 1, F_NORM2, true},
};

static const func *find_func(const parser *ps, const tok *t)
{
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++)
        if (is_name(t, funcs[i].name) &&
            (!funcs[i].pairwise_only || ps->dialect == NX_SR_DIALECT_PAIRWISE))
            return &funcs[i];
    return NULL;
}

static int32_t apply(parser *ps, const func *f, const int32_t *args)
{
    switch (f->op) {
    case F_SUM:
        return mk(ps, NX_SR_VSUM, 1, args[0], -1, -1);
    case F_DOT:
        return mk(ps, NX_SR_VSUM, 1, mk(ps, NX_PRIM_MUL, 2, args[0], args[1], -1), -1, -1);
    case F_NORM2:
        return mk(ps, NX_SR_VSUM, 1, mk(ps, NX_PRIM_MUL, 2, args[0], args[0], -1), -1, -1);
    case F_SQDIST: {
        int32_t d = mk(ps, NX_PRIM_SUB, 2, args[0], args[1], -1);
        return mk(ps, NX_SR_VSUM, 1, mk(ps, NX_PRIM_MUL, 2, d, d, -1), -1, -1);
    }
    default:
        return mk(ps, f->op, f->arity, args[0], args[1], args[2]);
    }
}

/* ---- grammar ---------------------------------------------------------------------------------*/

static int32_t expr(parser *ps);

static int32_t call(parser *ps, tok name)
{
    const func *f = find_func(ps, &name);
    if (!f)
        return fail_at(ps, &name, "a function (exp, log, sqrt, max, min, pow, select, ...)");
    next(ps); /* '(' */
    int32_t args[3] = {-1, -1, -1};
    int n = 0;
    if (!is_op(&ps->t, ")")) {
        for (;;) {
            int32_t a = expr(ps);
            if (a < 0)
                return -1;
            if (n < 3)
                args[n] = a;
            n++;
            if (!is_op(&ps->t, ","))
                break;
            next(ps);
        }
    }
    if (!is_op(&ps->t, ")"))
        return fail_at(ps, &ps->t, "',' or ')'");
    if (n != f->arity) {
        char what[128];
        snprintf(what, sizeof what, "%s takes %d argument%s, found %d", f->name, f->arity,
                 f->arity == 1 ? "" : "s", n);
        return fail_msg(ps, &name, NX_ERR_PARSE, what);
    }
    next(ps);
    return apply(ps, f, args);
}

static int32_t name_ref(parser *ps, const tok *t)
{
    if (is_name(t, "inf"))
        return mk_const(ps, INFINITY);
    if (is_name(t, "nan"))
        return mk_const(ps, NAN);
    if (ps->dialect == NX_SR_DIALECT_SEMIRING) {
        if (is_name(t, "a"))
            return mk_var(ps, NX_SR_VA);
        if (is_name(t, "b"))
            return mk_var(ps, NX_SR_VB);
        return fail_at(ps, t, "a, b, inf, nan or a number");
    }
    if (is_name(t, "x"))
        return mk_var(ps, NX_SR_VPX);
    if (is_name(t, "y"))
        return mk_var(ps, NX_SR_VPY);
    if (is_name(t, "b"))
        return mk_var(ps, NX_SR_VPB);
    if (t->len == 2 && t->s[0] == 'p' && t->s[1] >= '0' && t->s[1] <= '7')
        return mk_var(ps, NX_SR_VP0 + (t->s[1] - '0'));
    return fail_at(ps, t, "x, y, b, p0..p7, inf, nan or a number");
}

static int32_t primary(parser *ps)
{
    tok t = ps->t;
    if (t.kind == T_NUM) {
        if (t.len >= 64)
            return fail_msg(ps, &t, NX_ERR_PARSE, "number longer than 63 characters");
        next(ps);
        return mk_const(ps, t.num);
    }
    if (t.kind == T_NAME) {
        next(ps);
        if (is_op(&ps->t, "("))
            return call(ps, t);
        return name_ref(ps, &t);
    }
    if (is_op(&t, "(")) {
        next(ps);
        int32_t r = expr(ps);
        if (r < 0)
            return -1;
        if (!is_op(&ps->t, ")"))
            return fail_at(ps, &ps->t, "')'");
        next(ps);
        return r;
    }
    return fail_at(ps, &t, "a number, a name or '('");
}

static int32_t unary(parser *ps);

static int32_t power(parser *ps)
{
    int32_t base = primary(ps);
    if (base < 0 || !is_op(&ps->t, "^"))
        return base;
    next(ps);
    return mk(ps, NX_PRIM_POW, 2, base, unary(ps), -1);
}

static int32_t unary(parser *ps)
{
    if (++ps->depth > MAX_DEPTH)
        return fail_msg(ps, &ps->t, NX_ERR_PARSE, "expression nested more than 64 deep");
    int32_t r;
    if (is_op(&ps->t, "-")) {
        next(ps);
        r = unary(ps);
        /* A negated numeral stays a constant, so `zero = -inf` is a number. */
        if (r >= 0 && ps->e->nodes[r].op == NX_SR_CONST && r == ps->e->n - 1)
            ps->e->nodes[r].value = -ps->e->nodes[r].value;
        else
            r = mk(ps, NX_PRIM_NEG, 1, r, -1, -1);
    } else {
        r = power(ps);
    }
    ps->depth--;
    return r;
}

static int32_t product(parser *ps)
{
    int32_t l = unary(ps);
    while (l >= 0 && (is_op(&ps->t, "*") || is_op(&ps->t, "/"))) {
        int32_t op = is_op(&ps->t, "*") ? NX_PRIM_MUL : NX_PRIM_DIV;
        next(ps);
        l = mk(ps, op, 2, l, unary(ps), -1);
    }
    return l;
}

static int32_t sum(parser *ps)
{
    int32_t l = product(ps);
    while (l >= 0 && (is_op(&ps->t, "+") || is_op(&ps->t, "-"))) {
        int32_t op = is_op(&ps->t, "+") ? NX_PRIM_ADD : NX_PRIM_SUB;
        next(ps);
        l = mk(ps, op, 2, l, product(ps), -1);
    }
    return l;
}

static const struct {
    const char *s;
    int32_t op;
} cmps[] = {{"<", NX_PRIM_LT},  {"<=", NX_PRIM_LE}, {">", NX_PRIM_GT},
            {">=", NX_PRIM_GE}, {"==", NX_PRIM_EQ}, {"!=", NX_PRIM_NE}};

static int32_t expr(parser *ps)
{
    if (++ps->depth > MAX_DEPTH)
        return fail_msg(ps, &ps->t, NX_ERR_PARSE, "expression nested more than 64 deep");
    int32_t l = sum(ps);
    for (size_t i = 0; l >= 0 && i < sizeof cmps / sizeof cmps[0]; i++) {
        if (is_op(&ps->t, cmps[i].s)) {
            next(ps);
            l = mk(ps, cmps[i].op, 2, l, sum(ps), -1);
            break;
        }
    }
    ps->depth--;
    return l;
}

static void start(parser *ps, nx_ctx *ctx, const char *who, const char *text, nx_sr_dialect dialect,
                  nx_sr_expr *e, char *msg, size_t msglen)
{
    *ps = (parser){.ctx = ctx,
                   .who = who,
                   .dialect = dialect,
                   .p = text,
                   .line = 1,
                   .col = 1,
                   .e = e,
                   .st = NX_OK,
                   .msg = msg,
                   .msglen = msglen};
    msg[0] = '\0';
    next(ps);
}

nx_status nx_sr_parse_expr(nx_ctx *ctx, const char *who, const char *text, nx_sr_dialect dialect,
                           nx_sr_expr *e, int32_t *root, char *msg, size_t msglen)
{
    parser ps;
    start(&ps, ctx, who, text, dialect, e, msg, msglen);
    *root = expr(&ps);
    if (ps.st == NX_OK && ps.t.kind != T_END)
        fail_at(&ps, &ps.t, "an operator or end of input");
    return ps.st;
}

static bool stmt(parser *ps, nx_sr_stmt *s)
{
    if (ps->t.kind != T_NAME) {
        fail_at(ps, &ps->t, "a key (plus, times, zero, ...)");
        return false;
    }
    size_t n = ps->t.len < sizeof s->key ? ps->t.len : sizeof s->key - 1;
    memcpy(s->key, ps->t.s, n);
    s->key[n] = '\0';
    s->line = ps->t.line;
    s->col = ps->t.col;
    next(ps);
    if (!is_op(&ps->t, "=")) {
        fail_at(ps, &ps->t, "'='");
        return false;
    }
    next(ps);
    s->root = expr(ps);
    return s->root >= 0;
}

nx_status nx_sr_parse_stmts(nx_ctx *ctx, const char *who, const char *text, nx_sr_dialect dialect,
                            nx_sr_expr *e, nx_sr_stmt *stmts, int *nstmts, char *msg, size_t msglen)
{
    parser ps;
    start(&ps, ctx, who, text, dialect, e, msg, msglen);
    *nstmts = 0;
    while (ps.st == NX_OK) {
        while (is_op(&ps.t, ";"))
            next(&ps);
        if (ps.t.kind == T_END)
            break;
        if (*nstmts == NX_SR_MAX_STMTS) {
            fail_msg(&ps, &ps.t, NX_ERR_PARSE, "more than 8 statements");
            break;
        }
        if (!stmt(&ps, &stmts[*nstmts]))
            break;
        (*nstmts)++;
        if (!is_op(&ps.t, ";") && ps.t.kind != T_END && !ps.t.newline_before)
            fail_at(&ps, &ps.t, "an operator, ';', a newline or end of input");
    }
    if (ps.st == NX_OK && *nstmts == 0)
        fail_at(&ps, &ps.t, "a statement `key = expression`");
    return ps.st;
}
