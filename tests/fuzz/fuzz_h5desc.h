/* tests/fuzz/fuzz_h5desc.h - HDF5 files built from fuzzed descriptions, for
 * the harnesses of bcg's HDF5 readers (fuzz_motion_h5.c, fuzz_checkpoint.c).
 *
 * Why a description and not the file's bytes: libhdf5 (1.10, not
 * instrumented) has its own memory errors and endless loops on malformed
 * metadata, which the fuzzer finds within minutes and which bcg cannot fix;
 * fuzzing raw bytes would mostly rediscover those. A description is turned
 * into a well-formed file through the HDF5 API, so what the reader under
 * test meets is anything a valid file can hold: other names, shapes (also
 * huge ones declared without data), types (strings, compounds, enums,
 * arrays, opaque, odd float sizes), groups, links, attributes and values.
 * Raw bytes are still fuzzed on request (BCG_FUZZ_H5_RAW=1, see
 * docs/testing.md): an input that starts with the HDF5 signature is then
 * the file itself.
 *
 * A description is a sequence of records (integers little-endian; a string
 * is a length byte and its bytes):
 *   'G' path                       a group (intermediate groups created)
 *   'D' path type shape flags data a dataset; flags bit 0: chunked, bit 1:
 *                                  declared only (no data: its fill value)
 *   'A' path name type shape data  an attribute of the object at path
 *                                  ("" or "/": the root group)
 *   'L' path target                a soft link
 * type: one byte (the enum below), then for fixed strings, opaque and the
 * wide float one size byte. shape: rank byte (0 scalar, at most 4), then each
 * dimension as 4 bytes; a dimension byte 0xff in the top byte declares a
 * huge extent (2^40 + the rest). data: the values' bytes in the type's
 * memory layout (vlen strings: a length byte and the bytes, each), taken
 * from the input, zero when it runs out; at most H5D_MAX_BYTES per object
 * are written (a larger one is declared only). A malformed record ends the
 * description; whatever the HDF5 API refuses is skipped. */
#ifndef BCG_FUZZ_H5DESC_H
#define BCG_FUZZ_H5DESC_H

#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define H5D_MAX_BYTES (1 << 18)
#define H5D_MAX_RECORDS 512

typedef struct h5d_in {
  const uint8_t *p;
  size_t n;
} h5d_in;

static inline int h5d_u8(h5d_in *in, unsigned *v) {
  if (!in->n) return -1;
  *v = *in->p++;
  in->n--;
  return 0;
}
static inline int h5d_u32(h5d_in *in, uint64_t *v) {
  if (in->n < 4) return -1;
  uint32_t x = (uint32_t)in->p[0] | (uint32_t)in->p[1] << 8 | (uint32_t)in->p[2] << 16 | (uint32_t)in->p[3] << 24;
  in->p += 4, in->n -= 4;
  *v = (in->p[-1] == 0xff) ? ((uint64_t)1 << 40) + (x & 0xffffff) : x;
  return 0;
}
/* a string into buf (NUL-terminated; an embedded NUL shortens it) */
static inline int h5d_str(h5d_in *in, char *buf, size_t len) {
  unsigned n;
  if (h5d_u8(in, &n) || in->n < n || n >= len) return -1;
  memcpy(buf, in->p, n);
  buf[n] = 0;
  in->p += n, in->n -= n;
  return 0;
}
/* bytes for the data, zeros when the input runs out */
static inline void h5d_take(h5d_in *in, uint8_t *dst, size_t n) {
  size_t k = n < in->n ? n : in->n;
  memcpy(dst, in->p, k);
  memset(dst + k, 0, n - k);
  in->p += k, in->n -= k;
}

enum {
  H5D_F64, H5D_F32, H5D_I64, H5D_I32, H5D_U8, H5D_F64BE, H5D_I16, H5D_FSTR, H5D_VSTR_UTF8, H5D_VSTR_ASCII,
  H5D_COMPOUND, H5D_ENUM, H5D_ARRAY, H5D_OPAQUE, H5D_WIDE_FLOAT, H5D_U64, H5D_FSTR_NULLPAD, H5D_NTYPES
};

/* the type of a record (file type = memory type; vlen: *vlen set), -1 when invalid */
static inline hid_t h5d_type(h5d_in *in, int *vlen) {
  unsigned code, param = 0;
  *vlen = 0;
  if (h5d_u8(in, &code)) return -1;
  code %= H5D_NTYPES;
  if ((code == H5D_FSTR || code == H5D_FSTR_NULLPAD || code == H5D_OPAQUE || code == H5D_WIDE_FLOAT) &&
      h5d_u8(in, &param))
    return -1;
  hid_t t = -1;
  switch (code) {
    case H5D_F64: return H5Tcopy(H5T_IEEE_F64LE);
    case H5D_F32: return H5Tcopy(H5T_IEEE_F32LE);
    case H5D_I64: return H5Tcopy(H5T_STD_I64LE);
    case H5D_I32: return H5Tcopy(H5T_STD_I32LE);
    case H5D_U8: return H5Tcopy(H5T_STD_U8LE);
    case H5D_F64BE: return H5Tcopy(H5T_IEEE_F64BE);
    case H5D_I16: return H5Tcopy(H5T_STD_I16LE);
    case H5D_U64: return H5Tcopy(H5T_STD_U64LE);
    case H5D_FSTR:
    case H5D_FSTR_NULLPAD:
      t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, param ? param : 1);
      H5Tset_strpad(t, code == H5D_FSTR_NULLPAD ? H5T_STR_NULLPAD : H5T_STR_NULLTERM);
      return t;
    case H5D_VSTR_UTF8:
    case H5D_VSTR_ASCII:
      t = H5Tcopy(H5T_C_S1);
      H5Tset_size(t, H5T_VARIABLE);
      H5Tset_cset(t, code == H5D_VSTR_UTF8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
      *vlen = 1;
      return t;
    case H5D_COMPOUND:
      t = H5Tcreate(H5T_COMPOUND, 12);
      H5Tinsert(t, "x", 0, H5T_IEEE_F64LE);
      H5Tinsert(t, "n", 8, H5T_STD_I32LE);
      return t;
    case H5D_ENUM: {
      t = H5Tenum_create(H5T_STD_I32LE);
      int a = 0, b = 1;
      H5Tenum_insert(t, "a", &a);
      H5Tenum_insert(t, "b", &b);
      return t;
    }
    case H5D_ARRAY: {
      hsize_t two = 2;
      return H5Tarray_create2(H5T_IEEE_F64LE, 1, &two);
    }
    case H5D_OPAQUE:
      t = H5Tcreate(H5T_OPAQUE, param ? param : 1);
      H5Tset_tag(t, "fuzz");
      return t;
    case H5D_WIDE_FLOAT: /* a double in a wider container: 9 to 264 bytes a value */
      t = H5Tcopy(H5T_IEEE_F64LE);
      H5Tset_size(t, 9 + param);
      return t;
  }
  return -1;
}

/* a dataspace from the input; *npoints the number of values */
static inline hid_t h5d_space(h5d_in *in, uint64_t *npoints) {
  unsigned rank;
  if (h5d_u8(in, &rank)) return -1;
  rank %= 5;
  if (rank == 0) return *npoints = 1, H5Screate(H5S_SCALAR);
  hsize_t dims[4];
  uint64_t np = 1;
  for (unsigned i = 0; i < rank; i++) {
    uint64_t d;
    if (h5d_u32(in, &d)) return -1;
    dims[i] = d;
    np = (d && np > UINT64_MAX / d) ? UINT64_MAX : np * d;
  }
  *npoints = np;
  return H5Screate_simple((int)rank, dims, NULL);
}

/* the values of one object: a buffer in the memory layout of t (vlen: char *
 * pointers into a second buffer); NULL when too large to write */
static inline void *h5d_data(h5d_in *in, hid_t t, int vlen, uint64_t np, char **strings) {
  *strings = NULL;
  if (np == 0 || np > H5D_MAX_BYTES) return NULL;
  if (vlen) {
    char **ptr = calloc((size_t)np, sizeof *ptr);
    char *s = malloc((size_t)np * 256);
    if (!ptr || !s) return free(ptr), free(s), NULL;
    for (uint64_t i = 0; i < np; i++) {
      unsigned len = 0;
      h5d_u8(in, &len);
      char *d = s + i * 256;
      h5d_take(in, (uint8_t *)d, len);
      d[len] = 0;
      ptr[i] = d;
    }
    *strings = s;
    return ptr;
  }
  size_t sz = H5Tget_size(t);
  if (!sz || np * sz > H5D_MAX_BYTES) return NULL;
  uint8_t *buf = malloc((size_t)(np * sz));
  if (buf) h5d_take(in, buf, (size_t)(np * sz));
  return buf;
}

static inline hid_t h5d_open_obj(hid_t f, const char *path) {
  if (!path[0] || !strcmp(path, "/")) return H5Oopen(f, "/", H5P_DEFAULT);
  return H5Oopen(f, path, H5P_DEFAULT);
}

/* Build the file at path from a description. 0, or -1 when no file could be
 * created at all. */
static inline int h5d_build(const char *path, const uint8_t *p, size_t n) {
  H5E_auto2_t ofn;
  void *odata;
  H5Eget_auto2(H5E_DEFAULT, &ofn, &odata);
  H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
  hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) {
    H5Eset_auto2(H5E_DEFAULT, ofn, odata);
    return -1;
  }
  hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
  H5Pset_create_intermediate_group(lcpl, 1);
  h5d_in in = {p, n};
  for (int rec = 0; rec < H5D_MAX_RECORDS; rec++) {
    unsigned op;
    char name[256], other[256];
    if (h5d_u8(&in, &op)) break;
    if (op == 'G') {
      if (h5d_str(&in, name, sizeof name)) break;
      hid_t g = H5Gcreate2(f, name, lcpl, H5P_DEFAULT, H5P_DEFAULT);
      if (g >= 0) H5Gclose(g);
    } else if (op == 'L') {
      if (h5d_str(&in, name, sizeof name) || h5d_str(&in, other, sizeof other)) break;
      H5Lcreate_soft(other, f, name, lcpl, H5P_DEFAULT);
    } else if (op == 'D' || op == 'A') {
      if (h5d_str(&in, name, sizeof name)) break;
      if (op == 'A' && h5d_str(&in, other, sizeof other)) break;
      int vlen;
      hid_t t = h5d_type(&in, &vlen);
      if (t < 0) break;
      uint64_t np = 0;
      unsigned flags = 0;
      hid_t sp = h5d_space(&in, &np);
      if (sp < 0 || (op == 'D' && h5d_u8(&in, &flags))) {
        if (sp >= 0) H5Sclose(sp);
        H5Tclose(t);
        break;
      }
      char *strings = NULL;
      void *data = (op == 'D' && (flags & 2)) ? NULL : h5d_data(&in, t, vlen, np, &strings);
      if (op == 'D') {
        hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
        if (flags & 1) {
          int rank = H5Sget_simple_extent_ndims(sp);
          hsize_t chunk[4] = {16, 16, 16, 16};
          if (rank > 0) H5Pset_chunk(dcpl, rank, chunk);
        }
        hid_t d = H5Dcreate2(f, name, t, sp, lcpl, dcpl, H5P_DEFAULT);
        if (d >= 0 && data) H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
        if (d >= 0) H5Dclose(d);
        H5Pclose(dcpl);
      } else {
        hid_t o = h5d_open_obj(f, name);
        if (o >= 0) {
          if (H5Aexists(o, other) > 0) H5Adelete(o, other);
          hid_t a = H5Acreate2(o, other, t, sp, H5P_DEFAULT, H5P_DEFAULT);
          if (a >= 0 && data) H5Awrite(a, t, data);
          if (a >= 0) H5Aclose(a);
          H5Oclose(o);
        }
      }
      free(data);
      free(strings);
      H5Sclose(sp);
      H5Tclose(t);
    } else {
      break;
    }
  }
  H5Pclose(lcpl);
  H5Fclose(f);
  H5Eclear2(H5E_DEFAULT);
  H5Eset_auto2(H5E_DEFAULT, ofn, odata);
  return 0;
}

/* BCG_FUZZ_H5_RAW=1: inputs that start with the HDF5 signature are files */
static inline int h5d_raw_enabled(void) {
  const char *e = getenv("BCG_FUZZ_H5_RAW");
  return e && e[0] == '1';
}
static inline int h5d_is_raw(const uint8_t *p, size_t n) {
  return n >= 8 && !memcmp(p, "\x89HDF\r\n\x1a\n", 8);
}

#endif
