package plan

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseHandle reads a handle as tc writes it and Handle.String prints it:
// "root", "ingress", "none", "1:", "1:10", "ffff:" (hexadecimal, as in tc).
func ParseHandle(s string) (Handle, error) {
	switch s {
	case "root":
		return HandleRoot, nil
	case "ingress":
		return HandleIngress, nil
	case "none":
		return HandleNone, nil
	}
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("parse handle %q: want major:minor in hex, e.g. 1:10, ffff: or root", s)
	}
	ma, err := strconv.ParseUint(maj, 16, 16)
	if err != nil {
		return 0, fmt.Errorf("parse handle %q: major %q is not a 16-bit hex number", s, maj)
	}
	var mi uint64
	if min != "" {
		if mi, err = strconv.ParseUint(min, 16, 16); err != nil {
			return 0, fmt.Errorf("parse handle %q: minor %q is not a 16-bit hex number", s, min)
		}
	}
	return MakeHandle(uint16(ma), uint16(mi)), nil
}

// UnmarshalText reads what MarshalText writes, so plans survive JSON.
func (h *Handle) UnmarshalText(b []byte) error {
	v, err := ParseHandle(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// DecodeJSONString is UnmarshalText for sqm/internal/json, which does not
// call UnmarshalText (its StringDecoder says why).
func (h *Handle) DecodeJSONString(b []byte) error { return h.UnmarshalText(b) }
