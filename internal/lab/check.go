package lab

import (
	"errors"
	"fmt"

	"sqm/internal/features"
)

// checkKernel asks the running kernel for everything the lab builds before
// building any of it: netem for the modem, the shaping qdisc, ingress +
// u32 + mirred + ifb for ingress shaping. The first missing piece is named
// with its module, plus the way out (--vm).
// A trace run's modem needs tbf as well (see tracemodem.go).
func checkKernel(qdisc string, traced bool) error {
	checks := []struct {
		what string
		fn   func() error
	}{
		{"the emulated modem", func() error { return features.Qdisc("netem") }},
		{"shaping", func() error { return features.Qdisc(qdisc) }},
		{"ingress shaping", func() error { return features.Qdisc("ingress") }},
		{"ingress shaping", func() error { return features.Classifier("u32") }},
		{"ingress shaping", func() error { return features.Action("mirred") }},
		{"ingress shaping", features.IFB},
	}
	if traced {
		checks = append(checks, struct {
			what string
			fn   func() error
		}{"the trace-following modem", func() error { return features.Qdisc("tbf") }})
	}
	for _, c := range checks {
		if err := c.fn(); err != nil {
			if errors.Is(err, features.ErrNotAvailable) {
				return fmt.Errorf("lab: this kernel cannot run the lab (%s): %w; run 'sqm lab --vm' to use the project's VM kernel instead", c.what, err)
			}
			return fmt.Errorf("lab: check the kernel for %s: %w", c.what, err)
		}
	}
	return nil
}
