#!/usr/bin/env python3
"""A/B of sandbox binaries, one-shot: python3 xtask/scripts/ab_oneshot.py BIN1,BIN2[,..] [rows] [rounds] [prefix].

Each round runs every row with every binary, the order alternating; CPU time of the run and
its reaped descendants from wait4; medians printed per row. Run from anywhere; the runs start
in /var/tmp with a bare environment (PATH, HOME, LANG), stdio on /dev/null."""
import os, sys, statistics
bins = sys.argv[1].split(',')
rows = {
 'engine': ['run','--allow-root','--profile','unrestricted','--landlock','off','--isolation','off','--network','host','--','/bin/true'],
 'minimal': ['run','--allow-root','--profile','minimal','--','/bin/true'],
 'minimal-none': ['run','--allow-root','--profile','minimal','--network','none','--','/bin/true'],
}
sel = sys.argv[2].split(',') if len(sys.argv)>2 else list(rows)
n = int(sys.argv[3]) if len(sys.argv)>3 else 100
pre = sys.argv[4].split() if len(sys.argv)>4 else []
env = {'PATH':'/usr/bin:/bin','HOME':os.environ.get('ABHOME','/root'),'LANG':'C.UTF-8'}
res = {(b,r):[] for b in bins for r in sel}
devnull = os.open('/dev/null', os.O_RDWR)
os.chdir('/var/tmp')
for i in range(n):
    order = bins if i%2==0 else bins[::-1]
    for r in sel:
        for b in order:
            argv = pre + [b] + rows[r]
            pid = os.fork()
            if pid == 0:
                os.dup2(devnull,0); os.dup2(devnull,1); os.dup2(devnull,2)
                os.execve(argv[0], argv, env)
            _, st, ru = os.wait4(pid, 0)
            res[(b,r)].append((ru.ru_utime+ru.ru_stime)*1000)
for r in sel:
    print(r, '  '.join('%s=%.3f' % (os.path.basename(b), statistics.median(res[(b,r)])) for b in bins))
