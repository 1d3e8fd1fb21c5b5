# Fails when an optimised build of the suite calls one of the ISA op sets' functions (kernels/
# avx2.hpp, avx512.hpp, neon.hpp: ropex::kernels::<family>::f32 / f64) out of line. Every vector
# register is caller-saved, so such a call inside a block loop spills and reloads the loop's
# coefficients; GCC and Clang each left some ops out of line in the largest loops (objdump, 3 Dec
# 2026: 1073 calls of one AVX-512 op under GCC 12, 610 of an FP8 store under Clang 14, 320 of a
# NEON op). Reads BINARY with OBJDUMP (GNU or LLVM, x86 or aarch64).
execute_process(COMMAND ${OBJDUMP} -d --no-show-raw-insn -C ${BINARY}
                COMMAND grep -E "[[:space:]](call|callq|bl)[[:space:]]+(0x)?[0-9a-f]+ <ropex::kernels::[a-z0-9_]+::f(32|64)::"
                OUTPUT_VARIABLE calls RESULT_VARIABLE status)
if(NOT status MATCHES "^[01]$")
  message(FATAL_ERROR "disassembling ${BINARY} with ${OBJDUMP} failed: ${status}")
endif()
if(NOT calls STREQUAL "")
  string(REGEX MATCHALL "<ropex::kernels::[^>]*>" called "${calls}")
  list(LENGTH called count)
  list(REMOVE_DUPLICATES called)
  list(JOIN called "\n  " names)
  message(FATAL_ERROR "${count} out-of-line calls of ISA ops in ${BINARY} (mark them ROPEX_ALWAYS_INLINE):\n  ${names}")
endif()
message(STATUS "no ISA op is called out of line in ${BINARY}")
