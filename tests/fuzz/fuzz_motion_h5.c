/* tests/fuzz/fuzz_motion_h5.c - libFuzzer harness of the HDF5 reference-motion
 * reader (tasks/motion.h: bcg_motion_load_opts on a .h5 file: dataset qpos,
 * attributes fps and quat). Input and checks: tests/fuzz/fuzz_motion.h; the
 * file is built from a description (tests/fuzz/fuzz_h5desc.h). */
#include "fuzz_motion.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fm_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fm_run(data, size, "motion.h5", 1);
  return 0;
}
