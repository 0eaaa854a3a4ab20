package config

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Bounds of the numeric options. Each is checked when the file is read
// (Parse) and again by Validate (queues built from flags or read back from
// a state file), so a value the kernel cannot hold, or one that would make
// sqm itself allocate or overflow, never reaches the planner. Where the
// planner picks a mechanism with a narrower kernel field (cake's overhead,
// htb's 16-bit rate-table fields) it checks that narrower range itself.
const (
	// MaxKbit is the largest rate accepted, in kbit/s (4.3 Tbit/s): well
	// above any link sqm shapes, and small enough that bit/s fit in 64
	// bits with room (the kernel's 64-bit rates are bytes/s).
	MaxKbit = 1 << 32

	// MinOverhead is LuCI's lower limit for the per-packet overhead.
	MinOverhead = -1500
	// MaxOverhead mirrors it: no link layer adds more than a whole
	// Ethernet payload per packet, so a larger value is a typo; the bound
	// also keeps burst and size-table arithmetic far from overflow.
	MaxOverhead = 1500

	// MaxStabMTU is the largest size-table MTU: the largest MTU a Linux
	// device can have (65536, loopback). 0 means tc's default (2047).
	MaxStabMTU = 65536
	// MaxStabTSize is the largest size table the kernel can be given:
	// TCA_STAB is one netlink attribute, whose length is 16 bits, holding
	// the 4-byte attribute header, TCA_STAB_BASE (4+24 bytes) and
	// TCA_STAB_DATA (4 bytes + 2 per entry): (65535-4-28-4)/2. 0 means
	// tc's default (512).
	MaxStabTSize = (math.MaxUint16 - 4 - 28 - 4) / 2
	// MaxMPU is the largest minimum packet unit: the kernel's rate tables
	// keep it in 16 bits (struct tc_ratespec.mpu), and no link has a
	// minimum frame larger than the largest MTU.
	MaxMPU = math.MaxUint16

	// MaxTarget is the longest itarget/etarget: codel, fq_codel, pie and
	// cake take times as 32-bit microseconds.
	MaxTarget = time.Duration(math.MaxUint32) * time.Microsecond
)

// intBound is the accepted range of one integer option, with what the
// value means, for error messages.
type intBound struct {
	min, max int64
	what     string // "a per-packet overhead in bytes"
	example  string
}

// intBounds are the integer options and their ranges, keyed by UCI option
// name. Parse and Validate both read this table.
var intBounds = map[string]intBound{
	"overhead": {MinOverhead, MaxOverhead, "a per-packet overhead in bytes", "34 or 44"},
	"tcMTU":    {0, MaxStabMTU, "a size-table MTU in bytes", "2047"},
	"tcTSIZE":  {0, MaxStabTSize, "a size-table size in cells", "512"},
	"tcMPU":    {0, MaxMPU, "a minimum packet size in bytes", "0 or 64"},
	"ilimit":   {1, math.MaxUint32, "a queue limit in packets (bytes for bfifo)", "1001"},
	"elimit":   {1, math.MaxUint32, "a queue limit in packets (bytes for bfifo)", "1001"},
}

// checkInt parses v as option's integer and checks its range. It returns
// the value or the message of an OptionError naming the allowed range.
func checkInt(option, v string) (int64, string) {
	b := intBounds[option]
	s := v
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if !allDigits(s) || (err != nil && !isRangeErr(err)) {
		return 0, fmt.Sprintf("%q is not %s (a whole number from %d to %d, e.g. %s)", v, b.what, b.min, b.max, b.example)
	}
	if err != nil || n < b.min || n > b.max {
		return 0, fmt.Sprintf("%s is out of range: %s must be from %d to %d", v, b.what, b.min, b.max)
	}
	return n, ""
}

// rangeMsg is Validate's check of a value already stored in a Queue.
func rangeMsg(option string, n int64) string {
	b := intBounds[option]
	if n < b.min || n > b.max {
		return fmt.Sprintf("%d is out of range: %s must be from %d to %d", n, b.what, b.min, b.max)
	}
	return ""
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
