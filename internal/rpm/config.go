// Package rpm measures responsiveness the way the IETF draft
// "Responsiveness under Working Conditions" (draft-ietf-ippm-responsiveness)
// defines it, against any server that publishes the draft's configuration
// document (Apple's networkQuality servers, goserver, an nginx serving three
// files, or `sqm server --rpm`), and serves those endpoints itself.
//
// The unit is round trips per minute (RPM): 60000 divided by a round-trip
// time in milliseconds. The draft measures it with HTTP/2 over TLS so that
// the number reflects what applications see, queues in the sender's socket
// buffers included, not just what ICMP sees.
package rpm

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"sqm/internal/json"
)

// WellKnownPath is where the draft puts the configuration document.
const WellKnownPath = "/.well-known/nq"

// Config is a parsed, validated configuration document.
type Config struct {
	Version  int    `json:"version"`
	Large    string `json:"large_download_url"`
	Small    string `json:"small_download_url"`
	Upload   string `json:"upload_url"`
	Endpoint string `json:"test_endpoint,omitempty"` // host to connect to instead of the URLs' host
	// OldKeys is true when the URLs came from the key names of draft
	// revisions before 2023 (small_https_download_url, ...), which
	// goresponsiveness and older servers still use.
	OldKeys bool `json:"old_keys,omitempty"`
}

// The draft's key names (since early 2023) and the older ones, which
// carried "https" in the name. Servers in the field publish either set or
// both, so the client reads both; the current name wins when both appear.
var urlKeys = []struct{ cur, old string }{
	{"large_download_url", "large_https_download_url"},
	{"small_download_url", "small_https_download_url"},
	{"upload_url", "https_upload_url"},
}

// maxConfigSize bounds what is read of a configuration document: real ones
// are a few hundred bytes, and a hostile server must not make the client
// buffer gigabytes.
const maxConfigSize = 64 << 10

// ParseConfig parses a configuration document. The draft's validity rules
// are applied, because the draft says a client must ignore a document that
// breaks them: version 1, each field at most once, all three URLs present,
// http or https, and the same host in all three (so they can share
// connections). Errors name the field at fault.
func ParseConfig(data []byte) (*Config, error) {
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("configuration document is %d bytes; more than %d is not a configuration", len(data), maxConfigSize)
	}
	top, err := objectFields(data, "document")
	if err != nil {
		return nil, err
	}
	c := &Config{}
	for k, vs := range top {
		if len(vs) > 1 && (k == "version" || k == "urls" || k == "test_endpoint") {
			return nil, fmt.Errorf("configuration field %q appears %d times; it must appear once", k, len(vs))
		}
	}
	v, ok := top["version"]
	if !ok {
		return nil, errors.New(`configuration has no "version" field`)
	}
	if err := json.Unmarshal(v[0], &c.Version); err != nil {
		// The draft's prose quotes the value ("1"); accept it as a string too.
		var vs string
		if json.Unmarshal(v[0], &vs) != nil || vs != "1" {
			return nil, fmt.Errorf(`configuration "version" is %s, not an integer`, clip(v[0]))
		}
		c.Version = 1
	}
	if c.Version != 1 {
		return nil, fmt.Errorf(`configuration "version" is %d; only version 1 is understood`, c.Version)
	}
	if e, ok := top["test_endpoint"]; ok {
		if err := json.Unmarshal(e[0], &c.Endpoint); err != nil {
			return nil, fmt.Errorf(`configuration "test_endpoint" is %s, not a string`, clip(e[0]))
		}
		if c.Endpoint == "" || strings.ContainsAny(c.Endpoint, "/?#@ ") {
			return nil, fmt.Errorf(`configuration "test_endpoint" %q is not a host name or address`, c.Endpoint)
		}
	}
	u, ok := top["urls"]
	if !ok {
		return nil, errors.New(`configuration has no "urls" object`)
	}
	urls, err := objectFields(u[0], `"urls"`)
	if err != nil {
		return nil, err
	}
	dst := []*string{&c.Large, &c.Small, &c.Upload}
	host := ""
	for i, k := range urlKeys {
		name := k.cur
		raw, ok := urls[k.cur]
		if !ok {
			name = k.old
			if raw, ok = urls[k.old]; !ok {
				return nil, fmt.Errorf(`configuration "urls" has neither %q nor %q`, k.cur, k.old)
			}
			c.OldKeys = true
		}
		if len(raw) > 1 {
			return nil, fmt.Errorf("configuration URL %q appears %d times; it must appear once", name, len(raw))
		}
		var s string
		if err := json.Unmarshal(raw[0], &s); err != nil {
			return nil, fmt.Errorf("configuration URL %q is %s, not a string", name, clip(raw[0]))
		}
		p, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("configuration URL %q: %v", name, err)
		}
		if p.Scheme != "https" && p.Scheme != "http" {
			return nil, fmt.Errorf("configuration URL %q is %q; it must be an http or https URL", name, s)
		}
		if p.Host == "" || p.Hostname() == "" {
			return nil, fmt.Errorf("configuration URL %q (%q) has no host", name, s)
		}
		if i == 0 {
			host = p.Scheme + "://" + strings.ToLower(p.Host)
		} else if h := p.Scheme + "://" + strings.ToLower(p.Host); h != host {
			return nil, fmt.Errorf("configuration URL %q is on %s but %q is on %s; the draft requires one host for all three", name, h, urlKeys[0].cur, host)
		}
		*dst[i] = s
	}
	return c, nil
}

// objectFields reads one JSON object and returns each key's raw values in
// order of appearance. Unmarshal would keep only the last of a duplicated
// key, and the draft makes duplicates invalid, so the members are listed
// as they appear.
func objectFields(data []byte, what string) (map[string][]json.RawMessage, error) {
	ms, rest, err := json.Members(data)
	switch {
	case errors.Is(err, json.ErrNotObject):
		return nil, fmt.Errorf("configuration %s is not a JSON object", what)
	case err != nil:
		return nil, fmt.Errorf("configuration %s is not JSON: %v", what, err)
	case len(bytes.Trim(rest, " \t\r\n")) > 0:
		return nil, fmt.Errorf("configuration %s: data after the object", what)
	}
	out := map[string][]json.RawMessage{}
	for _, m := range ms {
		out[m.Name] = append(out[m.Name], m.Value)
	}
	return out, nil
}

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// ConfigURL turns what a user typed into the URL of a configuration
// document: a bare host or host:port, or an https://host URL without a path,
// means that host's /.well-known/nq; a URL with a path (Apple's servers
// publish theirs at /api/v1/gm/config) is taken as it is.
func ConfigURL(s string) (string, error) {
	if s == "" {
		return "", errors.New("--rpm needs a URL or host")
	}
	if !strings.Contains(s, "://") {
		// A bare IPv6 literal names a host, as it does for sqm test's
		// other servers; as a URL it needs brackets.
		if a, err := netip.ParseAddr(s); err == nil && a.Is6() {
			s = "[" + s + "]"
		}
		s = "https://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("--rpm %s: %v", s, err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return "", fmt.Errorf("--rpm %s: the scheme must be https (or http)", s)
	}
	if u.Hostname() == "" {
		return "", fmt.Errorf("--rpm %s: no host", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = WellKnownPath
	}
	return u.String(), nil
}

// WithPrefix puts prefix (PathPrefix of a secret) in front of the path of
// the configuration URL u, unless it is there already (a user may paste
// the URL a server logged).
func WithPrefix(u, prefix string) (string, error) {
	if prefix == "" {
		return u, nil
	}
	p, err := url.Parse(u)
	if err != nil {
		return "", fmt.Errorf("--rpm %s: %v", u, err)
	}
	if p.Path != prefix && !strings.HasPrefix(p.Path, prefix+"/") {
		p.Path = prefix + p.Path
	}
	return p.String(), nil
}

// redact replaces a secret's path prefix in u by "/(secret)".
func redact(u, secret string) string {
	if secret == "" {
		return u
	}
	return strings.Replace(u, PathPrefix(secret), "/(secret)", 1)
}
