package lab

import "sqm/internal/kernel"

// rootRates reads the root qdiscs' configured rates on wan (up) and ifb
// (down) in Mbit/s, 0 where the qdisc has none of its own (htb).
func (t *topology) rootRates(wan, ifb string) (r [2]float64, ok bool) {
	err := t.router.Do(func() error {
		k, err := kernel.Open()
		if err != nil {
			return err
		}
		defer k.Close()
		var idx [2]int
		for d, dev := range [2]string{ifb, wan} {
			if dev == "" {
				continue
			}
			if idx[d], err = k.LinkIndex(dev); err != nil {
				return err
			}
		}
		var sc [2]kernel.ShaperCounters
		if err := k.ShaperCounters(idx, &sc); err != nil {
			return err
		}
		for d := range sc {
			r[d] = float64(sc[d].RateBits) / 1e6
		}
		return nil
	})
	return r, err == nil
}
