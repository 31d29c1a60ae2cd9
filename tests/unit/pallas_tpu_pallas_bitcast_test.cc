// Ports of Pallas' TPU tests of bitcasts between element widths (docs/pallas-parity.md):
// tpu_pallas_test.py's PallasCallRefTransformTest (DMAs to and from, loads of, stores through and
// chains of bitcast refs) and tpu_pallas_pipeline_test.py's nested pipeline over bitcast windows.
// The expectations are Pallas' own: the bitcast of the host array (support/bitcast_rows.h).
#include <gtest/gtest.h>

#include <cstdint>

#include "support/bitcast_rows.h"
#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

// ---- PallasCallRefTransformTest ---------------------------------------------------------------

TEST(TpuPallasTest, RefTransformDmaBitcastedRef) {
  const Array<int32_t> x = arange<int32_t>({16, 1, 256});
  const Array<int16_t> full = bitcast_rows<int16_t>(x);  // (16, 2, 256)
  for (bool slice_first : {true, false}) {
    const Array<int16_t> y = pl::pallas_call(
        [slice_first](pltpu::AnyRef<const int32_t> xh, pltpu::AnyRef<int16_t> yh) {
          pl::run_scoped(
              [&](pltpu::DmaSemaphoreRef sem) {
                const auto ref =
                    slice_first ? xh.at(pl::ds(0, 8), pl::all, pl::ds(0, 128)).bitcast<int16_t>()
                                : xh.bitcast<int16_t>().at(pl::ds(0, 8), pl::all, pl::ds(0, 128));
                pltpu::async_copy(ref, yh, sem).wait();
              },
              pltpu::SemaphoreType::DMA);
        },
        pl::in_specs(pl::BlockSpec(pl::ANY)), pl::out_specs(pl::BlockSpec(pl::ANY)),
        pl::out_shape<int16_t>({8, 2, 128}))(x);
    for (int64_t i = 0; i < 8; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        for (int64_t c = 0; c < 128; ++c) {
          ASSERT_EQ(y(i, j, c), full(i, j, c)) << slice_first << " " << i << " " << j << " " << c;
        }
      }
    }
  }
}

TEST(TpuPallasTest, RefTransformLoadBitcastedRef) {
  const Array<int32_t> x = arange<int32_t>({16, 256});
  const Array<int16_t> full = bitcast_rows<int16_t>(x);  // (32, 256)
  for (bool slice_first : {true, false}) {
    for (bool use_primitive_io_op : {false, true}) {
      const Array<int16_t> y = pl::pallas_call(
          [=](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int16_t> yr) {
            const auto ref = slice_first ? xr.at(pl::ds(0, 8), pl::ds(0, 128)).bitcast<int16_t>()
                                         : xr.bitcast<int16_t>().at(pl::ds(0, 16), pl::ds(0, 128));
            if (use_primitive_io_op) {
              pltpu::store(yr, pltpu::load(ref));
            } else {
              yr[pl::ellipsis] = ref[pl::ellipsis];
            }
          },
          pl::out_shape<int16_t>({16, 128}))(x);
      for (int64_t r = 0; r < 16; ++r) {
        for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(y(r, c), full(r, c)) << slice_first;
      }
    }
  }
}

TEST(TpuPallasTest, RefTransformStoreBitcastedRef) {
  const Array<bfloat16> x = arange<bfloat16>({16, 128});
  const Array<int32_t> expected = bitcast_rows<int32_t>(x);  // (8, 128)
  for (bool slice_first : {true, false}) {
    for (bool use_primitive_io_op : {false, true}) {
      // Pallas reads back only y[:8, :128]; the rest of the output is never written.
      const Array<int32_t> y = pl::pallas_call(
          [=](pltpu::VmemRef<const bfloat16> xr, pltpu::VmemRef<int32_t> yr) {
            const auto ref = slice_first ? yr.at(pl::ds(0, 8), pl::ds(0, 128)).bitcast<bfloat16>()
                                         : yr.bitcast<bfloat16>().at(pl::ds(0, 16), pl::ds(0, 128));
            if (use_primitive_io_op) {
              pltpu::store(ref, pltpu::load(xr));
            } else {
              ref[pl::ellipsis] = xr[pl::ellipsis];
            }
          },
          pl::out_shape<int32_t>({16, 256}))(x);
      for (int64_t r = 0; r < 8; ++r) {
        for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(y(r, c), expected(r, c)) << slice_first;
      }
    }
  }
}

TEST(TpuPallasTest, RefTransformMultipleRefTransforms) {
  const Array<int32_t> x = arange<int32_t>({32, 256});
  const Array<int32_t> y = pl::pallas_call(
      [](pltpu::VmemRef<const int32_t> xr, pltpu::VmemRef<int32_t> yr) {
        const auto ref = xr.at(pl::ds(0, 16), pl::ds(0, 256))     // i32(16, 256)
                             .bitcast<int16_t>()                  // i16(32, 256)
                             .reshape(2, 16, 256)                 // i16(2, 16, 256)
                             .bitcast<float16>()                  // f16(2, 16, 256)
                             .at(pl::ds(1, 1), pl::all, pl::all)  // f16(1, 16, 256)
                             .reshape(16, 256)                    // f16(16, 256)
                             .at(pl::all, pl::ds(0, 128))         // f16(16, 128)
                             .bitcast<int32_t>();                 // i32(8, 128)
        yr[pl::ellipsis] = ref[pl::ellipsis];
      },
      pl::out_shape<int32_t>({8, 128}))(x);
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 128; ++c) ASSERT_EQ(y(r, c), x(8 + r, c));
  }
}

// ---- PallasCallPipelineTransformedRefsTest ------------------------------------------------------

TEST(TpuPallasPipelineTest, TransformedRefsTransformedRefsAsInputsNestedBitcast) {
  // The outer pipeline's float32 windows, seen as int16 (twice the rows), feed an inner
  // pipeline of int16 blocks: the output is the input, bit for bit. `dynamic_grid` is a grid
  // extent read from a variable.
  const Array<float> x = arange<float>({256, 128});
  const int64_t steps = 2;
  const Array<float> out =
      pl::kernel(pl::out_type<float>({256, 128}), pltpu::TensorCoreMesh("core", 1))(
          [steps](pltpu::HbmRef<const float> x_ref, pltpu::HbmRef<float> o_ref) {
            const pl::BlockSpec outer({128, 128}, [](int i) { return pl::idx(i, 0); });
            pltpu::emit_pipeline(
                [steps](pltpu::VmemRef<const float> outer_x, pltpu::VmemRef<float> outer_o) {
                  const auto tx = outer_x.bitcast<int16_t>();
                  const auto to = outer_o.bitcast<int16_t>();
                  const pl::BlockSpec inner({64, 128}, [](int i) { return pl::idx(i, 0); });
                  pltpu::emit_pipeline(
                      [](pltpu::VmemRef<const int16_t> xi, pltpu::VmemRef<int16_t> oi) {
                        oi[pl::ellipsis] = xi[pl::ellipsis];
                      },
                      pltpu::grid({2 * steps}), pl::in_specs(inner), pl::out_specs(inner),
                      pltpu::dimension_semantics(pltpu::PARALLEL))(tx, to);
                },
                pltpu::grid({steps}), pl::in_specs(outer), pl::out_specs(outer),
                pltpu::dimension_semantics(pltpu::PARALLEL))(x_ref, o_ref);
          })(x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(bits_of(out[i]), bits_of(x[i])) << i;
}

// ---- MiscellaneousTest ------------------------------------------------------------------------

TEST(TpuPallasTest, MiscellaneousBfloat16ToUint32Bitcast) {
  const Array<bfloat16> x = arange<bfloat16>({16, 2, 256});
  const Array<uint32_t> out = pl::pallas_call(
      [](pltpu::VmemRef<const bfloat16> xr, pltpu::VmemRef<uint32_t> o) {
        o[pl::ellipsis] = pltpu::bitcast<uint32_t>(xr[pl::ellipsis]);
      },
      pl::out_shape<uint32_t>({16, 1, 256}))(x);
  const Array<uint32_t> want = bitcast_rows<uint32_t>(x);
  for (int64_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], want[i]) << i;
}

}  // namespace
