package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/httpd/httpdtest"
)

const sampleConfig = `# router's sqm config
config queue 'wan'
	option enabled '1'
	option interface 'eth1'   # the modem port
	option download '20000'
	option upload '5000'
	option script 'simple.qos'
	option qdisc 'fq_codel'
	option vendor_note 'kept'
`

type rig struct {
	t        *testing.T
	srv      *Server
	ts       *httpdtest.Server
	cfg      string
	applies  int
	applyErr error
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, cfg: filepath.Join(t.TempDir(), "sqm")}
	if err := os.WriteFile(r.cfg, []byte(sampleConfig), 0o640); err != nil {
		t.Fatal(err)
	}
	admin, _ := HashPassword("admin-secret")
	read, _ := HashPassword("read-secret")
	users, err := ParseUsers("users", []byte("admin "+admin+"\nread "+read+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r.srv = &Server{
		ConfigPath: r.cfg, Users: users,
		Status: func(context.Context) (any, error) { return map[string]int{"devices": 0}, nil },
		Apply: func(context.Context) ([]string, error) {
			r.applies++
			return []string{"eth1: applied"}, r.applyErr
		},
	}
	r.ts = httpdtest.NewServer(r.srv)
	t.Cleanup(r.ts.Close)
	return r
}

// client is a browser-like client with its own cookie jar.
type client struct {
	r    *rig
	c    *http.Client
	csrf string
}

func (r *rig) client() *client {
	jar, _ := cookiejar.New(nil)
	return &client{r: r, c: &http.Client{Jar: jar}}
}

func (c *client) do(method, path string, body any, hdr map[string]string) (int, map[string]any) {
	c.r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, c.r.ts.URL+path, rd)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.c.Do(req)
	if err != nil {
		c.r.t.Fatal(err)
	}
	defer res.Body.Close()
	var m map[string]any
	json.NewDecoder(res.Body).Decode(&m)
	return res.StatusCode, m
}

func (c *client) login(pw string) int {
	code, m := c.do("POST", "/api/login", map[string]string{"password": pw}, nil)
	if s, ok := m["csrf"].(string); ok {
		c.csrf = s
	}
	return code
}

func (c *client) change(path string, body any) (int, map[string]any) {
	return c.do("POST", path, body, map[string]string{csrfHeader: c.csrf})
}

func TestAuth(t *testing.T) {
	r := newRig(t)
	anon := r.client()
	for _, p := range []string{"/api/status", "/api/config", "/api/test", "/api/session"} {
		if code, _ := anon.do("GET", p, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("GET %s without login: %d; want 401", p, code)
		}
	}
	if code, _ := anon.do("POST", "/api/config", map[string]any{"section": "wan", "set": map[string]string{"download": "1"}}, nil); code != http.StatusUnauthorized {
		t.Errorf("change without login: %d; want 401", code)
	}
	if code := anon.login("wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d; want 401", code)
	}

	adm := r.client()
	if code := adm.login("admin-secret"); code != http.StatusOK || adm.csrf == "" {
		t.Fatalf("admin login: %d, csrf %q", code, adm.csrf)
	}
	if code, _ := adm.do("GET", "/api/status", nil, nil); code != http.StatusOK {
		t.Errorf("status after login: %d", code)
	}
	body := map[string]any{"section": "wan", "set": map[string]string{"download": "30000"}}
	if code, _ := adm.do("POST", "/api/config", body, nil); code != http.StatusForbidden {
		t.Errorf("change without CSRF token: %d; want 403", code)
	}
	if code, _ := adm.do("POST", "/api/config", body, map[string]string{csrfHeader: "x" + adm.csrf}); code != http.StatusForbidden {
		t.Errorf("change with a wrong CSRF token: %d; want 403", code)
	}
	// A form post from another site: no JSON content type.
	req, _ := http.NewRequest("POST", r.ts.URL+"/api/config", strings.NewReader("section=wan"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(csrfHeader, adm.csrf)
	if res, err := adm.c.Do(req); err != nil || res.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("form post: %v %v; want 415", res.StatusCode, err)
	}
	if b, _ := os.ReadFile(r.cfg); string(b) != sampleConfig || r.applies != 0 {
		t.Fatalf("refused changes changed something: applies %d\n%s", r.applies, b)
	}

	ro := r.client()
	if code := ro.login("read-secret"); code != http.StatusOK {
		t.Fatalf("read login: %d", code)
	}
	if code, _ := ro.do("GET", "/api/config", nil, nil); code != http.StatusOK {
		t.Errorf("read-only GET config: %d", code)
	}
	if code, m := ro.change("/api/config", body); code != http.StatusForbidden || !strings.Contains(m["error"].(string), "read-only") {
		t.Errorf("read-only change: %d %v; want 403", code, m)
	}
	if code, _ := ro.change("/api/test", map[string]any{"server": "192.0.2.1"}); code != http.StatusForbidden {
		t.Errorf("read-only test: %d; want 403", code)
	}

	// The cookie is HttpOnly and SameSite=Strict.
	res, _ := http.Post(r.ts.URL+"/api/login", "application/json", strings.NewReader(`{"password":"admin-secret"}`))
	ck := res.Header.Get("Set-Cookie")
	if !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") {
		t.Errorf("Set-Cookie %q lacks HttpOnly or SameSite=Strict", ck)
	}

	if code, _ := adm.change("/api/logout", map[string]any{}); code != http.StatusOK {
		t.Errorf("logout: %d", code)
	}
	if code, _ := adm.do("GET", "/api/status", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("status after logout: %d; want 401", code)
	}
}

func TestConfigChange(t *testing.T) {
	r := newRig(t)
	c := r.client()
	if c.login("admin-secret") != http.StatusOK {
		t.Fatal("login")
	}
	code, m := c.change("/api/config", map[string]any{"section": "wan", "set": map[string]string{"download": "30000", "overhead": "18"}})
	if code != http.StatusOK || m["ok"] != true {
		t.Fatalf("change: %d %v", code, m)
	}
	want := strings.Replace(sampleConfig, "'20000'", "'30000'", 1) + "\toption overhead '18'\n"
	if b, _ := os.ReadFile(r.cfg); string(b) != want {
		t.Errorf("file:\n%s\nwant:\n%s", b, want)
	}
	if fi, _ := os.Stat(r.cfg); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v; want the old file's 0640", fi.Mode().Perm())
	}
	if r.applies != 1 {
		t.Errorf("applies = %d; want 1", r.applies)
	}

	before, _ := os.ReadFile(r.cfg)
	for _, tc := range []struct{ opt, val, want string }{
		{"overhead", "abc", "overhead"},
		{"overhead", "99999", "overhead"},
		{"download", "-5", "download"},
		{"eqdisc_opts", "diffserv5", "eqdisc_opts"},
	} {
		code, m := c.change("/api/config", map[string]any{"section": "wan", "set": map[string]string{tc.opt: tc.val}})
		errs, _ := m["errors"].([]any)
		if code != http.StatusBadRequest || len(errs) == 0 {
			t.Errorf("%s=%q: %d %v; want 400 with errors", tc.opt, tc.val, code, m)
			continue
		}
		if got := errs[0].(map[string]any)["option"]; got != tc.want {
			t.Errorf("%s=%q: error on option %v; want %s (%v)", tc.opt, tc.val, got, tc.want, errs[0])
		}
	}
	if code, _ := c.change("/api/config", map[string]any{"section": "lan", "set": map[string]string{"download": "1"}}); code != http.StatusBadRequest {
		t.Errorf("unknown section: %d; want 400", code)
	}
	if code, _ := c.change("/api/config", map[string]any{"section": "wan", "set": map[string]string{"download": "1"}, "extra": 1}); code != http.StatusBadRequest {
		t.Errorf("unknown field: %d; want 400", code)
	}
	if b, _ := os.ReadFile(r.cfg); !bytes.Equal(b, before) || r.applies != 1 {
		t.Errorf("refused changes touched the file or the kernel (applies %d)", r.applies)
	}

	// The kernel refuses: the old file is back and applied again.
	r.applyErr = errors.New("eth1: kernel said no")
	code, m = c.change("/api/config", map[string]any{"section": "wan", "set": map[string]string{"upload": "6000"}})
	if code != http.StatusConflict || m["rolled_back"] != true {
		t.Fatalf("refused apply: %d %v", code, m)
	}
	if b, _ := os.ReadFile(r.cfg); !bytes.Equal(b, before) {
		t.Errorf("file not restored:\n%s", b)
	}
	if r.applies != 3 {
		t.Errorf("applies = %d; want 3 (the change, then the old file)", r.applies)
	}
}

func TestAssetsCompressed(t *testing.T) {
	r := newRig(t)
	for _, p := range []string{"/", "/app.js", "/style.css"} {
		req, _ := http.NewRequest("GET", r.ts.URL+p, nil)
		req.Header.Set("Accept-Encoding", "gzip, deflate")
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != "gzip" {
			t.Errorf("%s: %d, encoding %q", p, res.StatusCode, res.Header.Get("Content-Encoding"))
			continue
		}
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := io.ReadAll(zr)
		res.Body.Close()
		name := strings.TrimPrefix(p, "/")
		if name == "" {
			name = "index.html"
		}
		want, _ := assetFS.ReadFile("assets/" + name)
		if !bytes.Equal(plain, want) {
			t.Errorf("%s: gunzipped body differs from the embedded file", p)
		}
		if res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no CSP", p)
		}
	}
	// Without Accept-Encoding the plain file.
	req, _ := http.NewRequest("GET", r.ts.URL+"/app.js", nil)
	req.Header.Set("Accept-Encoding", "identity")
	res, _ := http.DefaultTransport.RoundTrip(req)
	if res.Header.Get("Content-Encoding") != "" {
		t.Errorf("identity: got %q", res.Header.Get("Content-Encoding"))
	}
	res.Body.Close()
}

func TestAcceptsGzip(t *testing.T) {
	for h, want := range map[string]bool{
		"": false, "gzip": true, "deflate, gzip;q=1.0": true, "gzip;q=0": false, "*": true, "br": false, "gzip; q=0.5": true,
	} {
		r := httpdtest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", h)
		if got := acceptsGzip(r); got != want {
			t.Errorf("%q: %v; want %v", h, got, want)
		}
	}
}

func TestConfigAddDelete(t *testing.T) {
	r := newRig(t)
	c := r.client()
	if c.login("admin-secret") != http.StatusOK {
		t.Fatal("login")
	}
	code, m := c.change("/api/config", map[string]any{"add": "lte"})
	if code != http.StatusOK {
		t.Fatalf("add: %d %v", code, m)
	}
	if b, _ := os.ReadFile(r.cfg); string(b) != sampleConfig+"\nconfig queue 'lte'\n\toption enabled '0'\n" {
		t.Errorf("after add:\n%s", b)
	}
	code, m = c.do("GET", "/api/config", nil, nil)
	if secs, _ := m["sections"].([]any); code != 200 || len(secs) != 2 {
		t.Errorf("config after add: %d %v", code, m)
	}
	for _, body := range []map[string]any{
		{"add": "wan"}, {"add": "bad name"}, {"section": "lte", "delete": true, "set": map[string]string{"x": "1"}}, {},
	} {
		if code, m := c.change("/api/config", body); code != http.StatusBadRequest {
			t.Errorf("%v: %d %v; want 400", body, code, m)
		}
	}
	if code, m := c.change("/api/config", map[string]any{"section": "lte", "delete": true}); code != http.StatusOK {
		t.Fatalf("delete: %d %v", code, m)
	}
	if b, _ := os.ReadFile(r.cfg); string(b) != sampleConfig {
		t.Errorf("after add and delete:\n%s", b)
	}
	if r.applies != 2 {
		t.Errorf("applies = %d; want 2", r.applies)
	}
}
