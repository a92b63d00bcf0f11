/* tests/fuzz/fuzz_motion_csv.c - libFuzzer harness of the CSV reference-motion
 * reader (tasks/motion.h: bcg_motion_load_opts on a .csv file, bcg's format
 * and LAFAN's). Input and checks: tests/fuzz/fuzz_motion.h. */
#include "fuzz_motion.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  fm_init();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fm_run(data, size, "motion.csv", 0);
  return 0;
}
