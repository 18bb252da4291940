#!/usr/bin/env python3
"""What naming refusals costs on a real suite: python3 xtask/scripts/refusal_cost.py SANDBOX [rounds] [dir].

Runs packaging 24.1's own test suite (pytest, about 27,000 tests) inside `sandbox run --profile
shell` as uid 65534, the way an agent runs it: bare environment (PATH, HOME, LANG), stdin
/dev/null, stdout and stderr one file (`> log 2>&1`), so that the host's copy of the program's
stderr (module `tee`) passes every byte of the output and the refusal search reads it. Each
round runs it twice, the order alternating: naming on (the default), and with
SANDBOX_BENCH_NO_TEE=1 (the program writes the log itself, nothing is searched). CPU time is
the run's and every reaped descendant's (wait4); the medians and their ratio are printed, and
each run's pytest summary must be the same.

The suite and its test dependencies are fetched once from PyPI into DIR (default
/var/tmp/refusal-cost), outside the sandbox, as uid 65534. Needs root (for setpriv)."""
import os, statistics, subprocess, sys, time

sandbox = os.path.abspath(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
base = sys.argv[3] if len(sys.argv) > 3 else '/var/tmp/refusal-cost'
nobody = ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', '--']
env = {'PATH': '/usr/bin:/bin', 'HOME': '/nonexistent', 'LANG': 'C.UTF-8'}
src = os.path.join(base, 'packaging-24.1')

if not os.path.isdir(src):
    os.makedirs(base, exist_ok=True)
    os.chown(base, 65534, 65534)
    fetch = ('python3 -m venv .venv && .venv/bin/pip install -q pytest pretend && '
             '.venv/bin/pip download -q --no-deps --no-binary :all: packaging==24.1 -d dl && '
             'tar xzf dl/packaging-24.1.tar.gz')
    subprocess.run(nobody + ['bash', '-c', fetch], cwd=base, check=True,
                   env=dict(env, HOME=base), stdin=subprocess.DEVNULL)

suite = 'PYTHONPATH=src ../.venv/bin/python -m pytest -q -p no:cacheprovider tests'
argv = nobody + [sandbox, 'run', '--profile', 'shell', '--workspace', base, '--',
                 'bash', '-c', suite]
devnull = os.open('/dev/null', os.O_RDONLY)
cpu = {'on': [], 'off': []}
wall = {'on': [], 'off': []}
summaries = set()
for i in range(rounds):
    for kind in (('on', 'off') if i % 2 == 0 else ('off', 'on')):
        log = os.path.join(base, 'log-%s' % kind)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        e = dict(env)
        if kind == 'off':
            e['SANDBOX_BENCH_NO_TEE'] = '1'
        t0 = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.chdir(src)
            os.dup2(devnull, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.execvpe(argv[0], argv, e)
        _, status, ru = os.wait4(pid, 0)
        wall[kind].append(time.monotonic() - t0)
        os.close(out)
        text = open(log, errors='replace').read()
        last = [l for l in text.splitlines() if ' passed' in l][-1:]
        summaries.add(last[0].split(' in ')[0] if last else 'no summary')
        cpu[kind].append(ru.ru_utime + ru.ru_stime)
        print('round %d %-3s: cpu %.2f s, wall %.1f s, exit %d, %d bytes of output, %s'
              % (i + 1, kind, cpu[kind][-1], wall[kind][-1], os.waitstatus_to_exitcode(status),
                 len(text), last[0] if last else 'no summary'), flush=True)
if len(summaries) != 1:
    sys.exit('the runs differ: %s' % summaries)
on, off = statistics.median(cpu['on']), statistics.median(cpu['off'])
print('median cpu: naming on %.2f s, off %.2f s: %+.1f%%; median wall: on %.1f s, off %.1f s'
      % (on, off, (on / off - 1) * 100, statistics.median(wall['on']),
         statistics.median(wall['off'])))
