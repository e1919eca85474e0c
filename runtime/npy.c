/*
 * .npy array I/O: NumPy's format, versions 1.0, 2.0 and 3.0.
 *
 * A file is the magic "\x93NUMPY", two version bytes (major, minor), the header length (uint16 LE
 * for 1.0, uint32 LE for 2.0 and 3.0), the header, then the raw elements. The header is a Python
 * dict literal, {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, padded with spaces and
 * a final '\n' so the data starts at a multiple of 64 bytes. Version 3.0 only differs from 2.0 in
 * allowing utf-8 in the header, which a supported header never needs (all of it is ASCII).
 *
 * Choices the format leaves to us:
 * - bf16 has no NumPy dtype. nitrix writes it as descr '|V2' (NumPy's spelling of a 2-byte
 *   void) holding each element's bfloat16 bit pattern as a little-endian uint16, and reads '|V2'
 *   and '<V2' back as bf16. In NumPy, np.load(f).view('<u2') gives the bits and
 *   (a.view('<u2').astype('<u4') << 16).view('<f4') the float32 values (ml_dtypes users can
 *   .view(ml_dtypes.bfloat16)). Voids of any other size are rejected.
 * - Big-endian files ('>f4', ...) are read and byte-swapped; the writer always writes
 *   little-endian. '=' (native order) is rejected, since a file has no native order; '|' (no
 *   order) is accepted for the one-byte types and V2 only, where NumPy writes it.
 * - Bytes after the data are rejected: they come from a damaged file or from several arrays
 *   appended to one file, and ignoring them would hide both.
 * - bool elements are stored as 0 or 1: nonzero bytes read from a file (NumPy calls them True) and
 *   nonzero bytes of a bool tensor being written both become 1.
 * - The header parser is strict: exactly the keys 'descr', 'fortran_order' and 'shape', each once,
 *   in any order; strings in single or double quotes without escapes; True or False; a tuple of
 *   non-negative decimal integers (a 1-tuple needs its comma; in versions 1.0 and 2.0 the 'L'
 *   suffix of Python 2 writers is accepted, as NumPy does); spaces, tabs and newlines between
 *   tokens; an optional trailing comma; nothing but whitespace after the closing brace.
 * - The file reader streams: it reads the preamble and the header, checks that the file holds
 *   exactly the bytes the shape needs, and only then allocates the tensor and reads the data
 *   straight into it (through one scratch buffer when the file is in Fortran order, which is
 *   transposed into C order). A small file claiming a huge shape fails before any allocation.
 *   Pipes and character devices are read with the same bound: the preamble, the header it
 *   declares (at most 1 MiB), then exactly the data bytes the header declares, into a buffer
 *   that grows only as bytes arrive; one byte more is "trailing data". Reading /dev/zero fails at
 *   the magic, an endless FIFO right after the data, and neither grows memory.
 *
 * The writer produces NumPy 1.24's bytes for the same C-contiguous array: sorted keys, repr()
 * values, spare spaces letting the first extent grow to 21 digits in place, padding to 64 bytes.
 * (With at most 8 axes NumPy can create, every such header is 128 bytes; the growth spaces only
 * change the length for empty tensors with extents NumPy refuses, or if NX_MAX_DIMS grows.)
 * Strided tensors are gathered into C order about 64 KiB at a time (whole indices of the first
 * axis where one is at most 1 MiB); Fortran files and transposed views are copied in 32 x 32
 * tiles, which keeps source and destination in cache (3-4 times faster than walking the output
 * order at 256 MiB). nx_npy_write creates
 * "<path>.<pid>.<n>.tmp" beside the target (O_EXCL, mode 0666 less the umask), writes and fsyncs
 * it, then renames it over path; on any failure the temporary file is removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor.h"

#define NPY_PREFIX_MAX 12     /* magic (6), version (2), header length (4 from version 2.0) */
#define NPY_ALIGN 64          /* NumPy pads the header so the data starts on this boundary */
#define NPY_GROWTH_DIGITS 21  /* NumPy leaves room for the first extent to grow to this many */
#define NPY_HEADER_TEXT 512   /* bytes enough for any header the writer makes (NX_MAX_DIMS axes) */
#define NPY_WHERE 224         /* "nx_npy_read: <path>" prefix of messages, truncated */
#define NPY_CHUNK (64 * 1024) /* the file writer converts and writes this many bytes at a time */
#define NPY_SLAB_MAX (1 << 20) /* ... or one index of the first axis at a time, up to this size */
#define NPY_TILE 32            /* tile edge for transposing copies: 32 x 32 x 8 bytes fit in L1 */
#define NPY_STREAM_HEADER_MAX (1 << 20) /* longest header read from a pipe or device */

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
static const bool host_big_endian = true;
#else
static const bool host_big_endian = false;
#endif

/* descr kind letter and byte size for each dtype; bf16 is the 2-byte void (see the top). */
static const struct {
    char kind;
    int size;
    nx_dtype dtype;
} descr_table[] = {
    {'f', 4, NX_DTYPE_F32}, {'f', 8, NX_DTYPE_F64}, {'f', 2, NX_DTYPE_F16},
    {'V', 2, NX_DTYPE_BF16}, {'i', 1, NX_DTYPE_I8}, {'i', 2, NX_DTYPE_I16},
    {'i', 4, NX_DTYPE_I32}, {'i', 8, NX_DTYPE_I64}, {'u', 1, NX_DTYPE_U8},
    {'u', 4, NX_DTYPE_U32}, {'u', 8, NX_DTYPE_U64},
    {'b', 1, NX_DTYPE_BOOL},
};
#define DESCR_COUNT (sizeof descr_table / sizeof *descr_table)
#define DESCR_EXPECTED                                                                             \
    "'<f4' '<f8' '<f2' '|i1' '<i2' '<i4' '<i8' '|u1' '<u4' '<u8' '|b1' or '|V2' (bf16), '>' "    \
    "for big-endian"

/* What the preamble and header say. */
typedef struct npy_info {
    unsigned major, minor;
    size_t hstart;  /* offset of the header text */
    uint64_t hlen;  /* bytes of header text */
    nx_dtype dtype;
    bool big_endian; /* data bytes are big-endian ('>') */
    bool fortran;
    int ndim;
    int64_t shape[NX_MAX_DIMS];
    int64_t data_bytes;
    bool seen_descr, seen_fortran, seen_shape;
} npy_info;

/* A strided array of elements: what the writer reads from and a Fortran file is read through. */
typedef struct layout {
    const uint8_t *base; /* element (0, ..., 0) */
    size_t elsize;
    int ndim;
    int64_t shape[NX_MAX_DIMS];
    int64_t strides[NX_MAX_DIMS]; /* in elements */
} layout;

/* ---- element copies ------------------------------------------------------------------------*/

/* Drops extent-1 axes and merges neighbours that are contiguous with each other, so a C-contiguous
 * array becomes a single run and is copied with one memcpy. */
static void layout_simplify(layout *l)
{
    int n = 0;
    for (int i = 0; i < l->ndim; i++) {
        int64_t span;
        if (l->shape[i] == 1)
            continue;
        if (n > 0 && nx_mul_i64(l->strides[i], l->shape[i], &span) && l->strides[n - 1] == span) {
            l->shape[n - 1] *= l->shape[i];
            l->strides[n - 1] = l->strides[i];
            continue;
        }
        l->shape[n] = l->shape[i];
        l->strides[n] = l->strides[i];
        n++;
    }
    l->ndim = n;
}

static void copy_run(uint8_t *dst, const uint8_t *src, size_t elsize, int64_t stride, int64_t n)
{
    if (stride == 1) {
        memcpy(dst, src, (size_t)n * elsize);
        return;
    }
    ptrdiff_t step = (ptrdiff_t)stride * (ptrdiff_t)elsize;
    /* constant sizes let the compiler turn each memcpy into one load and store */
    switch (elsize) {
    case 1:
        for (int64_t k = 0; k < n; k++, src += step)
            dst[k] = *src;
        break;
    case 2:
        for (int64_t k = 0; k < n; k++, src += step)
            memcpy(dst + 2 * k, src, 2);
        break;
    case 4:
        for (int64_t k = 0; k < n; k++, src += step)
            memcpy(dst + 4 * k, src, 4);
        break;
    default:
        for (int64_t k = 0; k < n; k++, src += step)
            memcpy(dst + (size_t)k * elsize, src, elsize);
        break;
    }
}

/* Copies count elements of l, from C-order position start on, contiguously into dst. */
static void gather(uint8_t *dst, const layout *l, int64_t start, int64_t count)
{
    if (l->ndim == 0) {
        if (count > 0)
            memcpy(dst, l->base, l->elsize);
        return;
    }
    int last = l->ndim - 1;
    int64_t idx[NX_MAX_DIMS];
    int64_t rem = start;
    for (int i = last; i >= 0; i--) {
        idx[i] = rem % l->shape[i];
        rem /= l->shape[i];
    }
    while (count > 0) {
        int64_t off = 0;
        for (int i = 0; i < l->ndim; i++)
            off += idx[i] * l->strides[i];
        int64_t run = l->shape[last] - idx[last];
        if (run > count)
            run = count;
        copy_run(dst, l->base + off * (int64_t)l->elsize, l->elsize, l->strides[last], run);
        dst += (size_t)run * l->elsize;
        count -= run;
        idx[last] += run;
        for (int i = last; i > 0 && idx[i] == l->shape[i]; i--) {
            idx[i] = 0;
            idx[i - 1]++;
        }
    }
}

/* One tile of a 2-D transpose-like copy: rows i (source stride sp), columns j (source stride
 * sl), destination rows dstride apart. Called with constant es so each memcpy is one move. */
static inline void copy_tile(uint8_t *dst, int64_t dstride, const uint8_t *src, int64_t sp,
                             int64_t sl, int64_t ni, int64_t nj, size_t es)
{
    for (int64_t i = 0; i < ni; i++)
        for (int64_t j = 0; j < nj; j++)
            memcpy(dst + (i * dstride + j) * (int64_t)es, src + (i * sp + j * sl) * (int64_t)es,
                   es);
}

static void copy_tile_es(uint8_t *dst, int64_t dstride, const uint8_t *src, int64_t sp,
                         int64_t sl, int64_t ni, int64_t nj, size_t es)
{
    switch (es) {
    case 1:
        copy_tile(dst, dstride, src, sp, sl, ni, nj, 1);
        break;
    case 2:
        copy_tile(dst, dstride, src, sp, sl, ni, nj, 2);
        break;
    case 4:
        copy_tile(dst, dstride, src, sp, sl, ni, nj, 4);
        break;
    default:
        copy_tile(dst, dstride, src, sp, sl, ni, nj, 8);
        break;
    }
}

/* The axis other than the last with the smallest stride, if it beats the last axis: copying
 * tiles of it and the last axis keeps both source and destination in cache (a Fortran file, a
 * transposed view), where walking the last axis alone would touch one cache line per element. */
static int tile_axis(const layout *l)
{
    int last = l->ndim - 1, best = -1;
    if (l->ndim < 2 || l->strides[last] == 1)
        return -1;
    int64_t best_abs = l->strides[last] < 0 ? -l->strides[last] : l->strides[last];
    for (int k = 0; k < last; k++) {
        int64_t a = l->strides[k] < 0 ? -l->strides[k] : l->strides[k];
        if (a < best_abs) {
            best = k;
            best_abs = a;
        }
    }
    return best;
}

/* Copies all of l contiguously into dst in C order. */
static void gather_all(uint8_t *dst, const layout *l, int64_t numel)
{
    int p = tile_axis(l);
    if (p < 0) {
        gather(dst, l, 0, numel);
        return;
    }
    int last = l->ndim - 1;
    int64_t ds[NX_MAX_DIMS], idx[NX_MAX_DIMS] = {0};
    nx_rt_contiguous_strides(l->ndim, l->shape, ds);
    int64_t np = l->shape[p], nl = l->shape[last];
    int64_t outer = numel / (np * nl);
    for (int64_t o = 0; o < outer; o++) {
        int64_t soff = 0, doff = 0;
        for (int k = 0; k < last; k++) {
            soff += idx[k] * l->strides[k];
            doff += idx[k] * ds[k];
        }
        for (int64_t i0 = 0; i0 < np; i0 += NPY_TILE)
            for (int64_t j0 = 0; j0 < nl; j0 += NPY_TILE)
                copy_tile_es(dst + (doff + i0 * ds[p] + j0) * (int64_t)l->elsize, ds[p],
                             l->base + (soff + i0 * l->strides[p] + j0 * l->strides[last]) *
                                           (int64_t)l->elsize,
                             l->strides[p], l->strides[last],
                             np - i0 < NPY_TILE ? np - i0 : NPY_TILE,
                             nl - j0 < NPY_TILE ? nl - j0 : NPY_TILE, l->elsize);
        for (int k = last - 1; k >= 0; k--) {
            if (k == p)
                continue;
            if (++idx[k] < l->shape[k])
                break;
            idx[k] = 0;
        }
    }
}

static void swap_bytes(uint8_t *p, size_t elsize, int64_t n)
{
    for (int64_t i = 0; i < n; i++, p += elsize) {
        if (elsize == 2) {
            uint16_t v;
            memcpy(&v, p, 2);
            v = __builtin_bswap16(v);
            memcpy(p, &v, 2);
        } else if (elsize == 4) {
            uint32_t v;
            memcpy(&v, p, 4);
            v = __builtin_bswap32(v);
            memcpy(p, &v, 4);
        } else if (elsize == 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            v = __builtin_bswap64(v);
            memcpy(p, &v, 8);
        }
    }
}

/* Brings n elements between file and host form: byte order, and bools to 0/1. */
static void fix_elements(uint8_t *p, nx_dtype dtype, int64_t n, bool swap)
{
    size_t elsize = nx_dtype_size(dtype);
    if (swap && elsize > 1)
        swap_bytes(p, elsize, n);
    if (dtype == NX_DTYPE_BOOL) {
        for (int64_t i = 0; i < n; i++)
            p[i] = p[i] != 0;
    }
}

/* ---- messages --------------------------------------------------------------------------------*/

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* Up to 40 bytes of s for a message, without trailing padding, non-printable bytes as '?'. */
static const char *excerpt(char *buf, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    while (n > 0 && is_space(s[n - 1]))
        n--;
    size_t lim = n < 40 ? n : 40;
    for (size_t i = 0; i < lim && k + 1 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        buf[k++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (n > lim && k + 4 < cap) {
        memcpy(buf + k, "...", 3);
        k += 3;
    }
    buf[k] = '\0';
    return buf;
}

static const char *where_path(char *buf, const char *fn, const char *path)
{
    int n = snprintf(buf, NPY_WHERE, "%s: %s", fn, path);
    if (n >= NPY_WHERE)
        memcpy(buf + NPY_WHERE - 4, "...", 4);
    return buf;
}

static nx_status io_error(nx_ctx *ctx, const char *where, const char *what, int err)
{
    char msg[128];
    return nx_rt_error(ctx, NX_ERR_IO, "%s: %s: %s", where, what,
                       strerror_r(err, msg, sizeof msg));
}

/* ---- preamble --------------------------------------------------------------------------------*/

/* What a file that is not .npy probably is, for the two a neuroimaging user most often passes:
 * a NIfTI-1/2 image (sizeof_hdr 348 or 540, either byte order) or a gzip file (.nii.gz). */
static const char *foreign_hint(const uint8_t *p, size_t n, char *buf, size_t cap)
{
    static const char convert[] =
        "; convert it with nibabel: python -c \"import nibabel as nib, numpy as np; "
        "np.save('x.npy', np.asarray(nib.load('IN.nii.gz').dataobj))\"";
    uint32_t le = n >= 4 ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                               (uint32_t)p[3] << 24
                         : 0;
    uint32_t be = n >= 4 ? __builtin_bswap32(le) : 0;
    const char *what = NULL;
    if (n >= 2 && p[0] == 0x1f && p[1] == 0x8b)
        what = "it is gzip-compressed (a .nii.gz NIfTI image?)";
    else if (le == 348 || be == 348 || le == 540 || be == 540)
        what = "it looks like a NIfTI image (.nii)";
    if (!what)
        return "";
    snprintf(buf, cap, "; %s%s", what, convert);
    return buf;
}

static nx_status check_magic(nx_ctx *ctx, const char *where, const uint8_t *p, size_t have,
                             uint64_t total)
{
    size_t n = have < sizeof npy_magic ? have : sizeof npy_magic;
    if (n > 0 && memcmp(p, npy_magic, n) != 0) {
        char hex[6 * 3 + 1] = "", hint[320];
        for (size_t i = 0; i < n; i++)
            snprintf(hex + 3 * i, 4, "%02x ", p[i]);
        hex[3 * n - 1] = '\0';
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: bad magic: not a .npy file (starts with bytes %s); expected "
                           "93 4e 55 4d 50 59 (\"\\x93NUMPY\")%s",
                           where, hex, foreign_hint(p, n, hint, sizeof hint));
    }
    if (total < sizeof npy_magic)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: truncated header: the input is %llu bytes, shorter than the "
                           "6-byte magic \"\\x93NUMPY\"",
                           where, (unsigned long long)total);
    return NX_OK;
}

/* Reads magic, version and header length from the first have (= min(total, 12)) bytes of an
 * input of total bytes. */
static nx_status parse_preamble(nx_ctx *ctx, const char *where, const uint8_t *p, size_t have,
                                uint64_t total, npy_info *h)
{
    nx_status st = check_magic(ctx, where, p, have, total);
    if (st != NX_OK)
        return st;
    if (total < 8)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: truncated header: the input is %llu bytes and ends inside the "
                           "version; expected at least 10 bytes of preamble",
                           where, (unsigned long long)total);
    h->major = p[6];
    h->minor = p[7];
    if (h->major < 1 || h->major > 3 || h->minor != 0)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: unsupported format version %u.%u; expected 1.0, 2.0 or 3.0",
                           where, h->major, h->minor);
    h->hstart = h->major == 1 ? 10 : 12;
    if (total < h->hstart)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: truncated header: the input is %llu bytes and ends inside the "
                           "header length; version %u.0 needs %zu bytes of preamble",
                           where, (unsigned long long)total, h->major, h->hstart);
    h->hlen = p[8] | (uint64_t)p[9] << 8;
    if (h->major > 1)
        h->hlen |= (uint64_t)p[10] << 16 | (uint64_t)p[11] << 24;
    if (h->hlen > total - h->hstart)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: header length %llu goes beyond the end of the input: the header "
                           "would end at byte %llu but the input has %llu bytes",
                           where, (unsigned long long)h->hlen,
                           (unsigned long long)(h->hstart + h->hlen), (unsigned long long)total);
    return NX_OK;
}

/* ---- header dict -----------------------------------------------------------------------------*/

typedef struct cursor {
    nx_ctx *ctx;
    const char *where;
    const char *s;
    size_t n, i;
    bool py2_longs; /* versions 1.0 and 2.0 may come from Python 2, which wrote 3L */
} cursor;

/* "malformed header dict at offset 12: expected ':' after a key, found 'x' (near "x...")". */
static nx_status malformed(cursor *c, const char *expected)
{
    char found[32], near[48];
    if (c->i >= c->n) {
        snprintf(found, sizeof found, "the end of the header");
        near[0] = '\0';
    } else {
        unsigned char ch = (unsigned char)c->s[c->i];
        if (ch == '\'')
            snprintf(found, sizeof found, "\"'\"");
        else if (ch >= 0x20 && ch < 0x7f)
            snprintf(found, sizeof found, "'%c'", ch);
        else
            snprintf(found, sizeof found, "byte 0x%02x", ch);
        excerpt(near, sizeof near, c->s + c->i, c->n - c->i);
    }
    return nx_rt_error(c->ctx, NX_ERR_PARSE,
                       "%s: malformed header dict at offset %zu: expected %s, found %s%s%s%s",
                       c->where, c->i, expected, found, near[0] ? " (at \"" : "", near,
                       near[0] ? "\")" : "");
}

static void skip_space(cursor *c)
{
    while (c->i < c->n && is_space(c->s[c->i]))
        c->i++;
}

static bool peek(const cursor *c, char ch)
{
    return c->i < c->n && c->s[c->i] == ch;
}

static bool eat(cursor *c, char ch)
{
    if (!peek(c, ch))
        return false;
    c->i++;
    return true;
}

/* A quoted string without escapes; *str and *len point into the header. */
static nx_status parse_string(cursor *c, const char *what, const char **str, size_t *len)
{
    if (!peek(c, '\'') && !peek(c, '"'))
        return malformed(c, what);
    char quote = c->s[c->i++];
    size_t start = c->i;
    while (c->i < c->n && c->s[c->i] != quote) {
        char ch = c->s[c->i];
        if (ch == '\\' || ch == '\n' || ch == '\r')
            return malformed(c, "a string without escapes or line breaks");
        c->i++;
    }
    if (c->i >= c->n)
        return malformed(c, "the closing quote of a string");
    *str = c->s + start;
    *len = c->i - start;
    c->i++;
    return NX_OK;
}

static nx_status set_descr(cursor *c, npy_info *h, const char *s, size_t n)
{
    char order = n > 0 ? s[0] : '\0';
    int size = 0;
    bool digits = n >= 3 && n <= 4 && s[2] != '0';
    for (size_t i = 2; digits && i < n; i++) {
        digits = s[i] >= '0' && s[i] <= '9';
        size = size * 10 + (s[i] - '0');
    }
    size_t row = DESCR_COUNT;
    for (size_t r = 0; digits && r < DESCR_COUNT; r++) {
        if (descr_table[r].kind == s[1] && descr_table[r].size == size)
            row = r;
    }
    char shown[48];
    excerpt(shown, sizeof shown, s, n);
    if (row == DESCR_COUNT || (order != '<' && order != '>' && order != '|' && order != '='))
        return nx_rt_error(c->ctx, NX_ERR_PARSE, "%s: unknown descr '%s'; expected " DESCR_EXPECTED,
                           c->where, shown);
    bool orderless = size == 1 || s[1] == 'V';
    if (order == '=')
        return nx_rt_error(c->ctx, NX_ERR_PARSE,
                           "%s: descr '%s' has native byte order '=', which a file cannot have; "
                           "expected '<' or '>'",
                           c->where, shown);
    if ((order == '|' && !orderless) || (order == '>' && s[1] == 'V'))
        return nx_rt_error(c->ctx, NX_ERR_PARSE,
                           "%s: descr '%s' has the wrong byte order mark; expected %s", c->where,
                           shown, s[1] == 'V' ? "'|V2' or '<V2'" : "'<' or '>' before a "
                                                                   "multi-byte type");
    h->dtype = descr_table[row].dtype;
    h->big_endian = order == '>' && size > 1;
    return NX_OK;
}

static nx_status parse_descr(cursor *c, npy_info *h)
{
    if (peek(c, '['))
        return nx_rt_error(c->ctx, NX_ERR_PARSE,
                           "%s: the header's descr is a list (a structured dtype), which nitrix "
                           "does not support; expected a string, one of " DESCR_EXPECTED,
                           c->where);
    const char *s;
    size_t n;
    nx_status st = parse_string(c, "a quoted string as the value of 'descr'", &s, &n);
    if (st != NX_OK)
        return st;
    return set_descr(c, h, s, n);
}

static bool word_at(const cursor *c, const char *w)
{
    size_t n = strlen(w);
    if (c->n - c->i < n || memcmp(c->s + c->i, w, n) != 0)
        return false;
    if (c->i + n == c->n)
        return true;
    char next = c->s[c->i + n];
    return !(next == '_' || (next >= '0' && next <= '9') || ((next | 0x20) >= 'a' &&
                                                             (next | 0x20) <= 'z'));
}

static nx_status parse_fortran(cursor *c, npy_info *h)
{
    if (word_at(c, "True")) {
        h->fortran = true;
        c->i += 4;
    } else if (word_at(c, "False")) {
        h->fortran = false;
        c->i += 5;
    } else {
        return malformed(c, "True or False as the value of 'fortran_order'");
    }
    return NX_OK;
}

static nx_status parse_extent(cursor *c, int axis, int64_t *out)
{
    if (peek(c, '-'))
        return nx_rt_error(c->ctx, NX_ERR_PARSE,
                           "%s: shape extent %d is negative; expected an integer >= 0", c->where,
                           axis);
    if (c->i >= c->n || c->s[c->i] < '0' || c->s[c->i] > '9')
        return malformed(c, "a non-negative integer in the shape");
    if (c->s[c->i] == '0' && c->i + 1 < c->n && c->s[c->i + 1] >= '0' && c->s[c->i + 1] <= '9')
        return malformed(c, "an integer without leading zeros in the shape");
    int64_t v = 0;
    while (c->i < c->n && c->s[c->i] >= '0' && c->s[c->i] <= '9') {
        if (!nx_mul_i64(v, 10, &v) || !nx_add_i64(v, c->s[c->i] - '0', &v))
            return nx_rt_error(c->ctx, NX_ERR_PARSE,
                               "%s: shape extent %d does not fit in 64 bits; expected at most "
                               "%lld",
                               c->where, axis, (long long)INT64_MAX);
        c->i++;
    }
    if (c->py2_longs && (peek(c, 'L') || peek(c, 'l')))
        c->i++;
    *out = v;
    return NX_OK;
}

/* ( ) | ( int , ) | ( int , int [,] ) ... */
static nx_status parse_shape(cursor *c, npy_info *h)
{
    if (!eat(c, '('))
        return malformed(c, "'(' opening the tuple value of 'shape'");
    h->ndim = 0;
    skip_space(c);
    bool comma = false;
    while (!peek(c, ')')) {
        if (h->ndim == NX_MAX_DIMS)
            return nx_rt_error(c->ctx, NX_ERR_PARSE,
                               "%s: the shape has more than %d dimensions; nitrix supports at "
                               "most NX_MAX_DIMS = %d",
                               c->where, NX_MAX_DIMS, NX_MAX_DIMS);
        nx_status st = parse_extent(c, h->ndim, &h->shape[h->ndim]);
        if (st != NX_OK)
            return st;
        h->ndim++;
        skip_space(c);
        comma = eat(c, ',');
        skip_space(c);
        if (!comma && !peek(c, ')'))
            return malformed(c, "',' or ')' in the shape tuple");
    }
    if (h->ndim == 1 && !comma)
        return malformed(c, "',' after the only extent: a 1-tuple is written (n,)");
    c->i++;
    return NX_OK;
}

static nx_status parse_entry(cursor *c, npy_info *h)
{
    const char *key;
    size_t n;
    size_t at = c->i;
    nx_status st = parse_string(c, "a quoted key or '}'", &key, &n);
    if (st != NX_OK)
        return st;
    bool *seen = NULL;
    if (n == 5 && memcmp(key, "descr", 5) == 0)
        seen = &h->seen_descr;
    else if (n == 13 && memcmp(key, "fortran_order", 13) == 0)
        seen = &h->seen_fortran;
    else if (n == 5 && memcmp(key, "shape", 5) == 0)
        seen = &h->seen_shape;
    char shown[48];
    excerpt(shown, sizeof shown, key, n);
    if (!seen)
        return nx_rt_error(c->ctx, NX_ERR_PARSE,
                           "%s: malformed header dict: unexpected key '%s' at offset %zu; "
                           "expected only 'descr', 'fortran_order' and 'shape'",
                           c->where, shown, at);
    if (*seen)
        return nx_rt_error(c->ctx, NX_ERR_PARSE,
                           "%s: malformed header dict: key '%s' appears twice; expected each "
                           "key once",
                           c->where, shown);
    *seen = true;
    skip_space(c);
    if (!eat(c, ':'))
        return malformed(c, "':' after a key");
    skip_space(c);
    if (seen == &h->seen_descr)
        return parse_descr(c, h);
    if (seen == &h->seen_fortran)
        return parse_fortran(c, h);
    return parse_shape(c, h);
}

static nx_status parse_header(nx_ctx *ctx, const char *where, const char *text, size_t len,
                              npy_info *h)
{
    cursor c = {ctx, where, text, len, 0, h->major < 3};
    h->seen_descr = h->seen_fortran = h->seen_shape = false;
    skip_space(&c);
    if (!eat(&c, '{'))
        return malformed(&c, "'{' opening the header dict");
    skip_space(&c);
    while (!eat(&c, '}')) {
        nx_status st = parse_entry(&c, h);
        if (st != NX_OK)
            return st;
        skip_space(&c);
        if (eat(&c, ',')) {
            skip_space(&c);
        } else if (!peek(&c, '}')) {
            return malformed(&c, "',' or '}' after a value");
        }
    }
    if (!h->seen_descr || !h->seen_fortran || !h->seen_shape)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: malformed header dict: it lacks %s; expected the keys 'descr', "
                           "'fortran_order' and 'shape'",
                           where,
                           !h->seen_descr     ? "'descr'"
                           : !h->seen_fortran ? "'fortran_order'"
                                              : "'shape'");
    skip_space(&c);
    if (c.i < c.n)
        return malformed(&c, "only spaces and a newline after the header dict");
    return NX_OK;
}

/* ---- reading ---------------------------------------------------------------------------------*/

/* The data must be exactly what the shape needs: checked before anything is allocated. */
static nx_status data_size(nx_ctx *ctx, const char *where, npy_info *h)
{
    char sh[192];
    int64_t elsize = (int64_t)nx_dtype_size(h->dtype);
    int64_t numel;
    if (!nx_shape_numel(h->ndim, h->shape, &numel) ||
        !nx_mul_i64(numel, elsize, &h->data_bytes)) {
        nx_shape_str(sh, sizeof sh, h->ndim, h->shape);
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: shape %s of %s overflows: its byte size does not fit in 64 bits",
                           where, sh, nx_dtype_name(h->dtype));
    }
    return NX_OK;
}

static nx_status check_data(nx_ctx *ctx, const char *where, npy_info *h, uint64_t avail)
{
    char sh[192];
    nx_status st = data_size(ctx, where, h);
    if (st != NX_OK)
        return st;
    nx_shape_str(sh, sizeof sh, h->ndim, h->shape);
    if ((uint64_t)h->data_bytes > avail)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: data is truncated: shape %s of %s needs %lld bytes but only %llu "
                           "follow the header",
                           where, sh, nx_dtype_name(h->dtype), (long long)h->data_bytes,
                           (unsigned long long)avail);
    if ((uint64_t)h->data_bytes < avail)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: %llu bytes of trailing data after the array: shape %s of %s "
                           "needs %lld bytes but %llu follow the header; expected the input to "
                           "end with the data",
                           where, (unsigned long long)(avail - (uint64_t)h->data_bytes), sh,
                           nx_dtype_name(h->dtype), (long long)h->data_bytes,
                           (unsigned long long)avail);
    return NX_OK;
}

static bool needs_transpose(const npy_info *h)
{
    return h->fortran && h->ndim > 1;
}

/* Moves the file-ordered data at src (which may be t's own data) into t, C order, host form. */
static void fill(const npy_info *h, const uint8_t *src, nx_tensor *t)
{
    uint8_t *dst = t->storage->data;
    int64_t numel = h->data_bytes / (int64_t)nx_dtype_size(h->dtype);
    if (needs_transpose(h)) {
        layout l = {src, nx_dtype_size(h->dtype), h->ndim, {0}, {0}};
        int64_t s = 1;
        for (int i = 0; i < h->ndim; i++) {
            l.shape[i] = h->shape[i];
            l.strides[i] = s;
            s *= h->shape[i];
        }
        layout_simplify(&l);
        gather_all(dst, &l, numel);
    } else if (src != dst) {
        memcpy(dst, src, (size_t)h->data_bytes);
    }
    bool swap = h->dtype == NX_DTYPE_BF16 ? host_big_endian : h->big_endian != host_big_endian;
    fix_elements(dst, h->dtype, numel, swap);
}

static nx_status read_buffer(nx_ctx *ctx, const char *where, const uint8_t *buf, size_t len,
                             nx_tensor **out)
{
    npy_info h;
    size_t have = len < NPY_PREFIX_MAX ? len : NPY_PREFIX_MAX;
    nx_status st = parse_preamble(ctx, where, buf, have, len, &h);
    if (st != NX_OK)
        return st;
    st = parse_header(ctx, where, (const char *)buf + h.hstart, (size_t)h.hlen, &h);
    if (st != NX_OK)
        return st;
    size_t data_at = h.hstart + (size_t)h.hlen;
    st = check_data(ctx, where, &h, len - data_at);
    if (st != NX_OK)
        return st;
    nx_tensor *t = NULL;
    st = nx_rt_tensor_new_uninit(ctx, h.dtype, h.ndim, h.shape, &t); /* fill() writes every byte */
    if (st != NX_OK)
        return st;
    if (h.data_bytes > 0)
        fill(&h, buf + data_at, t);
    *out = t;
    return NX_OK;
}

nx_status nx_npy_read_mem(nx_ctx *ctx, const void *buf, size_t len, nx_tensor **out)
{
    if (!ctx || !out || (!buf && len > 0))
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_npy_read_mem: ctx and out must be non-NULL, and buf non-NULL "
                           "unless len is 0");
    *out = NULL;
    return read_buffer(ctx, "nx_npy_read_mem", buf, len, out);
}

static nx_status pread_all(nx_ctx *ctx, const char *where, int fd, void *buf, size_t n,
                           uint64_t off)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return io_error(ctx, where, "read failed", errno);
        if (r == 0)
            return nx_rt_error(ctx, NX_ERR_IO,
                               "%s: the file ended at byte %llu, expected %llu bytes (did it "
                               "change while being read?)",
                               where, (unsigned long long)(off + done),
                               (unsigned long long)(off + n));
        done += (size_t)r;
    }
    return NX_OK;
}

static nx_status read_header_fd(nx_ctx *ctx, const char *where, int fd, uint64_t size,
                                npy_info *h)
{
    uint8_t pre[NPY_PREFIX_MAX];
    size_t have = size < sizeof pre ? (size_t)size : sizeof pre;
    nx_status st = pread_all(ctx, where, fd, pre, have, 0);
    if (st == NX_OK)
        st = parse_preamble(ctx, where, pre, have, size, h);
    if (st != NX_OK)
        return st;
    char *text = nx_rt_alloc(ctx, (size_t)h->hlen);
    if (!text)
        return nx_rt_nomem(ctx, where, (size_t)h->hlen);
    st = pread_all(ctx, where, fd, text, (size_t)h->hlen, h->hstart);
    if (st == NX_OK)
        st = parse_header(ctx, where, text, (size_t)h->hlen, h);
    nx_rt_free(ctx, text, (size_t)h->hlen);
    if (st != NX_OK)
        return st;
    return check_data(ctx, where, h, size - h->hstart - h->hlen);
}

static nx_status read_data_fd(nx_ctx *ctx, const char *where, int fd, const npy_info *h,
                              nx_tensor *t)
{
    size_t bytes = (size_t)h->data_bytes;
    uint64_t off = h->hstart + h->hlen;
    if (bytes == 0)
        return NX_OK;
    if (!needs_transpose(h)) {
        nx_status st = pread_all(ctx, where, fd, t->storage->data, bytes, off);
        if (st == NX_OK)
            fill(h, t->storage->data, t);
        return st;
    }
    uint8_t *tmp = nx_rt_alloc(ctx, bytes);
    if (!tmp)
        return nx_rt_nomem(ctx, where, bytes);
    nx_status st = pread_all(ctx, where, fd, tmp, bytes, off);
    if (st == NX_OK)
        fill(h, tmp, t);
    nx_rt_free(ctx, tmp, bytes);
    return st;
}

static nx_status read_regular(nx_ctx *ctx, const char *where, int fd, uint64_t size,
                              nx_tensor **out)
{
    npy_info h;
    nx_status st = read_header_fd(ctx, where, fd, size, &h);
    if (st != NX_OK)
        return st;
    nx_tensor *t = NULL;
    st = nx_rt_tensor_new_uninit(ctx, h.dtype, h.ndim, h.shape, &t); /* fill() writes every byte */
    if (st != NX_OK)
        return st;
    st = read_data_fd(ctx, where, fd, &h, t);
    if (st != NX_OK) {
        nx_tensor_free(t);
        return st;
    }
    *out = t;
    return NX_OK;
}

/* Reads up to n bytes at the stream's position; *got < n only where the input ended. */
static nx_status read_upto(nx_ctx *ctx, const char *where, int fd, void *buf, size_t n,
                           size_t *got)
{
    *got = 0;
    while (*got < n) {
        ssize_t r = read(fd, (uint8_t *)buf + *got, n - *got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return io_error(ctx, where, "read failed", errno);
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return NX_OK;
}

/* Preamble and header of a stream, read with a bound: at most NPY_PREFIX_MAX bytes, then the
 * header length it declares (itself at most NPY_STREAM_HEADER_MAX). */
static nx_status read_stream_header(nx_ctx *ctx, const char *where, int fd, npy_info *h)
{
    uint8_t pre[NPY_PREFIX_MAX];
    size_t got;
    nx_status st = read_upto(ctx, where, fd, pre, sizeof pre, &got);
    if (st != NX_OK)
        return st;
    /* every valid file is longer than the preamble: a short read is the whole input */
    uint64_t total = got < sizeof pre ? got : UINT64_MAX;
    if ((st = parse_preamble(ctx, where, pre, got, total, h)) != NX_OK)
        return st;
    if (h->hlen > NPY_STREAM_HEADER_MAX)
        return nx_rt_error(ctx, NX_ERR_PARSE,
                           "%s: header length %llu is larger than a stream's limit of %d bytes; "
                           "expected a header NumPy writes (under 1 KiB for 8 axes)",
                           where, (unsigned long long)h->hlen, NPY_STREAM_HEADER_MAX);
    size_t early = sizeof pre - h->hstart; /* header bytes read with the preamble */
    if (early > h->hlen)
        early = (size_t)h->hlen;
    char *text = nx_rt_alloc(ctx, (size_t)h->hlen + 1);
    if (!text)
        return nx_rt_nomem(ctx, where, (size_t)h->hlen + 1);
    memcpy(text, pre + h->hstart, early);
    st = read_upto(ctx, where, fd, text + early, (size_t)h->hlen - early, &got);
    if (st == NX_OK && early + got < h->hlen)
        st = nx_rt_error(ctx, NX_ERR_PARSE,
                         "%s: truncated header: the input ended %zu bytes into a header of %llu "
                         "bytes",
                         where, early + got, (unsigned long long)h->hlen);
    if (st == NX_OK)
        st = parse_header(ctx, where, text, (size_t)h->hlen, h);
    nx_rt_free(ctx, text, (size_t)h->hlen + 1);
    return st;
}

/* The data of a stream: exactly the bytes the header declares, in a buffer that grows only as
 * they arrive (a stream declaring a huge shape and ending early costs what it sent), then a
 * check that nothing follows. /dev/zero fails at the magic; an endless FIFO after the data. */
static nx_status read_stream_data(nx_ctx *ctx, const char *where, int fd, const npy_info *h,
                                  uint8_t **out, size_t *out_cap)
{
    size_t want = (size_t)h->data_bytes, len = 0, cap = 0;
    uint8_t *buf = NULL;
    nx_status st = NX_OK;
    char sh[192];
    nx_shape_str(sh, sizeof sh, h->ndim, h->shape);
    while (st == NX_OK && len < want) {
        if (len == cap) {
            size_t need = want - len < NPY_CHUNK ? want : len + NPY_CHUNK;
            if (!nx_rt_grow(ctx, (void **)&buf, &cap, need, 1)) {
                st = nx_rt_nomem(ctx, where, need);
                break;
            }
        }
        size_t room = (cap < want ? cap : want) - len, got;
        if ((st = read_upto(ctx, where, fd, buf + len, room, &got)) != NX_OK)
            break;
        len += got;
        if (got < room)
            st = nx_rt_error(ctx, NX_ERR_PARSE,
                             "%s: data is truncated: shape %s of %s needs %zu bytes but the input "
                             "ended after %zu",
                             where, sh, nx_dtype_name(h->dtype), want, len);
    }
    uint8_t extra;
    size_t got = 0;
    if (st == NX_OK)
        st = read_upto(ctx, where, fd, &extra, 1, &got);
    if (st == NX_OK && got > 0)
        st = nx_rt_error(ctx, NX_ERR_PARSE,
                         "%s: trailing data after the array: shape %s of %s needs %zu bytes but "
                         "more follow; expected the input to end with the data",
                         where, sh, nx_dtype_name(h->dtype), want);
    if (st != NX_OK) {
        nx_rt_free(ctx, buf, cap);
        return st;
    }
    *out = buf;
    *out_cap = cap;
    return NX_OK;
}

/* Pipes and character devices have no size up front: the header first, then exactly the data
 * it declares. */
static nx_status read_stream(nx_ctx *ctx, const char *where, int fd, nx_tensor **out)
{
    npy_info h;
    nx_status st = read_stream_header(ctx, where, fd, &h);
    if (st == NX_OK)
        st = data_size(ctx, where, &h);
    uint8_t *buf = NULL;
    size_t cap = 0;
    if (st == NX_OK)
        st = read_stream_data(ctx, where, fd, &h, &buf, &cap);
    if (st != NX_OK)
        return st;
    nx_tensor *t = NULL;
    st = nx_rt_tensor_new_uninit(ctx, h.dtype, h.ndim, h.shape, &t); /* fill() writes every byte */
    if (st == NX_OK) {
        if (h.data_bytes > 0)
            fill(&h, buf, t);
        *out = t;
    }
    nx_rt_free(ctx, buf, cap);
    return st;
}

nx_status nx_npy_read(nx_ctx *ctx, const char *path, nx_tensor **out)
{
    if (!ctx || !path || !out)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_npy_read: ctx, path and out must be non-NULL");
    *out = NULL;
    char where[NPY_WHERE];
    where_path(where, "nx_npy_read", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return io_error(ctx, where, "cannot open the file", errno);
    struct stat sb;
    nx_status st;
    if (fstat(fd, &sb) != 0)
        st = io_error(ctx, where, "cannot stat the file", errno);
    else if (S_ISDIR(sb.st_mode))
        st = nx_rt_error(ctx, NX_ERR_IO, "%s: is a directory; expected a .npy file", where);
    else if (S_ISREG(sb.st_mode))
        st = read_regular(ctx, where, fd, (uint64_t)sb.st_size, out);
    else
        st = read_stream(ctx, where, fd, out);
    close(fd);
    return st;
}

/* ---- writing ---------------------------------------------------------------------------------*/

/* A tensor ready to write: its header bytes and its elements as a simplified layout. */
typedef struct npy_out {
    uint8_t pre[NPY_HEADER_TEXT + NPY_PREFIX_MAX + NPY_ALIGN];
    size_t pre_len; /* magic through the final '\n': a multiple of 64 */
    layout elems;
    nx_dtype dtype;
    int64_t numel;
    size_t data_bytes;
    int64_t slab;            /* elements per index of the first axis; 0: cut by element ranges */
    int64_t slabs_per_chunk; /* indices of the first axis the file writer copies at a time */
    size_t chunk_bytes;      /* the file writer's buffer */
} npy_out;

static size_t header_dict(const nx_tensor *t, char *buf, size_t cap)
{
    size_t k = 0;
    int size = (int)nx_dtype_size(t->dtype);
    char order = size == 1 || t->dtype == NX_DTYPE_BF16 ? '|' : '<';
    char kind = 'f';
    for (size_t r = 0; r < DESCR_COUNT; r++) {
        if (descr_table[r].dtype == t->dtype)
            kind = descr_table[r].kind;
    }
    k += (size_t)snprintf(buf + k, cap - k,
                          "{'descr': '%c%c%d', 'fortran_order': False, 'shape': (", order, kind,
                          size);
    for (int i = 0; i < t->ndim; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    k += (size_t)snprintf(buf + k, cap - k, "%s), }", t->ndim == 1 ? "," : "");
    if (t->ndim > 0) {
        /* NumPy's spare room for the first extent to grow in place */
        int digits = snprintf(NULL, 0, "%lld", (long long)t->shape[0]);
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++)
            buf[k++] = ' ';
    }
    return k;
}

/* Version 1.0 unless the padded header length overflows its 16-bit field, as NumPy decides. */
static void build_preamble(const nx_tensor *t, npy_out *o)
{
    char text[NPY_HEADER_TEXT];
    size_t n = header_dict(t, text, sizeof text);
    size_t hlen = n + 1; /* with the final '\n' */
    size_t prefix = 10;
    size_t pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    if (hlen + pad > 65535) {
        prefix = 12;
        pad = NPY_ALIGN - (prefix + hlen) % NPY_ALIGN;
    }
    uint64_t field = hlen + pad;
    uint8_t *p = o->pre;
    memcpy(p, npy_magic, sizeof npy_magic);
    p[6] = prefix == 10 ? 1 : 2;
    p[7] = 0;
    for (size_t i = 0; i < prefix - 8; i++)
        p[8 + i] = (uint8_t)(field >> (8 * i));
    memcpy(p + prefix, text, n);
    memset(p + prefix + n, ' ', pad);
    p[prefix + n + pad] = '\n';
    o->pre_len = prefix + hlen + pad;
}

/* The file writer cuts the data into whole indices of the first axis, so each chunk is itself a
 * tiled copy, unless one index holds more than NPY_SLAB_MAX bytes: then into element ranges. */
static void plan_chunks(npy_out *o)
{
    const layout *l = &o->elems;
    o->slab = 0;
    o->slabs_per_chunk = 0;
    o->chunk_bytes = o->data_bytes < NPY_CHUNK ? o->data_bytes : NPY_CHUNK;
    if (o->numel == 0 || l->ndim == 0)
        return;
    int64_t slab = o->numel / l->shape[0];
    size_t slab_bytes = (size_t)slab * l->elsize;
    if (slab_bytes > NPY_SLAB_MAX)
        return;
    int64_t k = (int64_t)(NPY_CHUNK / slab_bytes);
    if (tile_axis(l) == 0 && k < NPY_TILE) /* tiles need NPY_TILE indices of that axis */
        k = (int64_t)(NPY_SLAB_MAX / slab_bytes) < NPY_TILE ? (int64_t)(NPY_SLAB_MAX / slab_bytes)
                                                            : NPY_TILE;
    if (k < 1)
        k = 1;
    if (k > l->shape[0])
        k = l->shape[0];
    o->slab = slab;
    o->slabs_per_chunk = k;
    o->chunk_bytes = (size_t)k * slab_bytes;
}

static nx_status prepare(nx_ctx *ctx, const char *where, const nx_tensor *t, npy_out *o)
{
    if (nx_dtype_size(t->dtype) == 0 || t->ndim < 0 || t->ndim > NX_MAX_DIMS)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: the tensor is malformed", where);
    if (t->storage->device != NX_DEVICE_HOST)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "%s: the tensor is in device memory; expected a host tensor (copy it "
                           "with nx_tensor_to_device(t, NX_DEVICE_HOST, &h) first)",
                           where);
    o->dtype = t->dtype;
    o->numel = nx_tensor_numel(t);
    o->data_bytes = (size_t)o->numel * nx_dtype_size(t->dtype);
    o->elems.elsize = nx_dtype_size(t->dtype);
    o->elems.base = o->numel > 0 ? nx_tensor_data(t) : NULL;
    o->elems.ndim = t->ndim;
    for (int i = 0; i < t->ndim; i++) {
        o->elems.shape[i] = t->shape[i];
        o->elems.strides[i] = t->strides[i];
    }
    layout_simplify(&o->elems);
    plan_chunks(o);
    build_preamble(t, o);
    return NX_OK;
}

/* Elements start .. start+count-1 (C order) in file form at dst. */
static void emit(const npy_out *o, int64_t start, int64_t count, uint8_t *dst)
{
    gather(dst, &o->elems, start, count);
    fix_elements(dst, o->dtype, count, host_big_endian);
}

/* Indices first .. first+count-1 of the first axis, all of their elements, at dst. */
static int64_t emit_slabs(const npy_out *o, int64_t first, int64_t count, uint8_t *dst)
{
    layout sub = o->elems;
    sub.base += first * sub.strides[0] * (int64_t)sub.elsize;
    sub.shape[0] = count;
    gather_all(dst, &sub, count * o->slab);
    fix_elements(dst, o->dtype, count * o->slab, host_big_endian);
    return count * o->slab;
}

nx_status nx_npy_write_mem(nx_ctx *ctx, const nx_tensor *t, void **buf, size_t *len)
{
    if (!ctx || !t || !buf || !len)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_npy_write_mem: ctx, t, buf and len must be non-NULL");
    *buf = NULL;
    *len = 0;
    npy_out o;
    nx_status st = prepare(ctx, "nx_npy_write_mem", t, &o);
    if (st != NX_OK)
        return st;
    size_t total = o.pre_len + o.data_bytes;
    uint8_t *p = nx_rt_alloc(ctx, total);
    if (!p)
        return nx_rt_nomem(ctx, "nx_npy_write_mem", total);
    memcpy(p, o.pre, o.pre_len);
    if (o.numel > 0) {
        gather_all(p + o.pre_len, &o.elems, o.numel);
        fix_elements(p + o.pre_len, o.dtype, o.numel, host_big_endian);
    }
    *buf = p;
    *len = total;
    return NX_OK;
}

static nx_status write_all(nx_ctx *ctx, const char *where, int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return io_error(ctx, where, "write failed", errno);
        p += r;
        n -= (size_t)r;
    }
    return NX_OK;
}

static nx_status write_body(nx_ctx *ctx, const char *where, int fd, const npy_out *o,
                            uint8_t *chunk)
{
    nx_status st = write_all(ctx, where, fd, o->pre, o->pre_len);
    if (o->slab > 0) {
        int64_t n0 = o->elems.shape[0], per = o->slabs_per_chunk;
        for (int64_t a = 0; st == NX_OK && a < n0; a += per) {
            int64_t n = emit_slabs(o, a, n0 - a < per ? n0 - a : per, chunk);
            st = write_all(ctx, where, fd, chunk, (size_t)n * o->elems.elsize);
        }
        return st;
    }
    int64_t per = (int64_t)(o->chunk_bytes / o->elems.elsize);
    for (int64_t at = 0; st == NX_OK && at < o->numel; at += per) {
        int64_t count = o->numel - at < per ? o->numel - at : per;
        emit(o, at, count, chunk);
        st = write_all(ctx, where, fd, chunk, (size_t)count * o->elems.elsize);
    }
    return st;
}

/* ---- where an output goes ------------------------------------------------------------------*/

/* How an output path is written, decided from what is there (after following symbolic links):
 *   nothing        a new file, written as a temporary file beside it and renamed onto it;
 *   regular file   the same, the temporary file taking the old file's permission bits (and
 *                  owner and group where allowed), so an 0600 file stays 0600;
 *   regular file with more than one hard link, or reached through /proc (/dev/stdout)
 *                  written in place (truncated to the new length), so every link sees the new
 *                  array; this write is not atomic (see below);
 *   character device or FIFO
 *                  written in place, without fsync: /dev/null is a sink, /dev/full fails with
 *                  ENOSPC; a FIFO without a reader is refused rather than waited for;
 *   directory, socket, block device
 *                  refused (NX_ERR_INVALID_ARG) before anything is written.
 * A symbolic link is followed link by link (at most NPY_MAX_LINKS), and the file it names is the
 * one written, in that file's directory; a dangling link creates the file it names. Nothing is
 * ever written beside or over a name other than the target and its temporary file. */
typedef enum target_kind { TARGET_RENAME, TARGET_IN_PLACE } target_kind;

typedef struct npy_target {
    const char *path; /* as the caller named it, for messages */
    char where[NPY_WHERE];
    char *real; /* RENAME: the file the path resolves to (the rename's target) */
    size_t real_cap;
    char *tmp; /* RENAME: the temporary file beside real, once created */
    size_t tmp_cap;
    target_kind kind;
    bool exists;       /* RENAME: real exists (keep its mode, owner and group) */
    struct stat old;   /* what was at real or path */
    int fd;            /* IN_PLACE: the target, open; -1 otherwise */
} npy_target;

#define NPY_MAX_LINKS 40 /* symbolic links followed before giving up (Linux's own limit) */
#define NPY_PATH_MAX 4096

static nx_status target_error(nx_ctx *ctx, npy_target *tg, const char *what, const char *expected)
{
    return nx_rt_error(ctx, NX_ERR_INVALID_ARG, "%s: %s; expected %s", tg->where, what, expected);
}

/* real = the directory part of real (with its '/') followed by link, or link if absolute. */
static bool join_link(char *real, size_t cap, const char *link)
{
    char *slash = strrchr(real, '/');
    size_t keep = link[0] == '/' || !slash ? 0 : (size_t)(slash - real) + 1;
    size_t n = strlen(link);
    if (keep + n + 1 > cap)
        return false;
    memmove(real + keep, link, n + 1);
    return true;
}

/* Follows tg->path's symbolic links into tg->real; fills tg->old and tg->exists. Sets *proc when
 * a link points into /proc (/dev/stdout): such magic links name open files, not paths. */
static nx_status resolve_links(nx_ctx *ctx, npy_target *tg, bool *proc)
{
    char *link = nx_rt_alloc(ctx, NPY_PATH_MAX);
    if (!link)
        return nx_rt_nomem(ctx, tg->where, NPY_PATH_MAX);
    nx_status st = NX_OK;
    *proc = false;
    snprintf(tg->real, tg->real_cap, "%s", tg->path);
    for (int hops = 0;; hops++) {
        if (lstat(tg->real, &tg->old) != 0) {
            if (errno == ENOENT) {
                tg->exists = false;
                break;
            }
            st = io_error(ctx, tg->where, "cannot inspect the path", errno);
            break;
        }
        tg->exists = true;
        if (!S_ISLNK(tg->old.st_mode))
            break;
        ssize_t n = hops < NPY_MAX_LINKS ? readlink(tg->real, link, NPY_PATH_MAX) : -1;
        if (n < 0 || n >= NPY_PATH_MAX) {
            st = hops >= NPY_MAX_LINKS ? io_error(ctx, tg->where, "too many symbolic links", ELOOP)
                 : n < 0 ? io_error(ctx, tg->where, "cannot read a symbolic link", errno)
                         : io_error(ctx, tg->where, "a symbolic link", ENAMETOOLONG);
            break;
        }
        link[n] = '\0';
        if (strncmp(link, "/proc/", 6) == 0 || strcmp(link, "/proc") == 0)
            *proc = true;
        if (!join_link(tg->real, tg->real_cap, link)) {
            st = io_error(ctx, tg->where, "following its symbolic links", ENAMETOOLONG);
            break;
        }
    }
    nx_rt_free(ctx, link, NPY_PATH_MAX);
    return st;
}

/* Opens a target that is written in place. A FIFO is opened without blocking, so one with no
 * reader is refused at once (ENXIO), then switched back to blocking writes. */
static nx_status open_in_place(nx_ctx *ctx, npy_target *tg)
{
    tg->kind = TARGET_IN_PLACE;
    tg->fd = open(tg->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (tg->fd < 0 && errno == ENXIO)
        return nx_rt_error(ctx, NX_ERR_IO,
                           "%s: is a FIFO with no reader; expected a reader to be attached "
                           "first (nitrix does not wait for one), or a regular file",
                           tg->where);
    if (tg->fd < 0)
        return io_error(ctx, tg->where, "cannot open it for writing", errno);
    int flags = fcntl(tg->fd, F_GETFL);
    struct stat now;
    if (flags < 0 || fcntl(tg->fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || fstat(tg->fd, &now) != 0)
        return io_error(ctx, tg->where, "cannot set it up for writing", errno);
    if (S_ISDIR(now.st_mode) || S_ISSOCK(now.st_mode) || S_ISBLK(now.st_mode))
        return target_error(ctx, tg, "changed into a directory, socket or block device",
                            "a file");
    tg->old = now;
    return NX_OK;
}

/* Decides how tg->path is written (see npy_target); opens in-place targets. */
static nx_status plan_target(nx_ctx *ctx, npy_target *tg)
{
    struct stat st;
    if (stat(tg->path, &st) == 0) { /* what the path names, links followed by the kernel */
        if (S_ISDIR(st.st_mode))
            return target_error(ctx, tg, "is a directory", "a file name (a new or regular file, "
                                                           "a character device or a FIFO)");
        if (S_ISSOCK(st.st_mode))
            return target_error(ctx, tg, "is a socket",
                                "a regular file, a character device or a FIFO");
        if (S_ISBLK(st.st_mode))
            return target_error(ctx, tg, "is a block device, which nitrix refuses to overwrite",
                                "a regular file, a character device or a FIFO");
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            return open_in_place(ctx, tg);
    }
    bool proc = false;
    nx_status s = resolve_links(ctx, tg, &proc);
    if (s != NX_OK)
        return s;
    if (tg->exists && (proc || tg->old.st_nlink > 1))
        return open_in_place(ctx, tg);
    if (tg->exists && !S_ISREG(tg->old.st_mode))
        return target_error(ctx, tg, "is neither a regular file nor a device",
                            "a regular file, a character device or a FIFO");
    tg->kind = TARGET_RENAME;
    return NX_OK;
}

/* Creates <real>.<pid>.<n>.tmp beside the target: O_EXCL so two writers never share one. */
static int open_temp(npy_target *tg)
{
    static unsigned counter;
    for (int attempt = 0; attempt < 100; attempt++) {
        unsigned n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
        snprintf(tg->tmp, tg->tmp_cap, "%s.%ld.%u.tmp", tg->real, (long)getpid(), n);
        int fd = open(tg->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* The temporary file of a RENAME target, written whole and synced; removed on failure. */
static nx_status stage_temp(nx_ctx *ctx, npy_target *tg, const npy_out *o, uint8_t *chunk)
{
    int fd = open_temp(tg);
    if (fd < 0) {
        tg->tmp[0] = '\0';
        return io_error(ctx, tg->where, "cannot create the temporary file beside it", errno);
    }
    nx_status st = NX_OK;
    if (tg->exists) {
        /* keep the replaced file's permissions; its owner and group where we may (a file we
         * can replace but not chown keeps our ownership, as any editor's save does) */
        if (fchmod(fd, tg->old.st_mode & 0777) != 0)
            st = io_error(ctx, tg->where, "cannot give the new file the old one's mode", errno);
        if (st == NX_OK && fchown(fd, tg->old.st_uid, tg->old.st_gid) != 0) {
            /* not permitted: keep ours */
        }
    }
    if (st == NX_OK)
        st = write_body(ctx, tg->where, fd, o, chunk);
    if (st == NX_OK && fsync(fd) != 0)
        st = io_error(ctx, tg->where, "fsync failed", errno);
    if (close(fd) != 0 && st == NX_OK)
        st = io_error(ctx, tg->where, "close failed", errno);
    if (st != NX_OK) {
        unlink(tg->tmp);
        tg->tmp[0] = '\0';
    }
    return st;
}

/* Writes to an in-place target. SIGPIPE (a FIFO whose reader left) is held back and consumed,
 * so the write fails with EPIPE instead of ending the process. */
static nx_status write_in_place(nx_ctx *ctx, npy_target *tg, const npy_out *o, uint8_t *chunk)
{
    sigset_t pipe_set, old_mask, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
    bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    nx_status st = NX_OK;
    if (S_ISREG(tg->old.st_mode) && lseek(tg->fd, 0, SEEK_SET) != 0)
        st = io_error(ctx, tg->where, "cannot seek to its start", errno);
    if (st == NX_OK)
        st = write_body(ctx, tg->where, tg->fd, o, chunk);
    if (st == NX_OK && S_ISREG(tg->old.st_mode)) {
        if (ftruncate(tg->fd, (off_t)(o->pre_len + o->data_bytes)) != 0)
            st = io_error(ctx, tg->where, "cannot truncate it to the new length", errno);
        else if (fsync(tg->fd) != 0)
            st = io_error(ctx, tg->where, "fsync failed", errno);
    }
    if (!was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    if (close(tg->fd) != 0 && st == NX_OK)
        st = io_error(ctx, tg->where, "close failed", errno);
    tg->fd = -1;
    return st;
}

static void target_release(nx_ctx *ctx, npy_target *tg)
{
    if (tg->fd >= 0)
        close(tg->fd);
    if (tg->tmp && tg->tmp[0])
        unlink(tg->tmp);
    nx_rt_free(ctx, tg->tmp, tg->tmp_cap);
    nx_rt_free(ctx, tg->real, tg->real_cap);
}

/* Two outputs naming one file would leave only the last: refused. Devices may repeat. */
static nx_status check_distinct(nx_ctx *ctx, npy_target *tg, int n)
{
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++) {
            bool same;
            if (tg[i].kind == TARGET_RENAME && tg[j].kind == TARGET_RENAME)
                same = strcmp(tg[i].real, tg[j].real) == 0 ||
                       (tg[i].exists && tg[j].exists && tg[i].old.st_dev == tg[j].old.st_dev &&
                        tg[i].old.st_ino == tg[j].old.st_ino);
            else
                same = tg[i].kind == tg[j].kind && S_ISREG(tg[i].old.st_mode) &&
                       tg[i].old.st_dev == tg[j].old.st_dev &&
                       tg[i].old.st_ino == tg[j].old.st_ino;
            if (same)
                return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                                   "%s: names the same file as output %d ('%s'); expected "
                                   "distinct files",
                                   tg[i].where, j, tg[j].path);
        }
    }
    return NX_OK;
}

/* The commit: in-place targets first (they can fail: /dev/full), then the renames. */
static nx_status commit(nx_ctx *ctx, npy_target *tg, int n, const npy_out *o, uint8_t *chunk)
{
    for (int i = 0; i < n; i++) {
        if (tg[i].kind != TARGET_IN_PLACE)
            continue;
        nx_status st = write_in_place(ctx, &tg[i], &o[i], chunk);
        if (st != NX_OK)
            return st;
    }
    for (int i = 0; i < n; i++) {
        if (tg[i].kind != TARGET_RENAME)
            continue;
        if (rename(tg[i].tmp, tg[i].real) != 0)
            return io_error(ctx, tg[i].where, "cannot rename the temporary file onto it", errno);
        tg[i].tmp[0] = '\0';
    }
    return NX_OK;
}

static nx_status write_many(nx_ctx *ctx, int n, const char *const *paths,
                            const nx_tensor *const *ts, npy_target *tg, npy_out *o,
                            uint8_t **chunk, size_t *chunk_bytes)
{
    nx_status st = NX_OK;
    for (int i = 0; i < n; i++) {
        tg[i].path = paths[i];
        tg[i].fd = -1;
        where_path(tg[i].where, "nx_npy_write", paths[i]);
    }
    for (int i = 0; i < n && st == NX_OK; i++) {
        st = prepare(ctx, tg[i].where, ts[i], &o[i]);
        if (st == NX_OK && o[i].chunk_bytes > *chunk_bytes)
            *chunk_bytes = o[i].chunk_bytes;
    }
    for (int i = 0; i < n && st == NX_OK; i++) {
        tg[i].real_cap = tg[i].tmp_cap = NPY_PATH_MAX + 48;
        tg[i].real = nx_rt_alloc(ctx, tg[i].real_cap);
        tg[i].tmp = nx_rt_alloc(ctx, tg[i].tmp_cap);
        if (!tg[i].real || !tg[i].tmp)
            st = nx_rt_nomem(ctx, tg[i].where, tg[i].real_cap);
        else
            tg[i].tmp[0] = '\0';
        if (st == NX_OK && strlen(paths[i]) >= NPY_PATH_MAX)
            st = io_error(ctx, tg[i].where, "the path", ENAMETOOLONG);
        if (st == NX_OK)
            st = plan_target(ctx, &tg[i]);
    }
    if (st == NX_OK)
        st = check_distinct(ctx, tg, n);
    if (st == NX_OK && *chunk_bytes > 0 && !(*chunk = nx_rt_alloc(ctx, *chunk_bytes)))
        st = nx_rt_nomem(ctx, "nx_npy_write", *chunk_bytes);
    for (int i = 0; i < n && st == NX_OK; i++) {
        if (tg[i].kind == TARGET_RENAME)
            st = stage_temp(ctx, &tg[i], &o[i], *chunk);
    }
    if (st == NX_OK)
        st = commit(ctx, tg, n, o, *chunk);
    return st;
}

nx_status nx_npy_write_many(nx_ctx *ctx, int n, const char *const *paths,
                            const nx_tensor *const *ts)
{
    if (!ctx || n < 1 || n > NX_NPY_WRITE_MAX || !paths || !ts)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_npy_write_many: ctx, paths and ts must be non-NULL and n in "
                           "1..%d (got %d)",
                           NX_NPY_WRITE_MAX, n);
    for (int i = 0; i < n; i++) {
        if (!paths[i] || !ts[i])
            return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                               "nx_npy_write: path and tensor %d must be non-NULL", i);
    }
    npy_target *tg = nx_rt_alloc(ctx, (size_t)n * sizeof *tg);
    npy_out *o = nx_rt_alloc(ctx, (size_t)n * sizeof *o);
    if (!tg || !o) {
        nx_rt_free(ctx, tg, (size_t)n * sizeof *tg);
        nx_rt_free(ctx, o, (size_t)n * sizeof *o);
        return nx_rt_nomem(ctx, "nx_npy_write", (size_t)n * (sizeof *tg + sizeof *o));
    }
    memset(tg, 0, (size_t)n * sizeof *tg);
    uint8_t *chunk = NULL;
    size_t chunk_bytes = 0;
    nx_status st = write_many(ctx, n, paths, ts, tg, o, &chunk, &chunk_bytes);
    for (int i = 0; i < n; i++)
        target_release(ctx, &tg[i]);
    nx_rt_free(ctx, chunk, chunk_bytes);
    nx_rt_free(ctx, o, (size_t)n * sizeof *o);
    nx_rt_free(ctx, tg, (size_t)n * sizeof *tg);
    return st;
}

nx_status nx_npy_write(nx_ctx *ctx, const char *path, const nx_tensor *t)
{
    if (!ctx || !path || !t)
        return nx_rt_error(ctx, NX_ERR_INVALID_ARG,
                           "nx_npy_write: ctx, path and t must be non-NULL");
    return nx_npy_write_many(ctx, 1, &path, &t);
}
