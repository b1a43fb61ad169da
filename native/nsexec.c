/*
 * nsexec: runs one command inside a running sandbox, from outside it (the agent
 * host's process spawner, sandbox-agent/process/ns-spawn.ts). setns(2) into a
 * mount namespace needs a single-threaded caller, which Node is not, so this
 * small program does it between Node's spawn and the command's execve:
 *
 *   nsexec --target PID [--cgroup-procs FILE] [--caps HEXMASK] [--uid N] [--gid N]
 *          [--groups G,G... | --clear-groups] [--cwd DIR] [--tty] [--report FD] -- FILE ARG...
 *   nsexec --idle      (inside a sandbox: says "ready" and waits; see idle())
 *
 * 1. opens /proc/PID/ns/{user,cgroup,ipc,uts,net,pid,mnt} and /proc/PID/root
 *    before entering anything (the host's /proc is gone once inside);
 * 2. joins the sandbox's cgroup (--cgroup-procs: its memory limit counts the command);
 * 3. setns: the user namespace first (it owns the others), then the rest;
 *    one it already shares is skipped (joining its own user namespace is EINVAL);
 * 4. chroots to the target's root (its mount namespace's view: overlay, binds,
 *    drives) and chdirs to --cwd there, so the kernel resolves it inside;
 * 5. forks (a PID namespace holds only the children of who entered it); the
 *    child makes itself a session and process group leader (the host kills the
 *    command's tree by -pid), takes the terminal with --tty, keeps only --caps
 *    in its bounding set, no inheritable or ambient capability (what the kit's
 *    setpriv wrapper does for commands the in-sandbox agent starts), changes
 *    its ids (an image's User) and execs FILE with this environment, PATH
 *    looked up inside the sandbox;
 * 6. the parent reports on --report FD one line, then closes it:
 *      "ok <host pid> <sandbox pid>"      the command runs
 *      "error <stage> <errno> <message>"  nothing runs (exit status 127)
 *    and stays to mirror the command's end as its own (exit code, or the same
 *    signal), so its spawner sees the command's exit as today; the signals a
 *    spawner sends it (TERM, INT, HUP, QUIT, USR1, USR2) go to the command's group.
 *
 * Static, no allocation after start-up: the per-command cost is this fork and
 * two execs, measured by `npm run bench:nsenter` beside a plain spawn and nsenter(1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_GROUPS 64

static const char *const NAMESPACES[] = {"user", "cgroup", "ipc", "uts", "net", "pid", "mnt"};
#define NS_COUNT (sizeof(NAMESPACES) / sizeof(NAMESPACES[0]))

static int report_fd = -1;
static volatile pid_t command_pid = 0;

static void report(const char *line) {
  if (report_fd < 0) return;
  size_t len = strlen(line), done = 0;
  while (done < len) {
    ssize_t n = write(report_fd, line + done, len - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += (size_t)n;
  }
  close(report_fd);
  report_fd = -1;
}

static void fail(const char *stage, int err) {
  char line[256];
  snprintf(line, sizeof line, "error %s %d %s\n", stage, err, strerror(err));
  if (report_fd >= 0)
    report(line);
  else
    fprintf(stderr, "nsexec: %s: %s\n", stage, strerror(err));
  _exit(127);
}

static void usage(const char *why) {
  fprintf(stderr, "nsexec: %s\nusage: nsexec --target PID [--cgroup-procs FILE] [--caps HEXMASK] [--uid N] [--gid N] "
                  "[--groups G,...|--clear-groups] [--cwd DIR] [--tty] [--report FD] -- FILE ARG...\n", why);
  exit(2);
}

static long number(const char *text, const char *what) {
  char *end;
  errno = 0;
  long value = strtol(text, &end, 0);
  if (errno || *end || end == text || value < 0) usage(what);
  return value;
}

static void forward(int sig) {
  if (command_pid > 0 && kill(-command_pid, sig) < 0) kill(command_pid, sig);
}

struct options {
  long target, uid, gid;
  const char *cgroup_procs, *cwd;
  uint64_t caps;
  int has_caps, tty, clear_groups, group_count;
  gid_t groups[MAX_GROUPS];
  char **argv;
};

static void parse(int argc, char **argv, struct options *o) {
  memset(o, 0, sizeof *o);
  o->target = o->uid = o->gid = -1;
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--")) { i++; break; }
    if (!strcmp(a, "--tty")) { o->tty = 1; continue; }
    if (!strcmp(a, "--clear-groups")) { o->clear_groups = 1; continue; }
    if (!v) usage("an option lacks its value");
    i++;
    if (!strcmp(a, "--target")) o->target = number(v, "--target: not a pid");
    else if (!strcmp(a, "--cgroup-procs")) o->cgroup_procs = v;
    else if (!strcmp(a, "--cwd")) o->cwd = v;
    else if (!strcmp(a, "--uid")) o->uid = number(v, "--uid: not an id");
    else if (!strcmp(a, "--gid")) o->gid = number(v, "--gid: not an id");
    else if (!strcmp(a, "--report")) report_fd = (int)number(v, "--report: not a descriptor");
    else if (!strcmp(a, "--caps")) { o->caps = strtoull(v, NULL, 16); o->has_caps = 1; }
    else if (!strcmp(a, "--groups")) {
      char *copy = strdup(v), *save = NULL;
      for (char *g = strtok_r(copy, ",", &save); g; g = strtok_r(NULL, ",", &save)) {
        if (o->group_count == MAX_GROUPS) usage("--groups: too many");
        o->groups[o->group_count++] = (gid_t)number(g, "--groups: not an id");
      }
      free(copy);
    } else usage("unknown option");
  }
  if (o->target <= 0) usage("--target is required");
  if (i >= argc) usage("no command");
  o->argv = argv + i;
}

/* Joins the cgroup whose cgroup.procs is `file` (v1 or v2): the sandbox's memory limit then counts the command. */
static void join_cgroup(const char *file) {
  int fd = open(file, O_WRONLY | O_CLOEXEC);
  if (fd < 0) fail("cgroup", errno);
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%d\n", getpid());
  if (write(fd, pid, (size_t)len) != len) fail("cgroup", errno);
  close(fd);
}

static void enter(long target, const char *cwd) {
  char path[64];
  int fds[NS_COUNT], same[NS_COUNT];
  for (size_t i = 0; i < NS_COUNT; i++) {
    snprintf(path, sizeof path, "/proc/%ld/ns/%s", target, NAMESPACES[i]);
    fds[i] = open(path, O_RDONLY | O_CLOEXEC);
    if (fds[i] < 0) fail(NAMESPACES[i], errno == ENOENT ? ESRCH : errno);
    char self[64];
    struct stat theirs, ours;
    snprintf(self, sizeof self, "/proc/self/ns/%s", NAMESPACES[i]);
    same[i] = fstat(fds[i], &theirs) == 0 && stat(self, &ours) == 0 && theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev;
  }
  snprintf(path, sizeof path, "/proc/%ld/root", target);
  int root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (root < 0) fail("root", errno);
  for (size_t i = 0; i < NS_COUNT; i++) {
    if (!same[i] && setns(fds[i], 0) < 0) fail(NAMESPACES[i], errno);
    close(fds[i]);
  }
  if (fchdir(root) < 0 || chroot(".") < 0) fail("root", errno);
  close(root);
  if (chdir(cwd ? cwd : "/") < 0) fail("cwd", errno);
}

/* In the child: only `keep` may ever be regained by an exec, nothing is inherited or ambient. 0 or an errno. */
static int last_cap = 40;

static int limit_capabilities(uint64_t keep) {
  if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL) return errno;
  for (int cap = 0; cap <= last_cap; cap++)
    if (!(keep & (1ULL << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) return errno;
  struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
  struct __user_cap_data_struct data[2];
  if (syscall(SYS_capget, &header, data) < 0) return errno;
  data[0].inheritable = data[1].inheritable = 0;
  if (syscall(SYS_capset, &header, data) < 0) return errno;
  return 0;
}

static void read_last_cap(void) {
  FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
  if (!f) return;
  if (fscanf(f, "%d", &last_cap) != 1 || last_cap < 0 || last_cap > 63) last_cap = 40;
  fclose(f);
}

/* Child side of the fork: nothing here returns; failures go up the status pipe as (stage index, errno). */
static const char *const CHILD_STAGES[] = {"session", "tty", "caps", "groups", "gid", "uid", "exec"};

static void child_fail(int status_fd, int stage, int err) {
  int32_t msg[2] = {stage, err};
  if (write(status_fd, msg, sizeof msg) < 0) { /* the parent then reports an unknown failure */ }
  _exit(127);
}

static void run_command(const struct options *o, int status_fd, const sigset_t *original) {
  for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
  sigprocmask(SIG_SETMASK, original, NULL);
  int32_t pid = getpid();
  if (write(status_fd, &pid, sizeof pid) != sizeof pid) _exit(127);
  if (setsid() < 0) child_fail(status_fd, 0, errno);
  if (o->tty && ioctl(STDIN_FILENO, TIOCSCTTY, 0) < 0) child_fail(status_fd, 1, errno);
  int err = o->has_caps ? limit_capabilities(o->caps) : 0;
  if (err) child_fail(status_fd, 2, err);
  if (o->clear_groups && setgroups(0, NULL) < 0) child_fail(status_fd, 3, errno);
  if (o->group_count && setgroups((size_t)o->group_count, o->groups) < 0) child_fail(status_fd, 3, errno);
  if (o->gid >= 0 && setresgid((gid_t)o->gid, (gid_t)o->gid, (gid_t)o->gid) < 0) child_fail(status_fd, 4, errno);
  if (o->uid >= 0 && setresuid((uid_t)o->uid, (uid_t)o->uid, (uid_t)o->uid) < 0) child_fail(status_fd, 5, errno);
  execvp(o->argv[0], o->argv);
  child_fail(status_fd, 6, errno);
}

/*
 * --idle: the one process an agent host's sandbox runs (bwrap's command; bwrap's own init is PID 1 and reaps).
 * "ready" on stdout says bwrap has built the sandbox's root and executed it; then it waits, and the sandbox
 * lives as long as it does (SIGTERM or SIGKILL end both).
 */
static void idle(void) {
  if (write(STDOUT_FILENO, "ready\n", 6) != 6) _exit(1);
  close(STDOUT_FILENO);
  for (;;) pause();
}

/*
 * The command and its arguments are the sandbox's business: once they are copied, this helper's own command line
 * (what `ps` and /proc/<pid>/cmdline show on the host) becomes "nsexec --target PID" alone, so a host's process
 * list never mistakes the helper for the command it waits on, nor shows what runs in the sandbox.
 */
static void hide_command(int argc, char **argv, struct options *o) {
  int n = 0;
  while (o->argv[n]) n++;
  char **copy = calloc((size_t)n + 1, sizeof *copy);
  if (!copy) return;
  for (int i = 0; i < n; i++)
    if (!(copy[i] = strdup(o->argv[i]))) return;
  o->argv = copy;
  if (o->cwd && !(o->cwd = strdup(o->cwd))) return;
  if (o->cgroup_procs && !(o->cgroup_procs = strdup(o->cgroup_procs))) return;
  char *start = argv[0], *end = argv[argc - 1] + strlen(argv[argc - 1]);
  size_t room = (size_t)(end - start);
  memset(start, 0, room);
  snprintf(start, room, "nsexec --target %ld", o->target);
}

int main(int argc, char **argv) {
  struct options o;
  if (argc == 2 && !strcmp(argv[1], "--idle")) idle();
  parse(argc, argv, &o);
  hide_command(argc, argv, &o);
  if (report_fd >= 0) fcntl(report_fd, F_SETFD, FD_CLOEXEC);
  if (o.has_caps) read_last_cap();
  if (o.cgroup_procs) join_cgroup(o.cgroup_procs);
  enter(o.target, o.cwd);

  /* --tty: the terminal is this process's (a PTY spawner made it the session leader); give it up so the command's
     new session can take it. The hangup that goes to this group is ignored here and reset in the child. */
  if (o.tty) {
    signal(SIGHUP, SIG_IGN);
    ioctl(STDIN_FILENO, TIOCNOTTY);
  }
  static const int FORWARDED[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
  sigset_t block, original;
  sigemptyset(&block);
  for (size_t i = 0; i < sizeof FORWARDED / sizeof *FORWARDED; i++) sigaddset(&block, FORWARDED[i]);
  sigprocmask(SIG_BLOCK, &block, &original);

  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) < 0) fail("pipe", errno);
  pid_t child = fork();
  if (child < 0) fail("fork", errno);
  if (child == 0) {
    close(status_pipe[0]);
    run_command(&o, status_pipe[1], &original);
  }
  close(status_pipe[1]);
  command_pid = child;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = forward;
  for (size_t i = 0; i < sizeof FORWARDED / sizeof *FORWARDED; i++) sigaction(FORWARDED[i], &sa, NULL);
  sigprocmask(SIG_SETMASK, &original, NULL);

  /* The child's pid in the sandbox, then EOF (exec'd) or (stage, errno). */
  int32_t msg[3];
  size_t got = 0;
  while (got < sizeof msg) {
    ssize_t n = read(status_pipe[0], (char *)msg + got, sizeof msg - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  close(status_pipe[0]);
  char line[256];
  if (got == sizeof(int32_t)) {
    snprintf(line, sizeof line, "ok %d %d\n", child, msg[0]);
    report(line);
  } else {
    int stage = got == sizeof msg ? msg[1] : 6, err = got == sizeof msg ? msg[2] : EIO;
    if (stage < 0 || stage > 6) stage = 6;
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
    fail(CHILD_STAGES[stage], err);
  }

  int status;
  for (;;) {
    pid_t done = waitpid(child, &status, 0);
    if (done == child) break;
    if (done < 0 && errno != EINTR) _exit(127);
  }
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  int sig = WTERMSIG(status);
  /* Die of the same signal, so the spawner's exit event carries it (no core file of this helper). */
  signal(sig, SIG_DFL);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  sigprocmask(SIG_UNBLOCK, &only, NULL);
  prctl(PR_SET_DUMPABLE, 0);
  kill(getpid(), sig);
  _exit(128 + sig);
}
