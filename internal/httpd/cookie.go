package httpd

import (
	"strconv"
	"strings"
	"time"
)

// Cookie is a Set-Cookie the server sends (RFC 6265), with the attributes
// the page uses.
type Cookie struct {
	Name, Value string
	Path        string
	// MaxAge > 0 keeps the cookie that many seconds; < 0 deletes it now
	// (Max-Age=0); 0 says nothing (a session cookie, or Expires).
	MaxAge   int
	Expires  time.Time
	Secure   bool
	HttpOnly bool
	SameSite SameSite
}

// SameSite is the cookie's SameSite attribute.
type SameSite int

const (
	SameSiteDefault SameSite = iota // not sent
	SameSiteLax
	SameSiteStrict
	SameSiteNone
)

// String is the Set-Cookie value, or "" if the name is not a token or the
// value or path holds bytes a cookie cannot carry.
func (c *Cookie) String() string {
	if !isToken(c.Name) || !cookieValue(c.Value) || strings.ContainsAny(c.Path, ";\r\n") {
		return ""
	}
	var b strings.Builder
	b.WriteString(c.Name)
	b.WriteByte('=')
	b.WriteString(c.Value)
	if c.Path != "" {
		b.WriteString("; Path=")
		b.WriteString(c.Path)
	}
	if !c.Expires.IsZero() {
		b.WriteString("; Expires=")
		b.WriteString(c.Expires.UTC().Format(TimeFormat))
	}
	switch {
	case c.MaxAge > 0:
		b.WriteString("; Max-Age=")
		b.WriteString(strconv.Itoa(c.MaxAge))
	case c.MaxAge < 0:
		b.WriteString("; Max-Age=0")
	}
	if c.HttpOnly {
		b.WriteString("; HttpOnly")
	}
	if c.Secure {
		b.WriteString("; Secure")
	}
	switch c.SameSite {
	case SameSiteLax:
		b.WriteString("; SameSite=Lax")
	case SameSiteStrict:
		b.WriteString("; SameSite=Strict")
	case SameSiteNone:
		b.WriteString("; SameSite=None")
	}
	return b.String()
}

// cookieValue: RFC 6265 cookie-octets (no spaces, quotes, commas,
// semicolons or backslashes).
func cookieValue(v string) bool {
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == ',' || c == ';' || c == '\\' {
			return false
		}
	}
	return true
}

// SetCookie adds c to the response; a cookie that cannot be written (see
// Cookie.String) is left out, not sent mangled.
func SetCookie(w ResponseWriter, c *Cookie) {
	if v := c.String(); v != "" {
		w.Header().Add("Set-Cookie", v)
	}
}

// Cookie returns the value of the request's first cookie named name.
func (r *Request) Cookie(name string) (string, bool) {
	for _, line := range r.Header.Values("Cookie") {
		for _, pair := range strings.Split(line, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || k != name {
				continue
			}
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			if cookieValue(v) {
				return v, true
			}
		}
	}
	return "", false
}
