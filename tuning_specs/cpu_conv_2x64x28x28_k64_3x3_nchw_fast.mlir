// boo-tui example tuning spec (IREE 3.13 syntax), llvm-cpu: AN EXAMPLE OF THE FORMAT, NOT A SPEED-UP TO EXPECT.
// Tuned on a 2-core AMD Zen 5 (znver5, AVX-512): on a Zen 3 (znver3, AVX2) it is 3.44x SLOWER than the default.
// Tile sizes are machine-specific: `boo-tui tune` finds the right ones for the CPU at hand.
// MATCHES: the sample command
//   conv -n 2 -c 64 -H 28 -W 28 -k 64 -y 3 -x 3 -p 1 -q 1 -u 1 -v 1 -l 1 -j 1 -m conv -g 1 -F 1 -t 1   (NCHW, fp32)
//   AS boo-tui COMPILES IT on the CPU: with --iree-global-opt-use-im2col-for-convs (boo_engine/targets.py
//   per_op_default_flags), the conv becomes an im2col dispatch plus an f32 contraction
//   filter[64 x 576] * columns[2 x 576 x 784] -> out[2 x 64 x 784], i.e. M = [64], N = [2, 784] (the image index
//   is an N dim: it is not on the filter), K = [576] (= 64 channels x 3 x 3), with the NCHW indexing maps
//   below. This spec configures that contraction. The indexing maps matter: the NHWC version of the same conv
//   has the same sizes in another layout, and these tiles made it 5x slower. (Compiled without im2col, the
//   kernel is a linalg.conv op and this spec matches nothing.)
// SETS: distribution [2, 64, 112, 0], vector [1, 8, 32, 0], reduction [0, 0, 0, 1] with DoubleTilingExpert.
//   The compiler's default is [2, 64, 56, 0] / [1, 8, 16, 0] / [0, 0, 0, 16].
// EFFECT (2-core Zen 5, 1 thread, local-sync): ~1.15 ms -> ~0.82 ms for the whole conv (~30% faster).
//   Re-measure with benchmarks/bench_tuning_specs.py.
// Every action also sets the "__tuning_spec_applied__" marker, which boo-tui looks for in the dumped
// executable configurations to tell whether the spec matched anything.
module attributes {transform.with_named_sequence, iree_codegen.tuning_spec_with_default_entrypoint} {
  transform.named_sequence @apply_op_config(%op: !transform.any_op {transform.readonly},
                                            %config: !transform.any_param {transform.readonly}) {
    transform.annotate %op "compilation_info" = %config : !transform.any_op, !transform.any_param
    transform.annotate %op "__tuning_spec_applied__" : !transform.any_op
    transform.yield
  }

  transform.named_sequence @match_conv_im2col_contraction(%op: !transform.any_op {transform.readonly})
      -> (!transform.any_op, !transform.any_param) {
    %batch, %m, %n, %k = transform.iree.match.contraction %op,
        lhs_type = f32, rhs_type = f32, output_type = f32,
        indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d3)>,
                          affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>,
                          affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]
        : !transform.any_op -> !transform.param<i64>
    transform.iree.match.dims_equal %batch, [] : !transform.param<i64>
    transform.iree.match.dims_equal %m, [64] : !transform.param<i64>
    transform.iree.match.dims_equal %n, [2, 784] : !transform.param<i64>
    transform.iree.match.dims_equal %k, [576] : !transform.param<i64>
    %config = transform.param.constant #iree_codegen.compilation_info<
        lowering_config = #iree_cpu.lowering_config<distribution = [2, 64, 112, 0],
                                                     vector_common_parallel = [1, 8, 32, 0],
                                                     vector_reduction = [0, 0, 0, 1]>,
        translation_info = #iree_codegen.translation_info<pipeline = #iree_cpu.pipeline<DoubleTilingExpert>>
      > -> !transform.any_param
    transform.yield %op, %config : !transform.any_op, !transform.any_param
  }

  transform.named_sequence @__kernel_config(%variant_op: !transform.any_op {transform.consumed}) -> !transform.any_op
      attributes {iree_codegen.tuning_spec_entrypoint} {
    %res = transform.foreach_match in %variant_op
        @match_conv_im2col_contraction -> @apply_op_config
      : (!transform.any_op) -> !transform.any_op
    transform.yield %res : !transform.any_op
  }
}
