package json

import (
	"bytes"
	"encoding/base64"
	"testing"
)

var base64Inputs = []string{
	"", "YQ==", "YWI=", "YWJj", "YWJjZA==", "aGVsbG8sIHdvcmxk", "+/+/", "////", "AAAA",
	"YQ", "YQ=", "YQ===", "Y===", "====", "=", "YWJ", "YW=J", "YQ==YQ==", "YWJjYQ==YWJj", "YWJj=",
	"YQ==\n", "\nY\rQ=\n=\r\n", "YW\nJj", "\r\n", "YQ=\n", "YWJ\n=", "YWJj\nYWJj", "Y Q==", "YQ==\x00",
	"YR==", "YWK=", "_-_-", "YWJj\x80", "é", "YQ=a", "YQ=\n\n=",
}

// TestBase64LikeStd holds the base64 of []byte values to
// encoding/base64's StdEncoding, which encoding/json uses.
func TestBase64LikeStd(t *testing.T) {
	for _, in := range base64Inputs {
		sameBase64(t, in)
	}
	for n := range 70 {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*37 + n)
		}
		sameBase64(t, base64.StdEncoding.EncodeToString(b))
	}
}

func sameBase64(t *testing.T, in string) {
	t.Helper()
	got, ok := decodeBase64(in)
	want, err := base64.StdEncoding.DecodeString(in)
	if ok != (err == nil) || ok && !bytes.Equal(got, want) || ok && got == nil {
		t.Fatalf("decodeBase64(%q) = %q, %v; encoding/base64 gives %q, %v", in, got, ok, want, err)
	}
	if ok {
		if a, b := appendBase64(nil, want), base64.StdEncoding.AppendEncode(nil, want); !bytes.Equal(a, b) {
			t.Fatalf("appendBase64(%q) = %q, encoding/base64 gives %q", want, a, b)
		}
	}
}

func FuzzBase64(f *testing.F) {
	for _, in := range base64Inputs {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		sameBase64(t, in)
		if a, b := appendBase64([]byte("x"), []byte(in)), base64.StdEncoding.AppendEncode([]byte("x"), []byte(in)); !bytes.Equal(a, b) {
			t.Fatalf("appendBase64(%q) = %q, encoding/base64 gives %q", in, a, b)
		}
	})
}
