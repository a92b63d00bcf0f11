/* test_render.c - bcg render run as a process on the shipped policy
 * models/policies/stand_shac_bcg: videos (.mp4, .gif) of the size and frame
 * count asked for (ffprobe), a PNG strip (its header, and something drawn),
 * the ghost of the reference, and the errors. */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static char out[1 << 16];
static char policy[PATH_MAX], walk[PATH_MAX];

/* a file of the repository, from the working directory or the build tree's parent */
static const char *repo_path(const char *rel, char *buf, size_t len) {
  if (access(rel, R_OK) == 0) snprintf(buf, len, "%s", rel);
  else snprintf(buf, len, "%s/../%s", bcg_test_build_dir(), rel);
  return buf;
}

/* what the tests need: the shipped policy, MuJoCo's humanoid, ffmpeg and ffprobe */
static int ready(void) {
  repo_path("models/policies/stand_shac_bcg", policy, sizeof policy);
  repo_path("models/motions/walk.csv", walk, sizeof walk);
  char cfg[PATH_MAX + 16];
  snprintf(cfg, sizeof cfg, "%s/config.ini", policy);
  if (access(cfg, R_OK) || access("/usr/share/mujoco/model/humanoid/humanoid.xml", R_OK)) {
    CU_FAIL("models/policies/stand_shac_bcg or humanoid.xml missing");
    return 0;
  }
  if (system("command -v ffmpeg >/dev/null && command -v ffprobe >/dev/null") != 0) {
    CU_FAIL("ffmpeg/ffprobe missing: install the Debian package ffmpeg (make deps)");
    return 0;
  }
  return 1;
}

/* a shell command's output (stdout, stderr with err) into buf; its exit status */
static int sh(char *buf, size_t len, int err, const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(cmd, sizeof cmd - 8, fmt, ap);
  va_end(ap);
  if (err) snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  return bcg_test_capture(cmd, buf, len);
}

/* bcg render ARGS (stdout and stderr into out); the exit status */
static int render(const char *fmt, ...) {
  char args[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  return sh(out, sizeof out, 1, "%s/bcg render %s", bcg_test_build_dir(), args);
}

/* ffprobe's "width,height,frames" of FILE's video stream */
static const char *probe(const char *file) {
  static char buf[256];
  if (sh(buf, sizeof buf, 0,
         "ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=width,height,nb_read_frames "
         "-of csv=p=0 '%s'", file))
    return "(ffprobe failed)";
  buf[strcspn(buf, "\n")] = 0;
  return buf;
}

/* FILE (an image) decoded to rgb24 by ffmpeg: malloc'ed bytes, their count in *n */
static unsigned char *decode(const char *file, size_t *n) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "ffmpeg -v error -i '%s' -f rawvideo -pix_fmt rgb24 -", file);
  FILE *p = popen(cmd, "r");
  size_t cap = 1 << 20, k = 0;
  unsigned char *b = malloc(cap);
  while (p && b) {
    if (k == cap) b = realloc(b, cap *= 2);
    size_t r = b ? fread(b + k, 1, cap - k, p) : 0;
    if (!r) break;
    k += r;
  }
  if (p) pclose(p);
  *n = k;
  return b;
}

/* distinct colours of rgb24 pixels */
static long colours(const unsigned char *rgb, size_t n) {
  uint8_t *seen = calloc(1 << 21, 1); /* one bit per 24-bit colour */
  long c = 0;
  for (size_t i = 0; seen && i + 2 < n; i += 3) {
    uint32_t v = (uint32_t)rgb[i] << 16 | (uint32_t)rgb[i + 1] << 8 | rgb[i + 2];
    if (!(seen[v >> 3] & (1u << (v & 7)))) seen[v >> 3] |= (uint8_t)(1u << (v & 7)), c++;
  }
  free(seen);
  return c;
}

static void test_mp4(void) {
  if (!ready()) return;
  const char *f = bcg_test_tmp_path("a.mp4");
  CU_ASSERT_EQUAL_FATAL(render("%s --out %s --seconds 1 --width 160 --height 120 --fps 12", policy, f), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "written: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "(12 frames, 160x120, 12 fps)"));
  CU_ASSERT_STRING_EQUAL(probe(f), "160,120,12");
}

static void test_gif(void) {
  if (!ready()) return;
  const char *f = bcg_test_tmp_path("a.gif");
  CU_ASSERT_EQUAL_FATAL(render("%s --out %s --seconds 0.5 --width 96 --height 72 --fps 10 --sim bcg", policy, f), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, " in bcg, "));
  CU_ASSERT_STRING_EQUAL(probe(f), "96,72,5");
}

/* a PNG strip: the signature, IHDR's size (3 frames and two 2-pixel
 * separators), and a drawing (many colours, white separators) */
static void test_png_strip(void) {
  if (!ready()) return;
  const char *f = bcg_test_tmp_path("strip.png");
  CU_ASSERT_EQUAL_FATAL(render("%s --out %s --seconds 1 --width 80 --height 60 --frames 3", policy, f), 0);
  unsigned char h[24];
  FILE *p = fopen(f, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT_EQUAL(fread(h, 1, 24, p), 24);
  fclose(p);
  CU_ASSERT_EQUAL(memcmp(h, "\x89PNG\r\n\x1a\n", 8), 0);
  CU_ASSERT_EQUAL(memcmp(h + 12, "IHDR", 4), 0);
  const unsigned w = (unsigned)h[16] << 24 | h[17] << 16 | h[18] << 8 | h[19];
  const unsigned ht = (unsigned)h[20] << 24 | h[21] << 16 | h[22] << 8 | h[23];
  CU_ASSERT_EQUAL(w, 3 * 80 + 2 * 2);
  CU_ASSERT_EQUAL(ht, 60);
  size_t n;
  unsigned char *rgb = decode(f, &n);
  CU_ASSERT_EQUAL_FATAL(n, (size_t)w * ht * 3);
  long c = colours(rgb, n);
  bcg_test_report("png strip: distinct colours (at least 100)", (double)c);
  CU_ASSERT(c >= 100);
  const unsigned char *sep = rgb + (size_t)(30 * w + 80) * 3; /* row 30, the first separator */
  CU_ASSERT(sep[0] == 255 && sep[1] == 255 && sep[2] == 255);
  free(rgb);
}

/* the ghost: the reference drawn over the policy changes the picture; with
 * the walk clip as the reference (the standing policy stays behind it) by a
 * lot */
static void test_ghost(void) {
  if (!ready()) return;
  const char *a = bcg_test_tmp_path("ghost.png"), *b = bcg_test_tmp_path("noghost.png");
  const char *args = "--seconds 1.5 --width 120 --height 90 --frames 1";
  CU_ASSERT_EQUAL_FATAL(render("%s --out %s %s task.motion=%s", policy, a, args, walk), 0);
  CU_ASSERT_PTR_NULL(strstr(out, "no ghost"));
  CU_ASSERT_EQUAL_FATAL(render("%s --out %s %s task.motion=%s --no-ghost", policy, b, args, walk), 0);
  size_t na, nb;
  unsigned char *ra = decode(a, &na), *rb = decode(b, &nb);
  CU_ASSERT_EQUAL_FATAL(na, (size_t)120 * 90 * 3);
  CU_ASSERT_EQUAL_FATAL(nb, na);
  long diff = 0;
  for (size_t i = 0; i < na; i += 3) diff += ra[i] != rb[i] || ra[i + 1] != rb[i + 1] || ra[i + 2] != rb[i + 2];
  bcg_test_report("ghost: share of the pixels it changes (at least 0.02)", (double)diff / (120 * 90));
  CU_ASSERT(diff >= 0.02 * 120 * 90);
  free(ra);
  free(rb);
}

static void test_errors(void) {
  if (!ready()) return;
  const char *tmp = bcg_test_tmpdir();
  CU_ASSERT_EQUAL(render(""), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: render: missing RUN_DIR or CHECKPOINT"));
  CU_ASSERT_EQUAL(render("%s --out %s/x.avi", policy, tmp), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown extension '.avi'"));
  CU_ASSERT_EQUAL(render("%s --out %s/x", policy, tmp), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "unknown extension '(none)'"));
  CU_ASSERT_EQUAL(render("%s --sim both", policy), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--sim 'both': must be mujoco or bcg"));
  CU_ASSERT_EQUAL(render("%s --width 0", policy), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--width '0': must be a whole number of pixels in [16, 4096]"));
  CU_ASSERT_EQUAL(render("%s --height 12x", policy), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--height '12x'"));
  CU_ASSERT_EQUAL(render("%s --width 161 --out %s/x.mp4", policy, tmp), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "even width and height"));
  CU_ASSERT_EQUAL(render("%s --fps 0", policy), 2);
  CU_ASSERT_EQUAL(render("%s --seconds -1", policy), 2);
  CU_ASSERT_EQUAL(render("%s --frames 3 --out %s/x.gif", policy, tmp), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--frames is for a .png strip only"));
  CU_ASSERT_EQUAL(render("%s --bogus", policy), 2);
  CU_ASSERT_EQUAL(render("%s --out", policy), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "--out needs a value"));
  /* a directory without checkpoints; a path that is not there */
  char empty[PATH_MAX];
  snprintf(empty, sizeof empty, "%s/emptyrun", tmp);
  CU_ASSERT_EQUAL_FATAL(mkdir(empty, 0755), 0);
  CU_ASSERT_EQUAL(render("%s --out %s/x.png", empty, tmp), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "bcg: error: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "no checkpoint in"));
  CU_ASSERT_EQUAL(render("%s/nope --out %s/x.png", tmp, tmp), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "nope: cannot read"));
  /* an output directory that does not exist; ffmpeg not on PATH */
  CU_ASSERT_EQUAL(render("%s --out %s/nodir/x.png", policy, tmp), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "its directory does not exist"));
  CU_ASSERT_EQUAL(sh(out, sizeof out, 1, "PATH=/nonexistent %s/bcg render %s --out %s/x.png", bcg_test_build_dir(),
                     policy, tmp), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "ffmpeg not found on PATH: install the Debian package ffmpeg"));
  CU_ASSERT_EQUAL(sh(out, sizeof out, 1, "%s/bcg help render", bcg_test_build_dir()), 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "usage: bcg render RUN_DIR|CHECKPOINT"));
  /* nothing written by the failures but the directory made here */
  static const char *none[] = {"x.avi", "x", "x.mp4", "x.gif", "x.png"};
  for (int i = 0; i < 5; i++) CU_ASSERT_NOT_EQUAL(access(bcg_test_tmp_path(none[i]), F_OK), 0);
  CU_ASSERT_EQUAL(rmdir(empty), 0);
}

BCG_TESTS({"mp4 of the size and frames asked for", test_mp4}, {"gif (bcg)", test_gif},
          {"png strip", test_png_strip}, {"the ghost of the reference", test_ghost}, {"errors", test_errors});
BCG_RUN("render")
