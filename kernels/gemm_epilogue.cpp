// gemm_epilogue.cpp: the validity rules of a GemmLowp epilogue, shared by
// the CPU and CUDA GEMMs so both refuse the same requests.
#include "kernels/gemm_epilogue.h"

#include <algorithm>

#include "kernels/error.h"

namespace ddp {

void validate_gemm_epilogue(const GemmLowp& g, const std::string& describe) {
  DDP_REQUIRE(!(has_activation_epilogue(g) && g.beta != 0.0f),
              "gemm_lowp: an activation epilogue needs beta == 0 (" + describe + ")");
  DDP_REQUIRE(g.act == Activation::None || g.dact == Activation::None,
              "gemm_lowp: act and dact in one GEMM (" + describe + ")");
  DDP_REQUIRE(g.pre_activation == nullptr || g.ld_pre_activation >= std::max(1, g.n),
              "gemm_lowp: ld_pre_activation smaller than a row of C (" + describe + ")");
  if (g.dact != Activation::None) {
    DDP_REQUIRE(g.dact_input != nullptr || g.m == 0 || g.n == 0,
                "gemm_lowp: dact without dact_input (" + describe + ")");
    DDP_REQUIRE(g.ld_dact_input >= std::max(1, g.n),
                "gemm_lowp: ld_dact_input smaller than a row of C (" + describe + ")");
  }
  DDP_REQUIRE(g.bias_grad != nullptr || !g.bias_grad_accumulate,
              "gemm_lowp: bias_grad_accumulate without bias_grad (" + describe + ")");
}

}  // namespace ddp
