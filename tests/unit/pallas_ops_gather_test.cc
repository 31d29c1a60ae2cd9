// Port of Pallas' tests/pallas/ops_test.py test_8bit_gather (docs/pallas-parity.md): an int8
// lookup table indexed per lane by int8 data through lax.gather with batching dims, which must
// equal jnp.take_along_axis(lut, data, axis=0). Pallas draws batch_size from 1..16 with
// hypothesis; here every one runs. The data and the table are fixed pseudo-random values in
// Pallas' ranges (randint ranges: data in [0, 32), the table in [-128, 127)), the expectation a
// plain loop.
#include <gtest/gtest.h>

#include <cstdint>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

TEST(OpsTest, EightBitGather) {
  for (int64_t batch_size = 1; batch_size <= 16; ++batch_size) {
    Random r(1234 + static_cast<uint64_t>(batch_size));
    Array<int8_t> data({32 * batch_size, 128});
    for (int8_t& v : data) v = static_cast<int8_t>(r.uniform_int(0, 32));
    Array<int8_t> lut({32, 128});
    for (int8_t& v : lut) v = static_cast<int8_t>(r.uniform_int(-128, 127));

    const pl::BlockSpec xspec({32, 128}, [](int i) { return pl::idx(i, 0); });
    const pl::BlockSpec lspec({32, 128}, [](int) { return pl::idx(0, 0); });
    const auto kernel = [](pltpu::VmemRef<const int8_t> data_ref,
                           pltpu::VmemRef<const int8_t> lut_ref,
                           pltpu::VmemRef<int8_t> output_ref) {
      jnp::Value data_chunk = data_ref[pl::ellipsis];
      jnp::Value lut_chunk = lut_ref[pl::ellipsis];
      data_chunk = data_chunk.reshape({32, 128, 1});
      jnp::Value output =
          lax::gather(lut_chunk, data_chunk,
                      lax::GatherDimensionNumbers{.offset_dims = {},
                                                  .collapsed_slice_dims = {0},
                                                  .start_index_map = {0},
                                                  .operand_batching_dims = {1},
                                                  .start_indices_batching_dims = {1}},
                      {1, 1}, "promise_in_bounds");
      output_ref[pl::ellipsis] = output;
    };
    const Array<int8_t> result =
        pl::pallas_call(kernel, pl::out_shape<int8_t>(data.shape()), pl::grid({batch_size}),
                        pl::out_specs(xspec), pl::in_specs(xspec, lspec))(data, lut);
    // expected = jnp.take_along_axis(lut, data, axis=0, mode="promise_in_bounds")
    for (int64_t i = 0; i < 32 * batch_size; ++i) {
      for (int64_t j = 0; j < 128; ++j) {
        ASSERT_EQ(result(i, j), lut(static_cast<int64_t>(data(i, j)), j))
            << "batch_size " << batch_size << " at " << i << "," << j;
      }
    }
  }
}

}  // namespace
