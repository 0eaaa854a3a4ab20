package httpd

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// FuzzReadRequest: whatever the bytes, ReadRequest returns a request that
// keeps the server's rules or a refusal with a status of its own; never a
// panic, and never a request with ambiguous framing. The seeds are in
// testdata/fuzz/FuzzReadRequest (browser and curl requests, and the
// refusals' table).
func FuzzReadRequest(f *testing.F) {
	for _, tc := range refusals {
		f.Add([]byte(tc.raw))
	}
	lim := Limits{HeaderBytes: 1024, Fields: 20, Body: 4096}
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReaderSize(bytes.NewReader(data), 256)
		r, err := ReadRequest(br, lim)
		if err != nil {
			var re *RequestError
			if errors.As(err, &re) {
				if re.Code < 400 || re.Code > 505 || StatusText(re.Code) == "" || re.Msg == "" {
					t.Fatalf("refusal %d %q", re.Code, re.Msg)
				}
			} else if err != errNoRequest && err != io.ErrUnexpectedEOF && err != io.EOF {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if r.URL == nil || !strings.HasPrefix(r.URL.Path, "/") && r.URL.Path != "" || !isToken(r.Method) {
			t.Fatalf("request %q %q %+v", r.Method, r.Target, r.URL)
		}
		if r.ProtoMinor == 1 && r.Host == "" || r.Host != "" && !validHost(r.Host) {
			t.Fatalf("host %q in HTTP/1.%d", r.Host, r.ProtoMinor)
		}
		if len(r.Header.Values("Transfer-Encoding")) > 0 || len(r.Header.Values("Content-Length")) > 1 {
			t.Fatalf("ambiguous framing accepted: %v", r.Header)
		}
		if r.ContentLength < 0 || r.ContentLength > lim.Body {
			t.Fatalf("Content-Length %d", r.ContentLength)
		}
		n := 0
		for k, vs := range r.Header {
			if !isToken(k) {
				t.Fatalf("field name %q", k)
			}
			for _, v := range vs {
				n++
				if strings.ContainsAny(v, "\r\n\x00") || v != strings.Trim(v, " \t") {
					t.Fatalf("field %s value %q", k, v)
				}
			}
		}
		if n > lim.Fields {
			t.Fatalf("%d fields, cap %d", n, lim.Fields)
		}
	})
}
