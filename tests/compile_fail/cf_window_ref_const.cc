// Must not compile: a BufferedRef's windows bound to a VMEM ref of const elements (the pipeline
// copies its later blocks into the windows). Expected: "with_window_ref takes a VmemRef<T>".
#include <tessera/tessera.h>

#include <tuple>

using namespace tessera;

void window_ref_const() {
  auto k = pl::kernel(pl::out_type<float>({512}), pltpu::TensorCoreMesh("core", 1),
                      pl::scratch_types(pltpu::VMEM<float>({2, 128})))(
      [](pltpu::HbmRef<const float> x, pltpu::HbmRef<float> o, pltpu::VmemRef<float> v) {
        const pltpu::VmemRef<const float> read_only = v;
        auto [pipeline, make] = pltpu::emit_pipeline_with_allocations(
            [](pltpu::VmemRef<const float> xv, pltpu::VmemRef<float> ov) { ov = xv; },
            pltpu::grid({4}),
            pl::in_specs(pl::BlockSpec(
                {128}, [](int i) { return pl::idx(i); },
                pl::Buffered{.buffer_count = 2, .prefetched_count = 1})),
            pl::out_specs(pl::BlockSpec({128}, [](int i) { return pl::idx(i); })));
        pl::run_scoped(
            [&](std::tuple<pltpu::BufferedRef<float>, pltpu::BufferedRef<float>> allocs) {
              // error: the windows must be writable
              pipeline(x, o,
                       pltpu::allocations(std::get<0>(allocs).with_window_ref(read_only),
                                          std::get<1>(allocs)));
            },
            make(x, o));
      });
  k(Array<float>({512}));
}
