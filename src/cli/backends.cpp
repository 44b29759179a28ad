#include "cli/backends.h"

#if __has_include("kernels/cpu/matmul.h") && defined(LLMT_HAVE_KERNELS)
#include "kernels/cpu/matmul.h"
#define LLMT_BACKEND_NAME() std::string(::llmt::kernels::cpu::gemm_backend_name())
#else
#define LLMT_BACKEND_NAME() std::string("none")
#endif

namespace llmt::cli {

std::string blas_in_use() { return LLMT_BACKEND_NAME(); }

}  // namespace llmt::cli
