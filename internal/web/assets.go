package web

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"strings"
	"sync"

	"sqm/internal/httpd"
)

//go:embed assets/index.html assets/app.js assets/style.css
var assetFS embed.FS

// asset is one embedded file, compressed once on first use: the daemon
// does not pay for it unless someone opens the page, and the source stays
// the reviewable plain file (no generated .gz to keep in step).
type asset struct {
	plain, gz []byte
	etag      string
	ctype     string
}

var (
	assetsOnce sync.Once
	assets     map[string]*asset
)

func loadAssets() {
	assets = map[string]*asset{}
	for _, name := range []string{"index.html", "app.js", "style.css"} {
		b, err := assetFS.ReadFile("assets/" + name)
		if err != nil {
			panic(err) // embedded at build time
		}
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		sum := sha256.Sum256(b)
		ct := "text/html; charset=utf-8"
		switch {
		case strings.HasSuffix(name, ".js"):
			ct = "text/javascript; charset=utf-8"
		case strings.HasSuffix(name, ".css"):
			ct = "text/css; charset=utf-8"
		}
		assets[name] = &asset{plain: b, gz: z.Bytes(), etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ct}
	}
}

// acceptsGzip reports whether the client takes gzip (any q > 0).
func acceptsGzip(r *httpd.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) == "gzip" || strings.TrimSpace(enc) == "*" {
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

func (s *Server) asset(name string) httpd.HandlerFunc {
	return func(w httpd.ResponseWriter, r *httpd.Request) {
		assetsOnce.Do(loadAssets)
		a := assets[name]
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Vary", "Accept-Encoding")
		h.Set("Cache-Control", "no-cache")
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(httpd.StatusNotModified)
			return
		}
		body := a.plain
		if acceptsGzip(r) {
			h.Set("Content-Encoding", "gzip")
			body = a.gz
		}
		w.Write(body)
	}
}
