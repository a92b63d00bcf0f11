#!/usr/bin/env python3
"""trace_mismatch.py - where bcg and MuJoCo part, from a `bcg eval --trace` file.

    python3 tools/trace_mismatch.py TRACE.h5 [--model MJCF] [--top N] [--dt SECONDS]

For every MuJoCo step of every episode the trace holds MuJoCo's state and
bcg's prediction of the next state from it (`mujoco/bcg_next`: one bcg
control step taken from MuJoCo's state with the same action). Their
difference in the velocities is the one-step model mismatch: what the two
simulators do differently from the same state, before any drift. This
prints:

- its size over all steps (median, 90th and 99th percentile, rad/s and m/s
  mixed as they come in qvel);
- which degrees of freedom carry it: each dof's share of the summed squared
  mismatch, largest first;
- the steps with self-contact in MuJoCo (which bcg does not model) against
  the others;
- the N largest single steps: episode, time, the root height and the three
  dofs that differ most.

--model names the dofs (the MJCF the run used; needs the `mujoco` Python
package), else they are numbered (0-5: the free root's linear and angular
velocity when the model has one). --dt is the control step (default 0.02 s).

Needs numpy and h5py (Debian: python3-numpy python3-h5py); exits with status
3 and a one-line message when one is missing, 2 on bad arguments or a file
that is not a trace.
"""
import sys


def fail(code, msg):
    print("trace_mismatch: " + msg, file=sys.stderr)
    sys.exit(code)


def parse(argv):
    opts = {"model": None, "top": 8, "dt": 0.02}
    args = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--model", "--top", "--dt"):
            if i + 1 >= len(argv):
                fail(2, a + " needs a value")
            v = argv[i + 1]
            try:
                opts[a[2:]] = v if a == "--model" else (int(v) if a == "--top" else float(v))
            except ValueError:
                fail(2, "%s: not a number: %s" % (a, v))
            i += 2
        elif a.startswith("-"):
            fail(2, "unknown option " + a)
        else:
            args.append(a)
            i += 1
    if len(args) != 1:
        fail(2, "usage: trace_mismatch.py TRACE.h5 [--model MJCF] [--top N] [--dt SECONDS]")
    if opts["top"] < 0 or not opts["dt"] > 0:
        fail(2, "--top must be >= 0 and --dt > 0")
    return args[0], opts


def dof_names(model_path, nv):
    """the dofs' names from the MJCF (nv None: any number), else their numbers"""
    if not model_path:
        return [str(k) for k in range(nv)]
    try:
        import mujoco
    except ImportError:
        fail(3, "--model needs the mujoco Python package (pip install mujoco)")
    try:
        m = mujoco.MjModel.from_xml_path(model_path)
    except Exception as e:  # the compiler's message, on one line
        fail(2, "%s: %s" % (model_path, str(e).splitlines()[0] if str(e) else "does not compile"))
    if nv is not None and m.nv != nv:
        fail(2, "%s has nv = %d, the trace's states have %d velocities" % (model_path, m.nv, nv))
    names = []
    for j in range(m.njnt):
        n = m.joint(j).name or ("joint%d" % j)
        t = m.jnt_type[j]
        if t == 0:  # free
            names += [n + s for s in ("_vx", "_vy", "_vz", "_wx", "_wy", "_wz")]
        elif t == 1:  # ball
            names += [n + s for s in ("_wx", "_wy", "_wz")]
        else:
            names.append(n)
    return names


def main(argv):
    path, o = parse(argv)
    try:
        import numpy as np
        import h5py
    except ImportError as e:
        fail(3, "needs numpy and h5py (%s)" % e)
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        fail(2, "%s: %s" % (path, e))
    need = ("mujoco/x", "mujoco/bcg_next", "mujoco/length")
    for k in need:
        if k not in f:
            fail(2, "%s: no %s: not a `bcg eval --trace` file with MuJoCo (use --sim both or mujoco)" % (path, k))
    xm = f["mujoco/x"][:]
    pred = f["mujoco/bcg_next"][:]
    lens = f["mujoco/length"][:]
    sc = f["mujoco/self_contact"][:] if "mujoco/self_contact" in f else np.zeros(pred.shape[:2])
    runs, nx = pred.shape[0], pred.shape[2]
    if "dims_nq_nv_nu" in f:  # written by bcg eval --trace since 2026-12-05
        nq, nv = (int(v) for v in f["dims_nq_nv_nu"][:2])
        names = dof_names(o["model"], nv)
    elif o["model"]:
        names = dof_names(o["model"], None)
        nv = len(names)
        nq = nx - nv
    else:
        fail(2, "%s: an older trace without dims_nq_nv_nu: pass --model MJCF to split its states" % path)
    if nq + nv != nx:
        fail(2, "%s: states of %d values, not nq %d + nv %d" % (path, nx, nq, nv))
    D, S, where = [], [], []
    for r in range(runs):
        T = int(lens[r])
        if T < 1:
            continue
        D.append(pred[r, :T, nq:] - xm[r, 1:T + 1, nq:])
        S.append(sc[r, :T] > 0)
        where += [(r, t) for t in range(T)]
    if not D:
        fail(2, "%s: no MuJoCo steps" % path)
    D = np.concatenate(D)
    S = np.concatenate(S)
    e = np.linalg.norm(D, axis=1)
    print("%s: %d episodes, %d MuJoCo steps; one-step velocity mismatch |bcg_next - mujoco_next| (qvel units)"
          % (path, runs, len(e)))
    print("  median %.3f, 90%% %.3f, 99%% %.3f, largest %.3f"
          % (np.median(e), np.percentile(e, 90), np.percentile(e, 99), e.max()))
    tot = (D ** 2).sum(0)
    share = tot / tot.sum() if tot.sum() > 0 else tot
    order = np.argsort(share)[::-1]
    print("  share of the squared mismatch by dof: " +
          ", ".join("%s %.1f%%" % (names[k], 100 * share[k]) for k in order[:8]))
    if S.any():
        print("  MuJoCo self-contact in %d steps (%.1f%%): mean mismatch %.3f there, %.3f elsewhere"
              % (S.sum(), 100 * S.mean(), e[S].mean(), e[~S].mean()))
    else:
        print("  no MuJoCo self-contact in these steps")
    top = np.argsort(e)[::-1][:o["top"]]
    for i in sorted(top, key=lambda i: where[i]):
        r, t = where[i]
        d = np.abs(D[i])
        k3 = np.argsort(d)[::-1][:3]
        z = xm[r, t, 2] if nq == nv + 1 else float("nan")
        print("  episode %d, t = %5.2f s: %7.3f  root z %.3f%s  largest: %s"
              % (r, t * o["dt"], e[i], z, ", self-contact" if S[i] else "",
                 ", ".join("%s %+.2f" % (names[k], D[i][k]) for k in k3)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
