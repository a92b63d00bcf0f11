#!/usr/bin/env python3
"""trace_mismatch.py - where bcg and MuJoCo part, from a `bcg eval --trace` file.

    python3 tools/trace_mismatch.py TRACE.h5 [--model MJCF] [--top N] [--dt SECONDS]
    python3 tools/trace_mismatch.py TRACE.h5 --model MJCF --replay [KEY=VALUE ...]

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

--replay re-steps MuJoCo from every recorded state with the recorded control
(the trace's servos: bcg's PD law; the implicit integrator, timestep and
steps per control step as `bcg eval` ran them), through the `mujoco`
Python package, after changing MuJoCo's settings KEY=VALUE:

    timestep=S            MuJoCo's step (the control step is kept)
    solref=TC,DR          every geom's contact solref (time constant, damping ratio)
    solimp=D0,D1,W        every geom's contact solimp (first three values)
    cone=pyramidal|elliptic   impratio=R   noslip_iterations=N
    integrator=euler|implicit|implicitfast|rk4

and prints how far the replayed next states lie from MuJoCo's recorded ones
(with no KEY=VALUE: the check that the replay reproduces the trace) and
from bcg's step (mujoco/bcg_next): which of MuJoCo's settings, if any,
brings MuJoCo's step to bcg's, state for state.

Needs numpy and h5py (Debian: python3-numpy python3-h5py); exits with status
3 and a one-line message when one is missing, 2 on bad arguments or a file
that is not a trace.
"""
import sys


def fail(code, msg):
    print("trace_mismatch: " + msg, file=sys.stderr)
    sys.exit(code)


def parse(argv):
    opts = {"model": None, "top": 8, "dt": 0.02, "replay": None}
    args = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--replay":
            opts["replay"] = []
            i += 1
            while i < len(argv) and "=" in argv[i] and not argv[i].startswith("-"):
                opts["replay"].append(argv[i])
                i += 1
            continue
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
        fail(2, "usage: trace_mismatch.py TRACE.h5 [--model MJCF] [--top N] [--dt SECONDS] [--replay [KEY=VALUE ...]]")
    if opts["replay"] is not None and not opts["model"]:
        fail(2, "--replay needs --model MJCF (the model the run used)")
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


REPLAY_KEYS = ("timestep", "solref", "solimp", "cone", "impratio", "noslip_iterations", "integrator")


def replay_model(f, model_path, settings):
    """MuJoCo's model as `bcg eval` drove it, then the settings; returns (model, substeps)"""
    import mujoco
    if "mujoco_timestep_substeps" not in f or "mujoco/ctrl" not in f:
        fail(2, "the trace has no mujoco/ctrl: written by an older bcg eval --trace; trace the run again")
    m = mujoco.MjModel.from_xml_path(model_path)
    dt, sub = (float(v) for v in f["mujoco_timestep_substeps"][:])
    if "mujoco_pd_kp_kd_taumax" in f:
        pd = f["mujoco_pd_kp_kd_taumax"][:]
        if pd.shape[0] != m.nu:
            fail(2, "%s has %d actuators, the trace's servos %d" % (model_path, m.nu, pd.shape[0]))
        for i in range(m.nu):
            kp, kd, tm = pd[i]
            m.actuator_gaintype[i] = mujoco.mjtGain.mjGAIN_FIXED
            m.actuator_biastype[i] = mujoco.mjtBias.mjBIAS_AFFINE
            m.actuator_gainprm[i, :] = 0
            m.actuator_biasprm[i, :] = 0
            m.actuator_gainprm[i, 0] = kp
            m.actuator_biasprm[i, 1] = -kp
            m.actuator_biasprm[i, 2] = -kd
            m.actuator_gear[i, :] = 0
            m.actuator_gear[i, 0] = 1
            m.actuator_ctrllimited[i] = 0
            m.actuator_forcelimited[i] = 1 if tm > 0 else 0
            if tm > 0:
                m.actuator_forcerange[i, :] = (-tm, tm)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICIT
    m.opt.timestep = dt
    control_dt = dt * sub
    for kv in settings:
        k, v = kv.split("=", 1)
        try:
            if k == "timestep":
                m.opt.timestep = float(v)
                sub = round(control_dt / float(v))
                if sub < 1 or abs(sub * float(v) - control_dt) > 1e-9 * control_dt:
                    fail(2, "timestep=%s does not divide the control step %g s" % (v, control_dt))
            elif k == "solref":
                a, b = (float(x) for x in v.split(","))
                m.geom_solref[:, 0], m.geom_solref[:, 1] = a, b
            elif k == "solimp":
                vals = [float(x) for x in v.split(",")]
                if len(vals) != 3:
                    fail(2, "solimp=%s: three values D0,D1,WIDTH" % v)
                m.geom_solimp[:, :3] = vals
            elif k == "cone":
                m.opt.cone = {"pyramidal": 0, "elliptic": 1}[v]
            elif k == "impratio":
                m.opt.impratio = float(v)
            elif k == "noslip_iterations":
                m.opt.noslip_iterations = int(v)
            elif k == "integrator":
                m.opt.integrator = {"euler": 0, "rk4": 1, "implicit": 2, "implicitfast": 3}[v]
            else:
                fail(2, "--replay: unknown setting %s (one of %s)" % (k, ", ".join(REPLAY_KEYS)))
        except (ValueError, KeyError):
            fail(2, "--replay: bad value in %s" % kv)
    d = mujoco.MjData(m)
    mujoco.mj_setConst(m, d)
    return m, int(sub)


def replay(f, o, nq, nv, np):
    import mujoco
    m, sub = replay_model(f, o["model"], o["replay"])
    if m.nq != nq or m.nv != nv:
        fail(2, "%s has nq %d, nv %d; the trace %d, %d" % (o["model"], m.nq, m.nv, nq, nv))
    xm, pred, lens, ctrl = f["mujoco/x"][:], f["mujoco/bcg_next"][:], f["mujoco/length"][:], f["mujoco/ctrl"][:]
    d = mujoco.MjData(m)
    to_mj, to_bcg, rec = [], [], []
    for r in range(pred.shape[0]):
        for t in range(int(lens[r])):
            mujoco.mj_resetData(m, d)
            d.qpos[:] = xm[r, t, :nq]
            d.qvel[:] = xm[r, t, nq:]
            d.ctrl[:] = ctrl[r, t]
            for _ in range(sub):
                mujoco.mj_step(m, d)
            to_mj.append(np.linalg.norm(d.qvel - xm[r, t + 1, nq:]))
            to_bcg.append(np.linalg.norm(d.qvel - pred[r, t, nq:]))
            rec.append(np.linalg.norm(pred[r, t, nq:] - xm[r, t + 1, nq:]))
    if not to_mj:
        fail(2, "no MuJoCo steps to replay")

    def q(v):
        v = np.asarray(v)
        return "median %.3f, 90%% %.3f, 99%% %.3f, largest %.3f" % (
            np.median(v), np.percentile(v, 90), np.percentile(v, 99), v.max())
    what = " ".join(o["replay"]) or "MuJoCo's settings as run"
    print("replay of %d MuJoCo steps (mujoco %s) with %s; |dqvel| of the next state:" % (len(to_mj), mujoco.__version__, what))
    print("  replay vs MuJoCo's recorded step: " + q(to_mj))
    print("  replay vs bcg's step:             " + q(to_bcg))
    print("  recorded MuJoCo vs bcg's step:    " + q(rec))
    if not o["replay"] and np.median(to_mj) > 1e-6:
        print("  (the replay does not reproduce the trace: another MuJoCo version, or another model file?)")
    return 0


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
    if o["replay"] is not None:
        return replay(f, o, nq, nv, np)
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
