package json

import (
	"math"
	"reflect"
	"testing"
)

// TestIsEmptyLikeIsZero holds omitempty's per-kind test to
// reflect.Value.IsZero, which encoding/json uses for the kinds that have
// no length.
func TestIsEmptyLikeIsZero(t *testing.T) {
	var p *int
	var e any
	for _, v := range []any{
		false, true, 0, 1, int8(-1), int64(math.MinInt64), uint(0), uint8(1), uintptr(0), uint64(math.MaxUint64),
		0.0, math.Copysign(0, -1), float32(0), float32(math.Copysign(0, -1)), 1e-300, math.NaN(), float32(1e-45),
		p, new(int), &e,
	} {
		rv := reflect.ValueOf(v)
		if got, want := isEmpty(rv), rv.IsZero(); got != want {
			t.Errorf("isEmpty(%T %v) = %v, want %v", v, v, got, want)
		}
	}
	if isEmpty(reflect.ValueOf(&e).Elem()) != true || isEmpty(reflect.ValueOf(&[]any{1}[0]).Elem()) != false {
		t.Error("isEmpty of an interface: want true for nil, false for a value")
	}
}
