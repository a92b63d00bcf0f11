#!/usr/bin/env python3
"""trace_plot.py - draw a `bcg eval --trace` file: where the root went in each simulator.

    python3 tools/trace_plot.py TRACE.h5 OUT.png [--title TEXT] [--dt SECONDS]

TRACE.h5 is what `bcg eval RUN --trace TRACE.h5` writes (docs/usage.md section
4): per simulator (groups `bcg` and `mujoco`) the states x [runs][steps + 1]
[nq + nv] and the episodes' lengths. For a model with a free root (qpos
starts with the root's position x y z) it draws two panels: the root's path
seen from above (x against y, one line per episode, bcg solid, MuJoCo dashed,
a cross where an episode ended in a fall before the last step) and the
root's height over time. --dt is the control step (default 0.02 s, the
shipped configs'). Prints one line per simulator: episodes, falls (episodes
shorter than the longest), the mean final x and the mean |final y|.

Needs matplotlib, numpy and h5py (Debian: python3-matplotlib python3-h5py);
exits with status 3 and a one-line message when one is missing, 2 on bad
arguments or a file that is not a trace.
"""
import sys

FIGSIZE = (10.0, 4.2)  # inches, at DPI: 1000 x 420 pixels
DPI = 100
STYLE = {"bcg": ("-", "bcg"), "mujoco": ("--", "MuJoCo")}


def fail(code, msg):
    print("trace_plot: " + msg, file=sys.stderr)
    sys.exit(code)


def parse(argv):
    args, title, dt = [], None, 0.02
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--title", "--dt"):
            if i + 1 >= len(argv):
                fail(2, a + " needs a value")
            if a == "--title":
                title = argv[i + 1]
            else:
                try:
                    dt = float(argv[i + 1])
                except ValueError:
                    fail(2, "--dt: not a number: " + argv[i + 1])
                if not dt > 0:
                    fail(2, "--dt must be positive")
            i += 2
            continue
        if a.startswith("--"):
            fail(2, "unknown option " + a)
        args.append(a)
        i += 1
    if len(args) != 2:
        fail(2, "usage: trace_plot.py TRACE.h5 OUT.png [--title TEXT] [--dt SECONDS]")
    return args[0], args[1], title, dt


def main():
    path, out, title, dt = parse(sys.argv[1:])
    try:
        import h5py
        import numpy as np
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        fail(3, "needs matplotlib, numpy and h5py (%s)" % e)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        fail(2, "%s: cannot open as HDF5 (%s)" % (path, e))
    sims = [s for s in ("bcg", "mujoco") if s in f]
    if not sims:
        fail(2, "%s: no 'bcg' or 'mujoco' group: not a bcg eval --trace file" % path)
    fig, (ax_xy, ax_h) = plt.subplots(1, 2, figsize=FIGSIZE, dpi=DPI)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for sim in sims:
        g = f[sim]
        if "x" not in g or "length" not in g:
            fail(2, "%s: group '%s' lacks x or length" % (path, sim))
        x, lengths = g["x"][()], g["length"][()].astype(int)
        if x.ndim != 3 or x.shape[2] < 3 or x.shape[0] != lengths.shape[0]:
            fail(2, "%s: %s/x has shape %s: expected [runs][steps + 1][nq + nv]" % (path, sim, x.shape))
        ls, label = STYLE[sim]
        full = int(lengths.max())
        ends = []
        for e in range(x.shape[0]):
            n = min(int(lengths[e]), x.shape[1] - 1)
            p = x[e, : n + 1, :3]
            c = colours[e % len(colours)]
            ax_xy.plot(p[:, 0], p[:, 1], ls, color=c, lw=1.2, label="%s, episode %d" % (label, e) if e == 0 else None)
            ax_h.plot(np.arange(n + 1) * dt, p[:, 2], ls, color=c, lw=1.0)
            if n < full:
                ax_xy.plot(p[-1, 0], p[-1, 1], "x", color=c, ms=8, mew=2)
            ends.append(p[-1])
        ends = np.array(ends)
        falls = int(np.sum(lengths < full))
        print(
            "%-7s %d episodes, %d shorter than the longest (%d steps), final x %.2f m (mean), |final y| %.2f m (mean)"
            % (label, x.shape[0], falls, full, ends[:, 0].mean(), np.abs(ends[:, 1]).mean())
        )
    ax_xy.set_xlabel("root x (m)")
    ax_xy.set_ylabel("root y (m)")
    ax_xy.set_aspect("equal", adjustable="datalim")
    ax_xy.grid(alpha=0.3)
    ax_xy.set_title("root path from above (bcg solid, MuJoCo dashed; x: fall)", fontsize=9)
    ax_h.set_xlabel("time (s)")
    ax_h.set_ylabel("root height (m)")
    ax_h.grid(alpha=0.3)
    ax_h.set_title("root height", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(out)
    except OSError as e:
        fail(2, "%s: cannot write (%s)" % (out, e))
    print("written: " + out)


if __name__ == "__main__":
    main()
