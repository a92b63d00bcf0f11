/* cmd_render.c - `bcg render RUN_DIR|CHECKPOINT`: the trained policy's
 * rollout drawn by MuJoCo's offscreen renderer, headless on the CPU (OSMesa),
 * with a camera that follows the root and the task's reference (where it has
 * one: bcg_task_ops.reference_qpos) as a translucent ghost, encoded by ffmpeg
 * into an MP4 or GIF video or a PNG strip of frames side by side.
 *
 * The rollout is bcg eval's (bcg/eval.h): one episode, no initial-state
 * noise, from the clip's start, its trace (every control step's state and
 * the clock's phase) written to a temporary HDF5 file and read back. Each
 * video frame shows the control step nearest its time. libOSMesa is loaded at
 * run time (dlopen), so bcg itself does not depend on it. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mujoco/mujoco.h>

#include "bcg/config.h"
#include "bcg/eval.h"
#include "bcg/model.h"
#include "bcg/runlog.h"
#include "cmd.h"
#include "evalrun.h"

#define SEP 2 /* pixels between the frames of a PNG strip */

enum { FMT_MP4, FMT_GIF, FMT_PNG };

/* ---- the command line ------------------------------------------------------------------ */

typedef struct render_args {
  const char *target, *sim, *out;
  double seconds, fps;
  int width, height, frames, no_ghost, fmt;
  char outbuf[PATH_MAX + 32];
  char *ov[270]; /* overrides, then the evaluation's own (evalrun.h) */
  int nov;
} render_args;

/* one option with a value at argv[*i] (the value at argv[*i + 1]); 0 when
 * taken, 1 when a is not one, else the exit status of the usage error */
static int parse_opt(int argc, char **argv, int *i, render_args *A) {
  const char *a = argv[*i];
  static const char *valued[] = {"--sim", "--out", "--seconds", "--width", "--height", "--fps", "--frames"};
  int k = -1;
  for (int j = 0; j < 7; j++)
    if (!strcmp(a, valued[j])) k = j;
  if (k < 0) return 1;
  if (*i + 1 >= argc) return bcg_cli_usage("render", "%s needs a value", a);
  const char *v = argv[++*i];
  int bad = 0;
  switch (k) {
    case 0: A->sim = v; break;
    case 1: A->out = v; break;
    case 2: bad = bcg_cli_opt_real(v, 0.02, 3600, &A->seconds); break;
    case 3: bad = bcg_cli_opt_int(v, 16, 4096, &A->width); break;
    case 4: bad = bcg_cli_opt_int(v, 16, 4096, &A->height); break;
    case 5: bad = bcg_cli_opt_real(v, 1, 240, &A->fps); break;
    default: bad = bcg_cli_opt_int(v, 1, 64, &A->frames); break;
  }
  if (!bad) return 0;
  static const char *what[] = {"", "", "a number of seconds in [0.02, 3600]", "a whole number of pixels in [16, 4096]",
                               "a whole number of pixels in [16, 4096]", "a number of frames per second in [1, 240]",
                               "a whole number of frames in [1, 64]"};
  return bcg_cli_usage("render", "%s '%s': must be %s", a, v, what[k]);
}

/* the output's format from its extension (no --out: the default .mp4), and
 * the checks that depend on it */
static int out_format(render_args *A) {
  const char *dot = A->out ? strrchr(A->out, '.') : NULL, *slash = A->out ? strrchr(A->out, '/') : NULL;
  const char *ext = !A->out ? ".mp4" : dot && (!slash || dot > slash) ? dot : "";
  if (!strcasecmp(ext, ".mp4")) A->fmt = FMT_MP4;
  else if (!strcasecmp(ext, ".gif")) A->fmt = FMT_GIF;
  else if (!strcasecmp(ext, ".png")) A->fmt = FMT_PNG;
  else
    return bcg_cli_usage("render", "--out '%s': unknown extension '%s' (.mp4, .gif or .png)", A->out, *ext ? ext : "(none)");
  if (A->fmt == FMT_MP4 && (A->width % 2 || A->height % 2))
    return bcg_cli_usage("render", "--width %d --height %d: an .mp4 (H.264, yuv420p) needs an even width and height",
                         A->width, A->height);
  if (A->frames && A->fmt != FMT_PNG) return bcg_cli_usage("render", "--frames is for a .png strip only");
  return -1;
}

/* parses argv into A; returns -1 when it is complete, else the exit status
 * of the usage error it printed */
static int parse_args(int argc, char **argv, render_args *A) {
  memset(A, 0, sizeof *A);
  A->width = 640, A->height = 480, A->fps = 30;
  for (int i = 1; i < argc; i++) {
    int rc = parse_opt(argc, argv, &i, A);
    if (rc == 0) continue;
    if (rc != 1) return rc;
    const char *a = argv[i];
    if (!strcmp(a, "--no-ghost")) A->no_ghost = 1;
    else if (a[0] == '-') return bcg_cli_usage("render", "unknown option '%s'", a);
    else if (strchr(a, '=')) {
      if (A->nov >= 250) return bcg_cli_usage("render", "too many overrides");
      A->ov[A->nov++] = argv[i];
    } else if (!A->target) A->target = a;
    else return bcg_cli_usage("render", "unexpected argument '%s'", a);
  }
  if (!A->target) return bcg_cli_usage("render", "missing RUN_DIR or CHECKPOINT");
  if (!A->sim) A->sim = "mujoco";
  if (strcmp(A->sim, "mujoco") && strcmp(A->sim, "bcg"))
    return bcg_cli_usage("render", "--sim '%s': must be mujoco or bcg", A->sim);
  return out_format(A);
}

/* ---- the tools it needs: ffmpeg, libOSMesa ------------------------------------------------ */

/* ffmpeg's path on PATH into path; -1 when there is none */
static int find_ffmpeg(char *path, size_t len) {
  const char *p = getenv("PATH");
  char dirs[8192];
  snprintf(dirs, sizeof dirs, "%s", p && *p ? p : "/usr/bin:/bin");
  char *save = NULL;
  for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
    snprintf(path, len, "%s/ffmpeg", *d ? d : ".");
    if (access(path, X_OK) == 0) return 0;
  }
  return -1;
}

/* The few OSMesa names bcg uses (GL/osmesa.h of libosmesa6-dev, not needed
 * to build bcg): libOSMesa is dlopen()ed by bcg render only. */
typedef void *osmesa_ctx;
#define BCG_OSMESA_RGBA 0x1908 /* GL_RGBA */
#define BCG_GL_UNSIGNED_BYTE 0x1401
typedef osmesa_ctx (*osmesa_create_fn)(unsigned format, int depth, int stencil, int accum, osmesa_ctx share);
typedef unsigned char (*osmesa_current_fn)(osmesa_ctx c, void *buf, unsigned type, int w, int h);
typedef void (*osmesa_destroy_fn)(osmesa_ctx c);

typedef struct gl {
  void *lib;
  osmesa_ctx ctx;
  osmesa_current_fn current;
  osmesa_destroy_fn destroy;
  unsigned char *buf;
} gl;

/* libOSMesa loaded with its symbols global (libmujoco's GL loader looks up
 * OSMesaGetProcAddress there); 0, or -1 with the error printed */
static int gl_load(gl *G) {
  memset(G, 0, sizeof *G);
  G->lib = dlopen("libOSMesa.so.8", RTLD_NOW | RTLD_GLOBAL);
  if (!G->lib) G->lib = dlopen("libOSMesa.so", RTLD_NOW | RTLD_GLOBAL);
  if (!G->lib)
    return bcg_cli_error("render: cannot load libOSMesa.so.8 (headless OpenGL): %s; install the Debian package "
                         "libosmesa6 (make deps installs libosmesa6-dev)", dlerror()), -1;
  return 0;
}

/* a W x H OSMesa context (RGBA, 24-bit depth, 8-bit stencil) made current */
static int gl_open(gl *G, int W, int H) {
  osmesa_create_fn create = (osmesa_create_fn)dlsym(G->lib, "OSMesaCreateContextExt");
  osmesa_current_fn current = G->current = (osmesa_current_fn)dlsym(G->lib, "OSMesaMakeCurrent");
  G->destroy = (osmesa_destroy_fn)dlsym(G->lib, "OSMesaDestroyContext");
  if (!create || !current || !G->destroy || !dlsym(G->lib, "OSMesaGetProcAddress"))
    return bcg_cli_error("render: libOSMesa lacks OSMesaCreateContextExt, OSMesaMakeCurrent, OSMesaDestroyContext or "
                         "OSMesaGetProcAddress"), -1;
  G->buf = malloc((size_t)W * H * 4);
  G->ctx = G->buf ? create(BCG_OSMESA_RGBA, 24, 8, 0, NULL) : NULL;
  if (!G->ctx) return bcg_cli_error("render: cannot create an OSMesa context (RGBA, 24-bit depth)"), -1;
  if (!current(G->ctx, G->buf, BCG_GL_UNSIGNED_BYTE, W, H))
    return bcg_cli_error("render: cannot make the OSMesa context current on a %dx%d buffer", W, H), -1;
  return 0;
}

static void gl_close(gl *G) {
  if (G->ctx) G->current(NULL, NULL, 0, 0, 0), G->destroy(G->ctx); /* released: not current */
  free(G->buf);
  G->ctx = NULL, G->buf = NULL; /* the library stays loaded: libmujoco may keep pointers into it */
}

/* Under AddressSanitizer (make test-asan) LeakSanitizer reads its default
 * suppressions (and options) from these hooks of the executable: Mesa keeps a few hundred
 * bytes of its own (allocated in OSMesaMakeCurrent and its drivers) until the
 * process ends. Without ASan nothing calls it. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libOSMesa.so\n"; }
const char *__lsan_default_options(void);
const char *__lsan_default_options(void) { return "print_suppressions=0"; }

/* ---- the rollout: bcg eval's trace ----------------------------------------------------------- */

typedef struct traj {
  mjModel *m;     /* a copy of the session's compiled model */
  int nq, nv, n;  /* states: n = steps + 1 */
  double *x;      /* [n][nq + nv] */
  double *ref;    /* [n][nq] the reference's qpos at each state's clock, or NULL */
  double dt;      /* control_dt */
  double phase;
  int fell, len;  /* a fall; control steps simulated */
} traj;

static void traj_free(traj *T) {
  if (T->m) mj_deleteModel(T->m);
  free(T->x);
  free(T->ref);
  memset(T, 0, sizeof *T);
}

/* <sim>/x [1][n][nx] and <sim>/phase of the trace file into T */
static int read_trace(const char *path, const char *sim, traj *T, char *err, size_t errlen) {
  int64_t f = bcg_h5_open(path, err, errlen);
  if (f < 0) return -1;
  char name[64];
  snprintf(name, sizeof name, "%s/x", sim);
  int rc = -1;
  hid_t d = H5Dopen2((hid_t)f, name, H5P_DEFAULT), sp = d >= 0 ? H5Dget_space(d) : -1;
  hsize_t dims[3] = {0, 0, 0};
  if (sp < 0 || H5Sget_simple_extent_ndims(sp) != 3 || H5Sget_simple_extent_dims(sp, dims, NULL) != 3 || dims[0] < 1 ||
      dims[2] != (hsize_t)(T->nq + T->nv) || dims[1] < 1) {
    snprintf(err, errlen, "trace %.1024s: no dataset %s [1][steps + 1][%d]", path, name, T->nq + T->nv);
    goto out;
  }
  T->n = (int)dims[1];
  T->x = malloc(sizeof(double) * dims[0] * dims[1] * dims[2]);
  if (!T->x || H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, T->x) < 0) {
    snprintf(err, errlen, "trace %.1024s: cannot read %s", path, name);
    goto out;
  }
  int64_t g = bcg_h5_group(f, sim, 0, err, errlen);
  if (g < 0) goto out;
  double ph[BCG_EVAL_MAX_RUNS];
  long np = bcg_h5_read_doubles(g, "phase", ph, BCG_EVAL_MAX_RUNS, err, errlen);
  bcg_h5_group_close(g);
  if (np < 1) goto out;
  T->phase = ph[0];
  rc = 0;
out:
  if (sp >= 0) H5Sclose(sp);
  if (d >= 0) H5Dclose(d);
  bcg_checkpoint_close(f);
  return rc;
}

/* the task's reference at each state's clock {t, 0, phase} into T->ref, when
 * it has one (T->ref stays NULL otherwise: no ghost) */
static void trace_reference(const bcg_session *E, traj *T) {
  const bcg_task_ops *ops = E->task_ops;
  if (!BCG_OPS_HAS(ops, bcg_task_ops, reference_qpos)) return;
  bcg_task_clock *clk = calloc(T->n, sizeof *clk);
  bcg_real *q = calloc((size_t)T->n * T->nq, sizeof *q);
  T->ref = malloc(sizeof(double) * T->n * T->nq);
  int ok = clk && q && T->ref;
  for (int t = 0; ok && t < T->n; t++) clk[t].t = t, clk[t].phase = T->phase;
  ok = ok && ops->reference_qpos(E->task, clk, T->n, q) == 0;
  for (int i = 0; ok && i < T->n * T->nq; i++) T->ref[i] = (double)q[i];
  if (!ok) free(T->ref), T->ref = NULL;
  free(clk);
  free(q);
}

/* 5 s, or the task's episode when it is shorter ([task] episode_seconds) */
static double default_seconds(const bcg_config *cfg) {
  const bcg_params *tp = bcg_config_section(cfg, "task");
  double s = 5;
  if (tp && bcg_params_value(tp, "episode_seconds")) s = fmin(s, bcg_params_get_real(tp, "episode_seconds"));
  return s;
}

/* one episode of the policy in sim (bcg eval, no noise) traced into a
 * temporary file and read back with the reference at every step; the
 * session's model copied into T->m */
static int trace_episode(bcg_session *E, bcg_session *S, const bcg_config *cfg, const render_args *A, traj *T,
                         bcg_eval_result *res, char *err, size_t errlen) {
  const char *base = getenv("TMPDIR");
  char dir[PATH_MAX], path[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/bcg_render_XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir)) return snprintf(err, errlen, "cannot make a temporary directory %.1024s: %s", dir, strerror(errno)), -1;
  snprintf(path, sizeof path, "%s/trace.h5", dir);
  bcg_eval_opts o;
  memset(&o, 0, sizeof o);
  o.runs = 1;
  o.seconds = A->seconds;
  o.fall_height = bcg_config_get_real(cfg, "eval", "fall_height");
  o.mj_timestep = bcg_config_get_real(cfg, "eval", "mujoco_timestep");
  o.seed = (uint64_t)bcg_config_get_int(cfg, "eval", "seed");
  o.sims = !strcmp(A->sim, "bcg") ? BCG_EVAL_BCG : BCG_EVAL_MUJOCO;
  o.fall_penalty = 1;
  o.trace = path;
  T->nq = E->env->nq, T->nv = E->env->nv, T->dt = E->env->control_dt;
  int rc = bcg_eval(E, bcg_eval_learner_policy, S, &o, res, err, errlen) || read_trace(path, A->sim, T, err, errlen)
               ? -1 : 0;
  unlink(path);
  rmdir(dir);
  if (rc) return -1;
  const int si = o.sims == BCG_EVAL_BCG ? 0 : 1;
  T->fell = res->run[si][0].fell;
  T->len = (int)lround(res->run[si][0].length_s / T->dt);
  if (!A->no_ghost) trace_reference(E, T);
  const bcg_model *M = E->env->model;
  if (!M->mj || !(T->m = mj_copyModel(NULL, (const mjModel *)M->mj)))
    return snprintf(err, errlen, "the session's model has no MuJoCo model to draw"), -1;
  return 0;
}

/* the run opened as bcg eval opens it (evalrun.h), its latest checkpoint (or
 * CHECKPOINT) loaded, one episode traced into T; the default --seconds and
 * --out filled in. Returns -1, or the exit status of the error it printed. */
static int rollout(render_args *A, traj *T) {
  char run_dir[PATH_MAX + 8], ckpt[PATH_MAX + 64], cfgpath[PATH_MAX + 32], err[4096];
  int rc = bcg_cli_resolve_run(A->target, 0, "(train first)", run_dir, sizeof run_dir, ckpt, sizeof ckpt, cfgpath,
                               sizeof cfgpath);
  if (rc >= 0) return rc;
  bcg_config *cfg = bcg_cli_eval_config(cfgpath, A->ov, &A->nov);
  if (!cfg) return BCG_EXIT_ERROR;
  if (!(A->seconds > 0)) A->seconds = default_seconds(cfg);
  if (!A->out) snprintf(A->outbuf, sizeof A->outbuf, "%s/render-%s.mp4", run_dir, A->sim), A->out = A->outbuf;
  bcg_session S, Ssmall, *E = NULL;
  bcg_config *cfg_small = NULL;
  bcg_eval_result *res = calloc(1, sizeof *res);
  int64_t it = 0;
  rc = -1;
  if (!res || bcg_session_open(&S, cfg, err, sizeof err)) {
    rc = bcg_cli_error("%s", res ? err : "out of memory");
    goto out_cfg;
  }
  E = bcg_cli_eval_session(&S, cfg, cfgpath, A->ov, A->nov, 1, &Ssmall, &cfg_small);
  if (bcg_session_load(&S, ckpt, &it, NULL, NULL, NULL, err, sizeof err) ||
      trace_episode(E, &S, cfg, A, T, res, err, sizeof err))
    rc = bcg_cli_error("%s", err);
  else
    printf("render: policy of %s (iteration %lld) in %s, one episode of %g s without noise: %s %.2f s%s\n",
           ckpt, (long long)it, !strcmp(A->sim, "bcg") ? "bcg" : "MuJoCo", A->seconds,
           T->fell ? "it fell after" : "up for", T->len * T->dt,
           T->fell || T->len + 1 >= T->n ? "" : " (the clip or the episode ended; the last state is held)");
  if (E != &S) bcg_session_close(&Ssmall);
  bcg_config_free(cfg_small);
  bcg_session_close(&S);
out_cfg:
  free(res);
  bcg_config_free(cfg);
  return rc;
}

/* ---- drawing: MuJoCo's renderer into an offscreen buffer ------------------------------------- */

typedef struct drawer {
  mjModel *m;
  mjData *d, *dg; /* the state; the ghost */
  mjvScene scn;
  mjrContext con;
  mjvCamera cam;
  mjvOption opt;
  mjvPerturb pert;
  int W, H, root, made;
} drawer;

/* the root: the first body with a joint (the world's child otherwise) */
static int root_body(const mjModel *m) {
  for (int b = 1; b < m->nbody; b++)
    if (m->body_jntnum[b] > 0) return b;
  return m->nbody > 1 ? 1 : 0;
}

/* scene, GL context (the offscreen buffer raised to W x H where the model's
 * is smaller) and a camera that tracks the root from the side */
static int drawer_open(drawer *D, mjModel *m, int W, int H) {
  memset(D, 0, sizeof *D);
  D->m = m, D->W = W, D->H = H;
  if (m->vis.global.offwidth < W) m->vis.global.offwidth = W;
  if (m->vis.global.offheight < H) m->vis.global.offheight = H;
  /* a software renderer draws the shadow map every frame: humanoid.xml's
   * 4096^2 took half of each frame's time, 1024^2 looks the same at 640x480 */
  if (m->vis.quality.shadowsize > 1024) m->vis.quality.shadowsize = 1024;
  D->d = mj_makeData(m);
  D->dg = mj_makeData(m);
  if (!D->d || !D->dg) return bcg_cli_error("render: out of memory (mjData)"), -1;
  mjv_defaultOption(&D->opt);
  mjv_defaultPerturb(&D->pert);
  mjv_defaultScene(&D->scn);
  mjv_makeScene(m, &D->scn, 2 * m->ngeom + 2000);
  mjr_defaultContext(&D->con);
  mjr_makeContext(m, &D->con, mjFONTSCALE_100);
  D->made = 1;
  mjr_setBuffer(mjFB_OFFSCREEN, &D->con);
  if (D->con.currentBuffer != mjFB_OFFSCREEN)
    return bcg_cli_error("render: MuJoCo's offscreen buffer is not available under OSMesa"), -1;
  if (D->con.offWidth < W || D->con.offHeight < H)
    return bcg_cli_error("render: MuJoCo's offscreen buffer is %dx%d, smaller than %dx%d", D->con.offWidth,
                         D->con.offHeight, W, H), -1;
  mjv_defaultFreeCamera(m, &D->cam);
  D->root = root_body(m);
  D->cam.type = mjCAMERA_TRACKING;
  D->cam.trackbodyid = D->root;
  D->cam.distance = 1.6 * m->stat.extent;
  D->cam.azimuth = 120;
  D->cam.elevation = -15;
  return 0;
}

static void drawer_close(drawer *D) {
  if (D->made) mjr_freeContext(&D->con), mjv_freeScene(&D->scn);
  if (D->d) mj_deleteData(D->d);
  if (D->dg) mj_deleteData(D->dg);
  memset(D, 0, sizeof *D);
}

/* the ghost: the model's moving geoms at the reference pose qref, appended
 * to the scene, tinted and translucent */
static void add_ghost(drawer *D, const double *qref) {
  mju_copy(D->dg->qpos, qref, D->m->nq);
  mju_zero(D->dg->qvel, D->m->nv);
  mj_forward(D->m, D->dg);
  int n0 = D->scn.ngeom;
  mjv_addGeoms(D->m, D->dg, &D->opt, &D->pert, mjCAT_DYNAMIC, &D->scn);
  static const float tint[3] = {0.3f, 0.6f, 1.0f};
  for (int i = n0; i < D->scn.ngeom; i++) {
    mjvGeom *g = &D->scn.geoms[i];
    for (int c = 0; c < 3; c++) g->rgba[c] = 0.15f * g->rgba[c] + 0.85f * tint[c];
    g->rgba[3] = 0.3f;
    g->transparent = 1;
    g->segid = -1;
  }
}

/* one frame of state x (qpos, qvel) and the reference qref (NULL: none)
 * into rgb [H][W][3], top row first */
static void draw(drawer *D, const double *x, const double *qref, unsigned char *rgb) {
  const mjModel *m = D->m;
  mju_copy(D->d->qpos, x, m->nq);
  mju_copy(D->d->qvel, x + m->nq, m->nv);
  mj_forward(m, D->d);
  mju_copy3(D->cam.lookat, D->d->subtree_com + 3 * D->root);
  mjv_updateScene(m, D->d, &D->opt, &D->pert, &D->cam, mjCAT_ALL, &D->scn);
  if (qref) add_ghost(D, qref);
  mjrRect vp = {0, 0, D->W, D->H};
  mjr_render(vp, &D->scn, &D->con);
  mjr_readPixels(rgb, NULL, vp, &D->con);
  const size_t row = (size_t)D->W * 3; /* GL's first row is the bottom one */
  unsigned char tmp[4096 * 3];
  for (int y = 0; y < D->H / 2; y++) {
    unsigned char *a = rgb + (size_t)y * row, *b = rgb + (size_t)(D->H - 1 - y) * row;
    memcpy(tmp, a, row), memcpy(a, b, row), memcpy(b, tmp, row);
  }
}

/* ---- encoding: raw RGB frames piped to ffmpeg ------------------------------------------------ */

typedef struct encoder {
  pid_t pid;
  int in, err; /* ffmpeg's stdin, stderr */
  int broken;  /* a write failed (ffmpeg ended early) */
} encoder;

/* ffmpeg (at path) reading w x h rgb24 frames at fps from a pipe into out,
 * in the format fmt; 0 or -1 with the error printed */
static int enc_open(encoder *C, const char *path, int fmt, int w, int h, double fps, const char *out) {
  char size[32], rate[32];
  snprintf(size, sizeof size, "%dx%d", w, h);
  snprintf(rate, sizeof rate, "%g", fps);
  const char *argv[40] = {"ffmpeg", "-y", "-nostdin", "-loglevel", "error", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s",
                          size, "-r", rate, "-i", "-"};
  int n = 15;
  static const char *mp4[] = {"-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart", NULL};
  static const char *gif[] = {"-vf", "split[a][b];[a]palettegen[p];[b][p]paletteuse", "-f", "gif", NULL};
  static const char *png[] = {"-frames:v", "1", "-c:v", "png", "-f", "image2", "-update", "1", NULL};
  for (const char **o = fmt == FMT_MP4 ? mp4 : fmt == FMT_GIF ? gif : png; *o; o++) argv[n++] = *o;
  argv[n++] = out;
  argv[n] = NULL;
  memset(C, 0, sizeof *C);
  int pin[2], perr[2];
  if (pipe2(pin, O_CLOEXEC)) return bcg_cli_error("render: pipe: %s", strerror(errno)), -1;
  if (pipe2(perr, O_CLOEXEC)) {
    close(pin[0]), close(pin[1]);
    return bcg_cli_error("render: pipe: %s", strerror(errno)), -1;
  }
  C->pid = fork();
  if (C->pid == 0) {
    dup2(pin[0], 0);
    dup2(perr[1], 2);
    execv(path, (char *const *)argv);
    fprintf(stderr, "cannot run %s: %s\n", path, strerror(errno));
    _exit(127);
  }
  close(pin[0]), close(perr[1]);
  C->in = pin[1], C->err = perr[0];
  if (C->pid < 0) {
    close(C->in), close(C->err);
    return bcg_cli_error("render: fork: %s", strerror(errno)), -1;
  }
  return 0;
}

static void enc_write(encoder *C, const unsigned char *rgb, size_t len) {
  while (len && !C->broken) {
    ssize_t k = write(C->in, rgb, len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) { C->broken = 1; break; }
    rgb += k, len -= (size_t)k;
  }
}

/* end of input; ffmpeg's exit status checked (its stderr printed on failure) */
static int enc_close(encoder *C, const char *out) {
  close(C->in);
  char msg[8192];
  size_t n = 0;
  for (;;) {
    ssize_t k = read(C->err, msg + n, sizeof msg - 1 - n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    n += (size_t)k;
    if (n == sizeof msg - 1) n = 0; /* keep reading; the tail matters less than not blocking ffmpeg */
  }
  msg[n] = 0;
  close(C->err);
  int st = 0;
  while (waitpid(C->pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !C->broken) return 0;
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) msg[--n] = 0;
  if (WIFEXITED(st))
    return bcg_cli_error("render: ffmpeg failed writing %s (exit status %d)%s%s", out, WEXITSTATUS(st), n ? ": " : "",
                         msg), -1;
  return bcg_cli_error("render: ffmpeg writing %s was killed by signal %d%s%s", out,
                       WIFSIGNALED(st) ? WTERMSIG(st) : 0, n ? ": " : "", msg), -1;
}

/* ---- the frames --------------------------------------------------------------------------- */

/* the control step nearest time t (s), within the trace */
static int step_at(const traj *T, double t) {
  long s = lround(t / T->dt);
  return (int)(s < 0 ? 0 : s >= T->n ? T->n - 1 : s);
}

/* the state and the reference (NULL without one) of step s */
static const double *state_of(const traj *T, int s) { return T->x + (size_t)s * (T->nq + T->nv); }
static const double *ref_of(const traj *T, int s) { return T->ref ? T->ref + (size_t)s * T->nq : NULL; }

/* a video: round(seconds * fps) frames, frame i showing the step nearest i / fps */
static int video(drawer *D, const traj *T, const render_args *A, encoder *C, int *nframes) {
  unsigned char *rgb = malloc((size_t)A->width * A->height * 3);
  if (!rgb) return bcg_cli_error("render: out of memory"), -1;
  long n = lround(A->seconds * A->fps);
  *nframes = (int)(n < 1 ? 1 : n);
  for (int i = 0; i < *nframes && !C->broken; i++) {
    int s = step_at(T, i / A->fps);
    draw(D, state_of(T, s), ref_of(T, s), rgb);
    enc_write(C, rgb, (size_t)A->width * A->height * 3);
  }
  free(rgb);
  return 0;
}

/* a strip: N frames evenly spaced from the start to --seconds, side by side
 * with SEP white pixels between them, as one image */
static int strip(drawer *D, const traj *T, const render_args *A, encoder *C, int N) {
  const int W = A->width, H = A->height, SW = N * W + (N - 1) * SEP;
  unsigned char *rgb = malloc((size_t)W * H * 3), *img = malloc((size_t)SW * H * 3);
  if (!rgb || !img) return free(rgb), free(img), bcg_cli_error("render: out of memory"), -1;
  memset(img, 255, (size_t)SW * H * 3);
  for (int k = 0; k < N; k++) {
    int s = step_at(T, N > 1 ? k * A->seconds / (N - 1) : 0);
    draw(D, state_of(T, s), ref_of(T, s), rgb);
    for (int y = 0; y < H; y++)
      memcpy(img + ((size_t)y * SW + (size_t)k * (W + SEP)) * 3, rgb + (size_t)y * W * 3, (size_t)W * 3);
  }
  enc_write(C, img, (size_t)SW * H * 3);
  free(rgb);
  free(img);
  return 0;
}

/* the directory of the output must exist (ffmpeg's own message is obscure) */
static int out_dir_ok(const char *out) {
  char dir[PATH_MAX + 32];
  snprintf(dir, sizeof dir, "%s", out);
  char *s = strrchr(dir, '/');
  if (!s) return 1;
  if (s == dir) s[1] = 0; else *s = 0;
  return bcg_cli_is_dir(dir);
}

/* draw T into the output with ffmpeg at path; 0 or the exit status */
static int render_out(const render_args *A, traj *T, const char *ffmpeg, gl *G) {
  const int N = A->fmt == FMT_PNG ? (A->frames ? A->frames : 6) : 0;
  const int SW = N ? N * A->width + (N - 1) * SEP : A->width;
  drawer D;
  encoder C;
  memset(&D, 0, sizeof D);
  if (gl_open(G, A->width, A->height) || drawer_open(&D, T->m, A->width, A->height)) {
    drawer_close(&D);
    gl_close(G);
    return BCG_EXIT_ERROR;
  }
  struct sigaction ign = {.sa_handler = SIG_IGN}, old;
  sigaction(SIGPIPE, &ign, &old); /* ffmpeg ending early: a failed write, then its message */
  int nframes = 1, rc = enc_open(&C, ffmpeg, A->fmt, SW, A->height, A->fps, A->out);
  if (!rc) {
    int bad = N ? strip(&D, T, A, &C, N) : video(&D, T, A, &C, &nframes);
    rc = enc_close(&C, A->out) || bad;
  }
  sigaction(SIGPIPE, &old, NULL);
  drawer_close(&D);
  gl_close(G);
  if (rc) return BCG_EXIT_ERROR;
  if (N)
    printf("written: %s (%d frames of %dx%d from 0 to %g s side by side: %dx%d)\n", A->out, N, A->width, A->height,
           A->seconds, SW, A->height);
  else
    printf("written: %s (%d frames, %dx%d, %g fps)\n", A->out, nframes, A->width, A->height, A->fps);
  return BCG_EXIT_OK;
}

/* MuJoCo's fatal errors (e.g. no OpenGL it can load) in bcg's form */
static void mj_error(const char *msg) {
  fflush(stdout);
  fprintf(stderr, "bcg: error: render: MuJoCo: %s\n", msg);
  exit(BCG_EXIT_ERROR);
}

int bcg_cmd_render(int argc, char **argv) {
  render_args A;
  int rc = parse_args(argc, argv, &A);
  if (rc >= 0) return rc;
  char ffmpeg[PATH_MAX];
  if (find_ffmpeg(ffmpeg, sizeof ffmpeg))
    return bcg_cli_error("render: ffmpeg not found on PATH: install the Debian package ffmpeg (make deps does)");
  gl G;
  if (gl_load(&G)) return BCG_EXIT_ERROR; /* before the rollout: fail early */
  if (A.out && !out_dir_ok(A.out)) return bcg_cli_error("--out %s: its directory does not exist", A.out);
  traj T;
  memset(&T, 0, sizeof T);
  rc = rollout(&A, &T);
  if (rc >= 0) return traj_free(&T), rc;
  if (!A.no_ghost && !T.ref) printf("render: the task has no reference pose (reference_qpos): no ghost\n");
  fflush(stdout);
  mju_user_error = mj_error;
  rc = render_out(&A, &T, ffmpeg, &G);
  traj_free(&T);
  return rc;
}
