#include "cli/backends.h"

namespace llmt::cli {

std::string blas_in_use() { return "none"; }

}  // namespace llmt::cli
