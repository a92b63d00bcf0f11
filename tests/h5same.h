/* tests/h5same.h - two HDF5 files compared dataset by dataset, byte for byte
 * (a resumed run's checkpoints and log.h5 against an uninterrupted run's);
 * shared by test_cli.c and test_crash.c. */
#ifndef BCG_TESTS_H5SAME_H
#define BCG_TESTS_H5SAME_H

#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t h5same_info;
#define H5SAME_VISIT(f, cb, data) H5Ovisit3(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#else
typedef H5O_info_t h5same_info;
#define H5SAME_VISIT(f, cb, data) H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#endif

typedef struct h5same_names {
  char name[128][96];
  int n;
} h5same_names;

static herr_t h5same_cb(hid_t o, const char *name, const h5same_info *info, void *data) {
  (void)o;
  h5same_names *d = data;
  if (info->type == H5O_TYPE_DATASET && d->n < 128) snprintf(d->name[d->n++], sizeof d->name[0], "%s", name);
  return 0;
}

/* the stored bytes of a dataset (malloc'd) and their count, or NULL */
static void *h5same_read(hid_t f, const char *name, size_t *bytes) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  if (d < 0) return NULL;
  hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
  hssize_t n = H5Sget_simple_extent_npoints(sp);
  size_t sz = H5Tget_size(t) * (size_t)(n > 0 ? n : 0);
  void *buf = calloc(sz ? sz : 1, 1);
  if (buf && n > 0 && H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
    free(buf);
    buf = NULL;
  }
  *bytes = sz;
  H5Sclose(sp);
  H5Tclose(t);
  H5Dclose(d);
  return buf;
}

/* The datasets of a and b, byte for byte: the same names, sizes and bytes,
 * except the names skip() accepts (wall-clock time). Returns the number of
 * differences (each printed with the label), or -1 when a file cannot be
 * opened; *compared is the number of datasets compared. */
static int h5same(const char *a, const char *b, int (*skip)(const char *name), const char *label, int *compared) {
  H5E_auto2_t ef;
  void *ed;
  H5Eget_auto2(H5E_DEFAULT, &ef, &ed);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t fa = H5Fopen(a, H5F_ACC_RDONLY, H5P_DEFAULT), fb = H5Fopen(b, H5F_ACC_RDONLY, H5P_DEFAULT);
  int diff = -1;
  static h5same_names na, nb;
  if (compared) *compared = 0;
  if (fa < 0 || fb < 0) {
    fprintf(stderr, "%s: cannot open %s\n", label, fa < 0 ? a : b);
    goto out;
  }
  na.n = nb.n = 0;
  H5SAME_VISIT(fa, h5same_cb, &na);
  H5SAME_VISIT(fb, h5same_cb, &nb);
  diff = 0;
  if (na.n != nb.n) {
    fprintf(stderr, "%s: %d datasets in %s, %d in %s\n", label, na.n, a, nb.n, b);
    diff++;
  }
  for (int i = 0; i < na.n; i++) {
    if (skip && skip(na.name[i])) continue;
    size_t sa = 0, sb = 0;
    void *x = h5same_read(fa, na.name[i], &sa), *y = h5same_read(fb, na.name[i], &sb);
    if (!x || !y || sa != sb || memcmp(x, y, sa) != 0) {
      fprintf(stderr, "%s: %s differs (%zu and %zu bytes)\n", label, na.name[i], sa, sb);
      diff++;
    } else if (compared) {
      (*compared)++;
    }
    free(x);
    free(y);
  }
out:
  if (fa >= 0) H5Fclose(fa);
  if (fb >= 0) H5Fclose(fb);
  H5Eclear2(H5E_DEFAULT);
  H5Eset_auto2(H5E_DEFAULT, ef, ed);
  return diff;
}

/* what differs between an uninterrupted and a resumed run: the wall clock */
static int h5same_skip_ckpt(const char *name) { return strcmp(name, "trainer/wall_time") == 0; }
static int h5same_skip_log(const char *name) {
  return strcmp(name, "wall_time") == 0 || strncmp(name, "time_", 5) == 0;
}

#endif
