/*
 * Sockets inside a sandbox's network namespace, for the agent host (simulator/agent-host/netns.ts): the host
 * serves each sandbox's `localhost:8080`, its egress gateways and its previews' connections without any process
 * of its own in the sandbox. A socket belongs to the network namespace it was created in, for its whole life,
 * whoever holds it: so the host creates it there and keeps it.
 *
 *   socketIn(userFd, netFd, family, address, port, listen, timeoutMs, cb)   cb(errno, fd) on the JS thread
 *     listen = 1: a TCP socket bound to address:port and listening (backlog 511), non-blocking
 *     listen = 0: a TCP socket connected to address:port (ECONNREFUSED: nothing listens), non-blocking
 *   openPty(rootFd) -> [master, peer]                         a terminal of the sandbox's own devpts instance
 *     (bwrap --dev mounts one): its /dev/pts/ptmx opened through the root descriptor (openat2, RESOLVE_IN_ROOT),
 *     unlocked, and its peer opened from the master (TIOCGPTPEER), so inside the sandbox `tty` names it
 *   setWindowSize(fd, cols, rows)                             TIOCSWINSZ (the shell gets SIGWINCH)
 *
 * Entering a network namespace needs CAP_SYS_ADMIN in the caller's user namespace and in the namespace's owner;
 * a simulator run by a normal user has it only inside the sandbox's user namespace, which a threaded process
 * (Node) cannot join. So the work runs, on libuv's pool (a slow connect blocks no request), in a child made with
 * clone(CLONE_VM | CLONE_VFORK | CLONE_FILES): its own thread group (it may join a user namespace), the host's
 * memory and descriptor table (the socket it makes is the host's, no SCM_RIGHTS), the pool thread suspended
 * until it exits. It makes raw system calls only (no allocation: the host's other threads hold the heap).
 */
#define _GNU_SOURCE
#define NAPI_VERSION 8
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <node_api.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define STACK_SIZE (64 * 1024)

typedef struct {
  int32_t user_fd, net_fd, family, port, listen, timeout_ms;
  char address[64];
  int result; /* fd, or -errno */
  napi_ref callback;
  napi_async_work work;
} request;

static int make_socket(request *r) {
  struct sockaddr_storage addr;
  socklen_t len;
  memset(&addr, 0, sizeof addr);
  if (r->family == 6) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&addr;
    a->sin6_family = AF_INET6;
    a->sin6_port = htons((uint16_t)r->port);
    if (inet_pton(AF_INET6, r->address, &a->sin6_addr) != 1) return -EINVAL;
    len = sizeof *a;
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&addr;
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)r->port);
    if (inet_pton(AF_INET, r->address, &a->sin_addr) != 1) return -EINVAL;
    len = sizeof *a;
  }
  int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | (r->listen ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -errno;
  int err = 0;
  if (r->listen) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (r->family == 6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, len) < 0 || listen(fd, 511) < 0) err = errno;
  } else {
    /* Blocking, bounded: loopback answers at once (connected or refused) unless the listener's backlog is full. */
    struct timeval tv = {r->timeout_ms / 1000, (r->timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    while (connect(fd, (struct sockaddr *)&addr, len) < 0) {
      if (errno == EINTR) continue;
      err = errno == EINPROGRESS ? ETIMEDOUT : errno;
      break;
    }
    if (!err) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  if (err) {
    close(fd);
    return -err;
  }
  return fd;
}

static int in_namespace(void *data) {
  request *r = data;
  /* Its own user namespace already (a root simulator need not join): EINVAL, and the net namespace is still reachable. */
  if (r->user_fd >= 0 && setns(r->user_fd, CLONE_NEWUSER) < 0 && errno != EINVAL) {
    r->result = -errno;
    return 0;
  }
  if (setns(r->net_fd, CLONE_NEWNET) < 0) {
    r->result = -errno;
    return 0;
  }
  r->result = make_socket(r);
  return 0;
}

static void execute(napi_env env, void *data) {
  request *r = data;
  (void)env;
  char *stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) {
    r->result = -errno;
    return;
  }
  pid_t pid = clone(in_namespace, stack + STACK_SIZE, CLONE_VM | CLONE_VFORK | CLONE_FILES | SIGCHLD, r);
  if (pid < 0) r->result = -errno;
  else
    while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR) {
    }
  munmap(stack, STACK_SIZE);
}

static void complete(napi_env env, napi_status status, void *data) {
  request *r = data;
  napi_value cb, argv[2], undefined;
  (void)status;
  napi_get_reference_value(env, r->callback, &cb);
  napi_get_undefined(env, &undefined);
  napi_create_int32(env, r->result < 0 ? -r->result : 0, &argv[0]);
  napi_create_int32(env, r->result < 0 ? -1 : r->result, &argv[1]);
  napi_call_function(env, undefined, cb, 2, argv, NULL);
  napi_delete_reference(env, r->callback);
  napi_delete_async_work(env, r->work);
  free(r);
}

static napi_value socket_in(napi_env env, napi_callback_info info) {
  size_t argc = 8, len = 0;
  napi_value argv[8], name;
  napi_valuetype type;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  request *r = calloc(1, sizeof *r);
  if (!r) {
    napi_throw_error(env, NULL, "socketIn: out of memory");
    return NULL;
  }
  if (argc < 8 || napi_get_value_int32(env, argv[0], &r->user_fd) != napi_ok || napi_get_value_int32(env, argv[1], &r->net_fd) != napi_ok ||
      napi_get_value_int32(env, argv[2], &r->family) != napi_ok ||
      napi_get_value_string_utf8(env, argv[3], r->address, sizeof r->address, &len) != napi_ok ||
      napi_get_value_int32(env, argv[4], &r->port) != napi_ok || napi_get_value_int32(env, argv[5], &r->listen) != napi_ok ||
      napi_get_value_int32(env, argv[6], &r->timeout_ms) != napi_ok || napi_typeof(env, argv[7], &type) != napi_ok || type != napi_function) {
    free(r);
    napi_throw_type_error(env, NULL, "socketIn(userFd, netFd, family, address, port, listen, timeoutMs, callback): bad arguments");
    return NULL;
  }
  r->result = -ECANCELED;
  napi_create_reference(env, argv[7], 1, &r->callback);
  napi_create_string_utf8(env, "socketIn", NAPI_AUTO_LENGTH, &name);
  napi_create_async_work(env, NULL, name, execute, complete, r, &r->work);
  napi_queue_async_work(env, r->work);
  return NULL;
}

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif
#ifndef SYS_openat2
#define SYS_openat2 437
#endif

static napi_value throw_errno(napi_env env, int err, const char *what) {
  char message[256];
  snprintf(message, sizeof message, "%s: %s", what, strerror(err));
  napi_throw_error(env, NULL, message);
  return NULL;
}

static napi_value open_pty(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1], out, value;
  int32_t root;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_int32(env, argv[0], &root) != napi_ok) {
    napi_throw_type_error(env, NULL, "openPty(rootFd): bad arguments");
    return NULL;
  }
  struct open_how how;
  memset(&how, 0, sizeof how);
  how.flags = O_RDWR | O_NOCTTY | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  int master = (int)syscall(SYS_openat2, root, "dev/pts/ptmx", &how, sizeof how);
  if (master < 0) return throw_errno(env, errno, "open the sandbox's /dev/pts/ptmx");
  int unlock = 0;
  if (ioctl(master, TIOCSPTLCK, &unlock) < 0) {
    int err = errno;
    close(master);
    return throw_errno(env, err, "unlock the terminal");
  }
  int peer = ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (peer < 0) {
    int err = errno;
    close(master);
    return throw_errno(env, err, "open the terminal's peer");
  }
  napi_create_array_with_length(env, 2, &out);
  napi_create_int32(env, master, &value);
  napi_set_element(env, out, 0, value);
  napi_create_int32(env, peer, &value);
  napi_set_element(env, out, 1, value);
  return out;
}

static napi_value set_window_size(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  int32_t fd, cols, rows;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 3 || napi_get_value_int32(env, argv[0], &fd) != napi_ok || napi_get_value_int32(env, argv[1], &cols) != napi_ok ||
      napi_get_value_int32(env, argv[2], &rows) != napi_ok) {
    napi_throw_type_error(env, NULL, "setWindowSize(fd, cols, rows): bad arguments");
    return NULL;
  }
  struct winsize ws = {(unsigned short)rows, (unsigned short)cols, 0, 0};
  if (ioctl(fd, TIOCSWINSZ, &ws) < 0) return throw_errno(env, errno, "resize the terminal");
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"socketIn", NULL, socket_in, NULL, NULL, NULL, napi_default, NULL},
      {"openPty", NULL, open_pty, NULL, NULL, NULL, napi_default, NULL},
      {"setWindowSize", NULL, set_window_size, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, 3, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
