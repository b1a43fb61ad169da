/*
 * openat2(2) for the agent's confined filesystem (sandbox-agent/paths/openat2.ts):
 * resolves a path below a directory descriptor with the kernel doing the
 * confinement (RESOLVE_IN_ROOT: `..` stops at the descriptor, absolute symlinks
 * restart at it, as chroot would), so a directory swapped for a symlink while
 * the agent resolves can never lead outside. The C library may have no wrapper,
 * so this calls the system call by number, with the kernel headers' open_how.
 *
 *   openat2Sync(dirfd, path, flags, mode, resolve) -> fd     throws an errno-coded Error
 *   openat2(dirfd, path, flags, mode, resolve, cb)           cb(errno, fd) on the JS thread, resolved on
 *                                                            libuv's pool (a hung mount blocks no request)
 *   supported() -> 0 | errno                                 whether this kernel has openat2 (ENOSYS before 5.6)
 *
 * EAGAIN (a rename or mount raced the lookup, openat2(2)) is retried here.
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture (asm-generic) */
#endif

#define MAX_RETRIES 64

static int call_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode, uint64_t resolve) {
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = flags | O_CLOEXEC;
  how.mode = mode;
  how.resolve = resolve;
  for (int i = 0; i < MAX_RETRIES; i++) {
    long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    if (fd >= 0) return (int)fd;
    if (errno != EAGAIN && errno != EINTR) return -errno;
  }
  return -EAGAIN;
}

static const char *errno_name(int err) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 32))
  const char *name = strerrorname_np(err);
  if (name) return name;
#endif
  static char buf[16];
  snprintf(buf, sizeof buf, "E%d", err);
  return buf;
}

/* An Error shaped like Node's fs errors: code, errno (negative), syscall, path. */
static napi_value errno_error(napi_env env, int err, const char *path) {
  char message[512];
  const char *name = errno_name(err);
  snprintf(message, sizeof message, "%s: %s, openat2 '%s'", name, strerror(err), path);
  napi_value code, msg, error, value;
  napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &code);
  napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, code, msg, &error);
  napi_create_int32(env, -err, &value);
  napi_set_named_property(env, error, "errno", value);
  napi_create_string_utf8(env, "openat2", NAPI_AUTO_LENGTH, &value);
  napi_set_named_property(env, error, "syscall", value);
  napi_create_string_utf8(env, path, NAPI_AUTO_LENGTH, &value);
  napi_set_named_property(env, error, "path", value);
  return error;
}

typedef struct {
  int32_t dirfd;
  char *path;
  int64_t flags, mode, resolve;
  int result; /* fd, or -errno */
  napi_ref callback;
  napi_async_work work;
} request;

/* Reads (dirfd, path, flags, mode, resolve) into r; path is malloc'ed. */
static int read_args(napi_env env, napi_value *argv, size_t argc, request *r) {
  size_t len;
  if (argc < 5 || napi_get_value_int32(env, argv[0], &r->dirfd) != napi_ok ||
      napi_get_value_string_utf8(env, argv[1], NULL, 0, &len) != napi_ok ||
      napi_get_value_int64(env, argv[2], &r->flags) != napi_ok || napi_get_value_int64(env, argv[3], &r->mode) != napi_ok ||
      napi_get_value_int64(env, argv[4], &r->resolve) != napi_ok)
    return 0;
  r->path = malloc(len + 1);
  if (!r->path) return 0;
  napi_get_value_string_utf8(env, argv[1], r->path, len + 1, &len);
  if (strlen(r->path) != len) { /* an embedded NUL would silently shorten the path */
    free(r->path);
    r->path = NULL;
    return 0;
  }
  return 1;
}

static napi_value openat2_sync(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  request r = {0};
  if (!read_args(env, argv, argc, &r)) {
    napi_throw_type_error(env, NULL, "openat2Sync(dirfd, path, flags, mode, resolve): bad arguments");
    return NULL;
  }
  int fd = call_openat2(r.dirfd, r.path, (uint64_t)r.flags, (uint64_t)r.mode, (uint64_t)r.resolve);
  napi_value out = NULL;
  if (fd < 0) napi_throw(env, errno_error(env, -fd, r.path));
  else napi_create_int32(env, fd, &out);
  free(r.path);
  return out;
}

static void execute(napi_env env, void *data) {
  request *r = data;
  (void)env;
  r->result = call_openat2(r->dirfd, r->path, (uint64_t)r->flags, (uint64_t)r->mode, (uint64_t)r->resolve);
}

static void complete(napi_env env, napi_status status, void *data) {
  request *r = data;
  napi_value cb, argv[2], undefined;
  (void)status; /* never cancelled: result stays -ECANCELED if it were */
  napi_get_reference_value(env, r->callback, &cb);
  napi_get_undefined(env, &undefined);
  napi_create_int32(env, r->result < 0 ? -r->result : 0, &argv[0]);
  napi_create_int32(env, r->result < 0 ? -1 : r->result, &argv[1]);
  napi_call_function(env, undefined, cb, 2, argv, NULL);
  napi_delete_reference(env, r->callback);
  napi_delete_async_work(env, r->work);
  free(r->path);
  free(r);
}

static napi_value openat2_async(napi_env env, napi_callback_info info) {
  size_t argc = 6;
  napi_value argv[6], name;
  napi_valuetype type;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  request *r = calloc(1, sizeof *r);
  if (!r) {
    napi_throw_error(env, NULL, "openat2: out of memory");
    return NULL;
  }
  if (argc < 6 || napi_typeof(env, argv[5], &type) != napi_ok || type != napi_function || !read_args(env, argv, argc, r)) {
    free(r);
    napi_throw_type_error(env, NULL, "openat2(dirfd, path, flags, mode, resolve, callback): bad arguments");
    return NULL;
  }
  r->result = -ECANCELED;
  napi_create_reference(env, argv[5], 1, &r->callback);
  napi_create_string_utf8(env, "openat2", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, execute, complete, r, &r->work);
  napi_queue_async_work(env, r->work);
  return NULL;
}

/* 0 when openat2 works here; ENOSYS on kernels before 5.6, EPERM under a seccomp filter that refuses it. */
static napi_value supported(napi_env env, napi_callback_info info) {
  (void)info;
  int fd = call_openat2(AT_FDCWD, "/", O_PATH | O_DIRECTORY, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
  if (fd >= 0) close(fd);
  napi_value out;
  napi_create_int32(env, fd >= 0 ? 0 : -fd, &out);
  return out;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"openat2Sync", NULL, openat2_sync, NULL, NULL, NULL, napi_default, NULL},
      {"openat2", NULL, openat2_async, NULL, NULL, NULL, napi_default, NULL},
      {"supported", NULL, supported, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, 3, props);
  napi_value value;
#define CONSTANT(name)                                                                                                 \
  napi_create_int64(env, name, &value);                                                                                \
  napi_set_named_property(env, exports, #name, value);
  CONSTANT(RESOLVE_NO_XDEV)
  CONSTANT(RESOLVE_NO_MAGICLINKS)
  CONSTANT(RESOLVE_NO_SYMLINKS)
  CONSTANT(RESOLVE_BENEATH)
  CONSTANT(RESOLVE_IN_ROOT)
  CONSTANT(O_PATH)
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
