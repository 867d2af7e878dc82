// boo-tui example tuning spec for AMD GPUs (IREE 3.13 syntax), target hip:gfx942 (MI300).
// MATCHES: f16 x f16 -> f32 contractions with M=128, N=256, K=256 -- the sample command
//   gemmfp16 --a_w 128 --a_h 256 --b_w 256 -F 1
//   (IREE accumulates the f16 matmul in f32: the root op is a linalg.generic with an f32 output).
// SETS: TileAndFuse with MFMA_F32_16x16x16_F16, workgroup tile [64, 64, 0] (the compiler's default is
//   [64, 128, 0]), 2x2 MMA tiles per subgroup (default 2x4), reduction tile [0, 0, 4] (default 8),
//   4 subgroups of 64 lanes = workgroup size 256, operands 0 and 1 promoted to shared memory.
//   Smaller workgroup tiles give 2x the workgroups for this small GEMM (more CUs busy); measure on a GPU with
//   boo-tui --target hip:gfx942 --variant gfx942=tuning_specs/gfx942_gemm_f16_128x256x256.mlir
// CHECKED here only by cross-compiling for gfx942 (tests/test_specs.py): the spec applies and compiles.
//   Not measured (no GPU on the development machine).
// Every action also sets the "__tuning_spec_applied__" marker, which boo-tui looks for in the dumped
// executable configurations to tell whether the spec matched anything.
module attributes {transform.with_named_sequence, iree_codegen.tuning_spec_with_default_entrypoint} {
  transform.named_sequence @apply_op_config(%op: !transform.any_op {transform.readonly},
                                            %config: !transform.any_param {transform.readonly}) {
    transform.annotate %op "compilation_info" = %config : !transform.any_op, !transform.any_param
    transform.annotate %op "__tuning_spec_applied__" : !transform.any_op
    transform.yield
  }

  transform.named_sequence @match_gemm_f16_128x256x256(%op: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_param) {
    %batch, %m, %n, %k = transform.iree.match.contraction %op,
        lhs_type = f16, rhs_type = f16, output_type = f32 : !transform.any_op -> !transform.param<i64>
    transform.iree.match.dims_equal %batch, [] : !transform.param<i64>
    transform.iree.match.dims_equal %m, [128] : !transform.param<i64>
    transform.iree.match.dims_equal %n, [256] : !transform.param<i64>
    transform.iree.match.dims_equal %k, [256] : !transform.param<i64>
    %config = transform.param.constant #iree_codegen.compilation_info<
        lowering_config = #iree_gpu.lowering_config<{mma_kind = #iree_gpu.mma_layout<MFMA_F32_16x16x16_F16>,
                                                     promote_operands = [0, 1],
                                                     workgroup = [64, 64, 0],
                                                     subgroup = [2, 2, 0],
                                                     reduction = [0, 0, 4]}>,
        translation_info = #iree_codegen.translation_info<pipeline = #iree_gpu.pipeline<TileAndFuse>
          workgroup_size = [256, 1, 1] subgroup_size = 64,
          {gpu_pipeline_options = #iree_gpu.pipeline_options<prefetch_num_stages = 2>}>
      > -> !transform.any_param
    transform.yield %op, %config : !transform.any_op, !transform.any_param
  }

  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed}) -> !transform.any_op
      attributes {iree_codegen.tuning_spec_entrypoint} {
    %res = transform.foreach_match in %variant_op
        @match_gemm_f16_128x256x256 -> @apply_op_config
      : (!transform.any_op) -> !transform.any_op
    transform.yield %res : !transform.any_op
  }
}
