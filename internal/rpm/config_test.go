package rpm

import (
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      Config
		err       string // substring of the error; "" = valid
	}{
		{name: "current keys (draft -02 onwards)",
			doc:  `{"version":1,"urls":{"large_download_url":"https://h.example/large","small_download_url":"https://h.example/small","upload_url":"https://h.example/upload"}}`,
			want: Config{Version: 1, Large: "https://h.example/large", Small: "https://h.example/small", Upload: "https://h.example/upload"}},
		{name: "older keys (goresponsiveness, draft -00/-01)",
			doc:  `{"version":1,"urls":{"large_https_download_url":"https://h.example/l","small_https_download_url":"https://h.example/s","https_upload_url":"https://h.example/u"}}`,
			want: Config{Version: 1, Large: "https://h.example/l", Small: "https://h.example/s", Upload: "https://h.example/u", OldKeys: true}},
		{name: "both sets: current wins",
			doc:  `{"version":1,"urls":{"large_download_url":"https://h/new","small_download_url":"https://h/s","upload_url":"https://h/u","large_https_download_url":"https://h/old","small_https_download_url":"https://h/s","https_upload_url":"https://h/u"}}`,
			want: Config{Version: 1, Large: "https://h/new", Small: "https://h/s", Upload: "https://h/u"}},
		{name: "test_endpoint and any order, string version",
			doc:  `{"test_endpoint":"edge1.example","urls":{"upload_url":"https://h:8443/u","small_download_url":"https://h:8443/s","large_download_url":"https://h:8443/l"},"version":"1"}`,
			want: Config{Version: 1, Large: "https://h:8443/l", Small: "https://h:8443/s", Upload: "https://h:8443/u", Endpoint: "edge1.example"}},
		{name: "apple-style extra fields ignored",
			doc:  `{"version":1,"test_endpoint":"x.aaplimg.com","urls":{"small_https_download_url":"https://m.example/api/v1/small","large_https_download_url":"https://m.example/api/v1/large","https_upload_url":"https://m.example/api/v1/slurp","small_download_url":"https://m.example/api/v1/small","large_download_url":"https://m.example/api/v1/large","upload_url":"https://m.example/api/v1/slurp"},"extra":[1,2]}`,
			want: Config{Version: 1, Large: "https://m.example/api/v1/large", Small: "https://m.example/api/v1/small", Upload: "https://m.example/api/v1/slurp", Endpoint: "x.aaplimg.com"}},
		{name: "version 2", doc: `{"version":2,"urls":{}}`, err: `"version" is 2`},
		{name: "no version", doc: `{"urls":{}}`, err: `no "version"`},
		{name: "version not a number", doc: `{"version":true,"urls":{}}`, err: `"version" is true`},
		{name: "duplicate version", doc: `{"version":1,"version":1,"urls":{}}`, err: `"version" appears 2 times`},
		{name: "no urls", doc: `{"version":1}`, err: `no "urls"`},
		{name: "urls not an object", doc: `{"version":1,"urls":[]}`, err: `"urls" is not a JSON object`},
		{name: "missing upload", doc: `{"version":1,"urls":{"large_download_url":"https://h/l","small_download_url":"https://h/s"}}`, err: `neither "upload_url" nor "https_upload_url"`},
		{name: "duplicate url", doc: `{"version":1,"urls":{"large_download_url":"https://h/l","large_download_url":"https://h/l","small_download_url":"https://h/s","upload_url":"https://h/u"}}`, err: `"large_download_url" appears 2 times`},
		{name: "different hosts", doc: `{"version":1,"urls":{"large_download_url":"https://a/l","small_download_url":"https://b/s","upload_url":"https://a/u"}}`, err: "one host for all three"},
		{name: "ftp url", doc: `{"version":1,"urls":{"large_download_url":"ftp://h/l","small_download_url":"https://h/s","upload_url":"https://h/u"}}`, err: "http or https URL"},
		{name: "url not a string", doc: `{"version":1,"urls":{"large_download_url":7,"small_download_url":"https://h/s","upload_url":"https://h/u"}}`, err: "not a string"},
		{name: "no host", doc: `{"version":1,"urls":{"large_download_url":"https:///l","small_download_url":"https:///s","upload_url":"https:///u"}}`, err: "has no host"},
		{name: "bad endpoint", doc: `{"version":1,"test_endpoint":"a/b","urls":{}}`, err: `"test_endpoint" "a/b"`},
		{name: "not JSON", doc: `<html>`, err: "not JSON"},
		{name: "trailing data", doc: `{"version":1,"urls":{"large_download_url":"https://h/l","small_download_url":"https://h/s","upload_url":"https://h/u"}} {}`, err: "data after the object"},
		{name: "too big", doc: `{"version":1,"x":"` + strings.Repeat("a", maxConfigSize) + `"}`, err: "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.doc))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v; want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Errorf("got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestConfigURL(t *testing.T) {
	for in, want := range map[string]string{
		"rpm.example":                              "https://rpm.example/.well-known/nq",
		"10.0.0.1:8443":                            "https://10.0.0.1:8443/.well-known/nq",
		"https://[fd00::1]:4443/":                  "https://[fd00::1]:4443/.well-known/nq",
		"https://mensura.example/api/v1/gm/config": "https://mensura.example/api/v1/gm/config",
		"http://lan-box:8080":                      "http://lan-box:8080/.well-known/nq",
		"fd00::1":                                  "https://[fd00::1]/.well-known/nq",
		"[fd00::1]:4443":                           "https://[fd00::1]:4443/.well-known/nq",
	} {
		got, err := ConfigURL(in)
		if err != nil || got != want {
			t.Errorf("ConfigURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ftp://h/x", "https://", "https://:443/"} {
		if got, err := ConfigURL(bad); err == nil {
			t.Errorf("ConfigURL(%q) = %q; want an error", bad, got)
		}
	}
}

// FuzzParseConfig checks that no document crashes the parser and that an
// accepted one always satisfies the draft's rules.
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		`{"version":1,"urls":{"large_download_url":"https://h/l","small_download_url":"https://h/s","upload_url":"https://h/u"}}`,
		`{"version":1,"urls":{"large_https_download_url":"https://h/l","small_https_download_url":"https://h/s","https_upload_url":"https://h/u"},"test_endpoint":"e"}`,
		`{"version":"1","urls":{"large_download_url":"http://h:1/l","small_download_url":"http://h:1/s","upload_url":"http://h:1/u"}}`,
		`{"version":1,"version":1}`, `[]`, `{"urls":{"a":1}}`, ``, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		if c.Version != 1 || c.Large == "" || c.Small == "" || c.Upload == "" {
			t.Fatalf("accepted an incomplete config %+v from %q", c, data)
		}
		for _, u := range []string{c.Large, c.Small, c.Upload} {
			if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				t.Fatalf("accepted URL %q from %q", u, data)
			}
		}
	})
}
