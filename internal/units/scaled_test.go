package units

import (
	"math"
	"math/big"
	"math/bits"
	"strings"
	"testing"
)

// bigScaled is what scaled computed with math/big before it did the
// arithmetic itself: the reference it must agree with.
func bigScaled(digits string, exp10 int, scale, max uint64) (uint64, bool) {
	m, ok := new(big.Int).SetString(digits, 10)
	if !ok {
		panic(digits)
	}
	v := new(big.Int).Mul(m, new(big.Int).SetUint64(scale))
	if v.Sign() != 0 {
		switch {
		case exp10 > 40:
			return 0, false
		case exp10 > 0:
			v.Mul(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp10)), nil))
		case exp10 < -1000:
			v.SetInt64(0)
		case exp10 < 0:
			v.Quo(v, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-exp10)), nil))
		}
	}
	if !v.IsUint64() || v.Uint64() > max {
		return 0, false
	}
	return v.Uint64(), true
}

func checkScaled(t *testing.T, digits string, exp10 int, scale, max uint64) {
	t.Helper()
	want, wantOK := bigScaled(digits, exp10, scale, max)
	got, err := scaled(digits, exp10, scale, max)
	if (err == nil) != wantOK || got != want {
		t.Errorf("scaled(%q, %d, %d, %d) = %d, %v; want %d, ok %v", digits, exp10, scale, max, got, err, want, wantOK)
	}
	if err != nil && !strings.Contains(err.Error(), "too large") {
		t.Errorf("scaled(%q, %d, %d): error %q", digits, exp10, scale, err)
	}
}

var scaledCases = []struct {
	digits string
	exp10  int
}{
	{"0", 0}, {"000", 50}, {"1", 0}, {"15", -1}, {"1", 19}, {"1", 20}, {"18446744073709551615", 0},
	{"18446744073709551616", 0}, {"184467440737095516150", -1}, {"184467440737095516159", -1},
	{"99999999999999999999999999", -26}, {"1", -1000}, {"1", -1001}, {"5", -1}, {"0001", 3},
	{"123456789012345678901234567890", -25}, {"999", -3}, {"1", -20}, {"1844674407370955161", 1},
}

var scales = []uint64{1, 8, 1000, 1e6, 1 << 30, 1e12, 1 << 40, 1e15, 1 << 60, math.MaxUint64}

func TestScaledMatchesBig(t *testing.T) {
	for _, c := range scaledCases {
		for _, s := range scales {
			for _, max := range []uint64{math.MaxUint32, math.MaxUint64} {
				checkScaled(t, c.digits, c.exp10, s, max)
			}
		}
	}
}

func FuzzScaled(f *testing.F) {
	for _, c := range scaledCases {
		f.Add(c.digits, c.exp10, uint64(1e6))
	}
	f.Fuzz(func(t *testing.T, digits string, exp10 int, scale uint64) {
		if digits == "" || strings.Trim(digits, "0123456789") != "" || exp10 < -2000 || exp10 > 2000 {
			return
		}
		checkScaled(t, digits, exp10, scale, math.MaxUint64)
		checkScaled(t, digits, exp10, scale, math.MaxUint32)
	})
}

// TestDiv10LikeDiv64 holds div10 to bits.Div64 at the edges of its range.
func TestDiv10LikeDiv64(t *testing.T) {
	for hi := uint64(0); hi < 10; hi++ {
		for _, lo := range []uint64{0, 1, 9, 10, 11, 1<<32 - 1, 1 << 32, 1<<32 + 9, 1<<63 - 1, 1 << 63, 1<<64 - 10, 1<<64 - 1, 0x123456789abcdef0} {
			want, _ := bits.Div64(hi, lo, 10)
			if got := div10(hi, lo); got != want {
				t.Errorf("div10(%d, %#x) = %d, bits.Div64 gives %d", hi, lo, got, want)
			}
		}
	}
}
