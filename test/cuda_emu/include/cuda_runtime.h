/* pebble's host CUDA emulator: cuda_runtime.h is the runtime API (cuda_runtime_api.h); the
 * device-side language (__global__, threadIdx, __syncthreads, ...) is in pbl_emu_device.h,
 * force-included into the kernel files. */
#ifndef PBL_EMU_CUDA_RUNTIME_H
#define PBL_EMU_CUDA_RUNTIME_H
#include "cuda_runtime_api.h"
#endif
