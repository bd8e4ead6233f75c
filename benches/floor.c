/*
 * The floor for `gateway exec --policy strict -- true` on this machine: a minimal static C
 * program that does the same confinement steps as gateway's sandbox, with nothing else (no
 * policy, no output forwarding, no error reporting, no cgroup, no timeout). The spawn benchmark
 * (benches/spawn.rs) compiles it with gcc and times it beside gateway, so the README's figures
 * say how far gateway is from what this design can cost at all on the machine.
 *
 *   floor wrapper  PROGRAM                 vfork+exec PROGRAM and wait: no confinement
 *   floor confined PROGRAM BPF TMP R W X   the sandbox: BPF is a file of raw sock_filter
 *                                          records (gateway's own seccomp program); R, W, X
 *                                          are colon-separated path lists (landlock read,
 *                                          write, execute); TMP is the private TMPDIR mount
 *                                          point.
 *
 * Confined: a helper cloned into new mount, pid, ipc and network namespaces (fork semantics,
 * as gateway; strict's `none` network gets an empty network namespace) makes mounts private,
 * mounts a tmpfs on TMP and /dev/shm and a fresh /proc, then starts PROGRAM with
 * clone(CLONE_VM|CLONE_VFORK); the command starts a session, locks securebits, empties the
 * bounding, ambient and other capability sets, sets no_new_privs,
 * applies the landlock ruleset (built by the parent) and the seccomp filter, and execs. The
 * helper reaps it, kills the rest of the namespace, and exits; the parent waits.
 *
 * Benchmark-only code: every step is checked and a failure exits non-zero, nothing more.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

struct ruleset_attr {
    uint64_t fs, net, scoped;
};
struct __attribute__((packed)) path_beneath {
    uint64_t access;
    int32_t fd;
};

#define FS_EXECUTE (1ULL << 0)
#define FS_READ_FILE (1ULL << 2)
#define FS_READ_DIR (1ULL << 3)
/* Rights valid on a regular file (landlock: execute, write, read, truncate, ioctl_dev). */
#define FS_FILE_RIGHTS ((1ULL << 0) | (1ULL << 1) | (1ULL << 2) | (1ULL << 14) | (1ULL << 15))

static struct sock_fprog prog;
static int ruleset = -1;
static char *const *cmd_argv;
static char stack[256 * 1024];
static char *const env[] = {"PATH=/usr/bin:/bin", NULL};

static void die(const char *what) {
    perror(what);
    _exit(125);
}

static int command(void *arg) {
    (void)arg;
    if (setsid() < 0) die("setsid");
    /* NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE and their locks. */
    if (prctl(PR_SET_SECUREBITS, 0xef, 0, 0, 0)) die("securebits");
    for (int c = 0; c <= 40; c++)
        if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0)) die("capbset");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)) die("ambient");
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{0}};
    if (syscall(SYS_capset, &h, d)) die("capset");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) die("no_new_privs");
    if (ruleset >= 0 && syscall(SYS_landlock_restrict_self, ruleset, 0)) die("landlock");
    if (prog.len && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) die("seccomp");
    execve(cmd_argv[0], cmd_argv, env);
    die("execve");
    return 127;
}

static int run_command(void) {
    pid_t c = clone(command, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, NULL);
    if (c < 0) die("clone command");
    int st;
    if (waitpid(c, &st, 0) != c) die("waitpid");
    return st;
}

static void add_rules(char *list, uint64_t access) {
    for (char *p = strtok(list, ":"); p; p = strtok(NULL, ":")) {
        int fd = open(p, O_PATH | O_CLOEXEC);
        if (fd < 0) continue;
        struct path_beneath pb = {access, fd};
        if (syscall(SYS_landlock_add_rule, ruleset, 1, &pb, 0)) {
            pb.access = access & FS_FILE_RIGHTS;
            if (syscall(SYS_landlock_add_rule, ruleset, 1, &pb, 0)) die("landlock_add_rule");
        }
        close(fd);
    }
}

int main(int argc, char **argv) {
    static char *program[2];
    if (argc == 3 && !strcmp(argv[1], "wrapper")) {
        program[0] = argv[2];
        cmd_argv = program;
        int st = run_command();
        return WIFEXITED(st) ? WEXITSTATUS(st) : 125;
    }
    if (argc != 8 || strcmp(argv[1], "confined")) {
        fprintf(stderr, "usage: floor wrapper PROGRAM | floor confined PROGRAM BPF TMP R W X\n");
        return 2;
    }
    program[0] = argv[2];
    cmd_argv = program;
    static struct sock_filter filter[4096];
    int f = open(argv[3], O_RDONLY);
    if (f < 0) die(argv[3]);
    ssize_t n = read(f, filter, sizeof filter);
    close(f);
    if (n <= 0 || n % 8) die("bpf file");
    prog.len = n / 8;
    prog.filter = filter;
    const char *tmp = argv[4];

    int abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1);
    if (abi < 1) die("landlock abi");
    struct ruleset_attr ra = {(1ULL << 16) - 1, abi >= 4 ? 3 : 0, abi >= 6 ? 3 : 0};
    if (abi < 5) ra.fs = (1ULL << 15) - 1;
    ruleset = syscall(SYS_landlock_create_ruleset, &ra, sizeof ra, 0);
    if (ruleset < 0) die("landlock_create_ruleset");
    add_rules(argv[5], FS_READ_FILE | FS_READ_DIR);
    add_rules(argv[6], ra.fs);
    add_rules(argv[7], FS_READ_FILE | FS_READ_DIR | FS_EXECUTE);

    pid_t p = syscall(SYS_clone, CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0);
    if (p < 0) die("clone helper");
    if (p == 0) {
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) die("private");
        if (mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700")) die("tmpfs");
        if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777")) die("shm");
        if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) die("proc");
        int st = run_command();
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0) {
        }
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 125);
    }
    int st;
    if (waitpid(p, &st, 0) != p) die("waitpid helper");
    return WIFEXITED(st) ? WEXITSTATUS(st) : 125;
}
