#!/usr/bin/env python3
"""bcg_plots.py - the learning curves of `bcg report DIR --plots OUTDIR`.

bcg report runs it as `python3 bcg_plots.py OUTDIR` and writes the groups of
runs to its stdin, one per configuration:

    group<TAB>label
    run<TAB>run directory
    run<TAB>...

Each run's log.h5 gives the curves (datasets samples, wall_time, mean_return
and, for tasks with a reference, track_err in m). For every curve and x axis
(samples, wall time) it writes OUTDIR/<curve>_vs_<x>.png with one line per
group: the mean over the group's runs and a band of +- one standard
deviation, each run's curve interpolated onto a common grid over the range
that all of the group's runs reached (iterations whose value is not finite,
such as a return before the first episode ended, are skipped). A group of one
run is its curve.

Runs whose directory has an eval_curve.h5 (`bcg eval RUN_DIR --curve`, or
[eval] curve = true) add the same figures of E_fixed in MuJoCo and in bcg,
one point for the untrained policy and one per checkpoint
(efixed_mujoco_vs_samples.png, ...): the paper's Figure 5, measured as bcg
eval measures it rather than during training.

Runs evaluated by `bcg eval` (eval.h5) whose config.ini names a contact
model with a kappa add OUTDIR/kappa_penetration.png: the mean foot
penetration of the evaluation's episodes in bcg and in MuJoCo, and their
difference Delta d, against kappa (mean and +- one standard deviation over
the runs of each kappa; the paper's kappa ablation).

A gradstats.h5 written by `bcg gradstats` beside a run (in the run's own
directory or the one above it) adds OUTDIR/gradient_variance.png: the
policy-gradient variance across environments against kappa, one line per
estimator, mean and +- one standard deviation over the repeats (the paper's
Figure 4; several files: gradient_variance_2.png, ...).

Needs matplotlib, numpy and h5py (Debian: python3-matplotlib python3-h5py);
exits with status 3 and a one-line message when one is missing.
"""
import os
import sys

FIGSIZE = (7.0, 4.5)  # inches, at DPI: 700 x 450 pixels
DPI = 100
# (key, file name, y label, scale, prefix of the x keys: "" log.h5, "ec_" eval_curve.h5)
CURVES = [
    ("mean_return", "return", "mean episode return", 1.0, ""),
    ("track_err", "track_err", "tracking error track_err (cm)", 100.0, ""),
    ("efixed_mujoco_cm", "efixed_mujoco", "E_fixed in MuJoCo (cm; bcg eval of each checkpoint)", 1.0, "ec_"),
    ("efixed_bcg_cm", "efixed_bcg", "E_fixed in bcg (cm; bcg eval of each checkpoint)", 1.0, "ec_"),
]
XAXES = [("samples", "samples", "samples (simulated control steps)"), ("wall_time", "wall", "wall time (s)")]


def read_groups(stream):
    groups = []
    for n, line in enumerate(stream, 1):
        line = line.rstrip("\n")
        if not line:
            continue
        kind, _, value = line.partition("\t")
        if kind == "group":
            groups.append((value, []))
        elif kind == "run" and groups:
            groups[-1][1].append(value)
        else:
            raise SystemExit("bcg: error: bcg_plots.py: stdin line %d: expected 'group<TAB>label' or 'run<TAB>dir'" % n)
    return groups


def read_run(h5py, np, run):
    """the run's curves as float arrays, {} when its log cannot be read; its
    eval_curve.h5's with them, the x keys prefixed ec_"""
    try:
        with h5py.File(os.path.join(run, "log.h5"), "r") as f:
            c = {k: np.asarray(f[k][()], dtype=float) for k in ("samples", "wall_time", "mean_return", "track_err")
                 if k in f and getattr(f[k], "ndim", 0) == 1}
    except (OSError, KeyError) as e:
        sys.stderr.write("bcg: warning: bcg_plots.py: %s/log.h5: %s (left out)\n" % (run, e))
        return {}
    path = os.path.join(run, "eval_curve.h5")
    if os.path.isfile(path):
        try:
            with h5py.File(path, "r") as f:
                for k, dest in (("samples", "ec_samples"), ("wall_time", "ec_wall_time"),
                                ("efixed_mujoco_cm", "efixed_mujoco_cm"), ("efixed_bcg_cm", "efixed_bcg_cm")):
                    if k in f and getattr(f[k], "ndim", 0) == 1:
                        c[dest] = np.asarray(f[k][()], dtype=float)
        except (OSError, KeyError) as e:
            sys.stderr.write("bcg: warning: bcg_plots.py: %s: %s (left out)\n" % (path, e))
    return c


def xy(np, c, x, y, scale):
    if x not in c or y not in c:
        return None
    n = min(len(c[x]), len(c[y]))
    xs, ys = c[x][:n], c[y][:n] * scale
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    if len(xs) == 0:
        return None
    order = np.argsort(xs, kind="stable")
    return xs[order], ys[order]


def aggregate(np, curves):
    """mean and std over runs on a common grid (the range all runs reached)"""
    if len(curves) == 1:
        xs, ys = curves[0]
        return xs, ys, None
    lo = max(c[0][0] for c in curves)
    hi = min(c[0][-1] for c in curves)
    if not hi > lo:
        return None
    grid = np.linspace(lo, hi, 200)
    v = np.array([np.interp(grid, xs, ys) for xs, ys in curves])
    return grid, v.mean(axis=0), v.std(axis=0, ddof=1)


def run_kappa(run):
    """[contact] kappa of the run's config.ini, or None"""
    import configparser
    cp = configparser.ConfigParser(strict=False, interpolation=None, inline_comment_prefixes=(";", "#"))
    try:
        cp.read(os.path.join(run, "config.ini"))
        return float(cp.get("contact", "kappa"))
    except (configparser.Error, ValueError, OSError):
        return None


def run_penetration(h5py, np, run):
    """(bcg mm, MuJoCo mm, Delta d mm) of the run's eval.h5, or None"""
    try:
        with h5py.File(os.path.join(run, "eval.h5"), "r") as f:
            pen = [float(np.mean(f[s]["foot_penetration_mm"][()])) if s in f and "foot_penetration_mm" in f[s]
                   else float("nan") for s in ("bcg", "mujoco")]
            dd = float(f["delta_d_mm"][()][0]) if "delta_d_mm" in f else pen[0] - pen[1]
            return pen[0], pen[1], dd
    except (OSError, KeyError, IndexError, ValueError):
        return None


def kappa_figure(plt, h5py, np, groups, out):
    """kappa_penetration.png from the evaluated runs that have a kappa; the path or None"""
    rows = {}
    for _, rs in groups:
        for r in rs:
            k, p = run_kappa(r), run_penetration(h5py, np, r)
            if k is not None and p is not None:
                rows.setdefault(k, []).append(p)
    if not rows:
        return None
    ks = sorted(rows)
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    for i, name in enumerate(("bcg", "MuJoCo", "Delta d = bcg - MuJoCo")):
        vals = [np.array([p[i] for p in rows[k]], dtype=float) for k in ks]
        mean = np.array([np.nanmean(v) if np.isfinite(v).any() else np.nan for v in vals])
        std = np.array([np.nanstd(v, ddof=1) if np.isfinite(v).sum() > 1 else 0.0 for v in vals])
        ax.errorbar(ks, mean, yerr=std, marker="o", capsize=3, lw=1.5, label=name)
    ax.set_xscale("log")
    ax.set_xlabel("kappa (1/m)")
    ax.set_ylabel("foot penetration (mm)")
    ax.set_title("foot penetration after training against kappa: mean and +-1 std over runs", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "kappa_penetration.png")
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def gradstats_files(groups):
    """the gradstats.h5 files beside the runs, each once, in run order"""
    seen, files = set(), []
    for _, rs in groups:
        for r in rs:
            for cand in (os.path.join(r, "gradstats.h5"), os.path.join(r, os.pardir, "gradstats.h5")):
                real = os.path.realpath(cand)
                if real not in seen and os.path.isfile(real):
                    seen.add(real)
                    files.append(real)
    return files


def gradstats_figure(plt, h5py, np, path, out, n):
    """gradient_variance[_n].png of one gradstats.h5; the path written or None"""
    lines = {}
    try:
        with h5py.File(path, "r") as f:
            for name in f:
                g = f[name]
                if "kappa_var_mean_std_norm_mean_std_bundled_n" not in g or "estimator" not in g.attrs and \
                        "estimator" not in g:
                    continue
                v = np.asarray(g["kappa_var_mean_std_norm_mean_std_bundled_n"][()], dtype=float)
                est = g["estimator"][()] if "estimator" in g else g.attrs["estimator"]
                est = est.decode() if isinstance(est, bytes) else str(est)
                lines.setdefault(est, []).append((v[0], v[1], v[2]))
    except (OSError, KeyError, ValueError) as e:
        sys.stderr.write("bcg: warning: bcg_plots.py: %s: %s (left out)\n" % (path, e))
        return None
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    for est in sorted(lines):
        pts = sorted(lines[est])
        ks = [p[0] for p in pts]
        ax.errorbar(ks, [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3, lw=1.5, label=est)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kappa (1/m)")
    ax.set_ylabel("policy-gradient variance across environments")
    ax.set_title("gradient variance per estimator and kappa (bcg gradstats): mean and +-1 std", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize="small")
    fig.tight_layout()
    os.makedirs(out, exist_ok=True)
    dest = os.path.join(out, "gradient_variance%s.png" % ("" if n == 1 else "_%d" % n))
    fig.savefig(dest, dpi=DPI)
    plt.close(fig)
    return dest


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: bcg_plots.py OUTDIR < groups (bcg report DIR --plots OUTDIR runs it)\n")
        return 2
    out = sys.argv[1]
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
        import h5py
    except ImportError as e:
        sys.stderr.write("bcg: error: report --plots needs matplotlib, numpy and h5py for %s (Debian: apt install "
                         "python3-matplotlib python3-h5py): %s\n" % (sys.executable, e))
        return 3
    groups = read_groups(sys.stdin)
    runs = {r: read_run(h5py, np, r) for _, rs in groups for r in rs}
    written = 0
    for key, short, ylabel, scale, xprefix in CURVES:
        for xkey, xshort, xlabel in XAXES:
            xkey = xprefix + xkey
            fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
            lines = 0
            for label, rs in groups:
                curves = [c for c in (xy(np, runs[r], xkey, key, scale) for r in rs) if c is not None]
                if not curves:
                    continue
                agg = aggregate(np, curves)
                if agg is None:  # runs without a common range: each on its own
                    for xs, ys in curves:
                        ax.plot(xs, ys, lw=1, alpha=0.6)
                    continue
                grid, mean, std = agg
                (ln,) = ax.plot(grid, mean, lw=1.5, label="%s (%d run%s)" % (label, len(curves),
                                                                            "" if len(curves) == 1 else "s"))
                if std is not None:  # E_fixed and track_err are never negative: the band stops at 0
                    lo = mean - std if key in ("mean_return",) else np.maximum(mean - std, 0.0)
                    ax.fill_between(grid, lo, mean + std, color=ln.get_color(), alpha=0.2, lw=0)
                lines += 1
            if lines == 0:
                plt.close(fig)
                continue
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.set_title("%s against %s: mean and +-1 std over runs" % (short, "samples" if xshort == "samples"
                                                                        else "wall time"), fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
            fig.tight_layout()
            path = os.path.join(out, "%s_vs_%s.png" % (short, xshort))
            try:
                os.makedirs(out, exist_ok=True)
            except OSError as e:
                sys.stderr.write("bcg: error: report --plots: %s: %s\n" % (out, e.strerror))
                return 3
            fig.savefig(path, dpi=DPI)
            plt.close(fig)
            print("wrote %s" % path)
            written += 1
    kpath = kappa_figure(plt, h5py, np, groups, out)
    if kpath:
        print("wrote %s" % kpath)
        written += 1
    for n, gpath in enumerate(gradstats_files(groups), 1):
        dest = gradstats_figure(plt, h5py, np, gpath, out, n)
        if dest:
            print("wrote %s" % dest)
            written += 1
    if written == 0:
        sys.stderr.write("bcg: error: report --plots: no run has a curve to plot (samples with mean_return or "
                         "track_err in log.h5)\n")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
