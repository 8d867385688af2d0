/* The part of NCCL's API that executor/comm/nccl_module.c calls, for building that module
 * against the host CUDA emulator with a stand-in NCCL (test/cuda_emu/fake_nccl_lib.c). Same
 * names and meanings as NCCL's; only the fields and values the module uses. */
#ifndef PBL_EMU_NCCL_H
#define PBL_EMU_NCCL_H

#include <stddef.h>

#include "cuda_runtime_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
} ncclResult_t;

typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[128]; } ncclUniqueId;
typedef enum { ncclFloat32 = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

typedef struct ncclConfig_t {
    int blocking; /* 0: calls may return ncclInProgress; poll ncclCommGetAsyncError */
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER { 1 }

const char  *ncclGetErrorString(ncclResult_t result);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);

#ifdef __cplusplus
}
#endif

#endif
