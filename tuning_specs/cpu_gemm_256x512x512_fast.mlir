// boo-tui example tuning spec (IREE 3.13 syntax), llvm-cpu: AN EXAMPLE OF THE FORMAT, NOT A SPEED-UP TO EXPECT.
// Tuned on a 2-core AMD Zen 5 (znver5, AVX-512): on a Zen 3 (znver3, AVX2) it is 1.50x SLOWER than the default.
// Tile sizes are machine-specific: `boo-tui tune` finds the right ones for the CPU at hand.
// MATCHES: f32 matmuls A[M,K] * B[K,N] with M=256, N=512, K=512 -- the sample commands
//   gemm --a_w 256 --a_h 512 --b_w 512 -F 1, in the row-major A[M,K] * B[K,N] layout (indexing_maps);
//   NOT the --transB 1 variant: B[N,K] wants other tiles (these made it 4.4x slower there).
// SETS: distribution tiles [128, 128, 0], vector tiles [8, 32, 0], reduction [0, 0, 1] with DoubleTilingExpert.
//   The compiler's default is [64, 64, 0] / [8, 16, 0] / [0, 0, 16].
// EFFECT (2-core Zen 5, 1 thread, local-sync): 0.92 ms -> 0.56 ms (~40% faster). Re-measure with
//   benchmarks/bench_tuning_specs.py.
// Every action also sets the "__tuning_spec_applied__" marker, which boo-tui looks for in the dumped
// executable configurations to tell whether the spec matched anything.
module attributes {transform.with_named_sequence, iree_codegen.tuning_spec_with_default_entrypoint} {
  transform.named_sequence @apply_op_config(%op: !transform.any_op {transform.readonly},
                                            %config: !transform.any_param {transform.readonly}) {
    transform.annotate %op "compilation_info" = %config : !transform.any_op, !transform.any_param
    transform.annotate %op "__tuning_spec_applied__" : !transform.any_op
    transform.yield
  }

  transform.named_sequence @match_gemm_256x512x512_f32(%op: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_param) {
    %batch, %m, %n, %k = transform.iree.match.contraction %op,
        lhs_type = f32, rhs_type = f32, output_type = f32,
        indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
                          affine_map<(d0, d1, d2) -> (d2, d1)>,
                          affine_map<(d0, d1, d2) -> (d0, d1)>]
        : !transform.any_op -> !transform.param<i64>
    transform.iree.match.dims_equal %batch, [] : !transform.param<i64>
    transform.iree.match.dims_equal %m, [256] : !transform.param<i64>
    transform.iree.match.dims_equal %n, [512] : !transform.param<i64>
    transform.iree.match.dims_equal %k, [512] : !transform.param<i64>
    %config = transform.param.constant #iree_codegen.compilation_info<
        lowering_config = #iree_cpu.lowering_config<distribution = [128, 128, 0],
                                                     vector_common_parallel = [8, 32, 0],
                                                     vector_reduction = [0, 0, 1]>,
        translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>
      > -> !transform.any_param
    transform.yield %op, %config : !transform.any_op, !transform.any_param
  }

  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed}) -> !transform.any_op
      attributes {iree_codegen.tuning_spec_entrypoint} {
    %res = transform.foreach_match in %variant_op
        @match_gemm_256x512x512_f32 -> @apply_op_config
      : (!transform.any_op) -> !transform.any_op
    transform.yield %res : !transform.any_op
  }
}
