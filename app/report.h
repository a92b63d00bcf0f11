/* app/report.h - private to bcg report (app/cmd_report.c): what it reads of
 * a run, shared with the paper's tables (app/report_paper.c). */
#ifndef BCG_APP_REPORT_H
#define BCG_APP_REPORT_H

#include <limits.h>

typedef struct row {
  char dir[PATH_MAX];
  char setup[160];
  long iters;
  double samples, wall, ret_first, ret_last, ret_best, track_last;
  double efixed[2], falls[2], nruns[2]; /* bcg, mujoco; NAN when not evaluated */
  double etrack[2];                     /* mean E_track of the evaluation's episodes (cm) */
  double delta_d;                       /* eval's foot penetration bcg - MuJoCo (mm) */
  char err[256];
  char *cfgkey; /* config.ini as sorted "section.key=value" lines without the bookkeeping keys */
  char seed[32];
} row;

typedef struct rows {
  row *v;
  int n, cap;
} rows;

/* --paper: Table 1 (falls after MuJoCo transfer and Delta d per kappa and
 * motion, SHAC+BCG) and Table 2 (E_track and E_fixed in MuJoCo per motion,
 * SHAC+BCG against PPO) of the BCG paper from the runs' eval.h5, with the
 * paper's numbers beside them; Markdown or CSV. Returns an exit status. */
int bcg_report_paper(const rows *R, int csv);

#endif
