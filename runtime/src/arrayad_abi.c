/* arrayad ABI support: the part of every shared library's C wrappers that
 * does not depend on the exported definitions (compiled into each library
 * next to arrayad_runtime.c and the generated per-module tables).
 *
 * Per-thread state: the last error message, and the context of the
 * thread's last call, kept so that the next call on the same thread reuses
 * its arena and tape memory instead of mapping fresh pages. Threads share
 * nothing; a thread's calls never overlap (a context is taken out while in
 * use). The state is reached through an initial-exec TLS pointer (8 bytes
 * of static TLS, no __tls_get_addr, so the library needs only libc and
 * libm) and freed at thread exit by a pthread key destructor.
 *
 * GNU C99 (__thread, visibility and constructor attributes); every symbol
 * here is hidden in the library. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arrayad_runtime.h"


typedef struct {
    char *msg;                    /* the last error message (heap), or NULL */
    char fallback[ARRAYAD_ERR_BUF]; /* the message, truncated, when the heap is out */
    arrayad_ctx *ctx;
    uint64_t keep;                /* the most bytes kept between calls */
} arrayad_abi_thread_state;

static __thread arrayad_abi_thread_state *arrayad_abi_tls __attribute__((tls_model("initial-exec")));
static pthread_key_t arrayad_abi_key;
static int arrayad_abi_key_made;
static pthread_once_t arrayad_abi_key_once = PTHREAD_ONCE_INIT;

static void free_state(arrayad_abi_thread_state *t) {
    arrayad_ctx_free(t->ctx);
    free(t->msg);
    free(t);
}


/* The key destructor. It also forgets the TLS pointer: a destructor that
 * runs later on this thread may call in again. */
static void thread_exit(void *p) {
    if (arrayad_abi_tls == p) arrayad_abi_tls = NULL;
    free_state((arrayad_abi_thread_state *)p);
}

static void key_init(void) { arrayad_abi_key_made = pthread_key_create(&arrayad_abi_key, thread_exit) == 0; }

/* At dlclose or process exit: delete the key, so that no thread that exits
 * later runs thread_exit (its code may be unmapped by then), and free the
 * calling thread's state. The states of other threads still alive at
 * unload are left to them (leaked). */
__attribute__((destructor)) static void unload(void) {
    arrayad_abi_thread_state *t = arrayad_abi_tls;
    if (arrayad_abi_key_made) {
        arrayad_abi_key_made = 0;
        (void)pthread_key_delete(arrayad_abi_key);
    }
    arrayad_abi_tls = NULL;
    if (t) free_state(t);
}

static arrayad_abi_thread_state *state(void) {
    if (!arrayad_abi_tls) {
        arrayad_abi_tls = (arrayad_abi_thread_state *)calloc(1, sizeof *arrayad_abi_tls);
        if (arrayad_abi_tls) {
            arrayad_abi_tls->keep = arrayad_keep_limit();
            (void)pthread_once(&arrayad_abi_key_once, key_init);
            if (arrayad_abi_key_made) (void)pthread_setspecific(arrayad_abi_key, arrayad_abi_tls);
        }
    }
    return arrayad_abi_tls;
}

const char *arrayad_abi_last_error(void) {
    arrayad_abi_thread_state *t = arrayad_abi_tls;
    if (!t) return "";
    return t->msg ? t->msg : t->fallback;
}

/* Sets the thread's last error message to s (whole when the heap allows). */
static void set_message(arrayad_abi_thread_state *t, const char *s) {
    size_t n = strlen(s);
    free(t->msg);
    t->msg = (char *)malloc(n + 1);
    if (t->msg) {
        memcpy(t->msg, s, n + 1);
    } else {
        snprintf(t->fallback, sizeof t->fallback, "%s", s);
    }
}

/* Sets the thread's last error message to that of ctx. */
static void keep_error(arrayad_abi_thread_state *t, const arrayad_ctx *ctx) {
    size_t n = arrayad_format_error(ctx, NULL, 0);
    free(t->msg);
    t->msg = (char *)malloc(n + 1);
    if (t->msg) {
        arrayad_format_error(ctx, t->msg, n + 1);
    } else {
        arrayad_format_error(ctx, t->fallback, sizeof t->fallback);
    }
}

void arrayad_abi_release(void) {
    arrayad_abi_thread_state *t = arrayad_abi_tls;
    if (t && t->ctx) {
        arrayad_ctx_free(t->ctx);
        t->ctx = NULL;
    }
    arrayad_pool_release();
}

/* Whether every call flushes subnormal numbers to zero (a library built
 * with --flush-subnormals: its wrappers call arrayad_abi_flush_subnormals
 * when it is loaded). */
static int flush_subnormals;

void arrayad_abi_flush_subnormals(void) { __atomic_store_n(&flush_subnormals, 1, __ATOMIC_RELAXED); }

/* The context for a call: the thread's kept one, or a new one (NULL when
 * out of memory), in which the call flushes subnormal numbers when the
 * library does (the caller's control saved in ctx->fp_control). */
static arrayad_ctx *begin(void) {
    arrayad_abi_thread_state *t = state();
    arrayad_ctx *ctx;
    if (t && t->ctx) {
        ctx = t->ctx;
        t->ctx = NULL;
    } else {
        ctx = arrayad_ctx_new();
        if (!ctx && t) set_message(t, "out of memory: cannot allocate the call context");
    }
    /* generated code may use the stack down to the limit */
    if (ctx) arrayad_set_stack_limit(ctx);
    if (ctx && __atomic_load_n(&flush_subnormals, __ATOMIC_RELAXED))
        ctx->fp_control = arrayad_fp_flush_subnormals() | ARRAYAD_FP_SAVED;
    return ctx;
}

/* Puts back the caller's flush mode, keeps the message of a failed call,
 * then keeps the context for the thread's next call (if it holds at most
 * the keep limit) or frees it. */
static int32_t finish(arrayad_ctx *ctx, int32_t status) {
    arrayad_abi_thread_state *t = state();
    if (ctx->fp_control & ARRAYAD_FP_SAVED) {
        arrayad_fp_restore(ctx->fp_control);
        ctx->fp_control = 0;
    }
    if (status != 0 && t) keep_error(t, ctx);
    if (t && !t->ctx && arrayad_ctx_capacity(ctx) <= t->keep) {
        arrayad_ctx_reset(ctx);
        t->ctx = ctx;
    } else {
        arrayad_ctx_free(ctx);
    }
    return status;
}

arrayad_ctx *arrayad_abi_begin(void) { return begin(); }

int32_t arrayad_abi_end(arrayad_ctx *ctx, int32_t status) { return finish(ctx, status); }

int32_t arrayad_abi_call(arrayad_fn fn, const arrayad_sig *sig, const int64_t *sizes, const void *const *in,
                         void *const *out) {
    arrayad_ctx *ctx = begin();
    if (!ctx) return ARRAYAD_ERR_OUT_OF_MEMORY;
    return finish(ctx, arrayad_invoke(ctx, fn, sig, sizes, in, out));
}

int32_t arrayad_abi_jacobian(const arrayad_jac_desc *d, const int64_t *sizes, const void *const *in,
                             void *const *out, double *jac) {
    arrayad_ctx *ctx = begin();
    if (!ctx) return ARRAYAD_ERR_OUT_OF_MEMORY;
    return finish(ctx, arrayad_jacobian(ctx, d, sizes, in, out, jac));
}

int32_t arrayad_abi_jvp_many(const arrayad_jac_desc *d, const int64_t *sizes, const void *const *in,
                             void *const *out, int64_t k) {
    arrayad_ctx *ctx = begin();
    if (!ctx) return ARRAYAD_ERR_OUT_OF_MEMORY;
    return finish(ctx, arrayad_jvp_many(ctx, d, sizes, in, out, k));
}
