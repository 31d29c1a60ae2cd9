#!/usr/bin/env python3
"""Writes tests/unit/data/narrow_float_cases.txt: float32 -> float16 / float8_e4m3fn /
float8_e5m2 / float8_e4m3b11fnuz conversions and the float8/float16 -> float32 decodings as
numpy and ml_dtypes compute them (the reference for tests/unit/dtype_test.cc). Needs numpy and ml_dtypes
(`pip install jax` brings both); run from the repository root."""
import sys

import ml_dtypes
import numpy as np

F16, E4, E5, B11 = (np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
                    ml_dtypes.float8_e4m3b11fnuz)


def f32(bits):
    return np.array([bits], np.uint32).view(np.float32)[0]


def main():
    pts = [0.0, np.inf, -np.inf, np.nan, f32(1), np.finfo(np.float32).max, 1e10, 1e-30, 3.0, 1.1]
    for dtype, storage, pats in [
        (E4, np.uint8, range(0, 0x7f)),
        (E5, np.uint8, range(0, 0x7c)),
        (B11, np.uint8, range(0, 0x80)),
        (F16, np.uint16, sorted(set(range(0, 0x7c00, 61)) | set(range(0, 40)) |
                                set(range(0x3f0, 0x410)) | set(range(0x7bd0, 0x7c00)))),
    ]:
        vals = np.array(list(pats), storage).view(dtype).astype(np.float32)
        pats = list(pats)
        for i, v in enumerate(vals):
            n = np.array([pats[i] + 1], storage).view(dtype).astype(np.float32)[0]
            if not np.isfinite(n) or (dtype is E4 and pats[i] == 0x7e) or (
                    dtype is B11 and pats[i] == 0x7f):
                n = np.float32(2 * np.float64(v) - np.float64(vals[i - 1]))
            mid = np.float32((np.float64(v) + np.float64(n)) / 2)
            pts += [v, mid, np.nextafter(mid, np.float32(np.inf)),
                    np.nextafter(mid, np.float32(-np.inf))]
    xs = np.array(pts, np.float32)
    xs = np.concatenate([xs, -xs[::5], [f32(0xffc00000)]]).astype(np.float32)
    uniq = sorted(set(int(b) for b in xs.view(np.uint32)))
    xs = np.array(uniq, np.uint32).view(np.float32)
    lines = ["# float32 bits -> float16, float8_e4m3fn, float8_e5m2, float8_e4m3b11fnuz bits (numpy " +
             np.__version__ + ", ml_dtypes " + ml_dtypes.__version__ +
             "): E <f32> <f16> <e4m3fn> <e5m2> <e4m3b11fnuz>",
             "# float8 / float16 bits -> float32 bits: D <format> <bits> <f32>"]
    np.seterr(over="ignore")  # float32 -> float16 overflows to inf, as it should
    for x in xs:
        lines.append("E %08x %04x %02x %02x %02x" % (
            int(np.array([x], np.float32).view(np.uint32)[0]),
            int(np.array([x]).astype(np.float32).astype(F16).view(np.uint16)[0]),
            int(np.array([x], np.float32).astype(E4).view(np.uint8)[0]),
            int(np.array([x], np.float32).astype(E5).view(np.uint8)[0]),
            int(np.array([x], np.float32).astype(B11).view(np.uint8)[0])))
    for name, dtype, storage, pats in [("e4m3fn", E4, np.uint8, range(256)),
                                       ("e5m2", E5, np.uint8, range(256)),
                                       ("e4m3b11fnuz", B11, np.uint8, range(256)),
                                       ("f16", F16, np.uint16, range(0, 65536, 29))]:
        fl = np.array(list(pats), storage).view(dtype).astype(np.float32).view(np.uint32)
        for b, f in zip(pats, fl):
            lines.append("D %s %x %08x" % (name, b, int(f)))
    sys.stdout.write("\n".join(lines) + "\n")


main()
