#!/usr/bin/env python3
"""What a supervised connect costs: python3 xtask/scripts/connect_cost.py BEFORE AFTER [rounds] [dir].

BEFORE and AFTER are two builds of `sandbox`. Each round runs, for each build in turn (the
order interleaved), a C program (`-O2`) under `sandbox run --allow-root --profile
shell-network` in a workspace DIR/ws (default /var/tmp/connect-cost): it binds a unix listener
of its own in the workspace and a TCP listener of its own on 127.0.0.1, then makes 2,000
connects (each accepted and closed) to each, and prints the microseconds a connect of each
loop took (CLOCK_MONOTONIC, the loop's own time). The medians over the rounds are printed with
their range. Bare environment (PATH, HOME, LANG), stdin /dev/null; run as root."""
import os, statistics, subprocess, sys

SOURCE = r'''
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>
static double now(void) {
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
int main(int argc, char **argv) {
    int n = 2000;
    struct sockaddr_un u; memset(&u, 0, sizeof u); u.sun_family = AF_UNIX;
    strncpy(u.sun_path, argv[1], sizeof u.sun_path - 1); unlink(argv[1]);
    int ul = socket(AF_UNIX, SOCK_STREAM, 0);
    if (bind(ul, (void *)&u, sizeof u) || listen(ul, 64)) { perror("unix"); return 1; }
    struct sockaddr_in t; memset(&t, 0, sizeof t);
    t.sin_family = AF_INET; t.sin_addr.s_addr = htonl(0x7f000001);
    int tl = socket(AF_INET, SOCK_STREAM, 0); socklen_t len = sizeof t;
    if (bind(tl, (void *)&t, sizeof t) || listen(tl, 64) || getsockname(tl, (void *)&t, &len)) {
        perror("tcp"); return 1;
    }
    double a = now();
    for (int i = 0; i < n; i++) {
        int c = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(c, (void *)&u, sizeof u)) { perror("connect unix"); return 1; }
        close(accept(ul, 0, 0)); close(c);
    }
    double b = now();
    for (int i = 0; i < n; i++) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(c, (void *)&t, sizeof t)) { perror("connect tcp"); return 1; }
        close(accept(tl, 0, 0)); close(c);
    }
    double e = now();
    printf("%.1f %.1f\n", (b - a) / n, (e - b) / n);
    unlink(argv[1]);
    return 0;
}
'''

builds = {'before': os.path.abspath(sys.argv[1]), 'after': os.path.abspath(sys.argv[2])}
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 9
base = sys.argv[4] if len(sys.argv) > 4 else '/var/tmp/connect-cost'
ws = os.path.join(base, 'ws')
os.makedirs(ws, exist_ok=True)
with open(os.path.join(base, 'connects.c'), 'w') as f:
    f.write(SOURCE)
program = os.path.join(base, 'connects')
subprocess.run(['gcc', '-O2', '-o', program, program + '.c'], check=True)
env = {'PATH': '/usr/bin:/bin', 'HOME': '/root', 'LANG': 'C.UTF-8'}
times = {name: [] for name in builds}
for r in range(rounds):
    order = list(builds) if r % 2 == 0 else list(reversed(builds))
    for name in order:
        out = subprocess.run(
            [builds[name], 'run', '--allow-root', '--profile', 'shell-network', '--', program,
             os.path.join(ws, 'u.sock')],
            cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            check=True)
        times[name].append(tuple(float(x) for x in out.stdout.split()))
for name, got in times.items():
    unix, tcp = [g[0] for g in got], [g[1] for g in got]
    print(f'{name}: unix {statistics.median(unix):.1f} us ({min(unix)}-{max(unix)}), '
          f'tcp {statistics.median(tcp):.1f} us ({min(tcp)}-{max(tcp)}), {len(got)} rounds')
