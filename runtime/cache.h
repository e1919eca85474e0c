/* The kernel cache: compiled kernels by content-addressed key, in memory and on disk (DESIGN.md
 * §5).
 *
 * Key. The caller serialises everything that determines the compiled code into one byte string, the
 * key blob: canonical kernel IR + dtypes + shapes + backend + target (CPU features or sm_XX) +
 * toolchain versions + library version + driver choice. nx_rt_cache_key_init hashes it with
 * SipHash-2-4 with 128-bit output (Aumasson & Bernstein; 2 compression and 4 finalisation rounds)
 * under the fixed key NX_CACHE_HASH_KEY. Message words are read little-endian and the 16 output
 * bytes are the two 64-bit results, each little-endian, so the hash is the same on every machine.
 *
 * Typical use by a backend:
 *
 *     nx_rt_cache_blob b;                         // or any canonical byte string
 *     nx_rt_cache_blob_init(&b, ctx);
 *     nx_rt_cache_blob_bytes(&b, "ir", ir_bytes, ir_len);
 *     nx_rt_cache_blob_str(&b, "target", "znver3 +avx2 +avx512f"); ...
 *     nx_rt_cache_key key;
 *     if ((st = nx_rt_cache_blob_key(&b, &key)) != NX_OK) ...
 *     nx_rt_cache *cache;
 *     if ((st = nx_rt_cache_of(ctx, &cache)) != NX_OK) return st;
 *     void *kernel = nx_rt_cache_find(cache, &key);          // hit: a hash and a probe
 *     if (!kernel) {
 *         void *obj; size_t len; bool found;
 *         if ((st = nx_rt_cache_load(cache, &key, &obj, &len, &found)) != NX_OK) return st;
 *         if (!found) { compile -> obj, len; nx_rt_cache_store(cache, &key, obj, len); }
 *         kernel = link(obj, len); nx_rt_free(ctx, obj, len);
 *         if ((st = nx_rt_cache_insert(cache, &key, kernel, destroy, user, &kernel)) != NX_OK) ...
 *     }
 *     nx_rt_cache_blob_free(&b);
 *
 * Memory. The map is keyed by the 128-bit hash alone (two distinct blobs of one hash are not
 * expected in the life of the universe; the disk, which other processes and people can write, is
 * where the blob itself is compared). Objects are kept until the cache is closed (with the context
 * for nx_rt_cache_of), so pointers returned by find/insert stay valid that long; the cache never
 * evicts. Their destroy callbacks run at close. nx_ctx_free destroys the slots in reverse order,
 * and NX_SLOT_CACHE comes before NX_SLOT_JIT and NX_SLOT_CUDA: the JIT and CUDA services are gone
 * by the time the context's cache destroys its objects, so those destroy callbacks must not need
 * them.
 *
 * Disk. One file per entry, <dir>/<32 lowercase hex digits of the key hash>.nxk:
 *
 *     offset size
 *      0      8   magic "NXKCACHE"
 *      8      4   format version, little-endian u32 (NX_CACHE_FORMAT)
 *     12      4   header size, little-endian u32 (64)
 *     16     16   key hash (as in the file name)
 *     32      8   key blob length, little-endian u64
 *     40      8   payload length, little-endian u64
 *     48     16   checksum: SipHash-2-4-128 under NX_CACHE_SUM_KEY of bytes [0, 48) ++ blob ++
 * payload 64          the key blob, then the payload
 *
 * Trust. The disk is read only where this user alone can write: the directory must be owned by
 * the effective user and not writable by group or others, and so must each entry, which is opened
 * relative to the checked directory (openat), without following a symbolic link and without
 * blocking (O_NONBLOCK: a FIFO must not hang the open), and read only once fstat says it is a
 * regular file. A directory that is not private is not used at all (loads miss, stores are
 * skipped: the cache runs in memory); an entry that is not private is a miss and the next store
 * replaces it. Each is reported with one NX_LOG_WARN per process and directory (then
 * NX_LOG_DEBUG), naming the owner or mode and the remedy (chmod go-w, or NITRIX_CACHE_DIR set to
 * a directory of one's own). A shared cache directory therefore does not work as a shared
 * cache, by design: whoever can write a cache entry chooses the code the next run executes.
 * Directories the cache creates are mode 0700 and entries 0600.
 *
 * A private regular file is trusted only if every field checks out: magic, version, header size,
 * the key hash and the whole blob equal the caller's, the file size equals 64 + blob + payload,
 * and the checksum matches. Anything else is a miss (and the next store replaces the file). The
 * checksum is an integrity check against truncation, crashes and stray writes, not a security
 * boundary: its key NX_CACHE_SUM_KEY is a public constant, so anyone who can write an entry can
 * also compute its checksum; the ownership and mode checks above are what keep other users'
 * code out. Entries are written to a temporary file in the same directory
 * (tmp-<pid>-<seq>-<hex>) and renamed over the final name, so readers see a whole old file or a
 * whole new one and concurrent writers of one key are harmless. Several processes of one user
 * may share the directory.
 *
 * Failures. A directory that cannot be created or written turns the disk off for this cache (one
 * NX_LOG_WARN) and the cache carries on in memory; loads keep reading whatever is there. A damaged
 * or foreign entry, or something other than a regular file in an entry's place (a FIFO, a
 * directory, a device, a socket, a symbolic link), is logged once per cache at NX_LOG_WARN (it
 * means something outside nitrix changed the directory, or the machine crashed mid-write, and the
 * user may want to know) and at NX_LOG_DEBUG afterwards; an entry of another format version is
 * expected after an upgrade and is logged at NX_LOG_DEBUG only. None of these is an error for the
 * caller; only running out of memory is. */
#ifndef NX_RUNTIME_CACHE_H
#define NX_RUNTIME_CACHE_H

#include "internal.h"

#define NX_CACHE_FORMAT 1
#define NX_CACHE_HEADER_SIZE 64
#define NX_CACHE_HASH_KEY "nitrix-kcache-k1" /* 16 bytes, the SipHash key of key blobs */
#define NX_CACHE_SUM_KEY "nitrix-kcache-c1"  /* 16 bytes, the SipHash key of checksums */
#define NX_CACHE_FILE_EXT ".nxk"

/* ---- hashing ---------------------------------------------------------------------------------*/

/* Incremental SipHash-2-4-128; the result does not depend on how the input is split. */
typedef struct nx_rt_cache_hash_state {
    uint64_t v0, v1, v2, v3;
    uint64_t tail;  /* pending bytes, little-endian */
    uint64_t total; /* bytes absorbed so far */
} nx_rt_cache_hash_state;

NX_HIDDEN void nx_rt_cache_hash_init(nx_rt_cache_hash_state *s, const uint8_t key[16]);
NX_HIDDEN void nx_rt_cache_hash_update(nx_rt_cache_hash_state *s, const void *data, size_t len);
NX_HIDDEN void nx_rt_cache_hash_final(nx_rt_cache_hash_state *s, uint8_t out[16]);
/* One-shot SipHash-2-4-128 under key. */
NX_HIDDEN void nx_rt_cache_siphash(const uint8_t key[16], const void *data, size_t len,
                                   uint8_t out[16]);
/* One-shot under NX_CACHE_HASH_KEY: the hash of a key blob. */
NX_HIDDEN void nx_rt_cache_hash(const void *data, size_t len, uint8_t out[16]);

/* ---- keys ------------------------------------------------------------------------------------*/

typedef struct nx_rt_cache_key {
    uint8_t hash[16];
    const void *blob; /* borrowed: must stay valid while the key is in use */
    size_t blob_len;
} nx_rt_cache_key;

NX_HIDDEN void nx_rt_cache_key_init(nx_rt_cache_key *key, const void *blob, size_t blob_len);
/* 32 lowercase hex digits and a terminator. */
NX_HIDDEN void nx_rt_cache_key_hex(const nx_rt_cache_key *key, char out[33]);

/* Building a key blob field by field. Each field is encoded as
 *     name length (u32 LE), name bytes, value length (u64 LE), value bytes
 * so no two different field lists give the same blob ("ab" + "c" differs from "a" + "bc"). The
 * first field is always ("nitrix", nx_version()), so a new library version never reuses old
 * entries. Appends never fail: an allocation failure is remembered and reported by finish. */
typedef struct nx_rt_cache_blob {
    nx_ctx *ctx;
    uint8_t *data;
    size_t len, cap;
    bool failed;
} nx_rt_cache_blob;

NX_HIDDEN void nx_rt_cache_blob_init(nx_rt_cache_blob *b, nx_ctx *ctx);
NX_HIDDEN void nx_rt_cache_blob_bytes(nx_rt_cache_blob *b, const char *name, const void *value,
                                      size_t len);
NX_HIDDEN void nx_rt_cache_blob_str(nx_rt_cache_blob *b, const char *name, const char *value);
/* The value as 8 bytes, little-endian. */
NX_HIDDEN void nx_rt_cache_blob_i64(nx_rt_cache_blob *b, const char *name, int64_t value);
/* The key of the blob (borrowing b's bytes: keep b until the key is no longer used), or
 * NX_ERR_NOMEM if an append failed. */
NX_HIDDEN nx_status nx_rt_cache_blob_key(nx_rt_cache_blob *b, nx_rt_cache_key *key);
NX_HIDDEN void nx_rt_cache_blob_free(nx_rt_cache_blob *b);

/* ---- the cache -------------------------------------------------------------------------------*/

typedef struct nx_rt_cache nx_rt_cache;
typedef void (*nx_rt_cache_destroy_fn)(void *user, void *obj);

/* A cache whose disk part lives in dir (created on first store, with parents, mode 0700); dir NULL
 * or "" gives a memory-only cache. Close it with nx_rt_cache_close. */
NX_HIDDEN nx_status nx_rt_cache_open(nx_ctx *ctx, const char *dir, nx_rt_cache **out);
NX_HIDDEN void nx_rt_cache_close(nx_rt_cache *cache);
/* The context's cache over nx_ctx_cache_dir(ctx), created on first use, closed by nx_ctx_free. */
NX_HIDDEN nx_status nx_rt_cache_of(nx_ctx *ctx, nx_rt_cache **out);
/* The directory of the disk part, or NULL for a memory-only cache. */
NX_HIDDEN const char *nx_rt_cache_dir(const nx_rt_cache *cache);
/* False once a write to the directory has failed (stores are then skipped; loads go on). */
NX_HIDDEN bool nx_rt_cache_disk_writable(const nx_rt_cache *cache);

/* The object stored under key (borrowed, valid until the cache closes), or NULL. Thread-safe. */
NX_HIDDEN void *nx_rt_cache_find(nx_rt_cache *cache, const nx_rt_cache_key *key);
/* Stores obj (non-NULL) under key and sets *winner to the object now stored. If another thread
 * inserted the key first, obj is destroyed at once (destroy(user, obj)) and *winner is theirs. On
 * NX_ERR_NOMEM nothing is stored, *winner is NULL and obj still belongs to the caller. Thread-safe.
 */
NX_HIDDEN nx_status nx_rt_cache_insert(nx_rt_cache *cache, const nx_rt_cache_key *key, void *obj,
                                       nx_rt_cache_destroy_fn destroy, void *user, void **winner);

/* ---- key fields ----------------------------------------------------------------------------*/

/* A tensor's dtype, rank and shape as one key field (t NULL: a field that says "absent"). */
NX_HIDDEN void nx_rt_cache_blob_tensor(nx_rt_cache_blob *b, const char *name, const nx_tensor *t);

/* Reads key's payload from disk. On a hit *found is true and *payload (from the context allocator,
 * freed with nx_rt_free(ctx, *payload, *len)) holds *len bytes; on any kind of miss *found is false
 * and *payload NULL. Fails only with NX_ERR_NOMEM. */
NX_HIDDEN nx_status nx_rt_cache_load(nx_rt_cache *cache, const nx_rt_cache_key *key, void **payload,
                                     size_t *len, bool *found);
/* Writes key's payload to disk (atomically replacing any entry). Never fails: write problems turn
 * the disk off for this cache with one warning. */
NX_HIDDEN void nx_rt_cache_store(nx_rt_cache *cache, const nx_rt_cache_key *key,
                                 const void *payload, size_t len);

typedef struct nx_rt_cache_stats {
    int64_t finds, find_hits, inserts, insert_races;
    int64_t loads, load_hits, damaged, stores, store_failures;
    int64_t untrusted; /* directory or entry checks that found something not private */
} nx_rt_cache_stats;
NX_HIDDEN void nx_rt_cache_get_stats(nx_rt_cache *cache, nx_rt_cache_stats *out);

/* ---- the directory (for `nitrix info` and `nitrix cache clear`)
 * --------------------------------*/

/* Entries (*.nxk files named by a key) and their bytes, plus the bytes of leftover temporary files,
 * in dir (NULL: nx_ctx_cache_dir(ctx)). A missing directory is empty. NX_ERR_IO if it cannot be
 * read. */
NX_HIDDEN nx_status nx_rt_cache_disk_usage(nx_ctx *ctx, const char *dir, int64_t *bytes,
                                           int64_t *entries);
/* Removes the entries and temporary files from dir (NULL: nx_ctx_cache_dir(ctx)); other files and
 * the directory itself are left alone. *removed (may be NULL) counts the files removed. A writer
 * racing with a clear may lose its entry (it then warns and stays memory-only). */
NX_HIDDEN nx_status nx_rt_cache_disk_clear(nx_ctx *ctx, const char *dir, int64_t *removed);

#endif /* NX_RUNTIME_CACHE_H */
