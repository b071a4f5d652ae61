// Fuzzes the reader of calibrate's profile files (the planner's input): a profile it accepts has
// positive h2d, d2h, GEMM and attention rates and an overlap in [0, 1]; anything else fails with
// offgen::Error.
#include <cstddef>
#include <cstdint>

#include "engine/core/error.h"
#include "scheduler/cost_model.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static offgen::fuzz::MemoryFile file;
  file.write(data, size);
  offgen::MachineProfile profile;
  try {
    profile = offgen::MachineProfile::load(file.path());
  } catch (const offgen::Error&) {
    return 0;
  }
  OFFGEN_FUZZ_EXPECT(profile.h2d > 0 && profile.d2h > 0, "copy rates");
  OFFGEN_FUZZ_EXPECT(profile.gemm_small > 0 && profile.gemm_large > 0, "GEMM rates");
  OFFGEN_FUZZ_EXPECT(profile.attention > 0, "attention rate");
  OFFGEN_FUZZ_EXPECT(profile.disk_read >= 0 && profile.cpu_attention >= 0 &&
                         profile.gemm_one >= 0 && profile.gemm_mid >= 0,
                     "optional rates");
  OFFGEN_FUZZ_EXPECT(profile.overlap >= 0 && profile.overlap <= 1, "overlap in [0, 1]");
  return 0;
}
