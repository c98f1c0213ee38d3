/* arrayad runtime: arena, tape, errors, math helpers and the support of the
 * C ABI wrappers. See arrayad_runtime.h. C99 + _Thread_local, libc + libm. */
#if !defined(_DEFAULT_SOURCE)
#define _DEFAULT_SOURCE 1 /* lgamma_r, sysconf's _SC_PHYS_PAGES */
#endif
#if defined(ARRAYAD_STACK_BOUNDS) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE 1 /* pthread_getattr_np */
#endif
#include "arrayad_runtime.h"

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

#include <fenv.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* glibc declares lgamma_r only with _DEFAULT_SOURCE; declare it in case the
 * headers were included before our feature macro took effect. */
extern double lgamma_r(double x, int *sign);

/* Layout checks: generated code uses these offsets (C99 static assertions). */
typedef char arrayad_check_ptr_size[(sizeof(void *) == 8) ? 1 : -1];
typedef char arrayad_check_arena_ptr[(offsetof(arrayad_ctx, arena_ptr) == 0) ? 1 : -1];
typedef char arrayad_check_arena_end[(offsetof(arrayad_ctx, arena_end) == 8) ? 1 : -1];
typedef char arrayad_check_arena_cur[(offsetof(arrayad_ctx, arena_cur) == 16) ? 1 : -1];
typedef char arrayad_check_tape_ptr[(offsetof(arrayad_ctx, tape_ptr) == 24) ? 1 : -1];
typedef char arrayad_check_tape_end[(offsetof(arrayad_ctx, tape_end) == 32) ? 1 : -1];
typedef char arrayad_check_tape_base[(offsetof(arrayad_ctx, tape_base) == 40) ? 1 : -1];
typedef char arrayad_check_tape_top[(offsetof(arrayad_ctx, tape_top) == 48) ? 1 : -1];
typedef char arrayad_check_err_kind[(offsetof(arrayad_ctx, err_kind) == 112) ? 1 : -1];
typedef char arrayad_check_dest[(offsetof(arrayad_ctx, dest) == 384) ? 1 : -1];
typedef char arrayad_check_stack_limit[(offsetof(arrayad_ctx, stack_limit) == 392) ? 1 : -1];
typedef char arrayad_check_fp_control[(offsetof(arrayad_ctx, fp_control) == 400) ? 1 : -1];

/* ---- Arena ------------------------------------------------------------- */

struct arrayad_chunk {
    arrayad_chunk *next;
    uint64_t size; /* usable bytes at data, a multiple of ARRAYAD_ARENA_ALIGN */
    /* The size the doubling gave this chunk, before it was enlarged to one
       request (the array that did not fit): the next chunk doubles this,
       so that one large array is not followed by a chunk twice as large
       for the small arrays after it. */
    uint64_t grown;
    char *data;    /* ARRAYAD_ARENA_ALIGN-byte aligned */
    void *raw;     /* what malloc returned */
};

#define ARRAYAD_MIN_CHUNK ((uint64_t)1 << 16)
#define ARRAYAD_MAX_CHUNK_GROWTH ((uint64_t)1 << 26)
/* Larger requests are reported as out of memory without trying malloc. */
#define ARRAYAD_MAX_ALLOC ((uint64_t)1 << 56)

uint64_t arrayad_default_limit(void) {
    const char *s = getenv("ARRAYAD_MAX_MEMORY");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (s && *s) {
        char *end = NULL;
        unsigned long long v = strtoull(s, &end, 10);
        int shift = 0;
        if (end && (*end == 'k' || *end == 'K')) shift = 10, end++;
        else if (end && (*end == 'm' || *end == 'M')) shift = 20, end++;
        else if (end && (*end == 'g' || *end == 'G')) shift = 30, end++;
        else if (end && (*end == 't' || *end == 'T')) shift = 40, end++;
        if (end && *end == '\0' && end != s && v > 0 && v <= (UINT64_MAX >> shift)) return (uint64_t)v << shift;
    }
    if (pages > 0 && page > 0) return (uint64_t)pages * (uint64_t)page / 2;
    return (uint64_t)1 << 32;
}

/* $ARRAYAD_KEEP_MEMORY (bytes, or with a suffix K, M, G, T: powers of
 * 1024; 0 keeps nothing) when set and valid, else a quarter of the memory
 * limit. */
uint64_t arrayad_keep_limit(void) {
    const char *s = getenv("ARRAYAD_KEEP_MEMORY");
    char *end = NULL;
    unsigned long long v;
    int shift = 0;
    uint64_t fallback = arrayad_default_limit() / 4;
    if (!s || !*s) return fallback;
    v = strtoull(s, &end, 10);
    if (end == s) return fallback;
    if (*end == 'k' || *end == 'K') shift = 10, end++;
    else if (*end == 'm' || *end == 'M') shift = 20, end++;
    else if (*end == 'g' || *end == 'G') shift = 30, end++;
    else if (*end == 't' || *end == 'T') shift = 40, end++;
    if (*end != '\0' || v > (UINT64_MAX >> shift)) return fallback;
    return (uint64_t)v << shift;
}

/* The flush bits of the floating-point control: MXCSR's FTZ (bit 15) and
 * DAZ (bit 6), FPCR's FZ (bit 24). */
#if defined(__x86_64__)
#define FP_FLUSH_BITS UINT64_C(0x8040)
static uint64_t fp_control_get(void) {
    uint32_t csr;
    __asm__ volatile("stmxcsr %0" : "=m"(csr));
    return csr;
}
static void fp_control_set(uint64_t control) {
    uint32_t csr = (uint32_t)control;
    __asm__ volatile("ldmxcsr %0" : : "m"(csr));
}
#elif defined(__aarch64__)
#define FP_FLUSH_BITS (UINT64_C(1) << 24)
static uint64_t fp_control_get(void) {
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    return fpcr;
}
static void fp_control_set(uint64_t control) { __asm__ volatile("msr fpcr, %0" : : "r"(control)); }
#else
#define FP_FLUSH_BITS UINT64_C(0)
static uint64_t fp_control_get(void) { return 0; }
static void fp_control_set(uint64_t control) { (void)control; }
#endif

uint64_t arrayad_fp_flush_subnormals(void) {
    uint64_t control = fp_control_get();
    if ((control & FP_FLUSH_BITS) != FP_FLUSH_BITS) fp_control_set(control | FP_FLUSH_BITS);
    return control;
}

void arrayad_fp_restore(uint64_t control) {
    uint64_t now = fp_control_get();
    uint64_t want = (now & ~FP_FLUSH_BITS) | (control & FP_FLUSH_BITS);
    if (want != now) fp_control_set(want);
}

void arrayad_ctx_init(arrayad_ctx *ctx) {
    memset(ctx, 0, sizeof *ctx);
    ctx->limit = arrayad_default_limit();
}

/* Frees a message composed at run time. */
static void clear_text(arrayad_ctx *ctx) {
    free(ctx->err_text);
    ctx->err_text = NULL;
}

/* Chunks of at least this many bytes are aligned to it and advised to
 * be backed by transparent huge pages (where the kernel offers them: THP
 * "always" or "madvise"): a large array then costs one page fault per
 * 2 MiB instead of one per 4 KiB, and fewer TLB misses. */
#define ARRAYAD_HUGE_CHUNK ((uint64_t)2 << 20)

/* `bytes` rounded up to a multiple of ARRAYAD_ARENA_ALIGN (no overflow:
 * sizes are at most ARRAYAD_MAX_ALLOC, addresses far below 2^64). */
static uint64_t arena_round(uint64_t bytes) {
    return (bytes + (ARRAYAD_ARENA_ALIGN - 1)) & ~(uint64_t)(ARRAYAD_ARENA_ALIGN - 1);
}

/* A chunk of `size` usable bytes (a multiple of ARRAYAD_ARENA_ALIGN), or NULL. */
static arrayad_chunk *new_chunk(uint64_t size) {
    arrayad_chunk *c = (arrayad_chunk *)malloc(sizeof *c);
    if (!c) return NULL;
    c->raw = NULL;
    if (size >= ARRAYAD_HUGE_CHUNK && size <= (uint64_t)SIZE_MAX - ARRAYAD_HUGE_CHUNK) {
        /* Whole huge pages: the size rounded up to 2 MiB. */
        uint64_t whole = (size + ARRAYAD_HUGE_CHUNK - 1) & ~(ARRAYAD_HUGE_CHUNK - 1);
        if (posix_memalign(&c->raw, (size_t)ARRAYAD_HUGE_CHUNK, (size_t)whole) != 0) c->raw = NULL;
#ifdef MADV_HUGEPAGE
        if (c->raw) (void)madvise(c->raw, (size_t)whole, MADV_HUGEPAGE);
#endif
        c->data = (char *)c->raw;
    } else if ((size_t)size + ARRAYAD_ARENA_ALIGN >= (size_t)size) {
        c->raw = malloc((size_t)size + ARRAYAD_ARENA_ALIGN);
        c->data = (char *)arena_round((uintptr_t)c->raw);
    }
    if (!c->raw) {
        free(c);
        return NULL;
    }
    c->size = size;
    c->grown = size;
    c->next = NULL;
    return c;
}

static void free_chunk(arrayad_chunk *c) {
    free(c->raw);
    free(c);
}

void arrayad_ctx_release(arrayad_ctx *ctx) {
    arrayad_chunk *c = ctx->arena_first;
    while (c) {
        arrayad_chunk *next = c->next;
        free_chunk(c);
        c = next;
    }
    free(ctx->tape_base);
    clear_text(ctx);
    {
        uint64_t limit = ctx->limit;
        memset(ctx, 0, sizeof *ctx);
        ctx->limit = limit;
    }
}

void arrayad_ctx_reset(arrayad_ctx *ctx) {
    arrayad_chunk *first = ctx->arena_first;
    ctx->arena_cur = first;
    ctx->arena_ptr = first ? first->data : NULL;
    ctx->arena_end = first ? first->data + first->size : NULL;
    ctx->tape_ptr = ctx->tape_base;
    ctx->tape_top = ctx->tape_base;
    ctx->err_msg = NULL;
    ctx->err_vals[0] = ctx->err_vals[1] = ctx->err_vals[2] = 0;
    ctx->err_kind = 0;
    ctx->err_final = 0;
    clear_text(ctx);
    ctx->err_buf[0] = '\0';
    ctx->dest = NULL;
    ctx->stack_limit = 0;
}

/* An address in the caller's frame on the thread's stack: the frame
 * address, not that of a local variable, which AddressSanitizer's
 * detect_stack_use_after_return may place on a heap-allocated fake stack. */
static uintptr_t stack_here(void) { return (uintptr_t)__builtin_frame_address(0); }

#if defined(ARRAYAD_STACK_BOUNDS)
/* The lowest address of the calling thread's stack (0 when unknown),
 * asked once per thread: glibc reads /proc/self/maps for the main thread.
 * Only in the runtime of the JIT (runtime/build.rs): pthread_getattr_np
 * would make shared libraries depend on ld-linux, not only libc and libm. */
static _Thread_local uintptr_t stack_bottom;
static _Thread_local int stack_bottom_known;

static uintptr_t thread_stack_bottom(void) {
    if (!stack_bottom_known) {
        pthread_attr_t attr;
        void *addr = NULL;
        size_t size = 0;
        stack_bottom_known = 1;
        if (pthread_getattr_np(pthread_self(), &attr) == 0) {
            if (pthread_attr_getstack(&attr, &addr, &size) == 0) stack_bottom = (uintptr_t)addr;
            pthread_attr_destroy(&attr);
        }
    }
    return stack_bottom;
}
#else
/* The main thread's stack, [main_stack_lo, main_stack_hi) (empty when
 * unknown), read once per process (a later setrlimit is not seen): the top
 * of the [stack] mapping of /proc/self/maps less RLIMIT_STACK, as glibc's
 * pthread_getattr_np computes it (which a shared library cannot call
 * without depending on ld-linux), and no lower than 1 MiB (the kernel's
 * guard gap) above the mapping below it. An unlimited RLIMIT_STACK leaves
 * it unknown. The stacks of other threads are not known here. */
static uintptr_t main_stack_lo, main_stack_hi;
static pthread_once_t main_stack_once = PTHREAD_ONCE_INIT;

static void read_main_stack(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_STACK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) return;
    char line[512];
    unsigned long below = 0; /* the end of the mapping before this one */
    int whole = 1;           /* line starts a line of the file */
    while (fgets(line, sizeof line, maps)) {
        size_t n = strlen(line);
        int starts = whole;
        whole = n > 0 && line[n - 1] == '\n';
        unsigned long lo = 0, hi = 0;
        if (!starts || sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
        if (!(whole && n >= 9 && strcmp(line + n - 9, " [stack]\n") == 0)) {
            below = hi;
            continue;
        }
        uintptr_t bottom = hi > rl.rlim_cur ? hi - rl.rlim_cur : 0;
        if (bottom < below + (1u << 20)) bottom = below + (1u << 20);
        if (bottom > lo) bottom = lo;
        main_stack_lo = bottom;
        main_stack_hi = hi;
        break;
    }
    fclose(maps);
}

/* The lowest address of the calling thread's stack when it is the main
 * thread (0 otherwise, or when unknown). */
static uintptr_t thread_stack_bottom(void) {
    uintptr_t at = stack_here();
    pthread_once(&main_stack_once, read_main_stack);
    return main_stack_lo <= at && at < main_stack_hi ? main_stack_lo : 0;
}
#endif

/* The stack left below the limit for the runtime's and the C library's
 * frames, and for generated frames small enough to need no check. */
#define ARRAYAD_STACK_MARGIN (64u << 10)

void arrayad_set_stack_limit(arrayad_ctx *ctx) {
    uintptr_t at = stack_here();
    uintptr_t bottom = thread_stack_bottom();
    if (bottom)
        ctx->stack_limit = bottom + ARRAYAD_STACK_MARGIN;
    else
        ctx->stack_limit = at > ARRAYAD_CALL_STACK ? at - ARRAYAD_CALL_STACK : 1;
}

arrayad_ctx *arrayad_ctx_new(void) {
    arrayad_ctx *ctx = (arrayad_ctx *)malloc(sizeof *ctx);
    if (ctx) arrayad_ctx_init(ctx);
    return ctx;
}

void arrayad_ctx_free(arrayad_ctx *ctx) {
    if (!ctx) return;
    arrayad_ctx_release(ctx);
    free(ctx);
}

size_t arrayad_ctx_size(void) { return sizeof(arrayad_ctx); }

uint64_t arrayad_ctx_capacity(const arrayad_ctx *ctx) { return ctx->held; }

static int32_t record(arrayad_ctx *ctx, int32_t kind, const char *msg, int64_t a, int64_t b, int64_t c);

static void use_chunk(arrayad_ctx *ctx, arrayad_chunk *c) {
    ctx->arena_cur = c;
    ctx->arena_ptr = c->data;
    ctx->arena_end = c->data + c->size;
}

void *arrayad_alloc_slow(arrayad_ctx *ctx, uint64_t size) {
    uint64_t rounded, want, prev, grown;
    arrayad_chunk *c;
    char *p;
    if (size > ARRAYAD_MAX_ALLOC) {
        record(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
               "out of memory: an array of %1 bytes (or more) is too large", (int64_t)size,
               0, 0);
        return NULL;
    }
    rounded = arena_round(size);
    if (ctx->arena_cur && (uint64_t)(ctx->arena_end - ctx->arena_ptr) >= rounded) {
        p = ctx->arena_ptr;
        ctx->arena_ptr += rounded;
        return p;
    }
    /* Chunks after the current one are free (kept from an earlier call, or
       left there by a release to a mark): the first large enough is used;
       those too small on the way are freed, so that memory kept from a
       smaller call is replaced by a larger chunk, not added to. */
    {
        arrayad_chunk **link = ctx->arena_cur ? &ctx->arena_cur->next : &ctx->arena_first;
        while ((c = *link) != NULL) {
            if (c->size >= rounded) {
                use_chunk(ctx, c);
                ctx->arena_ptr += rounded;
                return c->data;
            }
            *link = c->next;
            ctx->held -= c->size;
            free_chunk(c);
        }
    }
    prev = ctx->arena_cur ? ctx->arena_cur->grown : 0;
    /* Doubling up to ARRAYAD_MAX_CHUNK_GROWTH, from the size the doubling
       gave the current chunk: a chunk enlarged to one large array is not
       followed by one twice its size (a 4 MB result, then its 8 KB row
       sums, held 12 MB). */
    grown = prev < ARRAYAD_MAX_CHUNK_GROWTH ? 2 * prev : ARRAYAD_MAX_CHUNK_GROWTH;
    if (grown < ARRAYAD_MIN_CHUNK) grown = ARRAYAD_MIN_CHUNK;
    want = grown < rounded ? rounded : grown;
    /* The memory limit: a smaller chunk if that fits, else an error. */
    if (want > ctx->limit || ctx->held > ctx->limit - want) want = rounded;
    if (want > ctx->limit || ctx->held > ctx->limit - want) {
        record(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
               "out of memory: an array of %1 bytes would exceed the memory limit of %2 bytes "
               "(ARRAYAD_MAX_MEMORY)",
               (int64_t)size, (int64_t)ctx->limit, 0);
        return NULL;
    }
    c = new_chunk(want);
    if (!c) {
        record(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
               "out of memory: could not allocate an array of %1 bytes", (int64_t)size, 0, 0);
        return NULL;
    }
    c->grown = want < grown ? want : grown;
    ctx->held += want;
    if (ctx->arena_cur) {
        c->next = ctx->arena_cur->next;
        ctx->arena_cur->next = c;
    } else {
        c->next = ctx->arena_first;
        ctx->arena_first = c;
    }
    use_chunk(ctx, c);
    ctx->arena_ptr += rounded;
    return c->data;
}

/* The position of `p` in the arena region allocated since the mark
 * (mark_ptr in mark_chunk; every chunk after it up to the current one):
 * the index of its chunk in that walk (0 for the mark chunk), or -1 when it
 * lies outside the region. */
static int64_t region_chunk(const arrayad_ctx *ctx, const char *mark_ptr, const arrayad_chunk *mark_chunk,
                            const char *p) {
    const arrayad_chunk *c = mark_chunk ? mark_chunk : ctx->arena_first;
    const char *lo = mark_chunk ? mark_ptr : (c ? c->data : NULL);
    int64_t k = 0;
    for (; c; c = c->next, k++) {
        if (p >= lo && p < c->data + c->size) return k;
        if (c == ctx->arena_cur) break;
        lo = c->next ? c->next->data : NULL;
    }
    return -1;
}

typedef struct {
    int64_t chunk;
    const char *src;
    uint64_t bytes;
    int64_t slot; /* index of the pair in the caller's list */
} kept_array;

static int kept_order(const void *a, const void *b) {
    const kept_array *x = (const kept_array *)a, *y = (const kept_array *)b;
    if (x->chunk != y->chunk) return x->chunk < y->chunk ? -1 : 1;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

int32_t arrayad_arena_keep(arrayad_ctx *ctx, const void *mark_ptr, void *mark_chunk, int64_t n, int64_t *pairs) {
    arrayad_chunk *mc = (arrayad_chunk *)mark_chunk;
    arrayad_chunk *dest_chunk = mc ? mc : ctx->arena_first;
    char *dest;
    kept_array small[8], *k = small;
    int64_t i, m = 0;
    uint64_t total = 0;
    if (!dest_chunk) return 0; /* nothing was ever allocated */
    dest = mc ? (char *)mark_ptr : dest_chunk->data;
    if (n < 0) return 0;
    if (n > 8) {
        k = (kept_array *)malloc((size_t)n * sizeof *k);
        if (!k) return 0;
    }
    for (i = 0; i < n; i++) {
        const char *p = (const char *)(intptr_t)pairs[2 * i];
        uint64_t bytes = (uint64_t)pairs[2 * i + 1];
        int64_t c = region_chunk(ctx, (const char *)mark_ptr, mc, p);
        if (c < 0 || bytes == 0) continue; /* outside the region: stays */
        k[m].chunk = c;
        k[m].src = p;
        k[m].bytes = bytes;
        k[m].slot = i;
        m++;
    }
    qsort(k, (size_t)m, sizeof *k, kept_order);
    /* Sources must not overlap (identical arrays are moved once). */
    for (i = 0; i < m; i++) {
        if (i > 0 && k[i].chunk == k[i - 1].chunk && k[i].src == k[i - 1].src && k[i].bytes == k[i - 1].bytes)
            continue;
        if (i > 0 && k[i].chunk == k[i - 1].chunk && k[i].src < k[i - 1].src + k[i - 1].bytes) {
            if (k != small) free(k);
            return 0;
        }
        total += arena_round(k[i].bytes);
    }
    if (total > (uint64_t)(dest_chunk->data + dest_chunk->size - dest)) {
        /* No room where the mark was: the kept arrays go to the start of the
           next chunk instead, through a temporary copy (they may lie in that
           chunk already). */
        arrayad_chunk *next = dest_chunk->next;
        char *tmp, *t;
        if (!next || next->size < total || !(tmp = (char *)malloc((size_t)total))) {
            if (k != small) free(k);
            return 0;
        }
        for (i = 0, t = tmp; i < m; i++) {
            if (i > 0 && k[i].chunk == k[i - 1].chunk && k[i].src == k[i - 1].src && k[i].bytes == k[i - 1].bytes) {
                pairs[2 * k[i].slot] = pairs[2 * k[i - 1].slot];
                continue;
            }
            memcpy(t, k[i].src, (size_t)k[i].bytes);
            pairs[2 * k[i].slot] = (int64_t)(intptr_t)(next->data + (t - tmp));
            t += arena_round(k[i].bytes);
        }
        total = (uint64_t)(t - tmp);
        memcpy(next->data, tmp, (size_t)total);
        free(tmp);
        if (k != small) free(k);
        ctx->arena_cur = next;
        ctx->arena_ptr = next->data + total;
        ctx->arena_end = next->data + next->size;
        return 1;
    }
    /* Move down in allocation order: each destination lies below (or at)
       its source and above every destination before it. */
    for (i = 0; i < m; i++) {
        if (i > 0 && k[i].chunk == k[i - 1].chunk && k[i].src == k[i - 1].src && k[i].bytes == k[i - 1].bytes) {
            pairs[2 * k[i].slot] = pairs[2 * k[i - 1].slot];
            continue;
        }
        if (dest != k[i].src) memmove(dest, k[i].src, (size_t)k[i].bytes);
        pairs[2 * k[i].slot] = (int64_t)(intptr_t)dest;
        dest += arena_round(k[i].bytes);
    }
    if (k != small) free(k);
    ctx->arena_cur = dest_chunk;
    ctx->arena_ptr = dest;
    ctx->arena_end = dest_chunk->data + dest_chunk->size;
    return 1;
}

/* ---- Tape -------------------------------------------------------------- */

int32_t arrayad_tape_grow(arrayad_ctx *ctx, uint64_t slots) {
    uint64_t used = (uint64_t)(ctx->tape_ptr - ctx->tape_base);
    uint64_t cap = (uint64_t)(ctx->tape_end - ctx->tape_base);
    uint64_t want = cap ? 2 * cap : 1024;
    uint64_t *mem;
    if (slots > ((uint64_t)1 << 58) || used + slots > ((uint64_t)1 << 58)) {
        return record(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                      "out of memory: the tape would exceed %1 slots", (int64_t)1 << 58, 0,
                      0);
    }
    if (want < used + slots) want = used + slots;
    /* The memory limit: the least growth if that fits, else an error. */
    if ((want - cap) * sizeof(uint64_t) > ctx->limit - (ctx->held < ctx->limit ? ctx->held : ctx->limit))
        want = used + slots;
    if (ctx->held > ctx->limit || (want - cap) * sizeof(uint64_t) > ctx->limit - ctx->held) {
        return record(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                      "out of memory: the tape would exceed the memory limit of %1 bytes "
                      "(ARRAYAD_MAX_MEMORY)",
                      (int64_t)ctx->limit, 0, 0);
    }
    mem = (uint64_t *)realloc(ctx->tape_base, (size_t)want * sizeof(uint64_t));
    if (!mem) {
        return record(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                      "out of memory: could not grow the tape to %1 slots", (int64_t)want,
                      0, 0);
    }
    ctx->held += (want - cap) * sizeof(uint64_t);
    ctx->tape_base = mem;
    ctx->tape_ptr = mem + used;
    /* only a push grows the tape, and it discards the popped slots above it */
    ctx->tape_top = mem + used;
    ctx->tape_end = mem + want;
    return 0;
}

/* ---- Errors ------------------------------------------------------------ */

static void put(char *buf, size_t cap, size_t *len, const char *s, size_t n);

/* Records an error of the runtime itself (an allocation that failed),
 * which the generated code that asked replaces with a located message
 * (arrayad_fail); nothing when generated code recorded one before. */
static int32_t record(arrayad_ctx *ctx, int32_t kind, const char *msg, int64_t a, int64_t b, int64_t c) {
    if (ctx->err_final) return ctx->err_kind;
    ctx->err_kind = kind;
    ctx->err_msg = msg;
    ctx->err_vals[0] = a;
    ctx->err_vals[1] = b;
    ctx->err_vals[2] = c;
    return kind;
}

/* Makes the error recorded in ctx the call's: later errors do not replace
 * it, and the stack limit is set above every stack, so that each function
 * making calls that still runs fails at its entry (a check that passes
 * the error on). Generated code that checks the status of its calls once,
 * at its end (straight-line code calling straight-line code: codegen's
 * lower/call.rs), runs on after a failed call and may fail again on the
 * values the failed call left unset; the first error is the one the
 * program meets. */
static int32_t finalise(arrayad_ctx *ctx) {
    ctx->err_final = 1;
    ctx->stack_limit = (uintptr_t)1 << (sizeof(uintptr_t) * 8 - 1);
    return ctx->err_kind;
}

int32_t arrayad_fail(arrayad_ctx *ctx, int32_t kind, const char *msg, int64_t a, int64_t b,
                     int64_t c) {
    if (ctx->err_final) return ctx->err_kind;
    record(ctx, kind, msg, a, b, c);
    return finalise(ctx);
}

int32_t arrayad_fail_text(arrayad_ctx *ctx, int32_t kind, const char *fmt, ...) {
    va_list ap;
    int n;
    clear_text(ctx);
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n >= 0 && (ctx->err_text = (char *)malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(ctx->err_text, (size_t)n + 1, fmt, ap);
        va_end(ap);
        ctx->err_msg = ctx->err_text;
    } else {
        /* no heap: the message, truncated */
        va_start(ap, fmt);
        vsnprintf(ctx->err_buf, sizeof ctx->err_buf, fmt, ap);
        va_end(ap);
        ctx->err_msg = ctx->err_buf;
    }
    ctx->err_kind = kind;
    return kind;
}

/* Appends "[d0, d1, ...]" to buf at *len (cap bytes). */
static void put_shape(char *buf, size_t cap, size_t *len, int64_t rank, const int64_t *dims);

/* Writes the message of arrayad_fail_shapes into buf (cap bytes, NUL
 * terminated); returns its full length. */
static size_t compose_shapes(char *buf, size_t cap, const char *msg, int64_t row, int64_t rank, const int64_t *shape,
                             const int64_t *first) {
    size_t len = 0;
    const char *m = msg;
    while (*m) {
        if (m[0] == '%' && m[1] == '1') {
            char num[32];
            int n = snprintf(num, sizeof num, "%lld", (long long)row);
            put(buf, cap, &len, num, n > 0 ? (size_t)n : 0);
            m += 2;
        } else if (m[0] == '%' && (m[1] == 'A' || m[1] == 'B')) {
            put_shape(buf, cap, &len, rank, m[1] == 'A' ? shape : first);
            m += 2;
        } else if (m[0] == '%' && m[1] == '%') {
            put(buf, cap, &len, "%", 1);
            m += 2;
        } else {
            put(buf, cap, &len, m, 1);
            m++;
        }
    }
    if (cap > 0) buf[len < cap ? len : cap - 1] = '\0';
    return len;
}

int32_t arrayad_fail_shapes(arrayad_ctx *ctx, int32_t kind, const char *msg, int64_t row,
                            int64_t rank, const int64_t *shape, const int64_t *first) {
    size_t len;
    if (ctx->err_final) return ctx->err_kind;
    clear_text(ctx);
    len = compose_shapes(NULL, 0, msg, row, rank, shape, first);
    if ((ctx->err_text = (char *)malloc(len + 1)) != NULL) {
        compose_shapes(ctx->err_text, len + 1, msg, row, rank, shape, first);
        ctx->err_msg = ctx->err_text;
    } else {
        compose_shapes(ctx->err_buf, sizeof ctx->err_buf, msg, row, rank, shape, first);
        ctx->err_msg = ctx->err_buf;
    }
    ctx->err_kind = kind;
    return finalise(ctx);
}

static void put_shape(char *buf, size_t cap, size_t *len, int64_t rank, const int64_t *dims) {
    int64_t a;
    put(buf, cap, len, "[", 1);
    for (a = 0; a < rank; a++) {
        char num[32];
        int n = snprintf(num, sizeof num, "%lld", (long long)dims[a]);
        if (a > 0) put(buf, cap, len, ", ", 2);
        put(buf, cap, len, num, n > 0 ? (size_t)n : 0);
    }
    put(buf, cap, len, "]", 1);
}

int32_t arrayad_error_kind(const arrayad_ctx *ctx) { return ctx->err_kind; }

/* Appends text to buf (truncating at cap), counting the full length in *len. */
static void put(char *buf, size_t cap, size_t *len, const char *s, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        if (*len + 1 < cap) buf[*len] = s[i];
        (*len)++;
    }
}

size_t arrayad_format_error(const arrayad_ctx *ctx, char *buf, size_t cap) {
    size_t len = 0;
    const char *m = ctx->err_msg;
    if (!m) m = ctx->err_kind ? "error (no message recorded)" : "";
    if (m == ctx->err_buf || m == ctx->err_text) {
        put(buf, cap, &len, m, strlen(m));
    } else {
        while (*m) {
            if (m[0] == '%' && m[1] >= '1' && m[1] <= '3') {
                char num[32];
                int n = snprintf(num, sizeof num, "%lld", (long long)ctx->err_vals[m[1] - '1']);
                put(buf, cap, &len, num, n > 0 ? (size_t)n : 0);
                m += 2;
            } else if (m[0] == '%' && m[1] == '%') {
                put(buf, cap, &len, "%", 1);
                m += 2;
            } else {
                put(buf, cap, &len, m, 1);
                m++;
            }
        }
    }
    if (cap > 0) buf[len < cap ? len : cap - 1] = '\0';
    return len;
}

/* ---- Math -------------------------------------------------------------- */

/* The Bernoulli numbers B_2 .. B_20 of arrayad_polygamma's series. */
static const double arrayad_bernoulli[10] = {
    1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0, -691.0 / 2730.0, 7.0 / 6.0, -3617.0 / 510.0,
    43867.0 / 798.0, -174611.0 / 330.0};

/* psi^(n)(x), the n-th derivative of digamma (n a whole number as a
 * double; n = 0 is digamma): the recurrence
 * psi^(n)(x) = psi^(n)(x + 1) + (-1)^(n+1) n! / x^(n+1) up to x >= 20 + n,
 * then the asymptotic series (Abramowitz & Stegun 6.4.11) to the B_20
 * term. NaN at the poles, for n not a whole number in 0..100 and for
 * x < -1e7. The reference interpreter (arrayad_ir::interp::ops::polygamma)
 * does the same operations in the same order: keep the two in sync. */
double arrayad_polygamma(double n, double x) {
    double fact = 1.0, sign, acc = 0.0, s;
    int k, i, j;
    if (n == 0.0) return arrayad_digamma(x);
    if (!(n >= 1.0 && n <= 100.0) || floor(n) != n || isnan(x) || x < -1e7 || (x <= 0.0 && floor(x) == x))
        return NAN;
    if (x == INFINITY) return 0.0;
    k = (int)n;
    for (i = 2; i <= k; i++) fact *= (double)i;
    sign = (k % 2 == 1) ? 1.0 : -1.0;
    while (x < 20.0 + n) {
        acc += fact / pow(x, n + 1.0);
        x += 1.0;
    }
    s = fact / n / pow(x, n) + fact / (2.0 * pow(x, n + 1.0));
    for (j = 0; j < 10; j++) {
        double two_j = 2.0 * ((double)j + 1.0), c = 1.0, m = two_j + 1.0;
        while (m <= two_j + n - 1.0) {
            c *= m;
            m += 1.0;
        }
        s += arrayad_bernoulli[j] * c / pow(x, two_j + n);
    }
    return sign * (acc + s);
}

double arrayad_lgamma(double x) {
    int sign;
    return lgamma_r(x, &sign);
}

/* The digamma function psi = (log Gamma)': the reflection formula for
 * x < 0.5, the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the
 * asymptotic series to the x^-14 term. Poles (0, -1, -2, ...) and -inf give
 * NaN. The reference interpreter (arrayad_ir::interp::ops::digamma) does
 * the same operations in the same order: keep the two in sync. */
double arrayad_digamma(double x) {
    const double pi = 3.14159265358979323846;
    double r = 0.0, f, t;
    if (isnan(x) || x == -INFINITY) return NAN;
    if (x == INFINITY) return INFINITY;
    if (x <= 0.0 && floor(x) == x) return NAN;
    if (x < 0.5) return arrayad_digamma(1.0 - x) - pi / tan(pi * x);
    while (x < 10.0) {
        r -= 1.0 / x;
        x += 1.0;
    }
    f = 1.0 / (x * x);
    t = f * (-1.0 / 12 +
             f * (1.0 / 120 +
                  f * (-1.0 / 252 + f * (1.0 / 240 + f * (-1.0 / 132 + f * (691.0 / 32760 + f * (-1.0 / 12)))))));
    return r + log(x) - 0.5 / x + t;
}

/* ---- C ABI support ----------------------------------------------------- */

static size_t elem_size(int32_t elem) { return elem == ARRAYAD_BOOL ? 1 : 8; }

static const char *elem_name(int32_t elem) {
    return elem == ARRAYAD_F64 ? "f64" : elem == ARRAYAD_I64 ? "i64" : "bool";
}

/* The prefix of a signature's messages: the definition's location. */
#define AT(sig) ((sig)->at ? (sig)->at : "")

/* The largest element count of an array (and of a Jacobian). */
#define ARRAYAD_MAX_COUNT ((int64_t)1 << 56)

static void shape_text(char *buf, size_t cap, int32_t rank, const int64_t *dims);

/* The extents of a leaf from the (checked, non-negative) sizes into dims,
 * and its element count, saturated at ARRAYAD_MAX_COUNT + 1 (as soon as
 * the product of the leading extents exceeds it): no overflow whatever the
 * extents. */
static int64_t leaf_count(const arrayad_leaf *l, const int64_t *sizes, int64_t *dims) {
    int32_t a;
    uint64_t n = 1;
    for (a = 0; a < l->rank; a++) {
        int64_t d = l->dims[a];
        dims[a] = d >= 0 ? d : sizes[-d - 1];
    }
    for (a = 0; a < l->rank; a++) {
        /* n <= 2^56 + 1 and dims[a] < 2^63: the product is exact in 128 bits */
        unsigned __int128 p = (unsigned __int128)n * (uint64_t)dims[a];
        n = p > (unsigned __int128)ARRAYAD_MAX_COUNT ? (uint64_t)ARRAYAD_MAX_COUNT + 1 : (uint64_t)p;
    }
    return (int64_t)n;
}

/* The extents of a leaf from the sizes; the element count in *count.
 * 0, or an error (OutOfMemory when the count exceeds 2^56). */
static int32_t leaf_dims(arrayad_ctx *ctx, const arrayad_sig *sig, const arrayad_leaf *l,
                         const int64_t *sizes, int64_t *dims, int64_t *count) {
    *count = leaf_count(l, sizes, dims);
    if (*count > ARRAYAD_MAX_COUNT) {
        char shape[128];
        shape_text(shape, sizeof shape, l->rank, dims);
        return arrayad_fail_text(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                                 "%sout of memory: %s: the element count of `%s` (shape %s) overflows",
                                 AT(sig), sig->fname, l->name, shape);
    }
    return 0;
}

#define ARRAYAD_STACK_SLOTS 64
#define ARRAYAD_STACK_LEAVES 16
#define ARRAYAD_MAX_RANK 255

static void shape_text(char *buf, size_t cap, int32_t rank, const int64_t *dims) {
    size_t len = 0;
    int32_t a;
    buf[0] = '\0';
    for (a = 0; a < rank && len + 1 < cap; a++) {
        int n = snprintf(buf + len, cap - len, "[%lld]", (long long)dims[a]);
        if (n < 0) break;
        len += (size_t)n;
    }
}

/* 0, or NegativeSize for the first negative size. */
static int32_t check_sizes(arrayad_ctx *ctx, const arrayad_sig *sig, const int64_t *sizes) {
    int32_t i;
    for (i = 0; i < sig->nsizes; i++) {
        if (sizes[i] == INT64_MIN) {
            /* A size expression (LANGUAGE.md section 11) without a value. */
            return arrayad_fail_text(ctx, ARRAYAD_ERR_SIZE_MISMATCH,
                                     "%ssize mismatch: %s: size `%s` has no value (a division by zero or an "
                                     "overflow)",
                                     AT(sig), sig->fname, sig->size_names[i]);
        }
        if (sizes[i] < 0) {
            return arrayad_fail_text(ctx, ARRAYAD_ERR_NEGATIVE_SIZE,
                                     "%snegative size: %s: size `%s` is %lld", AT(sig), sig->fname,
                                     sig->size_names[i], (long long)sizes[i]);
        }
    }
    return 0;
}

/* Where arrayad_jacobian wants the results of vjp_rows from output `first`
 * on: each is a stack of `rows` rows whose row r goes to row r of jac
 * (`cols` columns), from the next free column on. */
typedef struct row_scatter {
    int32_t first;
    int64_t rows, cols;
    double *jac;
} row_scatter;

/* The element count of one row of a result stack (all axes but the first). */
static int64_t sc_row_count(const arrayad_leaf *l, const uint64_t *dims) {
    int64_t n = 1;
    int32_t a;
    for (a = 1; a < l->rank; a++) n *= (int64_t)dims[a];
    return n;
}

static int overlap(const char *a, uint64_t na, const char *b, uint64_t nb) {
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

/* Before the results are copied out in order: an array result that still
 * points into memory an earlier output overwrites (an input the caller also
 * passed as an output, in place) is first copied into the arena, so that
 * every output gets the value of the call. (An output its result was
 * computed in, by destination passing, is not overwritten.) `bytes[j]` is
 * output j's size in bytes (0 for scalars), `dst[j]` where it is written.
 * 0, or OutOfMemory. */
static int32_t stage_aliased(arrayad_ctx *ctx, const arrayad_sig *sig, uint64_t *res, const char *const *dst,
                             const uint64_t *bytes) {
    size_t k = 0;
    int32_t i, j;
    for (j = 0; j < sig->nout; j++) {
        const arrayad_leaf *l = &sig->out[j];
        const char *src = (const char *)(uintptr_t)res[k];
        size_t slot = k;
        k += 1 + (size_t)l->rank;
        size_t ki = 0;
        if (l->rank == 0 || bytes[j] == 0) continue;
        for (i = 0; i < j; i++) {
            /* an output its result was computed in is not written again */
            int in_place = sig->out[i].rank > 0 && (const char *)(uintptr_t)res[ki] == dst[i];
            ki += 1 + (size_t)sig->out[i].rank;
            if (!in_place && overlap(dst[i], bytes[i] ? bytes[i] : 8, src, bytes[j])) {
                void *copy = arrayad_alloc_slow(ctx, bytes[j]);
                if (!copy) return ARRAYAD_ERR_OUT_OF_MEMORY;
                memcpy(copy, src, (size_t)bytes[j]);
                res[slot] = (uint64_t)(uintptr_t)copy;
                break;
            }
        }
    }
    return 0;
}

static int32_t count_of(arrayad_ctx *ctx, const arrayad_sig *sig, const arrayad_leaf *l,
                        const int64_t *sizes, int64_t *count);

/* Destination passing: a table offering each array output that overlaps
 * no input and no other output as the memory its result may be computed
 * in (`arrayad_ctx::dest`: its pointer and size in bytes per result), so
 * that the result is not copied; *dest stays NULL when no output
 * qualifies. Outputs scattered into a Jacobian (from sc->first) are not
 * offered. An input passed as an output too (a call in place) keeps the
 * copy through the arena. 0, or OutOfMemory. */
static int32_t offer_destinations(arrayad_ctx *ctx, const arrayad_sig *sig, const int64_t *sizes,
                                  const void *const *in, void *const *out, const uint64_t *out_bytes,
                                  const row_scatter *sc, const uint64_t **dest) {
    uint64_t *table = NULL;
    int32_t i, j;
    for (i = 0; i < sig->nout; i++) {
        const arrayad_leaf *l = &sig->out[i];
        int ok = l->rank > 0 && out_bytes[i] > 0 && !(sc && i >= sc->first);
        for (j = 0; j < sig->nin && ok; j++) {
            int64_t count;
            int32_t st;
            if (sig->in[j].rank == 0) continue;
            st = count_of(ctx, sig, &sig->in[j], sizes, &count);
            if (st != 0) return st;
            ok = !overlap((const char *)in[j], (uint64_t)count * elem_size(sig->in[j].elem),
                          (const char *)out[i], out_bytes[i]);
        }
        for (j = 0; j < sig->nout && ok; j++) {
            uint64_t nb = sig->out[j].rank > 0 ? out_bytes[j] : elem_size(sig->out[j].elem);
            if (j != i) ok = !overlap((const char *)out[j], nb, (const char *)out[i], out_bytes[i]);
        }
        if (!ok) continue;
        if (!table) {
            table = (uint64_t *)arrayad_alloc_slow(ctx, (uint64_t)sig->nout * 2 * sizeof(uint64_t));
            if (!table) return ARRAYAD_ERR_OUT_OF_MEMORY;
            memset(table, 0, (size_t)sig->nout * 2 * sizeof(uint64_t));
        }
        table[2 * i] = (uint64_t)(uintptr_t)out[i];
        table[2 * i + 1] = out_bytes[i];
    }
    *dest = table;
    return 0;
}

/* arrayad_invoke, with the outputs from sc->first on scattered into a
 * Jacobian (when sc is not NULL) rather than copied to out. */
static int32_t invoke(arrayad_ctx *ctx, arrayad_fn fn, const arrayad_sig *sig,
                      const int64_t *sizes, const void *const *in, void *const *out,
                      const row_scatter *sc) {
    uint64_t stack_slots[ARRAYAD_STACK_SLOTS];
    uint64_t *slots = stack_slots, *args, *res;
    uint64_t stack_bytes[ARRAYAD_STACK_LEAVES], *out_bytes = stack_bytes;
    const char *stack_dst[ARRAYAD_STACK_LEAVES], **out_dst = stack_dst;
    int64_t dims[ARRAYAD_MAX_RANK + 1];
    int32_t i, a, st = 0;
    size_t nin_slots = 0, nout_slots = 0, k;
    int64_t col = 0;
    const uint64_t *dest = NULL;

    st = check_sizes(ctx, sig, sizes);
    if (st) return st;
    for (i = 0; i < sig->nin; i++) nin_slots += 1 + (size_t)sig->in[i].rank;
    for (i = 0; i < sig->nout; i++) nout_slots += 1 + (size_t)sig->out[i].rank;
    if (nin_slots + nout_slots > ARRAYAD_STACK_SLOTS) {
        slots = (uint64_t *)malloc((nin_slots + nout_slots) * sizeof(uint64_t));
        if (!slots) {
            return arrayad_fail_text(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                                     "%sout of memory: %s: argument slots", AT(sig), sig->fname);
        }
    }
    args = slots;
    res = slots + nin_slots;

    /* pack the arguments */
    k = 0;
    for (i = 0; i < sig->nin && st == 0; i++) {
        const arrayad_leaf *l = &sig->in[i];
        if (l->rank == 0) {
            if (!in[i]) {
                st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                       "%sinvalid argument: %s: null pointer for `%s`", AT(sig),
                                       sig->fname, l->name);
            } else if (l->elem == ARRAYAD_F64) {
                memcpy(&args[k], in[i], 8);
            } else if (l->elem == ARRAYAD_I64) {
                memcpy(&args[k], in[i], 8);
            } else {
                args[k] = *(const unsigned char *)in[i] ? 1 : 0;
            }
            k++;
        } else {
            int64_t count;
            st = leaf_dims(ctx, sig, l, sizes, dims, &count);
            if (st == 0 && count > 0 && !in[i]) {
                st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                       "%sinvalid argument: %s: null pointer for the %s array `%s`",
                                       AT(sig), sig->fname, elem_name(l->elem), l->name);
            }
            args[k++] = (uint64_t)(uintptr_t)in[i];
            for (a = 0; a < l->rank; a++) args[k++] = (uint64_t)dims[a];
        }
    }
    /* the output pointers, and each output's size and destination */
    if (st == 0 && sig->nout > ARRAYAD_STACK_LEAVES) {
        out_bytes = (uint64_t *)arrayad_alloc_slow(ctx, (uint64_t)sig->nout * (sizeof(uint64_t) + sizeof(char *)));
        if (!out_bytes) st = ARRAYAD_ERR_OUT_OF_MEMORY;
        else out_dst = (const char **)(out_bytes + sig->nout);
    }
    for (i = 0; i < sig->nout && st == 0; i++) {
        const arrayad_leaf *l = &sig->out[i];
        int64_t count = 1;
        if (l->rank > 0) st = leaf_dims(ctx, sig, l, sizes, dims, &count);
        if (st == 0 && count > 0 && !out[i]) {
            st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                   "%sinvalid argument: %s: null pointer for the output `%s`",
                                   AT(sig), sig->fname, l->name);
        }
        if (sc && i >= sc->first) {
            out_dst[i] = (const char *)sc->jac;
            out_bytes[i] = (uint64_t)sc->rows * (uint64_t)sc->cols * sizeof(double);
        } else {
            out_dst[i] = (const char *)out[i];
            out_bytes[i] = l->rank > 0 ? (uint64_t)count * elem_size(l->elem) : 0;
        }
    }
    if (st == 0) st = offer_destinations(ctx, sig, sizes, in, out, out_bytes, sc, &dest);
    if (st == 0) {
        ctx->dest = dest;
        arrayad_set_stack_limit(ctx);
        st = fn(ctx, args, res);
        ctx->dest = NULL;
    }
    /* check the shapes of the array results (nothing is written before,
       unless computed in place in its output) */
    k = 0;
    for (i = 0; i < sig->nout && st == 0; i++) {
        const arrayad_leaf *l = &sig->out[i];
        if (l->rank > 0) {
            int64_t count;
            st = leaf_dims(ctx, sig, l, sizes, dims, &count);
            for (a = 0; a < l->rank && st == 0; a++) {
                if ((int64_t)res[k + 1 + a] != dims[a]) {
                    char want[128], got[128];
                    shape_text(want, sizeof want, l->rank, dims);
                    shape_text(got, sizeof got, l->rank, (const int64_t *)&res[k + 1]);
                    st = arrayad_fail_text(ctx, ARRAYAD_ERR_SIZE_MISMATCH,
                                           "%ssize mismatch: %s: result `%s` has shape %s, "
                                           "declared %s",
                                           AT(sig), sig->fname, l->name, got, want);
                }
            }
        }
        k += 1 + (size_t)l->rank;
    }
    if (st == 0) st = stage_aliased(ctx, sig, res, out_dst, out_bytes);
    /* copy the results out */
    k = 0;
    for (i = 0; i < sig->nout && st == 0; i++) {
        const arrayad_leaf *l = &sig->out[i];
        if (l->rank == 0) {
            if (l->elem == ARRAYAD_BOOL) {
                *(unsigned char *)out[i] = res[k] ? 1 : 0;
            } else {
                memcpy(out[i], &res[k], 8);
            }
            k++;
        } else {
            const void *src = (const void *)(uintptr_t)res[k];
            int64_t count = (int64_t)(out_bytes[i] / elem_size(l->elem));
            if (sc && i >= sc->first) count = (int64_t)res[k + 1] * sc_row_count(l, &res[k + 1]);
            if (count > 0 && sc && i >= sc->first) {
                /* a [rows][n] stack of f64 rows into columns col.. of jac */
                int64_t r, n = count / sc->rows;
                for (r = 0; r < sc->rows; r++) {
                    memcpy(sc->jac + r * sc->cols + col, (const double *)src + r * n,
                           (size_t)n * sizeof(double));
                }
                col += n;
            } else if (count > 0 && src != out[i]) {
                memmove(out[i], src, (size_t)count * elem_size(l->elem));
            }
            k += 1 + (size_t)l->rank;
        }
    }
    if (slots != stack_slots) free(slots);
    return st;
}

int32_t arrayad_invoke(arrayad_ctx *ctx, arrayad_fn fn, const arrayad_sig *sig,
                       const int64_t *sizes, const void *const *in, void *const *out) {
    return invoke(ctx, fn, sig, sizes, in, out, NULL);
}

/* Element count of leaf i of a signature's inputs or outputs. */
static int32_t count_of(arrayad_ctx *ctx, const arrayad_sig *sig, const arrayad_leaf *l,
                        const int64_t *sizes, int64_t *count) {
    int64_t dims[ARRAYAD_MAX_RANK + 1];
    if (l->rank == 0) {
        *count = 1;
        return 0;
    }
    return leaf_dims(ctx, sig, l, sizes, dims, count);
}

/* `count` zeroed elements of `size` bytes from the arena (the memory the
 * thread's context keeps between calls: no malloc on this path), or NULL
 * (an error is recorded). */
static void *arena_zeroed(arrayad_ctx *ctx, uint64_t count, uint64_t size) {
    uint64_t bytes = count * size;
    void *p;
    if (size != 0 && bytes / size != count) {
        arrayad_fail(ctx, ARRAYAD_ERR_OUT_OF_MEMORY, "out of memory: a table of %1 elements", (int64_t)count, 0, 0);
        return NULL;
    }
    p = arrayad_alloc_slow(ctx, bytes ? bytes : 1);
    if (p && bytes) memset(p, 0, (size_t)bytes);
    return p;
}

/* a + b for counts of at most ARRAYAD_MAX_COUNT + 1, saturated there. */
static int64_t count_add(int64_t a, int64_t b) {
    return a + b > ARRAYAD_MAX_COUNT ? ARRAYAD_MAX_COUNT + 1 : a + b;
}

/* An allocation of a Jacobian's (or a many-direction jvp's) own tables
 * failed: its error (recorded by the allocator, or none for malloc) again,
 * at the definition and naming the entry point `ps->fname` + `suffix`. */
static int32_t entry_oom(arrayad_ctx *ctx, const arrayad_sig *ps, const char *suffix) {
    char buf[256];
    const char *rest = buf;
    const char *prefix = "out of memory: ";
    buf[0] = '\0';
    if (ctx->err_kind == ARRAYAD_ERR_OUT_OF_MEMORY) arrayad_format_error(ctx, buf, sizeof buf);
    if (strncmp(buf, prefix, strlen(prefix)) == 0) rest = buf + strlen(prefix);
    if (!rest[0]) rest = "its working memory";
    return arrayad_fail_text(ctx, ARRAYAD_ERR_OUT_OF_MEMORY, "%sout of memory: %s%s: %s", AT(ps), ps->fname, suffix,
                             rest);
}

static int32_t jacobian_oom(arrayad_ctx *ctx, const arrayad_sig *ps) { return entry_oom(ctx, ps, "_jacobian"); }

/* The range of `count` elements of 8 bytes from `p` for k directions, in
   bytes (count, k <= 2^56 and count * k checked by the caller). */
static uint64_t directions_bytes(int64_t count, int64_t k) { return (uint64_t)count * (uint64_t)k * 8; }

int32_t arrayad_jvp_many(arrayad_ctx *ctx, const arrayad_jac_desc *d, const int64_t *sizes,
                         const void *const *in, void *const *out, int64_t k) {
    const arrayad_sig *ps = d->primal_sig;
    int32_t np = ps->nin, nr = ps->nout, lanes = d->lanes > 0 ? d->lanes : 1, i, j, l;
    int64_t *act_count, *res_count, first, cols = 0, rows = 0, off;
    const void **in2;
    void **out2;
    double *zero, *scratch;
    char *mark_ptr, *mark_end;
    arrayad_chunk *mark_cur;
    int32_t st = check_sizes(ctx, ps, sizes);
    if (st) return st;
    if (k < 0 || k > ARRAYAD_MAX_COUNT)
        return arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                 "%sinvalid argument: %s_jvp_many: the number of directions k = %lld is %s", AT(ps),
                                 ps->fname, (long long)k, k < 0 ? "negative" : "too large");
    if (k == 0) return arrayad_invoke(ctx, d->primal, ps, sizes, in, out);
    act_count = (int64_t *)arena_zeroed(ctx, (uint64_t)d->nact + 1, sizeof(int64_t));
    res_count = (int64_t *)arena_zeroed(ctx, (uint64_t)d->nres + 1, sizeof(int64_t));
    in2 = (const void **)arena_zeroed(ctx, (uint64_t)np + (uint64_t)d->nact * (uint64_t)lanes + 1, sizeof(void *));
    out2 = (void **)arena_zeroed(ctx, (uint64_t)nr + (uint64_t)d->nres * (uint64_t)lanes + 1, sizeof(void *));
    if (!act_count || !res_count || !in2 || !out2) return entry_oom(ctx, ps, "_jvp_many");
    /* The tangents of every direction, one after another per leaf: counted,
       not null, and overlapping no other buffer (later calls read them). */
    for (i = 0; i < d->nact + d->nres; i++) {
        int is_in = i < d->nact;
        const arrayad_leaf *leaf = is_in ? &ps->in[d->act[i]] : &ps->out[d->res[i - d->nact]];
        const arrayad_leaf *tleaf = is_in ? &d->jvp_sig->in[np + i] : &d->jvp_sig->out[nr + i - d->nact];
        int64_t *count = is_in ? &act_count[i] : &res_count[i - d->nact];
        const void *base = is_in ? in[np + i] : out[nr + i - d->nact];
        st = count_of(ctx, ps, leaf, sizes, count);
        if (st) return st;
        if (*count > 0 && k > ARRAYAD_MAX_COUNT / *count)
            return arrayad_fail_text(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                                     "%sout of memory: %s_jvp_many: %lld directions of `%s` (%lld elements each) are "
                                     "more than can be addressed",
                                     AT(ps), ps->fname, (long long)k, tleaf->name, (long long)*count);
        if (*count > 0 && !base)
            return arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT, "%sinvalid argument: %s_jvp_many: null pointer for `%s`",
                                     AT(ps), ps->fname, tleaf->name);
        if (is_in)
            cols += *count;
        else
            rows += *count;
    }
    for (i = 0; i < d->nres; i++) {
        uint64_t nb = directions_bytes(res_count[i], k);
        const char *t = (const char *)out[nr + i];
        for (j = 0; j < np + d->nact && st == 0; j++) {
            int64_t n = 1;
            const arrayad_leaf *leaf = j < np ? &ps->in[j] : &ps->in[d->act[j - np]];
            if (leaf->rank == 0 && j < np) continue; /* scalars are the wrapper's copies */
            if (leaf->rank > 0) st = count_of(ctx, ps, leaf, sizes, &n);
            if (st == 0 && overlap((const char *)in[j], j < np ? (uint64_t)n * elem_size(leaf->elem) : directions_bytes(n, k),
                                   t, nb))
                st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                       "%sinvalid argument: %s_jvp_many: the output `%s` overlaps the input `%s`", AT(ps),
                                       ps->fname, d->jvp_sig->out[nr + i].name,
                                       j < np ? ps->in[j].name : d->jvp_sig->in[j].name);
        }
        /* nor the values, nor another leaf's tangents (written by every pass) */
        for (j = 0; j < nr + d->nres && st == 0; j++) {
            int64_t n = 1;
            const arrayad_leaf *leaf = j < nr ? &ps->out[j] : &ps->out[d->res[j - nr]];
            if (j == nr + i) continue;
            if (leaf->rank > 0) st = count_of(ctx, ps, leaf, sizes, &n);
            if (st == 0 && overlap((const char *)out[j], j < nr ? (uint64_t)n * elem_size(leaf->elem) : directions_bytes(n, k),
                                   t, nb))
                st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                       "%sinvalid argument: %s_jvp_many: the output `%s` overlaps the output `%s`", AT(ps),
                                       ps->fname, d->jvp_sig->out[nr + i].name, d->jvp_sig->out[j].name);
        }
        if (st) return st;
    }
    /* Zero tangents for the lanes past the last direction, and somewhere
       for their results. */
    zero = (double *)arena_zeroed(ctx, (uint64_t)cols + 1, sizeof(double));
    scratch = (double *)arena_zeroed(ctx, (uint64_t)rows * (uint64_t)lanes + 1, sizeof(double));
    if (!zero || !scratch) return entry_oom(ctx, ps, "_jvp_many");
    for (i = 0; i < np; i++) in2[i] = in[i];
    for (i = 0; i < nr; i++) out2[i] = out[i];
    mark_ptr = ctx->arena_ptr;
    mark_end = ctx->arena_end;
    mark_cur = ctx->arena_cur;
    for (first = 0; first < k && st == 0; first += lanes) {
        for (l = 0; l < lanes; l++) {
            int64_t dir = first + l;
            for (i = 0, off = 0; i < d->nact; i++) {
                in2[np + l * d->nact + i] =
                    dir < k ? (const void *)((const double *)in[np + i] + dir * act_count[i]) : (const void *)(zero + off);
                off += act_count[i];
            }
            for (i = 0, off = 0; i < d->nres; i++) {
                out2[nr + l * d->nres + i] =
                    dir < k ? (void *)((double *)out[nr + i] + dir * res_count[i]) : (void *)(scratch + l * rows + off);
                off += res_count[i];
            }
        }
        ctx->arena_ptr = mark_ptr;
        ctx->arena_end = mark_end;
        ctx->arena_cur = mark_cur;
        ctx->tape_ptr = ctx->tape_top = ctx->tape_base;
        st = arrayad_invoke(ctx, d->jvp, d->jvp_sig, sizes, in2, out2);
    }
    return st;
}

int32_t arrayad_jacobian(arrayad_ctx *ctx, const arrayad_jac_desc *d, const int64_t *sizes,
                         const void *const *in, void *const *out, double *jac) {
    const arrayad_sig *ps = d->primal_sig;
    int64_t rows = 0, cols = 0, c, r, total;
    int64_t *act_count = NULL, *res_count = NULL, *sizes2 = NULL;
    const void **in2 = NULL;
    void **out2 = NULL;
    double *unit = NULL, *tout = NULL;
    char *vals = NULL;
    int32_t i, st;
    int32_t np = ps->nin, nr = ps->nout;
    int32_t lanes = d->lanes > 0 ? d->lanes : 1, l;
    char *mark_ptr, *mark_end;
    arrayad_chunk *mark_cur;

    st = check_sizes(ctx, ps, sizes);
    if (st) return st;
    act_count = (int64_t *)arena_zeroed(ctx, (uint64_t)d->nact + 1, sizeof(int64_t));
    res_count = (int64_t *)arena_zeroed(ctx, (uint64_t)d->nres + 1, sizeof(int64_t));
    in2 = (const void **)arena_zeroed(ctx, (uint64_t)np + (uint64_t)d->nact * (uint64_t)lanes + (uint64_t)d->nres + 1,
                                      sizeof(void *));
    out2 = (void **)arena_zeroed(ctx, (uint64_t)nr + (uint64_t)d->nact + (uint64_t)d->nres * (uint64_t)lanes + 1,
                                 sizeof(void *));
    if (!act_count || !res_count || !in2 || !out2) return jacobian_oom(ctx, ps);
    /* The columns: the active inputs, each checked (at most 2^56 elements). */
    for (i = 0; i < d->nact && st == 0; i++) {
        st = count_of(ctx, ps, &ps->in[d->act[i]], sizes, &act_count[i]);
        if (st == 0) cols = count_add(cols, act_count[i]);
    }
    if (st) goto done;
    /* The rows: the f64 elements of the result, from its declared extents,
       which may be far too large (counts saturate, nothing overflows). With
       no column the Jacobian is empty and the primal call checks them. */
    for (i = 0; i < d->nres; i++) {
        const arrayad_leaf *l = &ps->out[d->res[i]];
        int64_t dims[ARRAYAD_MAX_RANK + 1];
        res_count[i] = leaf_count(l, sizes, dims);
        if (res_count[i] > ARRAYAD_MAX_COUNT && cols > 0) {
            char shape[128];
            shape_text(shape, sizeof shape, l->rank, dims);
            st = arrayad_fail_text(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                                   "%sout of memory: %s_jacobian: the Jacobian has more rows than can be "
                                   "allocated (one per element of the result `%s`, of shape %s)",
                                   AT(ps), ps->fname, l->name, shape);
            goto done;
        }
        rows = count_add(rows, res_count[i]);
    }
    if (cols > 0 && (rows > ARRAYAD_MAX_COUNT || rows > ARRAYAD_MAX_COUNT / cols)) {
        st = arrayad_fail_text(ctx, ARRAYAD_ERR_OUT_OF_MEMORY,
                               "%sout of memory: %s_jacobian: the Jacobian would have %s%lld x %lld entries, "
                               "more than can be allocated",
                               AT(ps), ps->fname, rows > ARRAYAD_MAX_COUNT ? "more than " : "",
                               (long long)(rows > ARRAYAD_MAX_COUNT ? ARRAYAD_MAX_COUNT : rows), (long long)cols);
        goto done;
    }
    /* rows * cols <= 2^56 (or cols == 0) */
    total = cols > 0 ? rows * cols : 0;
    if (total > 0 && !jac) {
        st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                               "%sinvalid argument: %s_jacobian: null pointer for `jac`", AT(ps), ps->fname);
        goto done;
    }
    for (i = 0; i < np; i++) in2[i] = in[i];
    for (i = 0; i < nr; i++) out2[i] = out[i];
    if (total > 0 && !d->vjp_rows) {
        /* one row (the result is one f64): one call of the vjp with
           cotangent 1, each active leaf's cotangent written into its
           columns */
        static const double one = 1.0;
        int64_t off = 0;
        if (!d->vjp || d->nres != 1 || rows != 1) {
            st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                   "%sinvalid argument: %s_jacobian: the library has no reverse mode for it",
                                   AT(ps), ps->fname);
            goto done;
        }
        in2[np] = &one;
        for (i = 0; i < d->nact; i++) {
            out2[nr + i] = jac + off;
            off += act_count[i];
        }
        st = arrayad_invoke(ctx, d->vjp, d->vjp_sig, sizes, in2, out2);
        goto done;
    }
    if (total > 0 && rows <= cols) {
        /* reverse mode: one call of vjp_rows (one forward pass, then one
           backward pass per row) with the rows x rows identity as the
           cotangents: leaf i's cotangent stack is [rows][res_count[i]], row
           r one-hot at element r - (first row of leaf i) */
        int64_t off = 0;
        row_scatter sc;
        sizes2 = (int64_t *)arena_zeroed(ctx, (uint64_t)ps->nsizes + 1, sizeof(int64_t));
        /* rows * rows <= rows * cols <= 2^56: no overflow */
        unit = (double *)arena_zeroed(ctx, (uint64_t)(rows * rows), sizeof(double));
        if (!sizes2 || !unit) return jacobian_oom(ctx, ps);
        for (i = 0; i < ps->nsizes; i++) sizes2[i] = sizes[i];
        sizes2[ps->nsizes] = rows;
        for (i = 0; i < d->nres; i++) {
            double *block = unit + rows * off;
            for (r = 0; r < res_count[i]; r++) block[(off + r) * res_count[i] + r] = 1.0;
            in2[np + i] = block;
            off += res_count[i];
        }
        /* the stacks of the active leaves go straight into their columns */
        for (i = 0; i < d->nact; i++) out2[nr + i] = jac;
        sc.first = nr;
        sc.rows = rows;
        sc.cols = cols;
        sc.jac = jac;
        st = invoke(ctx, d->vjp_rows, d->vjp_rows_sig, sizes2, in2, out2, &sc);
        goto done;
    }
    if (total == 0) {
        st = arrayad_invoke(ctx, d->primal, ps, sizes, in, out);
        goto done;
    }
    {
        /* forward mode: one jvp call per `lanes` columns, lane l's
           tangents one-hot at column c + l (all zero past the last
           column); every call computes the values too (the jvp's primal
           results), so no separate primal call is made. An output may
           also be an input (in place), and the inputs are read by every
           call: the calls write the values to `vals` (and the Jacobian to
           `jout`, a copy when jac overlaps an input); the caller's buffers
           are written at the end. */
        int64_t off;
        uint64_t vbytes = 0, b;
        double *jout = jac;
        for (i = 0; i < nr; i++) {
            int64_t n;
            st = count_of(ctx, ps, &ps->out[i], sizes, &n);
            if (st) goto done;
            /* the values are copied out at the end: their buffers are
               checked now (the passes write `vals`) */
            if (n > 0 && !out[i]) {
                st = arrayad_fail_text(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                                       "%sinvalid argument: %s_jacobian: null pointer for the output `%s`", AT(ps),
                                       ps->fname, ps->out[i].name);
                goto done;
            }
            vbytes += ((uint64_t)n * elem_size(ps->out[i].elem) + 7) & ~(uint64_t)7;
        }
        for (i = 0; i < np && jout == jac; i++) {
            int64_t n;
            if (ps->in[i].rank == 0) continue; /* scalars are the wrapper's copies */
            st = count_of(ctx, ps, &ps->in[i], sizes, &n);
            if (st) goto done;
            if (overlap((const char *)in[i], (uint64_t)n * elem_size(ps->in[i].elem),
                        (const char *)jac, (uint64_t)total * sizeof(double))) {
                jout = (double *)malloc((size_t)total * sizeof(double));
                if (!jout) goto oom;
            }
        }
        /* vbytes <= the outputs' bytes (each < 2^59) */
        vals = (char *)arena_zeroed(ctx, vbytes + 8, 1);
        /* cols, rows <= 2^56 and lanes < 2^31: no overflow */
        unit = (double *)arena_zeroed(ctx, (uint64_t)cols * (uint64_t)lanes, sizeof(double));
        tout = (double *)arena_zeroed(ctx, (uint64_t)rows * (uint64_t)lanes, sizeof(double));
        if (!vals || !unit || !tout) {
            if (jout != jac) free(jout);
            return jacobian_oom(ctx, ps);
        }
        for (i = 0, b = 0; i < nr; i++) {
            int64_t n;
            (void)count_of(ctx, ps, &ps->out[i], sizes, &n);
            out2[i] = vals + b;
            b += ((uint64_t)n * elem_size(ps->out[i].elem) + 7) & ~(uint64_t)7;
        }
        /* what every jvp call returns to: the tables above stay */
        mark_ptr = ctx->arena_ptr;
        mark_end = ctx->arena_end;
        mark_cur = ctx->arena_cur;
        for (l = 0; l < lanes; l++) {
            off = 0;
            for (i = 0; i < d->nact; i++) {
                in2[np + l * d->nact + i] = unit + l * cols + off;
                off += act_count[i];
            }
            off = 0;
            for (i = 0; i < d->nres; i++) {
                out2[nr + l * d->nres + i] = tout + l * rows + off;
                off += res_count[i];
            }
        }
        for (c = 0; c < cols && st == 0; c += lanes) {
            for (l = 0; l < lanes; l++) {
                if (c > 0) unit[l * cols + c - lanes + l] = 0.0;
                if (c + l < cols) unit[l * cols + c + l] = 1.0;
            }
            ctx->arena_ptr = mark_ptr;
            ctx->arena_end = mark_end;
            ctx->arena_cur = mark_cur;
            ctx->tape_ptr = ctx->tape_top = ctx->tape_base;
            st = arrayad_invoke(ctx, d->jvp, d->jvp_sig, sizes, in2, out2);
            if (st == 0) {
                /* row by row: the pass's columns of a row are adjacent in
                   the Jacobian (one write of up to `lanes` doubles) */
                int32_t n = cols - c < lanes ? (int32_t)(cols - c) : lanes;
                for (r = 0; r < rows; r++) {
                    double *row = jout + r * cols + c;
                    for (l = 0; l < n; l++) row[l] = tout[l * rows + r];
                }
            }
        }
        for (i = 0, b = 0; i < nr && st == 0; i++) {
            int64_t n;
            uint64_t nb;
            (void)count_of(ctx, ps, &ps->out[i], sizes, &n);
            nb = (uint64_t)n * elem_size(ps->out[i].elem);
            if (nb > 0) memcpy(out[i], vals + b, (size_t)nb);
            b += (nb + 7) & ~(uint64_t)7;
        }
        if (jout != jac) {
            if (st == 0) memcpy(jac, jout, (size_t)total * sizeof(double));
            free(jout);
        }
    }
    goto done;
oom:
    st = jacobian_oom(ctx, ps);
done:
    /* the tables live in the arena: the call's end releases them */
    return st;
}

/* ---- Parallel maps ------------------------------------------------------ */

/* Threads: the caller of a parallel map and up to ARRAYAD_MAX_THREADS - 1
 * workers of one pool per copy of the runtime (the process's, for the JIT;
 * each shared library's own), started on first use, with all signals
 * blocked, and stopped when the library is unloaded. */
#define ARRAYAD_MAX_THREADS 256
/* The stack of a worker: generated code run there is checked against it
 * (ctx->stack_limit) like on any thread. */
#define ARRAYAD_WORKER_STACK ((size_t)16 << 20)
/* The work (iterations times the static weight of one) below which a map
 * runs on the calling thread: waking the pool and joining it costs some
 * ten microseconds. */
#define ARRAYAD_DEFAULT_GRAIN ((int64_t)1 << 15)
/* Chunks per participating thread: the map's iterations are split into
 * about this many times as many contiguous chunks as there are threads,
 * each thread's own range of them first (pool_ranges), then those left
 * to whichever thread is free. */
#define ARRAYAD_CHUNKS_PER_THREAD 8
/* How long a worker waits for the next map, and the caller for its
 * helpers, by polling before sleeping on a condition variable, unless
 * $ARRAYAD_POLL_US says otherwise (microseconds, 0 to never poll, at most
 * one second). Waking a sleeping thread takes tens of microseconds (more
 * in a virtual machine), a good part of a map of some calls (logsumexp's
 * gradient of 10^6 numbers runs six maps in 1 ms on two threads), while a
 * thread that polls starts at once. The maps of one call follow each
 * other within microseconds; after the last, workers poll this long, then
 * sleep. */
#define ARRAYAD_POLL_NS ((int64_t)200000)

/* The most arrays one map makes (a value and its tangents; a pass of a
 * vector jvp makes at most 33, its value and 32 lanes; a forward pass, its
 * values and stacked residuals), and the result slots of a chunk
 * function: per array the pointer of its rows, their count and the
 * extents of a row (rows of up to 6 axes: MAX_ROW_RANK of
 * codegen/src/parallel/), all within the slots. */
#define ARRAYAD_PMAP_MAX_OUTPUTS 34
#define ARRAYAD_PMAP_RESULT_SLOTS (2 * ARRAYAD_PMAP_MAX_OUTPUTS)
/* The words of one output in a map's layout: its result slot, the rank of
   its rows, their extents (up to 6). */
#define ARRAYAD_PMAP_LAYOUT_WORDS 8

typedef struct {
    arrayad_fn fn;
    const uint64_t *args; /* the chunk function's arguments; slots 0 and 1 are
                             replaced by each chunk's lo and hi */
    int64_t nslots;
    char *out[ARRAYAD_PMAP_MAX_OUTPUTS]; /* each n rows of elem[k] bytes */
    int64_t outputs;      /* how many of out (0 for a loop of effects) */
    int64_t elem[ARRAYAD_PMAP_MAX_OUTPUTS]; /* bytes of a row of each */
    int64_t slot[ARRAYAD_PMAP_MAX_OUTPUTS]; /* its first result slot */
    const int64_t *layout; /* the caller's (arrayad_parallel_map) */
    int64_t n, chunk, nchunks;
    uint64_t limit;       /* the memory limit of each thread's context */
    int64_t parts;        /* the threads taking part: pool_ranges[0..parts] */
    int64_t failed;       /* atomic: the lowest chunk that failed so far, or nchunks */
    fenv_t fp_env;        /* the caller's floating-point environment: its rounding
                             and, in glibc's fenv_t on x86-64 (MXCSR) and AArch64
                             (FPCR), whether subnormals flush to zero; every
                             thread runs its chunks in it, so that the results are
                             those of one thread */
} pmap_job;

typedef struct {
    pthread_t thread;
    int index;            /* 0.. : takes part in a job when below pool_helpers */
    arrayad_ctx ctx;      /* its context, kept between jobs */
    int64_t failed;       /* the chunk that failed in ctx in the last job, or -1 */
    size_t stack_size;    /* of its thread (the attributes' size) */
    uintptr_t stack_limit;
} pmap_worker;

static pthread_mutex_t pool_mutex = PTHREAD_MUTEX_INITIALIZER; /* guards what follows */
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t pool_done = PTHREAD_COND_INITIALIZER;
static pmap_worker *pool_workers[ARRAYAD_MAX_THREADS];
static int pool_size;          /* workers started */
static pmap_job *pool_job;     /* the job in progress */
static uint64_t pool_generation;
static int pool_helpers;       /* workers taking part in the job in progress */
static uint64_t pool_pending;  /* of those, how many have not finished it */
static int pool_stop;
static int pool_atfork;        /* the fork handler is registered */
/* Held by the call whose map runs on the pool: another caller meanwhile
 * runs its maps on its own thread. */
static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER;

/* The chunks of the map in progress, split into one contiguous range per
 * thread taking part (the caller's first, then each worker's by index):
 * a thread takes the chunks of its own range in increasing order, then
 * those left in the others'. Each thread then computes the same chunks
 * from one map of a call to the next whenever the work allows, so that
 * the rows it wrote stay in its own caches rather than move between
 * cores (which the rows' values never depend on). One cache line each. */
typedef struct {
    int64_t next; /* atomic: the next chunk of the range to take */
    int64_t end;
    char pad[48];
} pool_range;
static pool_range pool_ranges[ARRAYAD_MAX_THREADS] __attribute__((aligned(64)));

static uint64_t pool_runs;     /* atomic: maps run on the pool */
static int requested_threads;  /* atomic: arrayad_set_num_threads, 0 for the default */
static int default_threads;    /* atomic: computed once, 0 before */
static int64_t parallel_grain = -1; /* atomic: arrayad_set_parallel_grain, -1 for the default */
static int64_t env_grain = -2;      /* atomic: $ARRAYAD_PARALLEL_GRAIN read once (-1: unset), -2 before */
static int64_t env_poll_ns = -1;    /* atomic: the polling time in ns, read once from $ARRAYAD_POLL_US; -1 before */
/* The context in which the caller of the map in progress runs its own
 * chunks (guarded by pool_busy; no thread-local storage, which would make
 * a shared library depend on the dynamic loader). */
static arrayad_ctx pool_caller_ctx;
static int pool_caller_ready;

/* The CPU mask of the process (Linux; declared here rather than through
 * _GNU_SOURCE, which would bind the library's string conversions to a
 * newer glibc's symbols). */
#if !defined(_GNU_SOURCE)
extern int sched_getaffinity(pid_t pid, size_t size, void *mask);
#else
#include <sched.h>
#endif

/* A positive integer of at most ARRAYAD_MAX_THREADS from the environment,
 * or 0. */
static int threads_from_env(void) {
    const char *s = getenv("ARRAYAD_NUM_THREADS");
    char *end = NULL;
    long v;
    if (!s || !*s) return 0;
    v = strtol(s, &end, 10);
    if (*end != '\0' || v < 1) return 0;
    return v > ARRAYAD_MAX_THREADS ? ARRAYAD_MAX_THREADS : (int)v;
}

int32_t arrayad_num_threads(void) {
    int n = __atomic_load_n(&requested_threads, __ATOMIC_RELAXED);
    if (n > 0) return n;
    n = __atomic_load_n(&default_threads, __ATOMIC_RELAXED);
    if (n > 0) return n;
    n = threads_from_env();
    if (n == 0) {
        unsigned long mask[1024 / (8 * sizeof(unsigned long))];
        size_t k;
        memset(mask, 0, sizeof mask);
        if (sched_getaffinity(0, sizeof mask, (void *)mask) == 0)
            for (k = 0; k < sizeof mask / sizeof mask[0]; k++) n += __builtin_popcountl(mask[k]);
        if (n < 1) {
            long c = sysconf(_SC_NPROCESSORS_ONLN);
            n = c < 1 ? 1 : (c > ARRAYAD_MAX_THREADS ? ARRAYAD_MAX_THREADS : (int)c);
        }
        if (n > ARRAYAD_MAX_THREADS) n = ARRAYAD_MAX_THREADS;
    }
    __atomic_store_n(&default_threads, n, __ATOMIC_RELAXED);
    return n;
}

void arrayad_set_num_threads(int32_t n) {
    if (n > ARRAYAD_MAX_THREADS) n = ARRAYAD_MAX_THREADS;
    __atomic_store_n(&requested_threads, n > 0 ? n : 0, __ATOMIC_RELAXED);
}

uint64_t arrayad_parallel_runs(void) { return __atomic_load_n(&pool_runs, __ATOMIC_RELAXED); }

void arrayad_set_parallel_grain(int64_t work) {
    __atomic_store_n(&parallel_grain, work < 0 ? -1 : work, __ATOMIC_RELAXED);
}

/* The non-negative integer in environment variable `name`, or -1 when it
 * is unset or not one. */
static int64_t env_nonnegative(const char *name) {
    const char *s = getenv(name);
    char *end = NULL;
    long long v;
    if (!s || !*s) return -1;
    v = strtoll(s, &end, 10);
    return *end == '\0' && v >= 0 ? (int64_t)v : -1;
}

/* The grain: arrayad_set_parallel_grain's, else $ARRAYAD_PARALLEL_GRAIN
 * (a non-negative integer), else ARRAYAD_DEFAULT_GRAIN. */
static int64_t grain(void) {
    int64_t g = __atomic_load_n(&parallel_grain, __ATOMIC_RELAXED);
    if (g >= 0) return g;
    g = __atomic_load_n(&env_grain, __ATOMIC_RELAXED);
    if (g == -2) {
        g = env_nonnegative("ARRAYAD_PARALLEL_GRAIN");
        __atomic_store_n(&env_grain, g, __ATOMIC_RELAXED);
    }
    return g >= 0 ? g : ARRAYAD_DEFAULT_GRAIN;
}

/* Moves the error recorded in src into dst, as the error of dst's call. */
static void move_error(arrayad_ctx *dst, arrayad_ctx *src) {
    clear_text(dst);
    dst->err_kind = src->err_kind;
    memcpy(dst->err_vals, src->err_vals, sizeof dst->err_vals);
    if (src->err_msg == src->err_buf) {
        memcpy(dst->err_buf, src->err_buf, sizeof dst->err_buf);
        dst->err_msg = dst->err_buf;
    } else if (src->err_msg != NULL && src->err_msg == src->err_text) {
        dst->err_text = src->err_text;
        src->err_text = NULL;
        dst->err_msg = dst->err_text;
    } else {
        dst->err_msg = src->err_msg; /* a static template of generated code */
    }
    if (dst->err_kind == 0) dst->err_kind = ARRAYAD_ERR_INVALID_ARGUMENT;
    finalise(dst);
}

/* Runs chunk c of `job` in ctx; returns 0, or the status of its failure
 * (its error in ctx, and job->failed lowered to c). */
static int32_t run_chunk(pmap_job *job, arrayad_ctx *ctx, uintptr_t stack_limit, int64_t c) {
    int64_t lo, hi;
    uint64_t *args, dest[2 * ARRAYAD_PMAP_MAX_OUTPUTS], res[ARRAYAD_PMAP_RESULT_SLOTS];
    int32_t status;
    int64_t k;
    lo = c * job->chunk;
    hi = job->n - lo < job->chunk ? job->n : lo + job->chunk;
    arrayad_ctx_reset(ctx);
    ctx->stack_limit = stack_limit;
    args = (uint64_t *)arrayad_alloc_slow(ctx, (uint64_t)job->nslots * 8);
    if (args) {
        memcpy(args, job->args, (size_t)job->nslots * 8);
        args[0] = (uint64_t)lo;
        args[1] = (uint64_t)hi;
        /* Each array's rows lo..hi, in place (a loop of effects has
           no rows to offer). */
        for (k = 0; k < job->outputs; k++) {
            dest[2 * k] = (uint64_t)(uintptr_t)(job->out[k] + lo * job->elem[k]);
            dest[2 * k + 1] = (uint64_t)((hi - lo) * job->elem[k]);
        }
        ctx->dest = job->outputs > 0 ? dest : NULL;
        status = job->fn(ctx, args, res);
        ctx->dest = NULL;
    } else {
        status = ctx->err_kind ? ctx->err_kind : ARRAYAD_ERR_OUT_OF_MEMORY;
    }
    /* The count of each array follows its pointer, the extents of its
       rows after: those the caller gave. */
    for (k = 0; status == 0 && k < job->outputs; k++) {
        const int64_t *w = job->layout + k * ARRAYAD_PMAP_LAYOUT_WORDS;
        int64_t j, same = 1;
        for (j = 0; j < w[1]; j++) same &= (int64_t)res[w[0] + 2 + j] == (w[2 + j] > 0 ? w[2 + j] : 0);
        if (!same) {
            arrayad_fail(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                         "internal error: a chunk of a parallel map returned rows of other extents than %1 x ...",
                         w[1] > 0 ? w[2] : 0, 0, 0);
            status = ARRAYAD_ERR_INVALID_ARGUMENT;
        } else if ((int64_t)res[job->slot[k] + 1] != hi - lo) {
            /* Not the rows asked for: a bug of code generation,
               reported rather than copied. */
            arrayad_fail(ctx, ARRAYAD_ERR_INVALID_ARGUMENT,
                         "internal error: a chunk of a parallel map returned %1 rows instead of %2",
                         (int64_t)res[job->slot[k] + 1], hi - lo, 0);
            status = ARRAYAD_ERR_INVALID_ARGUMENT;
        }
    }
    if (status != 0) {
        int64_t seen = __atomic_load_n(&job->failed, __ATOMIC_RELAXED);
        if (ctx->err_kind == 0) ctx->err_kind = status;
        while (c < seen && !__atomic_compare_exchange_n(&job->failed, &seen, c, 0, __ATOMIC_RELAXED,
                                                          __ATOMIC_RELAXED)) {
        }
        return status;
    }
    for (k = 0; k < job->outputs; k++) {
        char *to = job->out[k] + lo * job->elem[k];
        int64_t bytes = (hi - lo) * job->elem[k];
        if (bytes > 0 && (char *)(uintptr_t)res[job->slot[k]] != to)
            memcpy(to, (const void *)(uintptr_t)res[job->slot[k]], (size_t)bytes);
    }
    return 0;
}

/* Runs chunks of `job` in ctx, as thread `part` of the map (its own range
 * of pool_ranges first), until none is left, or one fails (returns its
 * index, its error in ctx) or a lower one has failed (-1). Every chunk
 * below the lowest that fails runs to its end. */
static int64_t run_chunks(pmap_job *job, arrayad_ctx *ctx, uintptr_t stack_limit, int64_t part) {
    int64_t r;
    ctx->limit = job->limit;
    for (r = 0; r < job->parts; r++) {
        pool_range *range = &pool_ranges[(part + r) % job->parts];
        for (;;) {
            int64_t c = __atomic_fetch_add(&range->next, 1, __ATOMIC_RELAXED);
            if (c >= range->end || c > __atomic_load_n(&job->failed, __ATOMIC_RELAXED)) break;
            if (run_chunk(job, ctx, stack_limit, c) != 0) return c;
        }
    }
    return -1;
}

/* Nanoseconds of the monotonic clock, or -1 if it cannot be read. */
static int64_t monotonic_ns(void) {
    struct timespec t;
    if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) return -1;
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Tells the core that this thread is polling. */
static void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* The polling time in nanoseconds: $ARRAYAD_POLL_US (microseconds, a
 * non-negative integer, at most 10^6), else ARRAYAD_POLL_NS. Read first by
 * arrayad_parallel_map on the caller's thread, before it starts workers. */
static int64_t poll_ns(void) {
    int64_t ns = __atomic_load_n(&env_poll_ns, __ATOMIC_RELAXED);
    if (ns < 0) {
        int64_t us = env_nonnegative("ARRAYAD_POLL_US");
        ns = us < 0 ? ARRAYAD_POLL_NS : us > 1000000 ? (int64_t)1000000000 : us * 1000;
        __atomic_store_n(&env_poll_ns, ns, __ATOMIC_RELAXED);
    }
    return ns;
}

/* Polls, for up to poll_ns(), while *word equals `value` (`same` true) or
 * differs from it (`same` false), and pool_stop is not set. The caller
 * then tests again under pool_mutex and sleeps if need be: polling only
 * saves the wake-up. Reads the clock every 64 polls. */
static void poll_while(const uint64_t *word, uint64_t value, int same) {
    int64_t ns = poll_ns(), start = ns > 0 ? monotonic_ns() : -1, deadline;
    if (start < 0) return; /* no polling, or no clock to bound it */
    deadline = start + ns;
    for (;;) {
        int k;
        for (k = 0; k < 64; k++) {
            if ((__atomic_load_n(word, __ATOMIC_ACQUIRE) == value) != same ||
                __atomic_load_n(&pool_stop, __ATOMIC_ACQUIRE))
                return;
            cpu_relax();
        }
        {
            int64_t now = monotonic_ns();
            if (now < 0 || now >= deadline) return;
        }
    }
}

static void *pool_worker_main(void *arg) {
    pmap_worker *w = (pmap_worker *)arg;
    uint64_t seen = 0;
    int took_part = 0; /* in the last map: only then does it poll for the next */
    w->stack_limit = stack_here() - (w->stack_size - 4 * ARRAYAD_STACK_MARGIN);
    pthread_mutex_lock(&pool_mutex);
    for (;;) {
        pmap_job *job;
        if (took_part && !pool_stop && pool_generation == seen) {
            pthread_mutex_unlock(&pool_mutex);
            poll_while(&pool_generation, seen, 1);
            pthread_mutex_lock(&pool_mutex);
        }
        while (!pool_stop && pool_generation == seen) pthread_cond_wait(&pool_wake, &pool_mutex);
        if (pool_stop) break;
        seen = pool_generation;
        took_part = w->index < pool_helpers;
        if (!took_part) continue;
        job = pool_job;
        pthread_mutex_unlock(&pool_mutex);
        {
            fenv_t own;
            int switched = fegetenv(&own) == 0 && fesetenv(&job->fp_env) == 0;
            w->failed = run_chunks(job, &w->ctx, w->stack_limit, (int64_t)w->index + 1);
            if (switched) fesetenv(&own);
        }
        pthread_mutex_lock(&pool_mutex);
        if (__atomic_sub_fetch(&pool_pending, 1, __ATOMIC_RELEASE) == 0) pthread_cond_signal(&pool_done);
    }
    pthread_mutex_unlock(&pool_mutex);
    return NULL;
}

/* In the child of a fork, the pool's threads do not exist: a new pool
 * starts on first use (the old one's memory is lost). */
static void pool_after_fork(void) {
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    pool_mutex = m;
    pool_busy = m;
    pool_wake = c;
    pool_done = c;
    pool_size = 0;
    pool_job = NULL;
    pool_helpers = 0;
    pool_pending = 0;
}

/* Starts workers until there are `want` (fewer if the system refuses);
 * returns how many there are. Called with pool_mutex held. */
static int pool_start(int want) {
    sigset_t all, old;
    pthread_attr_t attr;
    size_t stack = 0;
    if (!pool_atfork) {
        if (pthread_atfork(NULL, NULL, pool_after_fork) != 0) return pool_size;
        pool_atfork = 1;
    }
    if (want > ARRAYAD_MAX_THREADS - 1) want = ARRAYAD_MAX_THREADS - 1;
    if (pool_size >= want) return pool_size;
    if (pthread_attr_init(&attr) != 0) return pool_size;
    (void)pthread_attr_setstacksize(&attr, ARRAYAD_WORKER_STACK);
    if (pthread_attr_getstacksize(&attr, &stack) != 0 || stack < 8 * ARRAYAD_STACK_MARGIN) {
        pthread_attr_destroy(&attr);
        return pool_size;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (pool_size < want) {
        pmap_worker *w = (pmap_worker *)calloc(1, sizeof *w);
        if (!w) break;
        arrayad_ctx_init(&w->ctx);
        w->index = pool_size;
        w->failed = -1;
        w->stack_size = stack;
        if (pthread_create(&w->thread, &attr, pool_worker_main, w) != 0) {
            free(w);
            break;
        }
        pool_workers[pool_size++] = w;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return pool_size;
}

/* Stops the pool when the library is unloaded (or the program exits), so
 * that no thread is left waiting in code that goes away. Not while a map
 * runs on it (another thread's call during exit): its threads are then
 * left to the end of the process. */
__attribute__((destructor)) static void pool_stop_all(void) {
    int k, n;
    if (pthread_mutex_trylock(&pool_busy) != 0) return;
    pthread_mutex_lock(&pool_mutex);
    __atomic_store_n(&pool_stop, 1, __ATOMIC_RELEASE);
    n = pool_size;
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_mutex);
    for (k = 0; k < n; k++) {
        pthread_join(pool_workers[k]->thread, NULL);
        arrayad_ctx_release(&pool_workers[k]->ctx);
        free(pool_workers[k]);
        pool_workers[k] = NULL;
    }
    pool_size = 0;
    if (pool_caller_ready) arrayad_ctx_release(&pool_caller_ctx);
    pthread_mutex_unlock(&pool_busy);
}

void arrayad_pool_release(void) {
    int k;
    if (pthread_mutex_trylock(&pool_busy) != 0) return;
    for (k = 0; k < pool_size; k++) arrayad_ctx_release(&pool_workers[k]->ctx);
    if (pool_caller_ready) arrayad_ctx_release(&pool_caller_ctx);
    pthread_mutex_unlock(&pool_busy);
}

/* Frees the memory of a chunk context beyond what a thread keeps. */
static void trim(arrayad_ctx *ctx) {
    if (ctx->held > arrayad_keep_limit()) arrayad_ctx_release(ctx);
}

/* The bytes of a row of output k of `layout` (8 times the product of its
 * extents, a negative extent taken as 0), and its result slot; false when
 * the layout is not one of a chunk's results or the rows of n iterations
 * would not fit in memory. */
static int pmap_output(const int64_t *layout, int64_t k, int64_t n, int64_t *elem, int64_t *slot) {
    const int64_t *w = layout + k * ARRAYAD_PMAP_LAYOUT_WORDS;
    int64_t rank = w[1], bytes = 8, j;
    if (w[0] < 0 || rank < 0 || rank > ARRAYAD_PMAP_LAYOUT_WORDS - 2 || w[0] + rank + 2 > ARRAYAD_PMAP_RESULT_SLOTS)
        return 0;
    for (j = 0; j < rank; j++) {
        int64_t d = w[2 + j] > 0 ? w[2 + j] : 0;
        if (d > 0 && bytes > ((INT64_MAX >> 4) / n) / d) return 0;
        bytes *= d;
    }
    *elem = bytes;
    *slot = w[0];
    return 1;
}

int32_t arrayad_parallel_map(arrayad_ctx *ctx, arrayad_fn fn, const uint64_t *args, int64_t nslots,
                             uint64_t *results, const int64_t *layout, int64_t outputs, int64_t weight) {
    int64_t n = (int64_t)args[1], work, chunk, lowest = INT64_MAX, total = 0;
    int64_t elem[ARRAYAD_PMAP_MAX_OUTPUTS], slot[ARRAYAD_PMAP_MAX_OUTPUTS];
    int threads, helpers, k;
    arrayad_ctx *lowest_ctx = NULL;
    pmap_job job;
    char *out[ARRAYAD_PMAP_MAX_OUTPUTS];
    if (n < 2 || ctx->err_final || nslots < 2 || outputs < 0 || outputs > ARRAYAD_PMAP_MAX_OUTPUTS ||
        (outputs > 0 && !layout))
        return fn(ctx, args, results);
    /* The rows of every output together fit in memory (else the map as
       written reports it). */
    for (k = 0; k < outputs; k++) {
        if (!pmap_output(layout, k, n, &elem[k], &slot[k]) || elem[k] > ((INT64_MAX >> 4) / n) - total)
            return fn(ctx, args, results);
        total += elem[k];
    }
    threads = arrayad_num_threads();
    if (threads > n) threads = (int)n;
    if (weight < 1) weight = 1;
    work = n > INT64_MAX / weight ? INT64_MAX : n * weight;
    if (threads < 2 || work < grain()) return fn(ctx, args, results);
    /* Busy: another caller's map runs, or this is a map inside a chunk of
       one (on the caller's thread or a worker), which runs serially rather
       than oversubscribing the machine. */
    if (pthread_mutex_trylock(&pool_busy) != 0) return fn(ctx, args, results);
    (void)poll_ns(); /* read $ARRAYAD_POLL_US here, before any worker polls */
    pthread_mutex_lock(&pool_mutex);
    helpers = pool_start(threads - 1);
    pthread_mutex_unlock(&pool_mutex);
    if (helpers > threads - 1) helpers = threads - 1;
    if (!pool_caller_ready) {
        arrayad_ctx_init(&pool_caller_ctx);
        pool_caller_ready = 1;
    }
    /* Each array in the caller's buffer for it when it offers one of this
       size (destination passing, as the chunk function would take it:
       entry k of ctx->dest for array k), else in ctx's arena. */
    memset(out, 0, sizeof out);
    {
        /* The arrays not offered share one allocation, so that a failure
           leaves nothing behind for the map as written. */
        int64_t missing = 0, unoffered = 0;
        char *rest = NULL;
        for (k = 0; k < outputs; k++) {
            if (ctx->dest && ctx->dest[2 * k] && ctx->dest[2 * k + 1] == (uint64_t)(n * elem[k])) {
                out[k] = (char *)(uintptr_t)ctx->dest[2 * k];
            } else {
                missing += n * elem[k];
                unoffered++;
            }
        }
        /* (Arrays of rows of no bytes get a pointer into the allocation
           too, of at least one line.) */
        if (helpers > 0 && unoffered > 0) rest = (char *)arrayad_alloc_slow(ctx, (uint64_t)(missing > 32 ? missing : 32));
        for (k = 0; rest && k < outputs; k++) {
            if (!out[k]) {
                out[k] = rest;
                rest += n * elem[k];
            }
        }
        if (unoffered > 0 && !rest) memset(out, 0, sizeof out);
    }
    if (helpers == 0 || (outputs > 0 && !out[0])) {
        /* No pool or no memory: the map as written, whose allocation
           reports a failure where it stands. */
        pthread_mutex_unlock(&pool_busy);
        if (ctx->err_kind && !ctx->err_final) ctx->err_kind = 0;
        return fn(ctx, args, results);
    }
    chunk = (n + (int64_t)(helpers + 1) * ARRAYAD_CHUNKS_PER_THREAD - 1) /
            ((int64_t)(helpers + 1) * ARRAYAD_CHUNKS_PER_THREAD);
    job.fn = fn;
    job.args = args;
    job.nslots = nslots;
    memcpy(job.out, out, sizeof out);
    job.outputs = outputs;
    memcpy(job.elem, elem, sizeof elem);
    memcpy(job.slot, slot, sizeof slot);
    job.layout = layout;
    job.n = n;
    job.chunk = chunk;
    job.nchunks = (n + chunk - 1) / chunk;
    /* Each thread may hold what the call has left, as the map's
       iterations on one thread could (they release their temporaries
       after each). */
    job.limit = ctx->limit > ctx->held ? ctx->limit - ctx->held : 0;
    job.parts = helpers + 1;
    for (k = 0; k < helpers + 1; k++) {
        pool_ranges[k].next = job.nchunks * k / (helpers + 1);
        pool_ranges[k].end = job.nchunks * (k + 1) / (helpers + 1);
    }
    job.failed = job.nchunks;
    if (fegetenv(&job.fp_env) != 0) {
        /* Not expected of glibc; without the caller's environment the
           helpers could round differently: the map runs on this thread. */
        pthread_mutex_unlock(&pool_busy);
        if (ctx->err_kind && !ctx->err_final) ctx->err_kind = 0;
        return fn(ctx, args, results);
    }
    __atomic_add_fetch(&pool_runs, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&pool_mutex);
    pool_job = &job;
    pool_helpers = helpers;
    __atomic_store_n(&pool_pending, (uint64_t)helpers, __ATOMIC_RELAXED);
    __atomic_store_n(&pool_generation, pool_generation + 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_mutex);
    {
        arrayad_ctx *own = &pool_caller_ctx;
        int64_t failed;
        uintptr_t stack_limit = ctx->stack_limit;
        arrayad_ctx_reset(own);
        failed = run_chunks(&job, own, stack_limit, 0);
        if (failed >= 0) {
            lowest = failed;
            lowest_ctx = own;
        }
    }
    poll_while(&pool_pending, 0, 0);
    pthread_mutex_lock(&pool_mutex);
    while (pool_pending > 0) pthread_cond_wait(&pool_done, &pool_mutex);
    pool_job = NULL;
    pthread_mutex_unlock(&pool_mutex);
    /* The error of the lowest chunk that failed: every chunk below it ran
       to its end, so it is the error the map meets in index order. */
    for (k = 0; k < helpers; k++) {
        pmap_worker *w = pool_workers[k];
        if (w->failed >= 0 && w->failed < lowest) {
            lowest = w->failed;
            lowest_ctx = &w->ctx;
        }
    }
    if (lowest_ctx) move_error(ctx, lowest_ctx);
    for (k = 0; k < helpers; k++) trim(&pool_workers[k]->ctx);
    trim(&pool_caller_ctx);
    pthread_mutex_unlock(&pool_busy);
    if (lowest_ctx) return ctx->err_kind;
    for (k = 0; k < outputs; k++) {
        results[slot[k]] = (uint64_t)(uintptr_t)out[k];
        results[slot[k] + 1] = (uint64_t)n;
    }
    return 0;
}
