package json

// The base64 of []byte values, encoding/base64's StdEncoding as
// encoding/json uses it, here because that package costs the router
// build 6 KB of code and an init that builds four encodings, for the
// two loops below. TestBase64LikeStd and FuzzBase64 hold them to it.

const b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// appendBase64 appends src in padded standard base64.
func appendBase64(dst, src []byte) []byte {
	for len(src) >= 3 {
		v := uint(src[0])<<16 | uint(src[1])<<8 | uint(src[2])
		dst = append(dst, b64[v>>18], b64[v>>12&63], b64[v>>6&63], b64[v&63])
		src = src[3:]
	}
	switch len(src) {
	case 1:
		v := uint(src[0]) << 16
		dst = append(dst, b64[v>>18], b64[v>>12&63], '=', '=')
	case 2:
		v := uint(src[0])<<16 | uint(src[1])<<8
		dst = append(dst, b64[v>>18], b64[v>>12&63], b64[v>>6&63], '=')
	}
	return dst
}

// decodeBase64 decodes padded standard base64 as StdEncoding.DecodeString
// does: carriage returns and newlines anywhere are skipped, the rest must
// be whole groups of four, "=" only as the last one or two of the last
// group, and the unused bits of a padded group may be anything. It
// returns a non-nil slice (empty for ""), or ok false.
func decodeBase64(s string) (_ []byte, ok bool) {
	out := make([]byte, 0, len(s)/4*3)
	var q [4]byte // the group's 6-bit values
	n, pad := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		var v byte
		switch {
		case c == '\r' || c == '\n':
			continue
		case pad > 0 && c != '=', n < 2 && c == '=':
			return nil, false // data after "=", or "=" too early in a group
		case c == '=':
			pad++
		case c >= 'A' && c <= 'Z':
			v = c - 'A'
		case c >= 'a' && c <= 'z':
			v = c - 'a' + 26
		case c >= '0' && c <= '9':
			v = c - '0' + 52
		case c == '+':
			v = 62
		case c == '/':
			v = 63
		default:
			return nil, false
		}
		if n == 4 {
			if pad > 0 {
				return nil, false // a group after a padded one
			}
			out = append(out, q[0]<<2|q[1]>>4, q[1]<<4|q[2]>>2, q[2]<<6|q[3])
			n = 0
		}
		q[n] = v
		n++
	}
	if n != 4 && n != 0 {
		return nil, false
	}
	if n == 4 {
		out = append(out, q[0]<<2|q[1]>>4, q[1]<<4|q[2]>>2, q[2]<<6|q[3])
		out = out[:len(out)-pad]
	}
	return out, true
}
