// Package jsontest holds sqm/internal/json to encoding/json's behaviour.
// Tests of packages with JSON types of their own (some unexported) run
// their values and inputs through both here. Only tests import it, so
// encoding/json stays out of the binaries (cmd/sqm's TestForbiddenDeps).
package jsontest

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"reflect"

	"sqm/internal/json"
)

// Unmarshal decodes data into a fresh value from newV with each package
// and reports where they disagree: one accepts what the other refuses,
// the values differ, or the values encode differently.
func Unmarshal(data []byte, newV func() any) error {
	a, b := newV(), newV()
	errA := json.Unmarshal(data, a)
	errB := stdjson.Unmarshal(data, b)
	if (errA == nil) != (errB == nil) {
		return fmt.Errorf("into %T, %q: sqm/internal/json says %v, encoding/json says %v", a, data, errA, errB)
	}
	if errA != nil {
		return nil
	}
	if !reflect.DeepEqual(a, b) {
		return fmt.Errorf("into %T, %q: sqm/internal/json stores %#v, encoding/json %#v", a, data, a, b)
	}
	return Marshal(a)
}

// Marshal encodes v with each package, as Marshal, MarshalIndent and an
// Encoder that leaves HTML alone, and reports the first difference.
func Marshal(v any) error {
	a, errA := json.Marshal(v)
	b, errB := stdjson.Marshal(v)
	if err := same("Marshal", v, a, b, errA, errB); err != nil {
		return err
	}
	a, errA = json.MarshalIndent(v, "> ", "\t")
	b, errB = stdjson.MarshalIndent(v, "> ", "\t")
	if err := same("MarshalIndent", v, a, b, errA, errB); err != nil {
		return err
	}
	var ba, bb bytes.Buffer
	ea, eb := json.NewEncoder(&ba), stdjson.NewEncoder(&bb)
	ea.SetEscapeHTML(false)
	eb.SetEscapeHTML(false)
	ea.SetIndent("", "  ")
	eb.SetIndent("", "  ")
	errA, errB = ea.Encode(v), eb.Encode(v)
	return same("Encoder.Encode", v, ba.Bytes(), bb.Bytes(), errA, errB)
}

func same(op string, v any, a, b []byte, errA, errB error) error {
	if (errA == nil) != (errB == nil) {
		return fmt.Errorf("%s(%T %#v): sqm/internal/json says %v, encoding/json says %v", op, v, v, errA, errB)
	}
	if errA == nil && !bytes.Equal(a, b) {
		return fmt.Errorf("%s(%T):\nsqm/internal/json %s\nencoding/json     %s", op, v, a, b)
	}
	return nil
}
