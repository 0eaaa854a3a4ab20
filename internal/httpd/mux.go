package httpd

import (
	"fmt"
	"sort"
	"strings"
)

// Mux routes by method and exact path. Patterns are "[METHOD ]/path" with
// the path matched exactly, as net/http's ServeMux matches a pattern
// without wildcards; "/{$}" is the root alone. A GET route also answers
// HEAD. A path with no route is 404; a path whose routes take other
// methods is 405 with Allow.
type Mux struct {
	routes map[string]map[string]Handler // path, method ("" any)
}

func NewMux() *Mux { return &Mux{routes: map[string]map[string]Handler{}} }

// Handle adds a route; a pattern this Mux cannot match exactly (a
// wildcard, a subtree "/dir/") or a route given twice panics, at start-up.
func (m *Mux) Handle(pattern string, h Handler) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		method, path = "", pattern
	}
	if path == "/{$}" {
		path = "/"
	} else if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, "{} ") || strings.HasSuffix(path, "/") {
		panic(fmt.Sprintf("httpd: pattern %q: want [METHOD ]/exact/path or /{$}", pattern))
	}
	if method != "" && !isToken(method) {
		panic(fmt.Sprintf("httpd: pattern %q: bad method", pattern))
	}
	ms := m.routes[path]
	if ms == nil {
		ms = map[string]Handler{}
		m.routes[path] = ms
	}
	if ms[method] != nil {
		panic(fmt.Sprintf("httpd: pattern %q given twice", pattern))
	}
	ms[method] = h
}

func (m *Mux) HandleFunc(pattern string, f func(ResponseWriter, *Request)) {
	m.Handle(pattern, HandlerFunc(f))
}

func (m *Mux) ServeHTTP(w ResponseWriter, r *Request) {
	ms := m.routes[r.URL.Path]
	if ms == nil {
		Error(w, "sqm: no page at "+clip(r.URL.Path), StatusNotFound)
		return
	}
	h := ms[r.Method]
	if h == nil && r.Method == "HEAD" {
		h = ms["GET"]
	}
	if h == nil {
		h = ms[""]
	}
	if h == nil {
		var allow []string
		for k := range ms {
			allow = append(allow, k)
			if k == "GET" && ms["HEAD"] == nil {
				allow = append(allow, "HEAD")
			}
		}
		sort.Strings(allow)
		w.Header().Set("Allow", strings.Join(allow, ", "))
		Error(w, fmt.Sprintf("sqm: %s takes %s, not %s", r.URL.Path, strings.Join(allow, ", "), clip(r.Method)), StatusMethodNotAllowed)
		return
	}
	h.ServeHTTP(w, r)
}
