// weights_range.h: weights loaded into a run (--init-weights, a resumed or
// evaluated checkpoint, --predict's and --generate's) that its working
// precision cannot hold. FP16's largest value is 65504: a master weight from
// 65520 on rounds to an Inf working copy, and every forward after it is NaN,
// so such a file is refused at load with the tensor named, and --precision
// bf16 (FP32's range) is offered. Cheap: one compare per weight.
#pragma once

#include <string>
#include <vector>

#include "kernels/lowp_codec.h"
#include "trainer/params/parameter_registry.h"

namespace ddp {

// The smallest magnitude that `precision` rounds to Inf (round to nearest
// even): 65520 for FP16; for BF16, 0x1.fefp127 (FP32's range, just short of
// FLT_MAX).
float lowp_overflow_threshold(Precision precision);

// Throws ddp::Error in one line, "<source>: tensor <name> holds <value>,
// beyond FP16's largest value 65504: ...", for the first tensor of
// `weights_fp32` (the registry's packed order: `packed`, else its flat
// layout) holding a finite value whose `precision` copy would be Inf, or
// holding Inf or NaN.
void check_weights_fit_precision(const std::vector<float>& weights_fp32, bool packed,
                                 const ParameterRegistry& registry, Precision precision, const std::string& source);

}  // namespace ddp
