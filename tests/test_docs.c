/* test_docs.c - the repository's Markdown points only at what a user has:
 * every relative link ([text](target), images included) resolves to a file
 * or folder of the repository, no link is absolute or leaves the
 * repository, and every repository path quoted as inline code (`docs/g1.md`,
 * `configs/ladder/g1_run_shac_bcg.ini`) exists. The checker runs first on a
 * generated tree with each kind of fault, so that it is known to find them.
 *
 * Scanned: every *.md under the repository root except build outputs and the
 * user's own folders (build*, deps, data, runs, hidden ones). Quoted paths
 * count when their first component is one of the repository's top-level
 * folders (those same exclusions) and their last one has an extension, so
 * that built binaries (`bench/gpu_bench`) and placeholders (`runs/<stamp>`)
 * are not taken for files. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* nftw's FTW_ACTIONRETVAL */
#endif
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

typedef struct scan {
  char root[PATH_MAX];
  size_t rootlen;
  char tops[64][256]; /* the top-level folders a quoted path may start with */
  int ntops;
  int nfiles, nlinks, npaths, nbad;
  char msg[8192]; /* the first problems, one per line */
} scan;

static scan *S; /* nftw's callback has no user pointer */

static int skipped_dir(const char *name) {
  return name[0] == '.' || strncmp(name, "build", 5) == 0 || strcmp(name, "deps") == 0 ||
         strcmp(name, "data") == 0 || strcmp(name, "runs") == 0;
}

static void problem(scan *s, const char *file, int line, const char *fmt, const char *what) {
  s->nbad++;
  size_t n = strlen(s->msg);
  if (n + 400 >= sizeof s->msg) return;
  int k = snprintf(s->msg + n, sizeof s->msg - n, "%s:%d: ", file, line);
  if (k > 0 && (size_t)k < sizeof s->msg - n) n += (size_t)k;
  k = snprintf(s->msg + n, sizeof s->msg - n, fmt, what);
  if (k > 0 && (size_t)k < sizeof s->msg - n) n += (size_t)k;
  if (n + 1 < sizeof s->msg) s->msg[n] = '\n', s->msg[n + 1] = 0;
}

/* rel (a path relative to the folder dir, both inside the root) as a path
 * from the root, ".." resolved; -1 when it climbs out of the root */
static int normalise(const char *dir, const char *rel, char *out, size_t cap) {
  char buf[PATH_MAX * 2];
  snprintf(buf, sizeof buf, "%s%s%s", dir, dir[0] ? "/" : "", rel);
  char *parts[512];
  int np = 0;
  for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
    if (strcmp(t, ".") == 0) continue;
    if (strcmp(t, "..") == 0) {
      if (np == 0) return -1;
      np--;
      continue;
    }
    if (np < 512) parts[np++] = t;
  }
  out[0] = 0;
  size_t n = 0;
  for (int i = 0; i < np; i++) {
    int k = snprintf(out + n, cap - n, "%s%s", i ? "/" : "", parts[i]);
    if (k < 0 || (size_t)k >= cap - n) return -1;
    n += (size_t)k;
  }
  return 0;
}

static int exists_in_root(const scan *s, const char *rel) {
  char p[PATH_MAX * 2];
  snprintf(p, sizeof p, "%s/%s", s->root, rel[0] ? rel : ".");
  struct stat st;
  return stat(p, &st) == 0;
}

static void check_link(scan *s, const char *file, const char *dir, int line, const char *target) {
  if (strncmp(target, "http://", 7) == 0 || strncmp(target, "https://", 8) == 0 ||
      strncmp(target, "mailto:", 7) == 0 || target[0] == '#' || target[0] == 0)
    return;
  s->nlinks++;
  char t[PATH_MAX];
  snprintf(t, sizeof t, "%s", target);
  t[strcspn(t, "#?")] = 0;
  char norm[PATH_MAX];
  if (t[0] == '/')
    problem(s, file, line, "link '%s' is absolute (links are relative to the file)", target);
  else if (normalise(dir, t, norm, sizeof norm))
    problem(s, file, line, "link '%s' leaves the repository", target);
  else if (!exists_in_root(s, norm))
    problem(s, file, line, "link '%s': no such file in the repository", target);
}

static int is_top(const scan *s, const char *name, size_t len) {
  for (int i = 0; i < s->ntops; i++)
    if (strlen(s->tops[i]) == len && strncmp(s->tops[i], name, len) == 0) return 1;
  return 0;
}

static void check_code_path(scan *s, const char *file, int line, const char *tok, size_t len) {
  char t[PATH_MAX];
  if (len == 0 || len >= sizeof t) return;
  memcpy(t, tok, len);
  t[len] = 0;
  if (strncmp(t, "./", 2) == 0) memmove(t, t + 2, strlen(t + 2) + 1);
  while ((len = strlen(t)) > 0 && strchr(".,:;", t[len - 1])) t[len - 1] = 0;
  if (!strchr(t, '/') || strpbrk(t, " \t{}<>*$=?[]|()~\\\"'") || strstr(t, "...")) return;
  if (!is_top(s, t, strcspn(t, "/"))) return;
  const char *last = strrchr(t, '/') + 1;
  if (!strchr(last, '.') || last[0] == '.') return;
  s->npaths++;
  if (!exists_in_root(s, t)) problem(s, file, line, "quoted path '%s': no such file in the repository", t);
}

static void check_text(scan *s, const char *file, const char *text) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", file);
  char *sl = strrchr(dir, '/');
  if (sl) *sl = 0;
  else dir[0] = 0;
  int line = 1, fence = 0;
  for (const char *p = text; *p;) {
    const char *eol = strchr(p, '\n');
    size_t n = eol ? (size_t)(eol - p) : strlen(p);
    const char *q = p;
    while (q < p + n && (*q == ' ' || *q == '\t')) q++;
    if ((size_t)(p + n - q) >= 3 && strncmp(q, "```", 3) == 0) {
      fence = !fence;
    } else if (!fence) {
      for (const char *c = p; c < p + n; c++) {
        if (c[0] == ']' && c + 1 < p + n && c[1] == '(') { /* a link's target */
          const char *b = c + 2, *e = b;
          while (e < p + n && *e != ')' && *e != ' ') e++;
          char t[PATH_MAX];
          size_t k = (size_t)(e - b) < sizeof t - 1 ? (size_t)(e - b) : sizeof t - 1;
          memcpy(t, b, k);
          t[k] = 0;
          check_link(s, file, dir, line, t);
        } else if (c[0] == '`') { /* an inline code span on this line */
          const char *e = memchr(c + 1, '`', (size_t)(p + n - c - 1));
          if (!e) break;
          if (e > c + 1) check_code_path(s, file, line, c + 1, (size_t)(e - c - 1));
          c = e;
        }
      }
    }
    line++;
    p += n + (eol ? 1 : 0);
  }
}

static int visit(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  (void)st;
  const char *name = path + ftw->base;
  if (type == FTW_D && ftw->level > 0 && skipped_dir(name)) return FTW_SKIP_SUBTREE;
  if (type != FTW_F) return FTW_CONTINUE;
  size_t n = strlen(name);
  if (n < 3 || strcmp(name + n - 3, ".md") != 0) return FTW_CONTINUE;
  const char *rel = path + S->rootlen + 1;
  FILE *f = fopen(path, "rb");
  if (!f) {
    problem(S, rel, 0, "%s", "cannot be read");
    return FTW_CONTINUE;
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  rewind(f);
  char *text = malloc((size_t)len + 1);
  size_t got = text ? fread(text, 1, (size_t)len, f) : 0;
  fclose(f);
  if (!text) return FTW_STOP;
  text[got] = 0;
  S->nfiles++;
  check_text(S, rel, text);
  free(text);
  return FTW_CONTINUE;
}

/* every Markdown file under root checked into s */
static void scan_tree(scan *s, const char *root) {
  memset(s, 0, sizeof *s);
  snprintf(s->root, sizeof s->root, "%s", root);
  s->rootlen = strlen(s->root);
  DIR *d = opendir(root);
  CU_ASSERT_PTR_NOT_NULL_FATAL(d);
  for (struct dirent *e; (e = readdir(d)) != NULL;) {
    char p[PATH_MAX * 2];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", root, e->d_name);
    if (skipped_dir(e->d_name) || stat(p, &st) || !S_ISDIR(st.st_mode) || s->ntops == 64) continue;
    snprintf(s->tops[s->ntops++], sizeof s->tops[0], "%s", e->d_name);
  }
  closedir(d);
  S = s;
  CU_ASSERT_EQUAL(nftw(root, visit, 16, FTW_PHYS | FTW_ACTIONRETVAL), 0);
}

static void put(const char *root, const char *rel, const char *text) {
  char p[PATH_MAX * 2];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

/* the checker finds each kind of fault, with the file and line, and nothing
 * in what is right */
static void test_checker_finds_faults(void) {
  char root[PATH_MAX], p[PATH_MAX * 2];
  snprintf(root, sizeof root, "%s", bcg_test_tmp_path("docs_tree"));
  CU_ASSERT_EQUAL_FATAL(mkdir(root, 0755), 0);
  snprintf(p, sizeof p, "%s/docs", root);
  CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
  snprintf(p, sizeof p, "%s/build", root); /* skipped: build outputs */
  CU_ASSERT_EQUAL_FATAL(mkdir(p, 0755), 0);
  put(root, "build/notes.md", "[x](nowhere.md)\n");
  put(root, "docs/ok.md", "back to the [front door](../README.md), [figure](fig.png \"title\")\n");
  put(root, "docs/fig.png", "");
  put(root, "README.md",
      "# t\n"
      "[fine](docs/ok.md) and [fine too](docs/ok.md#a-heading) and [web](https://example.org/x)\n"
      "[gone](docs/missing.md)\n"
      "[outside](../elsewhere/notes.md) [absolute](/etc/passwd)\n"
      "quoted `docs/ok.md`, `docs/gone.txt`, not paths: `bench/gpu_bench` `runs/<stamp>/x.h5` `a/b.c`\n"
      "```\n"
      "[in a fence](not/checked.md) `docs/fenced.txt`\n"
      "```\n");
  scan s;
  scan_tree(&s, root);
  CU_ASSERT_EQUAL(s.nfiles, 2);
  CU_ASSERT_EQUAL(s.nlinks, 7);
  CU_ASSERT_EQUAL(s.npaths, 2);
  CU_ASSERT_EQUAL(s.nbad, 4);
  CU_ASSERT_PTR_NOT_NULL(strstr(s.msg, "README.md:3: link 'docs/missing.md': no such file in the repository\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(s.msg, "README.md:4: link '../elsewhere/notes.md' leaves the repository\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(s.msg, "README.md:4: link '/etc/passwd' is absolute"));
  CU_ASSERT_PTR_NOT_NULL(strstr(s.msg, "README.md:5: quoted path 'docs/gone.txt': no such file in the repository\n"));
  if (s.nbad != 4) fprintf(stderr, "%s", s.msg);
}

/* this repository's Markdown */
static void test_repository_docs(void) {
  char guess[PATH_MAX], root[PATH_MAX];
  if (access("README.md", R_OK) == 0 && access("docs", R_OK) == 0)
    snprintf(guess, sizeof guess, ".");
  else
    snprintf(guess, sizeof guess, "%s/..", bcg_test_build_dir());
  if (!realpath(guess, root)) CU_FAIL_FATAL("the repository root cannot be found");
  scan s;
  scan_tree(&s, root);
  /* the README, docs/ and the READMEs of the plugin folders at least */
  CU_ASSERT(s.nfiles >= 10);
  CU_ASSERT(s.nlinks >= 50);
  CU_ASSERT(s.npaths >= 50);
  if (s.nbad) fprintf(stderr, "%d problem(s) in the repository's Markdown:\n%s", s.nbad, s.msg);
  CU_ASSERT_EQUAL(s.nbad, 0);
  bcg_test_report("Markdown files checked", s.nfiles);
  bcg_test_report("relative links checked", s.nlinks);
  bcg_test_report("quoted repository paths checked", s.npaths);
}

BCG_TESTS({"checker finds faults", test_checker_finds_faults}, {"repository docs", test_repository_docs});
BCG_RUN("docs")
