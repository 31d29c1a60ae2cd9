// Ports of Pallas' ops_test.py casts (docs/pallas-parity.md): test_cast_from_32bit and
// test_cast_from_sub_32bit over every pair of Tessera's dtypes (float32, int32, uint32,
// bfloat16, float16, int16, int8, uint16, uint8, bool, float8_e4m3fn, float8_e5m2,
// float8_e4m3b11fnuz, int4, uint4, int2, uint2), with jnp's rules: float to int truncates and
// saturates (NaN to 0), int to a narrower int wraps, anything to bool is != 0, and float targets
// round as the dtype's own conversion does (which tests/unit/narrow_dtypes_test.cc checks bit for
// bit against numpy and ml_dtypes). The 16-, 8-, 4- and 2-bit sources are enumerated
// exhaustively (NaNs replaced by 0, as Pallas' test does).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "support/pallas_port.h"
#include "tessera/tessera.h"

namespace {
using namespace tessera;
using namespace tessera::pallas_port;

template <class T>
constexpr bool kFloatLike = !std::is_integral_v<T> && !is_narrow_int_v<T>;

template <class T>
double as_double(T v) {
  if constexpr (kFloatLike<T>) {
    return static_cast<double>(static_cast<float>(v));
  } else {
    return static_cast<double>(v);
  }
}

template <class From, class To>
To jnp_cast(From v) {
  const double d = as_double(v);
  if constexpr (std::is_same_v<To, bool>) {
    return d != 0.0 || std::isnan(d);
  } else if constexpr (!kFloatLike<To> && kFloatLike<From>) {
    if (std::isnan(d)) return To(0);
    if (d >= double(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    if (d <= double(std::numeric_limits<To>::lowest())) return std::numeric_limits<To>::lowest();
    return static_cast<To>(std::trunc(d));
  } else if constexpr (!kFloatLike<To>) {
    return static_cast<To>(static_cast<int64_t>(v));  // wraps, as numpy's astype
  } else {
    return static_cast<To>(static_cast<float>(v));
  }
}

template <class From, class To>
void cast(const Array<From>& x) {
  if constexpr (!std::is_same_v<From, To>) {  // Pallas skips from == to
    SCOPED_TRACE(::testing::Message()
                 << dtype_name(dtype_of<From>) << " -> " << dtype_name(dtype_of<To>));
    const Array<To> y = pl::pallas_call(
        [](pltpu::VmemRef<const From> xr, pltpu::VmemRef<To> o) { o = xr.template astype<To>(); },
        pl::out_shape<To>(x.shape()))(x);
    for (int64_t i = 0; i < x.size(); ++i) {
      const To want = jnp_cast<From, To>(x[i]);
      if constexpr (kFloatLike<To>) {
        if (std::isnan(as_double(want))) {
          ASSERT_TRUE(std::isnan(as_double(y[i]))) << i << ": " << as_double(x[i]);
          continue;
        }
      }
      ASSERT_EQ(as_double(y[i]), as_double(want)) << i << ": " << as_double(x[i]);
    }
  }
}

template <class From>
void cast_to_all(const Array<From>& x) {
  cast<From, float>(x);
  cast<From, int32_t>(x);
  cast<From, uint32_t>(x);
  cast<From, bfloat16>(x);
  cast<From, float16>(x);
  cast<From, int16_t>(x);
  cast<From, int8_t>(x);
  cast<From, uint16_t>(x);
  cast<From, uint8_t>(x);
  cast<From, bool>(x);
  cast<From, float8_e4m3fn>(x);
  cast<From, float8_e5m2>(x);
  cast<From, float8_e4m3b11fnuz>(x);
  cast<From, int4>(x);
  cast<From, uint4>(x);
  cast<From, int2>(x);
  cast<From, uint2>(x);
}

TEST(OpsTest, CastFrom32bit) {
  Array<float> xf({8, 128});
  Random r(3);
  const float specials[] = {0.0f,
                            -0.0f,
                            1e10f,
                            -1e10f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            127.9f,
                            -128.9f,
                            300.0f,
                            65535.9f,
                            -3.7f,
                            448.0f,
                            500.0f,
                            30.0f,
                            31.0f,
                            -30.9f,
                            0x1p-14f,
                            -0x1p-13f,
                            4294967040.0f,
                            std::numeric_limits<float>::quiet_NaN()};
  constexpr int64_t kSpecials = sizeof(specials) / sizeof(specials[0]);
  for (int64_t i = 0; i < xf.size(); ++i) {
    xf[i] =
        i < kSpecials ? specials[i] : r.uniform() * static_cast<float>(r.uniform_int(1, 100000));
  }
  cast_to_all(xf);
  Array<int32_t> xi({8, 128});
  for (int64_t i = 0; i < xi.size(); ++i) xi[i] = static_cast<int32_t>(r.next());
  for (int32_t i = 0; i < 256; ++i) xi[i] = i - 128;  // the small ones every narrow type holds
  cast_to_all(xi);
  Array<uint32_t> xu({8, 128});
  for (int64_t i = 0; i < xu.size(); ++i) xu[i] = static_cast<uint32_t>(r.next());
  for (uint32_t i = 0; i < 256; ++i) xu[i] = i;
  xu[256] = 0xFFFFFFFFu;
  xu[257] = 0x80000000u;
  xu[258] = 16777217u;
  cast_to_all(xu);
}

// The value of T with these bits.
template <class T, class Bits>
T from_bits(Bits b) {
  if constexpr (kFloatLike<T> || is_narrow_int_v<T>) {
    return T::from_bits(b);
  } else {
    T v;
    std::memcpy(&v, &b, sizeof(v));
    return v;
  }
}

// Every value of a 16-bit type, NaNs replaced by 0.
template <class T>
Array<T> every_16bit() {
  Array<T> x({8, 65536 / 8});
  for (int64_t i = 0; i < x.size(); ++i) {
    T v = from_bits<T>(static_cast<uint16_t>(i));
    if constexpr (kFloatLike<T>) {
      if (std::isnan(as_double(v))) v = T(0.0f);
    }
    x[i] = v;
  }
  return x;
}

// Every value of an 8-bit type, NaNs replaced by 0.
template <class T>
Array<T> every_8bit() {
  Array<T> x({8, 32});
  for (int64_t i = 0; i < x.size(); ++i) {
    T v = from_bits<T>(static_cast<uint8_t>(i));
    if constexpr (kFloatLike<T>) {
      if (std::isnan(as_double(v))) v = T(0.0f);
    }
    x[i] = v;
  }
  return x;
}

// Every value of a sub-byte integer type (its 2^bits patterns, repeated over (8, 16)).
template <class T>
Array<T> every_narrow_int() {
  Array<T> x({8, 16});
  for (int64_t i = 0; i < x.size(); ++i) x[i] = T::from_bits(static_cast<uint8_t>(i));
  return x;
}

TEST(OpsTest, CastFromSub32bit) {
  cast_to_all(every_16bit<bfloat16>());
  cast_to_all(every_16bit<float16>());
  cast_to_all(every_16bit<int16_t>());
  cast_to_all(every_16bit<uint16_t>());
  cast_to_all(every_8bit<int8_t>());
  cast_to_all(every_8bit<uint8_t>());
  cast_to_all(every_8bit<float8_e4m3fn>());
  cast_to_all(every_8bit<float8_e5m2>());
  cast_to_all(every_8bit<float8_e4m3b11fnuz>());
  cast_to_all(every_narrow_int<int4>());
  cast_to_all(every_narrow_int<uint4>());
  cast_to_all(every_narrow_int<int2>());
  cast_to_all(every_narrow_int<uint2>());
  Array<bool> xbool({16, 16});
  for (int64_t i = 0; i < xbool.size(); ++i) xbool[i] = ((i / 16) + i) % 2 == 1;
  cast_to_all(xbool);
}

}  // namespace
