/* tests/fuzz/make_seeds.c - the HDF5 seeds of the fuzz harnesses, as
 * descriptions (tests/fuzz/fuzz_h5desc.h), which the harnesses build back
 * into equivalent files:
 *
 *   make_seeds motion DIR                      the motion_h5 seeds, from the
 *       repository's CSV clips: the layouts the reader accepts (dataset qpos
 *       [frames][nq], attribute fps on the dataset or the root group, quat
 *       fixed- or variable-length) and near-valid ones it must refuse; two
 *       also as raw files (raw_*, for BCG_FUZZ_H5_RAW=1)
 *   make_seeds describe IN.h5 OUT [OPTIONS_BYTE]   the description of any
 *       file of floats, integers and strings (the checkpoint seeds)
 *
 * Every seed starts with its harness's options byte. tests/fuzz/make_seeds.sh
 * builds this and makes every seed corpus that is not plain text; run it
 * from the repository root after the build. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_h5desc.h"

static FILE *out;
static int bad;

static void put_str(const char *s) {
  size_t n = strlen(s);
  if (n > 255) bad = 1, n = 255;
  fputc((int)n, out);
  fwrite(s, 1, n, out);
}

/* the description's type code of a file type (-1: not representable) */
static int code_of(hid_t t, unsigned *param, int *vlen) {
  H5T_class_t c = H5Tget_class(t);
  size_t sz = H5Tget_size(t);
  *param = 0, *vlen = 0;
  if (c == H5T_FLOAT) {
    if (sz == 8) return H5Tget_order(t) == H5T_ORDER_BE ? H5D_F64BE : H5D_F64;
    if (sz == 4) return H5D_F32;
  } else if (c == H5T_INTEGER) {
    int sgn = H5Tget_sign(t) == H5T_SGN_2;
    if (sz == 8) return sgn ? H5D_I64 : H5D_U64;
    if (sz == 4 && sgn) return H5D_I32;
    if (sz == 2 && sgn) return H5D_I16;
    if (sz == 1 && !sgn) return H5D_U8;
  } else if (c == H5T_STRING) {
    if (H5Tis_variable_str(t) > 0) {
      *vlen = 1;
      return H5Tget_cset(t) == H5T_CSET_UTF8 ? H5D_VSTR_UTF8 : H5D_VSTR_ASCII;
    }
    if (sz >= 1 && sz <= 255) {
      *param = (unsigned)sz;
      return H5Tget_strpad(t) == H5T_STR_NULLTERM ? H5D_FSTR : H5D_FSTR_NULLPAD;
    }
  }
  return -1;
}

/* type, shape and (when data != 0) the values of a dataset or attribute */
static void put_object(hid_t obj, int is_attr, int data) {
  hid_t t = is_attr ? H5Aget_type(obj) : H5Dget_type(obj), sp = is_attr ? H5Aget_space(obj) : H5Dget_space(obj);
  unsigned param;
  int vlen, code = code_of(t, &param, &vlen);
  if (code < 0) {
    fprintf(stderr, "h5todesc: a type it cannot describe (written as f64)\n");
    code = H5D_F64, bad = 1;
  }
  fputc(code, out);
  if (code == H5D_FSTR || code == H5D_FSTR_NULLPAD) fputc((int)param, out);
  int rank = H5Sget_simple_extent_ndims(sp);
  hsize_t dims[4] = {0};
  if (rank > 4) bad = 1, rank = 4;
  H5Sget_simple_extent_dims(sp, dims, NULL);
  fputc(rank, out);
  hssize_t np = H5Sget_simple_extent_npoints(sp);
  for (int i = 0; i < rank; i++) {
    uint32_t d = (uint32_t)dims[i];
    for (int b = 0; b < 4; b++) fputc((int)(d >> (8 * b)) & 0xff, out);
  }
  if (!is_attr) fputc(0, out); /* flags: contiguous, written */
  if (data && np > 0) {
    hid_t mt = H5Tcopy(t);
    if (vlen) {
      char **s = calloc((size_t)np, sizeof *s);
      if (is_attr ? H5Aread(obj, mt, s) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, s)) bad = 1;
      for (hssize_t i = 0; i < np; i++) {
        size_t n = s[i] ? strlen(s[i]) : 0;
        if (n > 255) bad = 1, n = 255;
        fputc((int)n, out);
        fwrite(s[i], 1, n, out);
        H5free_memory(s[i]);
      }
      free(s);
    } else {
      size_t n = (size_t)np * H5Tget_size(t);
      char *b = malloc(n);
      if (is_attr ? H5Aread(obj, mt, b) : H5Dread(obj, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, b)) bad = 1;
      fwrite(b, 1, n, out);
      free(b);
    }
    H5Tclose(mt);
  }
  H5Sclose(sp);
  H5Tclose(t);
}

static herr_t attr_cb(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
  (void)info;
  const char *path = data;
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  fputc('A', out);
  put_str(path);
  put_str(name);
  put_object(a, 1, 1);
  H5Aclose(a);
  return 0;
}

#if H5_VERSION_GE(1, 12, 0)
typedef H5O_info2_t obj_info;
#define VISIT(f, cb, data) H5Ovisit3(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#else
typedef H5O_info_t obj_info;
#define VISIT(f, cb, data) H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, cb, data, H5O_INFO_BASIC)
#endif

static herr_t visit_cb(hid_t f, const char *name, const obj_info *info, void *data) {
  (void)data;
  int root = !strcmp(name, ".");
  if (info->type == H5O_TYPE_GROUP && !root) {
    fputc('G', out);
    put_str(name);
  } else if (info->type == H5O_TYPE_DATASET) {
    hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
    fputc('D', out);
    put_str(name);
    put_object(d, 0, 1);
    H5Dclose(d);
  }
  hid_t o = H5Oopen(f, name, H5P_DEFAULT);
  char path[512];
  snprintf(path, sizeof path, "%s", root ? "" : name);
  H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, NULL, attr_cb, path);
  H5Oclose(o);
  return 0;
}

/* the description of the HDF5 file in, with an options byte first when opt >= 0 */
static int describe(const char *in, const char *outpath, int opt) {
  hid_t f = H5Fopen(in, H5F_ACC_RDONLY, H5P_DEFAULT);
  if (f < 0) return fprintf(stderr, "make_seeds: cannot open %s\n", in), -1;
  out = fopen(outpath, "wb");
  if (!out) return H5Fclose(f), fprintf(stderr, "make_seeds: cannot create %s\n", outpath), -1;
  if (opt >= 0) fputc(opt & 0xff, out);
  bad = 0;
  VISIT(f, visit_cb, NULL);
  H5Fclose(f);
  fclose(out);
  if (bad) fprintf(stderr, "make_seeds: %s: some content was not described exactly\n", in);
  return 0;
}

#define MAXF 16
#define MAXQ 32

static int read_csv(const char *path, int skip, int nf, double q[MAXF][MAXQ], int *nq) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[8192];
  int n = 0, s = 0;
  while (n < nf && fgets(line, sizeof line, f)) {
    if (line[0] == '#' || (line[0] >= 'a' && line[0] <= 'z')) continue;
    if (s++ < skip) continue;
    int c = 0;
    for (char *t = strtok(line, ","); t && c < MAXQ; t = strtok(NULL, ",")) q[n][c++] = atof(t);
    *nq = c;
    n++;
  }
  fclose(f);
  return n;
}

static void str_attr(hid_t loc, const char *name, const char *v, int vlen) {
  hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
  if (vlen) {
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
  } else {
    H5Tset_size(t, strlen(v));
    H5Tset_strpad(t, H5T_STR_NULLPAD);
  }
  hid_t a = H5Acreate2(loc, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  if (vlen) H5Awrite(a, t, &v);
  else H5Awrite(a, t, v);
  H5Aclose(a), H5Sclose(sp), H5Tclose(t);
}

static void num_attr(hid_t loc, const char *name, hid_t type, const double *v, int n) {
  hsize_t d = (hsize_t)n;
  hid_t sp = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &d, NULL);
  hid_t a = H5Acreate2(loc, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
  H5Awrite(a, H5T_NATIVE_DOUBLE, v);
  H5Aclose(a), H5Sclose(sp);
}

typedef struct seed {
  const char *name;
  unsigned char opt;   /* the harness's options byte */
  int rank;            /* 2, or 1 for a malformed dataset */
  int drop_col;        /* write nq - 1 columns */
  hid_t ftype;         /* file type of qpos */
  int fps_on_root, fps_n, fps_int;
  double fps;          /* <= 0: no attribute */
  const char *quat;    /* NULL: no attribute */
  int quat_vlen, quat_on_root, xyzw;
  int raw;             /* also write the file's bytes (raw_NAME) */
} seed;

static int write_seed(const char *dir, const seed *s, double q[MAXF][MAXQ], int nf, int nq) {
  char tmp[4096], out[4096];
  snprintf(tmp, sizeof tmp, "%s/%s.tmp.h5", dir, s->name);
  snprintf(out, sizeof out, "%s/%.*s.desc", dir, (int)(strlen(s->name) - 3), s->name); /* name.h5 -> name.desc */
  hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return -1;
  int cols = nq - (s->drop_col ? 1 : 0);
  double *buf = malloc(sizeof(double) * (size_t)nf * (size_t)cols);
  for (int i = 0; i < nf; i++)
    for (int c = 0; c < cols; c++) {
      int src = c;
      if (s->xyzw && c >= 3 && c < 7) src = c == 6 ? 3 : c + 1; /* w x y z -> x y z w */
      buf[i * cols + c] = q[i][src];
    }
  hsize_t dims[2] = {(hsize_t)nf, (hsize_t)cols}, d1 = (hsize_t)nf * (hsize_t)cols;
  hid_t sp = s->rank == 2 ? H5Screate_simple(2, dims, NULL) : H5Screate_simple(1, &d1, NULL);
  hid_t d = H5Dcreate2(f, "qpos", s->ftype, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
  if (s->fps > 0) {
    double v[2] = {s->fps, s->fps};
    num_attr(s->fps_on_root ? f : d, "fps", s->fps_int ? H5T_STD_I32LE : H5T_IEEE_F64LE, v, s->fps_n);
  }
  if (s->quat) str_attr(s->quat_on_root ? f : d, "quat", s->quat, s->quat_vlen);
  H5Dclose(d), H5Sclose(sp), H5Fclose(f);
  free(buf);
  int rc = describe(tmp, out, s->opt);
  if (!rc && s->raw) { /* the file's bytes too, for BCG_FUZZ_H5_RAW=1 */
    char raw[4200];
    snprintf(raw, sizeof raw, "%s/raw_%s", dir, s->name);
    FILE *in = fopen(tmp, "rb"), *o = fopen(raw, "wb");
    if (!in || !o) return -1;
    fputc(s->opt, o);
    char b[65536];
    size_t n;
    while ((n = fread(b, 1, sizeof b, in)) > 0) fwrite(b, 1, n, o);
    fclose(in), fclose(o);
  }
  remove(tmp);
  return rc;
}

static int motion_seeds(const char *dir) {
  static double jump[MAXF][MAXQ], walk[MAXF][MAXQ], biped[MAXF][MAXQ];
  int nqh = 0, nqw = 0;
  int nj = read_csv("models/motions/jump.csv", 0, 6, jump, &nqh);
  int nw = read_csv("models/motions/walk.csv", 30, 5, walk, &nqw);
  if (nj < 6 || nw < 5 || nqh != 28 || nqw != 28) return fprintf(stderr, "cannot read the CSV clips\n"), 1;
  /* biped2d (nq 9): a short synthetic clip from its zero pose */
  for (int i = 0; i < 4; i++)
    for (int c = 0; c < 9; c++) biped[i][c] = 0.01 * i * (c % 3 + 1) * (c > 2 ? -1 : 1);
  const hid_t F64 = H5T_IEEE_F64LE, F32 = H5T_IEEE_F32LE, I32 = H5T_STD_I32LE;
  const seed js[] = {
      {"jump_fps_dataset.h5", 0x00, 2, 0, F64, 0, 1, 0, 30, "wxyz", 0, 0, 0, 1},
      {"jump_f32_root_fps_int.h5", 0x40, 2, 0, F32, 1, 1, 1, 30, NULL, 0, 0, 0, 0},
      {"jump_vlen_quat_root.h5", 0x28, 2, 0, F64, 0, 1, 0, 60, "wxyz", 1, 1, 0, 0},
      {"jump_one_dim.h5", 0x00, 1, 0, F64, 0, 1, 0, 30, NULL, 0, 0, 0, 0},
      {"jump_nq27.h5", 0x00, 2, 1, F64, 0, 1, 0, 30, NULL, 0, 0, 0, 0},
      {"jump_fps_two_values.h5", 0x00, 2, 0, F64, 0, 2, 0, 30, NULL, 0, 0, 0, 0},
      {"jump_bad_quat_attr.h5", 0x00, 2, 0, F64, 0, 1, 0, 30, "abcd", 1, 0, 0, 0},
      {"jump_no_fps.h5", 0x00, 2, 0, F64, 0, 1, 0, 0, NULL, 0, 0, 0, 0},
      {"jump_int_qpos.h5", 0x80, 2, 0, I32, 0, 1, 0, 30, NULL, 0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof js / sizeof js[0]; i++)
    if (write_seed(dir, &js[i], jump, 6, 28)) return fprintf(stderr, "%s: write failed\n", js[i].name), 1;
  const seed ws[] = {
      {"walk_xyzw.h5", 0x00, 2, 0, F64, 0, 1, 0, 30, "xyzw", 0, 0, 1, 1},
      {"walk_xyzw_forced.h5", 0xd0, 2, 0, F64, 1, 1, 0, 30, NULL, 0, 0, 1, 0},
  };
  for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
    if (write_seed(dir, &ws[i], walk, 5, 28)) return fprintf(stderr, "%s: write failed\n", ws[i].name), 1;
  const seed bs[] = {
      {"biped2d.h5", 0x04, 2, 0, F64, 0, 1, 0, 50, NULL, 0, 0, 0, 0},
      {"biped2d_fps_override.h5", 0x24, 2, 0, F32, 0, 1, 0, 0, NULL, 0, 0, 0, 0},
  };
  for (size_t i = 0; i < sizeof bs / sizeof bs[0]; i++)
    if (write_seed(dir, &bs[i], biped, 4, 9)) return fprintf(stderr, "%s: write failed\n", bs[i].name), 1;
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "motion")) return motion_seeds(argv[2]) ? 1 : 0;
  if ((argc == 4 || argc == 5) && !strcmp(argv[1], "describe"))
    return describe(argv[2], argv[3], argc == 5 ? (int)strtol(argv[4], NULL, 0) : -1) ? 1 : 0;
  fprintf(stderr, "usage: make_seeds motion DIR | make_seeds describe IN.h5 OUT [OPTIONS_BYTE]\n");
  return 2;
}
