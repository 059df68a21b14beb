/*
 * child_posix.c: child.h on POSIX systems (Linux, macOS, Android, BSDs).
 *
 * The child is started with posix_spawn; every pipe end the library holds is close-on-exec from
 * the moment it exists (pipe2 where the system has it, POSIX_SPAWN_CLOEXEC_DEFAULT on macOS), so
 * a second bridge's child never inherits the first one's stdin. Reads and writes poll a wake pipe
 * beside the child's pipe: child_wake makes it readable for good, and every blocked call returns.
 * A write to a child that is gone fails with EPIPE instead of raising SIGPIPE in the host.
 */
#define _GNU_SOURCE
#include "child.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Most arguments a child is given: the executable, "stdio", the bridge's extras, NULL. */
#define MAX_ARGUMENTS 16
/* Polling steps while waiting for a child to exit: from 1 ms, doubling up to 10 ms. */
#define EXIT_POLL_FIRST_NS 1000000L
#define EXIT_POLL_LONGEST_NS 10000000L
#define NS_PER_MS 1000000L
#define NS_PER_S 1000000000L

struct oamd_child {
    pid_t pid;
    pid_t owner; /* the process that spawned it: a fork's copy must not wake or stop it */
    int input;  /* the child's stdin, written by the bridge's writer thread */
    int output; /* the child's stdout, read by the bridge's reader thread */
    int wake_read, wake_write;
};

static int make_pipe(int fds[2]) {
#if defined(__APPLE__)
    if (pipe(fds) != 0) return -1;
    /* Spawned children get no inherited descriptor anyway (POSIX_SPAWN_CLOEXEC_DEFAULT); this
     * covers a host's own fork+exec. */
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
#else
    return pipe2(fds, O_CLOEXEC);
#endif
}

static void close_fd(int *fd) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

oamd_child *child_spawn(const char *executable, const char *const *extra_args, char *error, size_t error_size) {
    oamd_child *child = calloc(1, sizeof *child);
    if (!child) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    int in[2] = {-1, -1}, out[2] = {-1, -1}, wake[2] = {-1, -1};
    if (make_pipe(in) != 0 || make_pipe(out) != 0 || make_pipe(wake) != 0) {
        snprintf(error, error_size, "pipe: %s", strerror(errno));
        goto fail;
    }
    const char *argv[MAX_ARGUMENTS];
    size_t argc = 0;
    argv[argc++] = executable;
    argv[argc++] = "stdio";
    for (size_t i = 0; extra_args && extra_args[i] && argc < MAX_ARGUMENTS - 1; i++) argv[argc++] = extra_args[i];
    argv[argc] = NULL;

    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attributes);
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    /* The child starts with default signal handling whatever the host did (Python hosts ignore
     * SIGPIPE, Mono blocks signals in its threads). */
    sigset_t none, defaults;
    sigemptyset(&none);
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    posix_spawnattr_setsigmask(&attributes, &none);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#if defined(__APPLE__)
    flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
#endif
    posix_spawnattr_setflags(&attributes, flags);
    int status = strchr(executable, '/')
                     ? posix_spawn(&child->pid, executable, &actions, &attributes, (char *const *)argv, environ)
                     : posix_spawnp(&child->pid, executable, &actions, &attributes, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (status != 0) {
        snprintf(error, error_size, "cannot start %s: %s", executable, strerror(status));
        goto fail;
    }
    close(in[0]);
    close(out[1]);
    child->owner = getpid();
    child->input = in[1];
    child->output = out[0];
    child->wake_read = wake[0];
    child->wake_write = wake[1];
    fcntl(child->input, F_SETFL, fcntl(child->input, F_GETFL) | O_NONBLOCK);
    fcntl(child->output, F_SETFL, fcntl(child->output, F_GETFL) | O_NONBLOCK);
#ifdef F_SETNOSIGPIPE
    fcntl(child->input, F_SETNOSIGPIPE, 1);
#endif
    return child;
fail:
    for (int i = 0; i < 2; i++) {
        close_fd(&in[i]);
        close_fd(&out[i]);
        close_fd(&wake[i]);
    }
    free(child);
    return NULL;
}

/* Waits until fd is ready for `events` or the wake pipe is readable. */
static int wait_ready(oamd_child *child, int fd, short events) {
    for (;;) {
        struct pollfd fds[2] = {{fd, events, 0}, {child->wake_read, POLLIN, 0}};
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            return CHILD_BROKEN;
        }
        if (fds[1].revents) return CHILD_WOKEN;
        if (fds[0].revents) return 1;
    }
}

long child_read(oamd_child *child, char *buffer, size_t size) {
    for (;;) {
        int ready = wait_ready(child, child->output, POLLIN);
        if (ready != 1) return ready;
        ssize_t n = read(child->output, buffer, size);
        if (n > 0) return (long)n;
        if (n == 0) return CHILD_END;
        if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return CHILD_BROKEN;
    }
}

/* write(2) that reports EPIPE without a SIGPIPE for the host: on systems without F_SETNOSIGPIPE
 * the signal is blocked in this thread around the call and a pending one is taken back. */
static ssize_t write_without_sigpipe(int fd, const char *buffer, size_t size) {
#ifdef F_SETNOSIGPIPE
    return write(fd, buffer, size);
#else
    sigset_t pipe_signal, previous;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, &previous);
    ssize_t n = write(fd, buffer, size);
    int saved = errno;
    if (n < 0 && saved == EPIPE) {
        struct timespec now = {0, 0};
        while (sigtimedwait(&pipe_signal, NULL, &now) < 0 && errno == EINTR) {
        }
    }
    pthread_sigmask(SIG_SETMASK, &previous, NULL);
    errno = saved;
    return n;
#endif
}

int child_write_all(oamd_child *child, const char *buffer, size_t size) {
    while (size > 0) {
        int ready = wait_ready(child, child->input, POLLOUT);
        if (ready != 1) return ready;
        ssize_t n = write_without_sigpipe(child->input, buffer, size);
        if (n > 0) {
            buffer += n;
            size -= (size_t)n;
        } else if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) {
            return CHILD_BROKEN;
        }
    }
    return 0;
}

void child_write_if_room(oamd_child *child, const char *buffer, size_t size) {
    if (child->input >= 0) (void)write_without_sigpipe(child->input, buffer, size);
}

void child_close_input(oamd_child *child) { close_fd(&child->input); }

void child_close_output(oamd_child *child) { close_fd(&child->output); }

void child_wake(oamd_child *child) {
    char byte = 1;
    /* One byte is enough: nobody drains the wake pipe, so it stays readable. */
    while (write(child->wake_write, &byte, 1) < 0 && errno == EINTR) {
    }
}

static long elapsed_ns(const struct timespec *since) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)(now.tv_sec - since->tv_sec) * NS_PER_S + (now.tv_nsec - since->tv_nsec);
}

/* True once the child has exited and been reaped (or someone else reaped it: ECHILD). */
static int reaped(pid_t pid) {
    int status;
    pid_t done = waitpid(pid, &status, WNOHANG);
    return done == pid || (done < 0 && errno == ECHILD);
}

static int wait_exit(pid_t pid, int grace_ms) {
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    long step = EXIT_POLL_FIRST_NS;
    while (!reaped(pid)) {
        if (elapsed_ns(&start) >= (long)grace_ms * NS_PER_MS) return 0;
        struct timespec pause = {0, step};
        nanosleep(&pause, NULL);
        if (step < EXIT_POLL_LONGEST_NS) step *= 2;
    }
    return 1;
}

void child_stop(oamd_child *child, int grace_ms) {
    if (child->pid <= 0) return;
    if (!wait_exit(child->pid, grace_ms)) {
        kill(child->pid, SIGTERM);
        if (!wait_exit(child->pid, grace_ms)) {
            kill(child->pid, SIGKILL);
            int status;
            while (waitpid(child->pid, &status, 0) < 0 && errno == EINTR) {
            }
        }
    }
    child->pid = 0;
}

int child_owned_here(const oamd_child *child) { return child->owner == getpid(); }

void child_forget(oamd_child *child) {
    child->pid = 0;
    child_free(child);
}

void child_free(oamd_child *child) {
    if (!child) return;
    close_fd(&child->input);
    close_fd(&child->output);
    close_fd(&child->wake_read);
    close_fd(&child->wake_write);
    free(child);
}

/* This library's folder, resolved when it is loaded: a relative dlopen path would mean another
 * folder once the host changes its working directory. */
static char library_folder[PATH_MAX];

__attribute__((constructor)) static void remember_library_folder(void) {
    Dl_info info;
    char resolved[PATH_MAX];
    if (!dladdr((void *)&remember_library_folder, &info) || !info.dli_fname) return;
    if (!realpath(info.dli_fname, resolved)) return;
    char *slash = strrchr(resolved, '/');
    if (!slash) return;
    *slash = '\0';
    snprintf(library_folder, sizeof library_folder, "%s", resolved);
}

char *child_default_executable(void) {
    static const char *const beside[] = {"oamd", "oamd/oamd", "../oamd/oamd"};
    if (!library_folder[0]) return NULL;
    for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
        char path[PATH_MAX + sizeof "/../oamd/oamd"];
        struct stat info;
        int n = snprintf(path, sizeof path, "%s/%s", library_folder, beside[i]);
        if (n > 0 && (size_t)n < sizeof path && stat(path, &info) == 0 && S_ISREG(info.st_mode) && access(path, X_OK) == 0) return strdup(path);
    }
    return NULL;
}

const char *child_executable_name(void) { return "oamd"; }
