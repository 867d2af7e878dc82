// boo-tui example tuning spec (IREE 3.13 syntax), llvm-cpu, that MATCHES NOTHING on purpose.
// MATCHES: f32 contractions with M=12345, N=678, K=91 -- no kernel in sample_commands.txt has that shape.
// SETS: (would set) distribution [64, 64, 0], vector [8, 16, 0], reduction [0, 0, 16].
// EFFECT: none. It compiles without a word from IREE, which is exactly the silent failure boo-tui reports as
//   "spec not applied: matched no dispatch" (its actions carry the "__tuning_spec_applied__" marker, which
//   never shows up in the dumped executable configurations).
module attributes {transform.with_named_sequence, iree_codegen.tuning_spec_with_default_entrypoint} {
  transform.named_sequence @apply_op_config(%op: !transform.any_op {transform.readonly},
                                            %config: !transform.any_param {transform.readonly}) {
    transform.annotate %op "compilation_info" = %config : !transform.any_op, !transform.any_param
    transform.annotate %op "__tuning_spec_applied__" : !transform.any_op
    transform.yield
  }

  transform.named_sequence @match_gemm_12345x678x91_f32(%op: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_param) {
    %batch, %m, %n, %k = transform.iree.match.contraction %op,
        lhs_type = f32, rhs_type = f32, output_type = f32,
        indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                          affine_map<(d0, d1, d2) -> (d2, d1)>,
                          affine_map<(d0, d1, d2) -> (d0, d1)>]
        : !transform.any_op -> !transform.param<i64>
    transform.iree.match.dims_equal %batch, [] : !transform.param<i64>
    transform.iree.match.dims_equal %m, [12345] : !transform.param<i64>
    transform.iree.match.dims_equal %n, [678] : !transform.param<i64>
    transform.iree.match.dims_equal %k, [91] : !transform.param<i64>
    %config = transform.param.constant #iree_codegen.compilation_info<
        lowering_config = #iree_cpu.lowering_config<distribution = [64, 64, 0],
                                                     vector_common_parallel = [8, 16, 0],
                                                     vector_reduction = [0, 0, 16]>,
        translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>
      > -> !transform.any_param
    transform.yield %op, %config : !transform.any_op, !transform.any_param
  }

  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed}) -> !transform.any_op
      attributes {iree_codegen.tuning_spec_entrypoint} {
    %res = transform.foreach_match in %variant_op
        @match_gemm_12345x678x91_f32 -> @apply_op_config
      : (!transform.any_op) -> !transform.any_op
    transform.yield %res : !transform.any_op
  }
}
