/*
 * splice(2) for the simulator's sandbox proxy (simulator/proxy/splice.ts):
 * moves exactly N bytes from one socket to another through a pipe, in the
 * kernel, on a thread of its own, so a large upload through /port/{n} or a
 * preview costs the proxy no copy to user space. Node has no splice; the
 * proxy falls back to piping in JS where this addon is not built.
 *
 *   start(inFd, outFd, bytes, idleMs, done) -> handle
 *       done(errno, moved) once, on the JS thread; ETIMEDOUT when either side
 *       made no progress for idleMs (0: no limit), ECONNRESET when the sender
 *       ended before `bytes`
 *   abort(handle)                                ends the transfer early (done gets ECANCELED)
 *
 * The descriptors are dup()ed: Node may close its own at any time (a socket
 * destroyed while the transfer runs) without this thread touching a reused fd.
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define CHUNK (1 << 20)

typedef struct {
  int in, out, wake, pipe_r, pipe_w;
  int64_t bytes, moved;
  int err, idle_ms;
  napi_threadsafe_function done;
} transfer;

static void close_all(transfer *t) {
  if (t->in >= 0) close(t->in);
  if (t->out >= 0) close(t->out);
  if (t->pipe_r >= 0) close(t->pipe_r);
  if (t->pipe_w >= 0) close(t->pipe_w);
}

/* Waits until fd is ready for `events`; ECANCELED once abort() wrote the eventfd, EPIPE on a hang-up. */
static int wait_for(transfer *t, int fd, short events) {
  struct pollfd fds[2] = {{fd, events, 0}, {t->wake, POLLIN, 0}};
  for (;;) {
    int n = poll(fds, 2, t->idle_ms > 0 ? t->idle_ms : -1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return ETIMEDOUT;
    if (fds[1].revents) return ECANCELED;
    if (fds[0].revents & events) return 0;
    if (fds[0].revents & (POLLERR | POLLNVAL)) return EPIPE;
    if (fds[0].revents & POLLHUP) return events == POLLIN ? 0 : EPIPE; /* a read may still find the last bytes */
  }
}

static void *run(void *arg) {
  transfer *t = arg;
  int64_t in_pipe = 0;
  while (t->err == 0 && (t->moved < t->bytes)) {
    /* Take all the socket holds (up to the pipe's size) before sending: fewer, larger sends wake the receiver less. */
    while (in_pipe < CHUNK && t->moved + in_pipe < t->bytes) {
      int64_t want = t->bytes - t->moved - in_pipe;
      ssize_t n = splice(t->in, NULL, t->pipe_w, NULL, want < CHUNK - in_pipe ? want : CHUNK - in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) in_pipe += n;
      else if (n == 0) { t->err = ECONNRESET; break; } /* the sender ended before the whole body */
      else if (errno != EAGAIN) { t->err = errno; break; }
      else break;
    }
    if (t->err) break;
    if (in_pipe == 0) { t->err = wait_for(t, t->in, POLLIN); continue; }
    {
      /* MSG_MORE only while more is to come: on the last bytes it would hold them back (TCP cork). */
      unsigned int more = t->moved + in_pipe < t->bytes ? SPLICE_F_MORE : 0;
      ssize_t n = splice(t->pipe_r, NULL, t->out, NULL, in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK | more);
      if (n > 0) { in_pipe -= n; t->moved += n; }
      else if (n < 0 && errno == EAGAIN) t->err = wait_for(t, t->out, POLLOUT);
      else { t->err = n == 0 ? EPIPE : errno; break; }
    }
  }
  close_all(t);
  napi_call_threadsafe_function(t->done, t, napi_tsfn_blocking);
  napi_release_threadsafe_function(t->done, napi_tsfn_release);
  return NULL;
}

static void call_done(napi_env env, napi_value js_cb, void *context, void *data) {
  transfer *t = data;
  (void)context;
  if (env != NULL) {
    napi_value argv[2], undefined;
    napi_create_int32(env, t->err, &argv[0]);
    napi_create_double(env, (double)t->moved, &argv[1]);
    napi_get_undefined(env, &undefined);
    napi_call_function(env, undefined, js_cb, 2, argv, NULL);
  }
  close(t->wake);
  free(t);
}

static napi_value throw_errno(napi_env env, const char *what) {
  napi_throw_error(env, NULL, what);
  return NULL;
}

static napi_value start(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t in, out, idle_ms;
  int64_t bytes;
  if (argc < 5 || napi_get_value_int32(env, argv[0], &in) != napi_ok || napi_get_value_int32(env, argv[1], &out) != napi_ok ||
      napi_get_value_int64(env, argv[2], &bytes) != napi_ok || bytes < 0 || napi_get_value_int32(env, argv[3], &idle_ms) != napi_ok)
    return throw_errno(env, "start(inFd, outFd, bytes, idleMs, done)");
  transfer *t = calloc(1, sizeof *t);
  if (!t) return throw_errno(env, "out of memory");
  t->in = t->out = t->wake = t->pipe_r = t->pipe_w = -1;
  t->bytes = bytes;
  t->idle_ms = idle_ms;
  int pipefd[2];
  t->in = fcntl(in, F_DUPFD_CLOEXEC, 3);
  t->out = fcntl(out, F_DUPFD_CLOEXEC, 3);
  t->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (t->in < 0 || t->out < 0 || t->wake < 0 || pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) < 0) {
    close_all(t);
    if (t->wake >= 0) close(t->wake);
    free(t);
    return throw_errno(env, "splice: no descriptors left");
  }
  t->pipe_r = pipefd[0];
  t->pipe_w = pipefd[1];
  fcntl(t->pipe_w, F_SETPIPE_SZ, CHUNK); /* fewer, larger moves; the default 64 KiB still works */
  napi_value name;
  napi_create_string_utf8(env, "splice", NAPI_AUTO_LENGTH, &name);
  if (napi_create_threadsafe_function(env, argv[4], NULL, name, 0, 1, NULL, NULL, NULL, call_done, &t->done) != napi_ok) {
    close_all(t);
    close(t->wake);
    free(t);
    return throw_errno(env, "splice: no callback");
  }
  pthread_t thread;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  int wake = t->wake;
  if (pthread_create(&thread, &attr, run, t) != 0) {
    pthread_attr_destroy(&attr);
    napi_release_threadsafe_function(t->done, napi_tsfn_abort);
    close_all(t);
    close(t->wake);
    free(t);
    return throw_errno(env, "splice: no thread");
  }
  pthread_attr_destroy(&attr);
  /* The handle is the eventfd's number, which stays open until done() ran: abort() after that is a no-op. */
  napi_value handle;
  napi_create_int32(env, wake, &handle);
  return handle;
}

static napi_value abort_transfer(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  int32_t wake;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &wake) != napi_ok) return throw_errno(env, "abort(handle)");
  uint64_t one = 1;
  if (write(wake, &one, sizeof one) < 0) { /* already ended */ }
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"start", NULL, start, NULL, NULL, NULL, napi_default, NULL},
      {"abort", NULL, abort_transfer, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, 2, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
