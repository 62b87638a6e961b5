// Package console serves the read-only web console under /ui/: static
// assets embedded in the binary (HTML, one JS module, CSS and a vendored
// chart library), no build step. The page reads the node's own JSON API
// with same-origin fetch; the assets hold no data, so they are served
// without a credential while every data call keeps the API's roles.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

// Path is the console's root; Prefix is every path under it.
const (
	Path   = "/ui"
	Prefix = "/ui/"
)

// ContentSecurityPolicy allows only the node's own scripts, styles and
// API: no inline script or style, no frames, no forms, no base change,
// so a name from a pull request can never become code even if the page
// had a bug that put it into markup.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// asset is one embedded file with what its answer needs, computed once.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the embedded assets. It is built once per node; every
// answer is a slice of memory, so a request costs no disk and no
// allocation beyond net/http's own.
type Handler struct {
	files map[string]asset // by path below Prefix, "" for index.html
}

// New indexes the embedded assets.
func New() *Handler {
	h := &Handler{files: map[string]asset{}}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embed directive guarantees the directory
	}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		h.files[p] = asset{body: body, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		panic(err) // reading an embedded FS does not fail
	}
	h.files[""] = h.files["index.html"]
	return h
}

// contentType names a file's media type by its extension; text types
// carry their charset so that a browser never sniffs one.
func contentType(p string) string {
	switch path.Ext(p) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case "", ".txt":
		return "text/plain; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// ServeHTTP answers GET and HEAD under /ui/ with the strict headers;
// /ui redirects to /ui/ so that relative asset paths resolve.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setHeaders(w.Header())
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the console is read-only: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == Path {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	a, ok := h.files[strings.TrimPrefix(r.URL.Path, Prefix)]
	if !ok {
		http.Error(w, "no such console file", http.StatusNotFound)
		return
	}
	w.Header().Set("ETag", a.etag)
	// The assets change only with the binary: revalidate every time,
	// which is one 304 per file when nothing changed.
	w.Header().Set("Cache-Control", "no-cache")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(a.body)
	}
}

// setHeaders sets what every console answer carries, errors included.
func setHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}
