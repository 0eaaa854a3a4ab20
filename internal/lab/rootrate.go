package lab

import "sqm/internal/kernel"

// rootRater reads the root qdiscs' configured rates in the router
// namespace, on one netlink socket opened there (the rate sampler reads
// ten times a second).
type rootRater struct {
	k   *kernel.Conn
	idx [2]int // ifb (down), wan (up); 0: none
}

func (t *topology) newRootRater(wan, ifb string) (*rootRater, error) {
	r := &rootRater{}
	err := t.router.Do(func() error {
		k, err := kernel.Open()
		if err != nil {
			return err
		}
		for d, dev := range [2]string{ifb, wan} {
			if dev == "" {
				continue
			}
			if r.idx[d], err = k.LinkIndex(dev); err != nil {
				k.Close()
				return err
			}
		}
		r.k = k
		return nil
	})
	return r, err
}

// rates are the configured rates, bit/s, down and up; 0 where the qdisc
// has none of its own (htb).
func (r *rootRater) rates() (bits [2]uint64, err error) {
	var sc [2]kernel.ShaperCounters
	if err := r.k.ShaperCounters(r.idx, &sc); err != nil {
		return bits, err
	}
	for d := range sc {
		bits[d] = sc[d].RateBits
	}
	return bits, nil
}

func (r *rootRater) close() { r.k.Close() }
