/* Keeps what NVRTC compiles for a module's `mx.fast.cuda_kernel`s where MLX looks for it.

   MLX's CUDA backend looks up every kernel module it builds in its cache directory
   (MLX_PTX_CACHE_DIR: `<module>.ptx` holds the code, `<module>.txt` a line `name<TAB>mangled`
   per kernel), but it writes only its own kernels there, never a `cuda_kernel`'s
   (`custom_kernel_<name>...`). A fresh process therefore compiled every such kernel again, about
   1.5 s each on an H200. Loaded into an executor with LD_PRELOAD, this library passes every call
   through to the real NVRTC and, when a `custom_kernel_` program's code is fetched, writes the
   two files MLX would read into MLX_PTX_CACHE_DIR (the executor's private directory, from which
   the judge files them per module: see kernel_cache.py). It changes no result and no argument.

   Built by the judge with the system's C compiler: cc -O2 -shared -fPIC nvrtc_keep.c -ldl */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvrtcResult; /* NVRTC_SUCCESS is 0 */
typedef struct _nvrtcProgram *nvrtcProgram;

#define PREFIX "custom_kernel_"
#define MAX_NAME 200 /* kernel_cache.NAME takes file names of at most 200 characters */
#define MAX_LINES (64 << 10)

struct program {
  nvrtcProgram prog;
  char module[MAX_NAME + 1];
  char *lines; /* "name\tmangled\n" ... */
  size_t len;
  struct program *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct program *programs;

/* The loaded NVRTC library's path: MLX loads it as its own dependency, in its local scope
   (Python opens extension modules with RTLD_LOCAL), where RTLD_NEXT does not look. */
static int find_nvrtc(struct dl_phdr_info *info, size_t size, void *out) {
  (void)size;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base != NULL ? base + 1 : info->dlpi_name;
  if (strncmp(base, "libnvrtc.so", 11) != 0) return 0;
  *(const char **)out = info->dlpi_name;
  return 1;
}

static void *real(const char *name) {
  void *f = dlsym(RTLD_NEXT, name);
  if (f == NULL) {
    const char *path = NULL;
    dl_iterate_phdr(find_nvrtc, &path);
    void *lib = path != NULL ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (lib != NULL) f = dlsym(lib, name);
  }
  if (f == NULL) {
    fprintf(stderr, "nvrtc_keep: %s is not loaded\n", name);
    abort();
  }
  return f;
}

/* A module name MLX can find as one file: the prefix, then letters, digits and _.+- only. */
static int keepable(const char *file) {
  size_t n = strlen(file);
  if (n < sizeof(PREFIX) + 3 || strncmp(file, PREFIX, sizeof(PREFIX) - 1) != 0 ||
      strcmp(file + n - 3, ".cu") != 0 || n - 3 + 4 > MAX_NAME)
    return 0;
  for (size_t i = 0; i < n - 3; i++) {
    char c = file[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '.' || c == '+' || c == '-'))
      return 0;
  }
  return 1;
}

static struct program **find(nvrtcProgram prog) {
  struct program **p = &programs;
  while (*p != NULL && (*p)->prog != prog) p = &(*p)->next;
  return p;
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name, int num_headers,
                               const char *const *headers, const char *const *include_names) {
  nvrtcResult (*f)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                   const char *const *) = real("nvrtcCreateProgram");
  nvrtcResult r = f(prog, src, name, num_headers, headers, include_names);
  if (r != 0 || name == NULL || !keepable(name)) return r;
  struct program *p = calloc(1, sizeof *p);
  if (p == NULL) return r;
  p->prog = *prog;
  memcpy(p->module, name, strlen(name) - 3);
  pthread_mutex_lock(&lock);
  p->next = programs;
  programs = p;
  pthread_mutex_unlock(&lock);
  return r;
}

nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *expr, const char **lowered) {
  nvrtcResult (*f)(nvrtcProgram, const char *, const char **) = real("nvrtcGetLoweredName");
  nvrtcResult r = f(prog, expr, lowered);
  if (r != 0 || expr == NULL || lowered == NULL || *lowered == NULL) return r;
  pthread_mutex_lock(&lock);
  struct program *p = *find(prog);
  size_t a = strlen(expr), b = strlen(*lowered);
  if (p != NULL && strpbrk(expr, "\t\n") == NULL && strpbrk(*lowered, "\t\n") == NULL &&
      p->len + a + b + 2 <= MAX_LINES) {
    char *grown = realloc(p->lines, p->len + a + b + 2);
    if (grown != NULL) {
      p->lines = grown;
      memcpy(p->lines + p->len, expr, a);
      p->lines[p->len + a] = '\t';
      memcpy(p->lines + p->len + a + 1, *lowered, b);
      p->lines[p->len + a + b + 1] = '\n';
      p->len += a + b + 2;
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* Write `data` to dir/name through a temporary file, so that a reader never sees half of it. */
static int put(const char *dir, const char *name, const char *data, size_t len) {
  char path[4096], tmp[4096];
  if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path ||
      snprintf(tmp, sizeof tmp, "%s/.keep-%d-%s", dir, (int)getpid(), name) >= (int)sizeof tmp)
    return -1;
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, data + done, len - done);
    if (w <= 0) break;
    done += (size_t)w;
  }
  if (close(fd) != 0 || done != len || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

/* The names first: MLX reads the code file's presence as "cached", then the names beside it. */
static void keep(nvrtcProgram prog, const char *code, size_t len) {
  const char *dir = getenv("MLX_PTX_CACHE_DIR");
  if (dir == NULL || *dir == '\0' || code == NULL || len == 0) return;
  pthread_mutex_lock(&lock);
  struct program *p = *find(prog);
  if (p != NULL && p->len > 0) {
    char names[MAX_NAME + 8], ptx[MAX_NAME + 8];
    snprintf(names, sizeof names, "%s.txt", p->module);
    snprintf(ptx, sizeof ptx, "%s.ptx", p->module);
    if (put(dir, names, p->lines, p->len) == 0) put(dir, ptx, code, len);
  }
  pthread_mutex_unlock(&lock);
}

/* The real `get` (nvrtcGetCUBIN or nvrtcGetPTX), then the code it fetched kept. */
static nvrtcResult fetch(nvrtcProgram prog, char *code, const char *get, const char *size_of) {
  nvrtcResult (*f)(nvrtcProgram, char *) = real(get);
  nvrtcResult (*size)(nvrtcProgram, size_t *) = real(size_of);
  nvrtcResult r = f(prog, code);
  size_t n = 0;
  if (r == 0 && size(prog, &n) == 0) keep(prog, code, n);
  return r;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin) {
  return fetch(prog, cubin, "nvrtcGetCUBIN", "nvrtcGetCUBINSize");
}

nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx) {
  return fetch(prog, ptx, "nvrtcGetPTX", "nvrtcGetPTXSize");
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog) {
  nvrtcResult (*f)(nvrtcProgram *) = real("nvrtcDestroyProgram");
  if (prog != NULL) {
    pthread_mutex_lock(&lock);
    struct program **p = find(*prog);
    if (*p != NULL) {
      struct program *gone = *p;
      *p = gone->next;
      free(gone->lines);
      free(gone);
    }
    pthread_mutex_unlock(&lock);
  }
  return f(prog);
}
