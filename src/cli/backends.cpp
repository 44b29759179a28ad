#include "cli/backends.h"

#include "kernels/ops.h"

namespace llmt::cli {

std::string blas_in_use() { return kernels::gemm_backend_name(); }

}  // namespace llmt::cli
