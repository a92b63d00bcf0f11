/* tests/fuzz/fuzz_checkpoint.c - libFuzzer harness of the checkpoint reader
 * (core/runlog.c: bcg_checkpoint_open with its format and CRC-32 checks;
 * core/train.c: bcg_session_load, which reads the trainer counters and
 * hands the learner, estimator and task groups to the plugins' load), the
 * path of `bcg train --resume` and `bcg eval`.
 *
 * Two sessions are opened once: tests/fuzz/checkpoint_shac.ini (SHAC, the BCG
 * estimator, imitation with the discriminator, domain randomisation) and
 * tests/fuzz/checkpoint_ppo.ini (PPO, locomotion on biped2d).
 *
 * Input: one options byte, then the checkpoint file as a description
 * (tests/fuzz/fuzz_h5desc.h; its bytes instead with BCG_FUZZ_H5_RAW=1).
 *   bit 0  the session: SHAC or PPO
 *   bit 1  seal the file first (bcg_checkpoint_seal: a valid checksum over
 *          whatever the file holds, so its contents reach the plugins)
 *   bit 2  after a successful load, one training iteration from the loaded
 *          state (what --resume does next), in a freshly opened session
 *
 * Checked: no crash, hang or sanitizer report; a refusal is one line that
 * names the file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcg/config.h"
#include "bcg/loader.h"
#include "bcg/runlog.h"
#include "bcg/train.h"
#include "fuzz_h5desc.h"
#include "fuzz_util.h"

static const char *const ini[2] = {"tests/fuzz/checkpoint_shac.ini", "tests/fuzz/checkpoint_ppo.ini"};
static bcg_config *cfg[2];
static bcg_session S[2];

static void open_session(int i) {
  char err[4096];
  if (bcg_session_open(&S[i], cfg[i], err, sizeof err)) fz_die(err);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fz_init();
  char err[4096];
  for (int i = 0; i < 2; i++) {
    if (bcg_config_load_with(&cfg[i], bcg_registry_global(), ini[i], 0, NULL, err, sizeof err)) fz_die(err);
    open_session(i);
  }
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  const unsigned o = data[0];
  const int which = o & 1, seal = (o >> 1) & 1, iterate = (o >> 2) & 1;
  char path[PATH_MAX + 32], err[4096];
  if (h5d_is_raw(data + 1, size - 1)) {
    if (!h5d_raw_enabled()) return 0;
    fz_write("ckpt_000000001.h5", data + 1, size - 1, path, sizeof path);
  } else {
    snprintf(path, sizeof path, "%s/ckpt_000000001.h5", fz_dir);
    if (h5d_build(path, data + 1, size - 1)) fz_die("cannot create the HDF5 file");
  }
  if (seal && bcg_checkpoint_seal(path, err, sizeof err)) {
    fz_say("seal refused", err);
    fz_check_msg(err);
  }
  if (iterate) { /* the iteration starts from this checkpoint alone */
    bcg_session_close(&S[which]);
    open_session(which);
  }
  int64_t it = 0, logit = 0;
  uint64_t samples = 0;
  double wall = 0;
  if (bcg_session_load(&S[which], path, &it, &samples, &wall, &logit, err, sizeof err)) {
    fz_say("refused", err);
    fz_check_msg(err);
    if (!strstr(err, path)) fz_die2("the message does not name the file", err);
    return 0;
  }
  snprintf(err, sizeof err, "iteration %lld, %llu samples", (long long)it, (unsigned long long)samples);
  fz_say("loaded", err);
  if (iterate) {
    bcg_learner_stats st;
    memset(&st, 0, sizeof st);
    int rc = S[which].lops->iterate(S[which].learner, &st);
    fz_say("iteration", rc ? "failed" : "done");
  }
  return 0;
}
