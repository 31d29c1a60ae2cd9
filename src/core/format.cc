// detail::format_array: the text of an array, as numpy's `str(np_array)` writes it.
//
// The rules below transcribe numpy's arrayprint.py (numpy 2.3+, default print options,
// legacy=False, `str()` so separator " " and no prefix/suffix), limited to Tessera's dtypes.
//
// Layout (numpy `_formatArray`):
//   * size == 0 (any rank >= 1): "[]".
//   * rank 0: the str of the scalar (see "Rank 0" below), no brackets.
//   * Each axis is printed as "[" + items + "]". Rows of the last axis are separated by " ";
//     higher axes put (axes_left - 1) newlines between their items, so 2-D arrays have one item
//     per line and 3-D arrays a blank line between blocks. Every continuation line is indented
//     by one space per enclosing "[" (the "hanging indent").
//   * Line wrapping inside a row: an element (or "...") is moved to a new line (with the hanging
//     indent) when len(line) + len(word) > width - 1, where width starts at linewidth (75) and
//     shrinks by one per nesting level (room for the closing "]"s). A line holding only the
//     indent never wraps. Trailing spaces are stripped from wrapped lines.
//   * Summarisation: when size > threshold, every axis longer than 2 * edgeitems shows its first
//     and last edgeitems items with a "..." item between them ("..." on its own line for
//     axes >= 2 of the last). (numpy quirk kept: with edgeitems == 0 the last item still shows.)
//   * Element widths are computed over the items that are shown only.
// Floats (float32; bfloat16 likewise, see below), numpy `FloatingFormat`, floatmode 'maxprec',
// precision 8:
//   * Scientific notation is used when the non-zero finite |values| have max >= 1e6, or
//     min < 1e-4, or max / min > 1e3 (comparisons in the element type's precision). numpy
//     <= 2.2 used 1e8 instead of 1e6 for the first rule; numpy 2.3+ uses 10**min(8, digits of
//     the dtype) = 1e6 for float32. Tessera uses 1e6 for float32 and bfloat16 alike.
//   * Positional: each value is the shortest decimal that round-trips in the element type,
//     cut to at most 8 fractional digits (the exact binary value rounded half-even at that
//     digit when the shortest string is longer), trailing zeros trimmed but the "." kept:
//     42 -> "42.", 0.25 -> "0.25". All elements share one width: the integer part (with its
//     "-") right-aligned to the widest one, the fraction left-aligned and space-padded to the
//     longest fraction: "[0.1  0.25]", "[  1.5 100. ]", "[-1.  2.]".
//   * Scientific: shortest round-trip mantissa digits (at most 8 after the point); every element
//     then gets as many fraction digits as the longest one, elements with fewer digits being
//     printed with the extra digits of their exact binary value ("[1.0e-05 1.5e+00]"); exponent
//     "e+XX"/"e-XX" with at least two digits: "[1.e-05 1.e+00]".
//   * nan / inf / -inf print as "nan", "inf", "-inf", right-aligned to the common width; the
//     integer-part width grows so they fit ("[ 1. nan]").
//   * -0.0 prints as "-0.".
// bfloat16, float16: like float32, but "shortest round-trip" means the shortest decimal that
//   converts back (round to nearest even) to the same value of the dtype, e.g. bfloat16(1.1f)
//   prints "1.1". float16 is numpy's own and prints exactly as numpy does, with its cutoff of
//   1e3 (below). float8_e4m3fn, float8_e5m2, float8_e4m3b11fnuz: their exact values printed as
//   float32 (96, not the "1e+02" that also rounds back to it), as ml_dtypes' element str() shows
//   them. Not reproduced: numpy 2.x prints dtypes from outside numpy, such as ml_dtypes'
//   bfloat16 and float8s, with each element's own str() and no common width, so real JAX output
//   for those arrays can differ; Tessera lays them out as numpy lays out float32.
// Integers (int8/16/32, uint8/16/32): decimal, right-aligned to the widest of str(max) and
//   str(min) of the shown items: "[ 1 -2 30]".
// Sub-byte integers (int4, uint4, int2, uint2): decimal with no common width, as numpy prints
//   ml_dtypes' int4 arrays (each element's own str()): "[0 1 -8]".
// Booleans: " True" / "False" (width 5) in arrays: "[ True False]".
// Rank 0 (numpy prints 0-d arrays as the scalar's str): floats as positional with at least one
//   fraction digit ("42.0", "0.1", "-0.0") when the value is 0 or 1e-4 <= |x| < 1e6 (float16:
//   1e3; numpy <= 2.2: 1e16), otherwise scientific with trailing zeros and "." trimmed ("1e-05",
//   "1.5e+07"); nan/inf/-inf; ints "7"; bools "True" / "False".
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/array.h"
#include "tessera/dtype.h"
#include "tessera/shape.h"

namespace tessera::detail {

namespace {

constexpr int kFloatPrecision = 8;             // numpy's default `precision`
constexpr float kExpCutoffMin = 1e-4f;         // arrays: scientific when min |x| < this
constexpr float kExpCutoffRatio = 1000.0f;     // arrays: scientific when max / min > this
constexpr double kScalarMinPositional = 1e-4;  // 0-d: scientific when 0 < |x| < this

// Arrays and 0-d: scientific when max |x| >= this: 10**min(8, the dtype's decimal precision),
// 1e3 for float16 (numpy 2.3+); Tessera uses float32's 1e6 for bfloat16 and the float8s too.
float exp_cutoff_max(DType dt) { return dt == DType::kFloat16 ? 1e3f : 1e6f; }

// ---------------------------------------------------------------------------------------------
// Decimal digits of a non-negative value.

struct Decimal {
  std::string digits = "0";  // significant digits, no leading or trailing zeros; "0" for zero
  int exp = 0;               // decimal exponent of digits[0]: value = d0.d1d2... * 10^exp
};

// Parses an unsigned decimal as fmt writes it: "123", "0.0012", "1.5e-05", "1e+16".
Decimal parse_decimal(std::string_view s) {
  std::string mant;
  int int_digits = 0;
  bool seen_point = false;
  int e10 = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      mant += c;
      if (!seen_point) ++int_digits;
    } else if (c == '.') {
      seen_point = true;
    } else if (c == 'e' || c == 'E') {
      e10 = std::atoi(std::string(s.substr(i + 1)).c_str());
      break;
    }
  }
  Decimal d;
  const size_t first = mant.find_first_not_of('0');
  if (first == std::string::npos) return d;
  const size_t last = mant.find_last_not_of('0');
  d.digits = mant.substr(first, last - first + 1);
  d.exp = int_digits - 1 - static_cast<int>(first) + e10;
  return d;
}

int frac_digits_positional(const Decimal& d) {
  return std::max(0, static_cast<int>(d.digits.size()) - 1 - d.exp);
}

// The narrow float dtypes (bfloat16, float16, float8s) by their bits.
float narrow_value(DType dt, uint32_t b) {
  switch (dt) {
    case DType::kBFloat16:
      return bfloat16::from_bits(static_cast<uint16_t>(b));
    case DType::kFloat16:
      return float16::from_bits(static_cast<uint16_t>(b));
    case DType::kFloat8E4M3FN:
      return float8_e4m3fn::from_bits(static_cast<uint8_t>(b));
    case DType::kFloat8E4M3B11FNUZ:
      return float8_e4m3b11fnuz::from_bits(static_cast<uint8_t>(b));
    default:
      return float8_e5m2::from_bits(static_cast<uint8_t>(b));
  }
}
uint32_t narrow_bits(DType dt, float v) {
  switch (dt) {
    case DType::kBFloat16:
      return bfloat16(v).bits;
    case DType::kFloat16:
      return float16(v).bits;
    case DType::kFloat8E4M3FN:
      return float8_e4m3fn(v).bits;
    case DType::kFloat8E4M3B11FNUZ:
      return float8_e4m3b11fnuz(v).bits;
    default:
      return float8_e5m2(v).bits;
  }
}
// The bits of the largest finite value.
uint32_t narrow_max_bits(DType dt) {
  switch (dt) {
    case DType::kBFloat16:
      return 0x7f7f;
    case DType::kFloat16:
      return 0x7bff;
    case DType::kFloat8E4M3FN:
      return 0x7e;
    case DType::kFloat8E4M3B11FNUZ:
      return 0x7f;
    default:
      return 0x7b;
  }
}

// True when the decimal `x` rounds (to nearest, ties to even) to the positive finite value of
// the narrow float `dt` whose bits are `b` (b > 0).
bool rounds_to_narrow(DType dt, double x, uint32_t b) {
  const double v = narrow_value(dt, b);
  const double lo = narrow_value(dt, b - 1);
  const double hi = b == narrow_max_bits(dt) ? v + (v - lo) : narrow_value(dt, b + 1);
  const double m_lo = (v + lo) / 2;  // exact: the operands have at most 11 significant bits
  const double m_hi = (v + hi) / 2;
  const bool even = (b & 1u) == 0;
  return (x > m_lo || (even && x == m_lo)) && (x < m_hi || (even && x == m_hi));
}

// The shortest decimal that rounds back to the same narrow float (|v| finite, non-zero); among
// candidates of that length, the closest to the value.
Decimal shortest_narrow(float v, DType dt) {
  const uint32_t sign = dt == DType::kBFloat16 || dt == DType::kFloat16 ? 0x8000u : 0x80u;
  const uint32_t b = narrow_bits(dt, v) & ~sign;
  const double x = std::fabs(static_cast<double>(v));
  for (int n = 1; n <= 9; ++n) {
    // The correctly rounded n-digit decimal, then its neighbours one unit away (the interval
    // can be lopsided at a power of two, so the nearest n-digit decimal may miss it while a
    // neighbour does not).
    const Decimal c = parse_decimal(fmt::format("{:.{}e}", x, n - 1));
    int64_t m = 0;
    for (int i = 0; i < n; ++i) {
      m = m * 10 + (i < static_cast<int>(c.digits.size()) ? c.digits[i] - '0' : 0);
    }
    const int scale = c.exp - (n - 1);
    for (const int64_t cand : {m, m - 1, m + 1}) {
      if (cand <= 0) continue;
      const std::string text = fmt::format("{}e{}", cand, scale);
      if (rounds_to_narrow(dt, std::strtod(text.c_str(), nullptr), b)) return parse_decimal(text);
    }
  }
  return parse_decimal(fmt::format("{}", std::fabs(v)));  // unreachable: 9 digits always do
}

// Shortest round-trip digits of |v| (finite) in the element type.
Decimal shortest(float v, DType dt) {
  if (v == 0.0f) return Decimal{};
  if (dt != DType::kFloat32) return shortest_narrow(v, dt);
  return parse_decimal(fmt::format("{}", std::fabs(v)));
}

// |v| (exact binary value) rounded half-even to `frac` fraction digits, positional.
Decimal rounded_fixed(float v, int frac) {
  return parse_decimal(fmt::format("{:.{}f}", std::fabs(static_cast<double>(v)), frac));
}

// |v| (exact binary value) rounded half-even to `frac` fraction digits, scientific.
Decimal rounded_scientific(float v, int frac) {
  return parse_decimal(fmt::format("{:.{}e}", std::fabs(static_cast<double>(v)), frac));
}

struct Positional {
  std::string int_part;  // with the '-' of negative values
  std::string frac;      // no trailing zeros
};

// numpy dragon4_positional(v, precision=max_frac, unique=True, fractional=True, trim='.'),
// split at the point. max_frac < 0: no limit.
Positional positional(float v, DType dt, int max_frac) {
  Decimal d = shortest(v, dt);
  if (max_frac >= 0 && frac_digits_positional(d) > max_frac) d = rounded_fixed(v, max_frac);
  Positional p;
  const int n = static_cast<int>(d.digits.size());
  if (d.digits == "0") {
    p.int_part = "0";
  } else if (d.exp >= 0) {
    const int int_digits = d.exp + 1;
    if (n <= int_digits) {
      p.int_part = d.digits + std::string(static_cast<size_t>(int_digits - n), '0');
    } else {
      p.int_part = d.digits.substr(0, static_cast<size_t>(int_digits));
      p.frac = d.digits.substr(static_cast<size_t>(int_digits));
    }
  } else {
    p.int_part = "0";
    p.frac = std::string(static_cast<size_t>(-d.exp - 1), '0') + d.digits;
  }
  if (std::signbit(v)) p.int_part.insert(p.int_part.begin(), '-');
  return p;
}

struct Scientific {
  std::string int_part;  // one digit, with the '-' of negative values
  std::string frac;      // exactly min_frac digits or more (up to max_frac)
  int exp = 0;
};

// numpy dragon4_scientific(v, precision=max_frac, min_digits=min_frac, unique=True): the
// shortest round-trip digits, cut to max_frac, extended with the exact value's digits to
// min_frac.
Scientific scientific(float v, DType dt, int max_frac, int min_frac) {
  Decimal d = shortest(v, dt);
  const int frac = static_cast<int>(d.digits.size()) - 1;
  if (frac > max_frac) {
    d = rounded_scientific(v, max_frac);
  } else if (frac < min_frac && v != 0.0f) {
    d = rounded_scientific(v, min_frac);
  }
  Scientific s;
  s.int_part = d.digits.substr(0, 1);
  s.frac = d.digits.substr(1);
  if (static_cast<int>(s.frac.size()) < min_frac) {
    s.frac.append(static_cast<size_t>(min_frac) - s.frac.size(), '0');
  }
  s.exp = d.exp;
  if (std::signbit(v)) s.int_part.insert(s.int_part.begin(), '-');
  return s;
}

std::string exponent_text(int exp, int min_digits) {
  std::string digits = std::to_string(std::abs(exp));
  if (static_cast<int>(digits.size()) < min_digits) {
    digits.insert(0, static_cast<size_t>(min_digits) - digits.size(), '0');
  }
  return (exp < 0 ? "-" : "+") + digits;
}

std::string pad_left(std::string s, size_t width) {
  if (s.size() < width) s.insert(0, width - s.size(), ' ');
  return s;
}

std::string pad_right(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// ---------------------------------------------------------------------------------------------
// Element formatters (numpy FloatingFormat, IntegerFormat, BoolFormat).

class FloatFormat {
 public:
  FloatFormat(const std::vector<float>& shown, DType dt) : dt_(dt) {
    std::vector<float> finite;
    bool any_nonfinite = false;
    bool any_neginf = false;
    for (float v : shown) {
      if (std::isfinite(v)) {
        finite.push_back(v);
      } else {
        any_nonfinite = true;
        if (std::isinf(v) && v < 0) any_neginf = true;
      }
    }
    float max_val = 0.0f;
    float min_val = 0.0f;
    bool any_nonzero = false;
    for (float v : finite) {
      if (v == 0.0f) continue;
      const float a = std::fabs(v);
      if (!any_nonzero) {
        max_val = min_val = a;
        any_nonzero = true;
      } else {
        max_val = std::max(max_val, a);
        min_val = std::min(min_val, a);
      }
    }
    if (any_nonzero) {
      exp_format_ = max_val >= in_dtype(exp_cutoff_max(dt_)) || min_val < in_dtype(kExpCutoffMin) ||
                    in_dtype(max_val / min_val) > kExpCutoffRatio;
    }

    if (finite.empty()) {
      pad_left_ = 0;
      pad_right_ = 0;
    } else if (exp_format_) {
      precision_ = 0;
      exp_size_ = 2;
      for (float v : finite) {
        const Scientific s = scientific(v, dt_, kFloatPrecision, 0);
        precision_ = std::max(precision_, static_cast<int>(s.frac.size()));
        pad_left_ = std::max(pad_left_, static_cast<int>(s.int_part.size()));
        exp_size_ = std::max(exp_size_, static_cast<int>(std::to_string(std::abs(s.exp)).size()));
      }
      pad_right_ = exp_size_ + 2 + precision_;
    } else {
      for (float v : finite) {
        const Positional p = positional(v, dt_, kFloatPrecision);
        pad_left_ = std::max(pad_left_, static_cast<int>(p.int_part.size()));
        pad_right_ = std::max(pad_right_, static_cast<int>(p.frac.size()));
      }
    }
    if (any_nonfinite) {
      const int offset = pad_right_ + 1;  // +1 for the decimal point
      pad_left_ = std::max({pad_left_, 3 - offset, 3 + (any_neginf ? 1 : 0) - offset});
    }
  }

  std::string operator()(float v) const {
    const int total = pad_left_ + pad_right_ + 1;
    const size_t width = static_cast<size_t>(total);
    if (std::isnan(v)) return pad_left("nan", width);
    if (std::isinf(v)) return pad_left(v < 0 ? "-inf" : "inf", width);
    if (exp_format_) {
      const Scientific s = scientific(v, dt_, precision_, precision_);
      return pad_left(s.int_part, static_cast<size_t>(pad_left_)) + "." + s.frac + "e" +
             exponent_text(s.exp, exp_size_);
    }
    const Positional p = positional(v, dt_, kFloatPrecision);
    return pad_left(p.int_part, static_cast<size_t>(pad_left_)) + "." +
           pad_right(p.frac, static_cast<size_t>(pad_right_));
  }

 private:
  // A threshold as numpy sees it when compared with values of the element type.
  float in_dtype(float x) const {
    return dt_ == DType::kFloat32 ? x : narrow_value(dt_, narrow_bits(dt_, x));
  }

  DType dt_;
  bool exp_format_ = false;
  int pad_left_ = 0;
  int pad_right_ = 0;
  int precision_ = 0;  // scientific: fraction digits of every element
  int exp_size_ = 2;   // scientific: exponent digits
};

// numpy's str of a float scalar (0-d arrays).
std::string scalar_float_text(float v, DType dt) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  const double a = std::fabs(static_cast<double>(v));
  if (a == 0.0 || (a >= kScalarMinPositional && a < exp_cutoff_max(dt))) {
    const Positional p = positional(v, dt, -1);
    return p.int_part + "." + (p.frac.empty() ? "0" : p.frac);
  }
  const Decimal d = shortest(v, dt);
  std::string s = std::signbit(v) ? "-" : "";
  s += d.digits.substr(0, 1);
  if (d.digits.size() > 1) s += "." + d.digits.substr(1);
  return s + "e" + exponent_text(d.exp, 2);
}

float load_float(DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DType::kBFloat16:
      return static_cast<const bfloat16*>(data)[i];
    case DType::kFloat16:
      return static_cast<const float16*>(data)[i];
    case DType::kFloat8E4M3FN:
      return static_cast<const float8_e4m3fn*>(data)[i];
    case DType::kFloat8E5M2:
      return static_cast<const float8_e5m2*>(data)[i];
    case DType::kFloat8E4M3B11FNUZ:
      return static_cast<const float8_e4m3b11fnuz*>(data)[i];
    default:
      return static_cast<const float*>(data)[i];
  }
}

int64_t load_int(DType dtype, const void* data, int64_t i) {
  switch (dtype) {
    case DType::kInt8:
      return static_cast<const int8_t*>(data)[i];
    case DType::kInt16:
      return static_cast<const int16_t*>(data)[i];
    case DType::kUInt8:
      return static_cast<const uint8_t*>(data)[i];
    case DType::kUInt16:
      return static_cast<const uint16_t*>(data)[i];
    case DType::kUInt32:
      return static_cast<const uint32_t*>(data)[i];
    case DType::kInt4:
      return static_cast<const int4*>(data)[i];
    case DType::kUInt4:
      return static_cast<const uint4*>(data)[i];
    case DType::kInt2:
      return static_cast<const int2*>(data)[i];
    case DType::kUInt2:
      return static_cast<const uint2*>(data)[i];
    default:
      return static_cast<const int32_t*>(data)[i];
  }
}

bool load_bool(const void* data, int64_t i) { return static_cast<const bool*>(data)[i]; }

// ---------------------------------------------------------------------------------------------
// Layout (numpy _leading_trailing and _formatArray).

// Appends the offsets of the elements that the summarised text shows.
void collect_shown(const Shape& shape, const SmallVec& strides, int axis, int64_t offset,
                   bool summarise, int64_t edge, std::vector<int64_t>& out) {
  if (axis == shape.rank()) {
    out.push_back(offset);
    return;
  }
  const int64_t n = shape[axis];
  const int64_t stride = strides[axis];
  if (summarise && n - edge > edge) {
    for (int64_t i = 0; i < edge; ++i) {
      collect_shown(shape, strides, axis + 1, offset + i * stride, summarise, edge, out);
    }
    // numpy takes a[-edge:], which is the whole axis when edge == 0.
    for (int64_t i = edge == 0 ? 0 : n - edge; i < n; ++i) {
      collect_shown(shape, strides, axis + 1, offset + i * stride, summarise, edge, out);
    }
  } else {
    for (int64_t i = 0; i < n; ++i) {
      collect_shown(shape, strides, axis + 1, offset + i * stride, summarise, edge, out);
    }
  }
}

void rstrip(std::string& s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
}

// numpy _extendLine: wrap before `word` if the line would grow past `width`, unless the line
// holds nothing but the indent.
void extend_line(std::string& s, std::string& line, const std::string& word, int64_t width,
                 const std::string& prefix) {
  bool wrap = static_cast<int64_t>(line.size() + word.size()) > width;
  if (line.size() <= prefix.size()) wrap = false;
  if (wrap) {
    rstrip(line);
    s += line;
    s += '\n';
    line = prefix;
  }
  line += word;
}

class Printer {
 public:
  Printer(const Shape& shape, bool summarise, int64_t edge,
          std::function<std::string(int64_t)> element)
      : shape_(shape),
        strides_(row_major_strides(shape)),
        summarise_(summarise),
        edge_(edge),
        element_(std::move(element)) {}

  std::string print(int linewidth) const { return recurse(0, 0, " ", linewidth); }

 private:
  std::string recurse(int axis, int64_t offset, const std::string& hanging, int64_t width) const {
    const int axes_left = shape_.rank() - axis;
    const std::string next_hanging = hanging + ' ';
    const int64_t next_width = width - 1;
    const int64_t n = shape_[axis];
    const int64_t stride = strides_[axis];
    const bool show_summary = summarise_ && n - edge_ > edge_;
    const int64_t leading = show_summary ? edge_ : 0;
    const int64_t trailing = show_summary ? edge_ : n;

    std::string s;
    if (axes_left == 1) {
      const int64_t elem_width = width - 1;  // room for the "]"
      std::string line = hanging;
      for (int64_t i = 0; i < leading; ++i) {
        extend_line(s, line, element_(offset + i * stride), elem_width, hanging);
        line += ' ';
      }
      if (show_summary) {
        extend_line(s, line, "...", elem_width, hanging);
        line += ' ';
      }
      for (int64_t i = trailing; i > 1; --i) {
        extend_line(s, line, element_(offset + (n - i) * stride), elem_width, hanging);
        line += ' ';
      }
      extend_line(s, line, element_(offset + (n - 1) * stride), elem_width, hanging);
      s += line;
    } else {
      const std::string line_sep(static_cast<size_t>(axes_left - 1), '\n');
      for (int64_t i = 0; i < leading; ++i) {
        s += hanging;
        s += recurse(axis + 1, offset + i * stride, next_hanging, next_width);
        s += line_sep;
      }
      if (show_summary) {
        s += hanging;
        s += "...";
        s += line_sep;
      }
      for (int64_t i = trailing; i > 1; --i) {
        s += hanging;
        s += recurse(axis + 1, offset + (n - i) * stride, next_hanging, next_width);
        s += line_sep;
      }
      s += hanging;
      s += recurse(axis + 1, offset + (n - 1) * stride, next_hanging, next_width);
    }
    return "[" + s.substr(hanging.size()) + "]";
  }

  const Shape& shape_;
  SmallVec strides_;
  bool summarise_;
  int64_t edge_;
  std::function<std::string(int64_t)> element_;
};

}  // namespace

std::string format_array(DType dtype, const void* data, const Shape& shape,
                         const PrintOptions& options) {
  const bool is_float = is_floating(dtype);
  // The float8s print their values as float32 (see the file comment).
  const DType digits = is_float8(dtype) ? DType::kFloat32 : dtype;

  if (shape.rank() == 0) {
    if (is_float) return scalar_float_text(load_float(dtype, data, 0), digits);
    if (dtype == DType::kBool) return load_bool(data, 0) ? "True" : "False";
    return std::to_string(load_int(dtype, data, 0));
  }
  if (shape.size() == 0) return "[]";

  const bool summarise = shape.size() > options.threshold;
  const int64_t edge = std::max<int64_t>(0, options.edgeitems);
  std::vector<int64_t> shown;
  collect_shown(shape, row_major_strides(shape), 0, 0, summarise, edge, shown);

  std::function<std::string(int64_t)> element;
  if (is_float) {
    std::vector<float> values;
    values.reserve(shown.size());
    for (int64_t off : shown) values.push_back(load_float(dtype, data, off));
    element = [format = FloatFormat(values, digits), dtype, data](int64_t off) {
      return format(load_float(dtype, data, off));
    };
  } else if (dtype == DType::kBool) {
    element = [data](int64_t off) { return std::string(load_bool(data, off) ? " True" : "False"); };
  } else {
    int64_t lo = load_int(dtype, data, shown.front());
    int64_t hi = lo;
    for (int64_t off : shown) {
      const int64_t v = load_int(dtype, data, off);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const size_t width =
        is_narrow_int(dtype) ? 0 : std::max(std::to_string(lo).size(), std::to_string(hi).size());
    element = [width, dtype, data](int64_t off) {
      return pad_left(std::to_string(load_int(dtype, data, off)), width);
    };
  }
  return Printer(shape, summarise, edge, std::move(element)).print(options.linewidth);
}

}  // namespace tessera::detail
