/* app/report_paper.c - bcg report --paper: the BCG paper's Tables 1 and 2
 * built from a set of evaluated runs (app/report.h).
 *
 * Each run is placed by its config.ini: the motion is the stem of
 * [task] motion (".../jump.csv" -> jump), the method SHAC+BCG (learner shac,
 * estimator bcg), SHAC (shac, autodiff) or PPO (ppo), kappa and erp (the
 * position correction, 0 when the config does not set it) the smoothed_kappa
 * contact model's. Both tables keep runs of different contact settings apart
 * (plugin, kappa, erp): Table 1 has a row per kappa and erp, Table 2 a row per
 * method and contact setting of each motion, so that a kappa sweep's runs do
 * not enter the kappa-300 SHAC+BCG cell the paper's Table 2 compares. Runs
 * without eval.h5 (bcg eval RUN) or of another method are left out and
 * counted. Cells are mean +- std over the runs of a cell (seeds); falls are
 * per evaluation (of its episodes). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* "section.key=value" of a run's sorted config lines, or "" */
static void cfg_value(const row *r, const char *key, char *out, size_t len) {
  out[0] = 0;
  if (!r->cfgkey) return;
  size_t kl = strlen(key);
  for (const char *l = r->cfgkey; *l;) {
    const char *e = strchr(l, '\n');
    size_t n = e ? (size_t)(e - l) : strlen(l);
    if (n > kl && !strncmp(l, key, kl) && l[kl] == '=') {
      snprintf(out, len, "%.*s", (int)(n - kl - 1), l + kl + 1);
      return;
    }
    l += n + (e ? 1 : 0);
  }
}

enum { M_SHAC_BCG, M_SHAC, M_PPO, M_OTHER };
static const char *method_name[] = {"SHAC+BCG", "SHAC", "PPO", "other"};

typedef struct place {
  char motion[64], contact[32];
  int method;
  double kappa, erp;
} place;

static place place_of(const row *r) {
  place p = {{0}, {0}, M_OTHER, NAN, NAN};
  char v[1024], l[64], e[64], c[64];
  cfg_value(r, "task.motion", v, sizeof v);
  const char *b = strrchr(v, '/');
  snprintf(p.motion, sizeof p.motion, "%.63s", b ? b + 1 : v);
  char *dot = strrchr(p.motion, '.');
  if (dot) *dot = 0;
  cfg_value(r, "learner.plugin", l, sizeof l);
  cfg_value(r, "estimator.plugin", e, sizeof e);
  if (!strcmp(l, "shac") && !strcmp(e, "bcg")) p.method = M_SHAC_BCG;
  else if (!strcmp(l, "shac") && !strcmp(e, "autodiff")) p.method = M_SHAC;
  else if (!strcmp(l, "ppo")) p.method = M_PPO;
  cfg_value(r, "contact.plugin", c, sizeof c);
  snprintf(p.contact, sizeof p.contact, "%.31s", c);
  if (!strcmp(c, "smoothed_kappa")) {
    cfg_value(r, "contact.kappa", v, sizeof v);
    p.kappa = v[0] ? atof(v) : NAN;
    cfg_value(r, "contact.erp", v, sizeof v);
    p.erp = v[0] ? atof(v) : 0; /* the key's default */
  }
  return p;
}

/* mean and std (n - 1) of the finite values */
typedef struct stat { double mean, std; int n; } stat;
static stat stat_of(const double *v, int n) {
  stat s = {NAN, NAN, 0};
  double sum = 0, ss = 0;
  for (int i = 0; i < n; i++)
    if (isfinite(v[i])) sum += v[i], s.n++;
  if (!s.n) return s;
  s.mean = sum / s.n;
  for (int i = 0; i < n; i++)
    if (isfinite(v[i])) ss += (v[i] - s.mean) * (v[i] - s.mean);
  s.std = s.n > 1 ? sqrt(ss / (s.n - 1)) : 0;
  return s;
}

/* mean (and std over several runs) with dec decimals */
static void cell(char *b, size_t len, stat s, int dec) {
  if (!s.n) {
    snprintf(b, len, "-");
    return;
  }
  char m[24], d[24];
  snprintf(m, sizeof m, "%.*f", dec, s.mean);
  snprintf(d, sizeof d, "%.*f", dec, s.std);
  if (s.n == 1) snprintf(b, len, "%s", m); /* one run: its value */
  else snprintf(b, len, "%s ± %s", m, d);
}

/* the paper's numbers (docs/usage.md section 9 says where they come from) */
typedef struct ref2 { const char *motion; double shac_bcg, ppo; } ref2;
static const ref2 paper_t2[] = {{"run", 34.1, 42.8}, {"jump", 18.6, 18.0}, {"fight", 13.5, 34.3}, {"dance", 18.5, 19.0}};
static const char *paper_t1(double kappa) {
  if (kappa == 50) return "5/5 falls, 11-13 mm";
  if (kappa == 300) return "0/5 falls, about 3 mm";
  return "-";
}

#define MAXC 256
typedef struct cellset {
  place key[MAXC];
  int idx[MAXC][64], n[MAXC];
  int ncell;
} cellset;

static int same_num(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

static int find_or_add(cellset *C, const place *p) {
  for (int i = 0; i < C->ncell; i++)
    if (!strcmp(C->key[i].motion, p->motion) && C->key[i].method == p->method &&
        !strcmp(C->key[i].contact, p->contact) && same_num(C->key[i].kappa, p->kappa) &&
        same_num(C->key[i].erp, p->erp))
      return i;
  if (C->ncell == MAXC) return -1;
  C->key[C->ncell] = *p;
  C->n[C->ncell] = 0;
  return C->ncell++;
}

static int cmp_motion(const char *a, const char *b) {
  static const char *order[] = {"run", "jump", "fight", "dance"};
  int ia = 4, ib = 4;
  for (int i = 0; i < 4; i++) {
    if (!strcmp(a, order[i])) ia = i;
    if (!strcmp(b, order[i])) ib = i;
  }
  return ia != ib ? ia - ib : strcmp(a, b);
}

/* numbers ascending, NaN (no such setting) last */
static int cmp_num(double a, double b) {
  if (same_num(a, b)) return 0;
  if (isnan(a) || isnan(b)) return isnan(a) ? 1 : -1;
  return a < b ? -1 : 1;
}

/* the contact setting: plugin, then kappa and erp */
static int cmp_contact(const place *a, const place *b) {
  int c = strcmp(a->contact, b->contact);
  if (c) return c;
  c = cmp_num(a->kappa, b->kappa);
  return c ? c : cmp_num(a->erp, b->erp);
}

/* Table 1's rows: kappa, erp, motion */
static int cmp_t1(const place *a, const place *b) {
  int c = cmp_num(a->kappa, b->kappa);
  if (!c) c = cmp_num(a->erp, b->erp);
  return c ? c : cmp_motion(a->motion, b->motion);
}

/* Table 2's rows: motion, method (SHAC+BCG before PPO), contact setting */
static int cmp_t2(const place *a, const place *b) {
  int c = cmp_motion(a->motion, b->motion);
  if (!c) c = a->method - b->method;
  return c ? c : cmp_contact(a, b);
}

/* the cells of C that keep(), in the order cmp() gives: their indices into C */
static int sorted_cells(const cellset *C, int (*keep)(const place *), int (*cmp)(const place *, const place *),
                        int *map) {
  int m = 0;
  for (int i = 0; i < C->ncell; i++)
    if (keep(&C->key[i])) map[m++] = i;
  for (int i = 1; i < m; i++)
    for (int j = i; j > 0 && cmp(&C->key[map[j - 1]], &C->key[map[j]]) > 0; j--) {
      int u = map[j];
      map[j] = map[j - 1], map[j - 1] = u;
    }
  return m;
}

static int keep_t1(const place *p) { return p->method == M_SHAC_BCG && !isnan(p->kappa); }
static int keep_t2(const place *p) { return p->method == M_SHAC_BCG || p->method == M_PPO; }

/* "kappa 300, erp 0.2" for smoothed_kappa, else the plugin's name */
static void contact_name(const place *p, char *b, size_t len) {
  if (!isnan(p->kappa)) snprintf(b, len, "kappa %g, erp %g", p->kappa, p->erp);
  else snprintf(b, len, "%s", p->contact[0] ? p->contact : "-");
}

static void table1(const rows *R, const cellset *C, int csv) {
  int map[MAXC], m = sorted_cells(C, keep_t1, cmp_t1, map);
  if (csv)
    printf("table,kappa,erp,motion,runs,falls_mujoco_mean,falls_mujoco_std,episodes,delta_d_mm_mean,delta_d_mm_std,"
           "paper\n");
  else {
    printf("## Table 1: SHAC+BCG after transfer to MuJoCo, per kappa, position correction (erp) and motion\n\n");
    printf("| kappa | erp | motion | runs | falls in MuJoCo | Delta d mm | paper (all motions, no erp) |\n"
           "|--:|--:|:--|--:|--:|--:|:--|\n");
  }
  for (int k = 0; k < m; k++) {
    int c = map[k];
    const place *p = &C->key[c];
    double falls[64], dd[64];
    double eps = NAN;
    for (int j = 0; j < C->n[c]; j++) {
      const row *r = &R->v[C->idx[c][j]];
      falls[j] = r->falls[1];
      dd[j] = r->delta_d;
      if (isfinite(r->nruns[1])) eps = r->nruns[1];
    }
    stat f = stat_of(falls, C->n[c]), d = stat_of(dd, C->n[c]);
    if (csv) {
      printf("1,%g,%g,%s,%d,%.4g,%.4g,%g,%.4g,%.4g,\"%s\"\n", p->kappa, p->erp, p->motion, C->n[c], f.mean, f.std, eps,
             d.mean, d.std, paper_t1(p->kappa));
      continue;
    }
    char fc[64], dc[64];
    cell(fc, sizeof fc, f, 1);
    cell(dc, sizeof dc, d, 1);
    printf("| %g | %g | %s | %d | %s of %g | %s | %s |\n", p->kappa, p->erp, p->motion, C->n[c], fc, eps, dc,
           paper_t1(p->kappa));
  }
  if (!m && !csv) printf("(no evaluated SHAC+BCG run with smoothed_kappa)\n");
}

static void table2(const rows *R, const cellset *C, int csv) {
  int map[MAXC], m = sorted_cells(C, keep_t2, cmp_t2, map);
  if (csv)
    printf("table,motion,method,contact,kappa,erp,runs,etrack_mujoco_cm_mean,etrack_mujoco_cm_std,"
           "efixed_mujoco_cm_mean,efixed_mujoco_cm_std,falls_mujoco_mean,paper_etrack_cm\n");
  else {
    printf("\n## Table 2: tracking after transfer to MuJoCo, SHAC+BCG against PPO, per contact setting\n\n");
    printf("| motion | method | contact | runs | E_track MuJoCo cm | E_fixed MuJoCo cm | falls in MuJoCo | paper E_track "
           "cm (kappa 300) |\n");
    printf("|:--|:--|:--|--:|--:|--:|--:|--:|\n");
  }
  for (int k = 0; k < m; k++) {
    int c = map[k];
    const place *p = &C->key[c];
    double et[64], ef[64], fa[64];
    for (int j = 0; j < C->n[c]; j++) {
      const row *r = &R->v[C->idx[c][j]];
      et[j] = r->etrack[1], ef[j] = r->efixed[1], fa[j] = r->falls[1];
    }
    double ref = NAN;
    for (size_t q = 0; q < sizeof paper_t2 / sizeof paper_t2[0]; q++)
      if (!strcmp(paper_t2[q].motion, p->motion)) ref = p->method == M_PPO ? paper_t2[q].ppo : paper_t2[q].shac_bcg;
    stat a = stat_of(et, C->n[c]), b = stat_of(ef, C->n[c]), f = stat_of(fa, C->n[c]);
    if (csv) {
      printf("2,%s,%s,%s,%g,%g,%d,%.4g,%.4g,%.4g,%.4g,%.4g,%g\n", p->motion, method_name[p->method], p->contact,
             p->kappa, p->erp, C->n[c], a.mean, a.std, b.mean, b.std, f.mean, ref);
      continue;
    }
    char ac[64], bc[64], fc[64], rc[32], cc[64];
    cell(ac, sizeof ac, a, 1);
    cell(bc, sizeof bc, b, 1);
    cell(fc, sizeof fc, f, 1);
    contact_name(p, cc, sizeof cc);
    if (isnan(ref)) snprintf(rc, sizeof rc, "-");
    else snprintf(rc, sizeof rc, "%.1f", ref);
    printf("| %s | %s | %s | %d | %s | %s | %s | %s |\n", p->motion, method_name[p->method], cc, C->n[c], ac, bc, fc,
           rc);
  }
  if (!m && !csv) printf("(no evaluated SHAC+BCG or PPO run)\n");
}

int bcg_report_paper(const rows *R, int csv) {
  cellset *C = calloc(1, sizeof *C);
  if (!C) {
    fprintf(stderr, "bcg: error: report: out of memory\n");
    return 1;
  }
  int unevaluated = 0, other = 0, full = 0;
  for (int i = 0; i < R->n; i++) {
    const row *r = &R->v[i];
    if (r->err[0]) continue;
    if (!isfinite(r->falls[1])) {
      unevaluated++;
      continue;
    }
    place p = place_of(r);
    if (p.method == M_OTHER) {
      other++;
      continue;
    }
    int c = find_or_add(C, &p);
    if (c < 0 || C->n[c] >= 64) full = 1;
    else C->idx[c][C->n[c]++] = i;
  }
  table1(R, C, csv);
  if (csv) printf("\n");
  table2(R, C, csv);
  if (!csv) {
    printf("\nruns: %d read, %d without a MuJoCo evaluation (bcg eval RUN), %d of another method left out%s\n", R->n,
           unevaluated, other, full ? "; some cells were full (at most 64 runs each, 256 cells)" : "");
    printf("paper: the numbers the BCG paper reports (docs/usage.md section 9), for reference\n");
  }
  free(C);
  return 0;
}
