package netlink

// As is errors.As for a concrete error type T: the first error in err's
// tree, depth first through Unwrap() error and Unwrap() []error, that is
// a T or whose As method takes a *T. errors.As takes its target as an
// any and checks it at run time with internal/reflectlite, 7 KB of the
// router build's code on mipsle that only its two calls there needed;
// TestAsLikeErrors holds this to it.
func As[T error](err error) (T, bool) {
	var zero T
	for err != nil {
		if t, ok := err.(T); ok {
			return t, true
		}
		if a, ok := err.(interface{ As(any) bool }); ok {
			var t T
			if a.As(&t) {
				return t, true
			}
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if t, ok := As[T](e); ok {
					return t, true
				}
			}
			return zero, false
		default:
			return zero, false
		}
	}
	return zero, false
}
