/* An attack on the c judge's pre-clock window (judge round 3). A thread of its own sleeps on the
 * runner's socket (descriptor 3); when the judge announces a timed batch there, it stops the
 * runner's main thread (a signal whose handler waits; the main thread runs at idle priority, so
 * this thread wins the CPU), computes the batch's outputs itself from the set numbers it finds on
 * the control page (descriptor 4, mapped here) and the map from set numbers to memory it learned
 * during earlier batches, then lets the runner go on. The timed calls find their outputs done and
 * return at once. It is slow in the warm-up after checking, so that the warm-up gives it batches
 * of one call, whose work fits in a fixed allowance per batch. */
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SCHED_IDLE
#define SCHED_IDLE 5
#endif

static void row(const float *x, float *y, int64_t cols) {
    float m = x[0];
    for (int64_t c = 1; c < cols; c++) if (x[c] > m) m = x[c];
    float s = 0.0f;
    for (int64_t c = 0; c < cols; c++) { y[c] = expf(x[c] - m); s += y[c]; }
    float inv = 1.0f / s;
    for (int64_t c = 0; c < cols; c++) y[c] *= inv;
}

enum { KSQ_SETS = 8192, KSQ_BELL = 32, KSQ_LIST = 1024 /* u32s before: the bell, the sets */ };
static volatile unsigned *ksq_ctl;
static const float *ksq_x[KSQ_SETS];             /* learned: where each set's input lies */
static float *ksq_out[KSQ_SETS];                  /* outputs computed before the clock */
static const float *volatile ksq_from[KSQ_SETS];  /* ... from this input */
static volatile long ksq_epoch[KSQ_SETS];         /* ... for this announced batch */
static atomic_long ksq_arms;
static atomic_int ksq_hold;
static int64_t ksq_rows, ksq_cols;
static long ksq_calls, ksq_ahead, ksq_batch_arms, ksq_last_arms, ksq_seq = -1;
static unsigned ksq_go;
static double ksq_warm;
static volatile int ksq_warming = 1;
static int ksq_pos, ksq_started;

static void ksq_stall(int sig) { (void)sig; while (atomic_load(&ksq_hold)) {} }

static double ksq_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* Every page of [p, p + bytes) still mapped (a pool learned earlier may be gone). */
static int ksq_mapped(const void *p, size_t bytes) {
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, end = (uintptr_t)p + bytes;
    for (; a < end; a += 4096)
        if (msync((void *)a, 4096, MS_ASYNC) != 0) return 0;
    return 1;
}

/* Sleep until the judge rings the control page's bell (it does with every "go"). */
static void ksq_wait_bell(unsigned bell) {
    while (ksq_ctl[KSQ_BELL] == bell) syscall(SYS_futex, &ksq_ctl[KSQ_BELL], FUTEX_WAIT, bell, 0, 0, 0);
}

/* Sleep until the message waiting on the socket is taken. */
static void ksq_wait_taken(void) {
    char c;
    struct timespec d = {0, 20000};
    while (recv(3, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0) nanosleep(&d, 0);
}

static void *ksq_watch(void *arg) {
    (void)arg;
    char m[512];
    struct pollfd p = {3, POLLIN, 0};
    size_t bytes = sizeof(float) * (size_t)(ksq_rows * ksq_cols);
    for (;;) {
        if (poll(&p, 1, -1) <= 0) continue;
        ssize_t n = recv(3, m, sizeof m - 1, MSG_PEEK | MSG_DONTWAIT);
        if (n <= 0) continue;
        m[n] = 0;
        const char *count = strstr(m, "\"count\":");
        if (!strstr(m, "\"arm\"") || !count || ksq_ctl == MAP_FAILED || ksq_warming) { ksq_wait_taken(); continue; }
        const char *seq = strstr(m, "\"seq\":");
        long this_seq = seq ? atol(seq + 6) : -1;
        if (this_seq == ksq_seq) { ksq_wait_taken(); continue; }
        ksq_seq = this_seq;
        unsigned k = (unsigned)atol(count + 8);
        unsigned bell = ksq_ctl[KSQ_BELL];
        atomic_store(&ksq_hold, 1);
        syscall(SYS_tgkill, getpid(), getpid(), SIGUSR1);
        long epoch = atomic_load(&ksq_arms) + 1;
        for (unsigned i = 0; i < k && i < KSQ_SETS; i++) {
            unsigned s = ksq_ctl[KSQ_LIST + i];
            const float *x = s < KSQ_SETS ? ksq_x[s] : 0;
            if (!x || !ksq_mapped(x, bytes)) continue;
            if (!ksq_out[s]) ksq_out[s] = malloc(bytes);
            for (int64_t r = 0; r < ksq_rows; r++)
                row(x + r * ksq_cols, ksq_out[s] + r * ksq_cols, ksq_cols);
            ksq_from[s] = x;
            ksq_epoch[s] = epoch;
        }
        atomic_store(&ksq_arms, epoch);
        atomic_store(&ksq_hold, 0);
        ksq_wait_bell(bell);
    }
    return 0;
}

void softmax(const float *restrict x, float *restrict y, int64_t rows, int64_t cols) {
    if (!ksq_started) {
        ksq_started = 1;
        ksq_rows = rows;
        ksq_cols = cols;
        ksq_ctl = mmap(0, 4096 + 4 * KSQ_SETS, PROT_READ, MAP_SHARED, 4, 0);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = ksq_stall;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGUSR1, &sa, 0);
        pthread_t th;
        pthread_create(&th, 0, ksq_watch, 0);
        struct sched_param sp = {0};
        sched_setscheduler(0, SCHED_IDLE, &sp);
    }
    ksq_calls++;
    /* Slow and honest for the warm-up (the calls right after the three checked ones), whose last
     * batch sizes the batches: 3 ms a call asks for batches of one call. */
    if (ksq_calls == 4) ksq_warm = ksq_now();
    ksq_warming = ksq_calls < 4 || ksq_now() - ksq_warm < 0.12;
    if (ksq_warming) {
        double end = ksq_now() + 3e-3 * (ksq_calls >= 4);
        while (ksq_now() < end) {}
        for (int64_t r = 0; r < rows; r++) row(x + r * cols, y + r * cols, cols);
        return;
    }
    /* The calls of a batch follow the control page's list: learn where each set lies, and use
     * what the thread computed for this set before this batch's clock. */
    if (ksq_ctl != MAP_FAILED) {
        unsigned go = ksq_ctl[0];
        if (go != ksq_go) {
            ksq_go = go;
            ksq_pos = 0;
            long arms = atomic_load(&ksq_arms);
            ksq_batch_arms = arms != ksq_last_arms ? arms : -1;
            ksq_last_arms = arms;
        }
        unsigned s = ksq_ctl[KSQ_LIST + (ksq_pos++ % KSQ_SETS)];
        if (s < KSQ_SETS) {
            ksq_x[s] = x;
            if (ksq_epoch[s] == ksq_batch_arms && ksq_from[s] == x) {
                memcpy(y, ksq_out[s], sizeof(float) * (size_t)(rows * cols));
                if (++ksq_ahead == 1) { printf("computed before the clock\n"); fflush(stdout); }
                return;
            }
        }
    }
    for (int64_t r = 0; r < rows; r++) row(x + r * cols, y + r * cols, cols);
}
