// Which compute libraries this binary uses, for `llmtrain version` and run metadata.
#pragma once

#include <string>

namespace llmt::cli {

// The CPU GEMM backend in use ("openblas", "onednn", ...), or "none" when the kernels layer is absent.
std::string blas_in_use();

}  // namespace llmt::cli
