package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestStrictHeadersOnEveryAnswer: pages, assets, 404s and 405s all carry
// the CSP and the other browser headers, and assets their real type.
func TestStrictHeadersOnEveryAnswer(t *testing.T) {
	h := New()
	cases := []struct {
		method, path string
		code         int
		ctype        string
	}{
		{"GET", "/ui/", 200, "text/html; charset=utf-8"},
		{"GET", "/ui/console.js", 200, "text/javascript; charset=utf-8"},
		{"GET", "/ui/console.css", 200, "text/css; charset=utf-8"},
		{"GET", "/ui/vendor/uplot/uPlot.iife.min.js", 200, "text/javascript; charset=utf-8"},
		{"HEAD", "/ui/index.html", 200, "text/html; charset=utf-8"},
		{"GET", "/ui/nope.js", 404, ""},
		{"GET", "/ui/../api.go", 404, ""},
		{"POST", "/ui/", 405, ""},
		{"GET", "/ui", 301, ""},
	}
	for _, c := range cases {
		w := get(t, h, c.method, c.path, nil)
		hd := w.Header()
		if w.Code != c.code || hd.Get("Content-Security-Policy") != ContentSecurityPolicy ||
			hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("Referrer-Policy") != "no-referrer" ||
			hd.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s %s: %d %v", c.method, c.path, w.Code, hd)
		}
		if c.ctype != "" && hd.Get("Content-Type") != c.ctype {
			t.Errorf("%s %s: Content-Type %q, want %q", c.method, c.path, hd.Get("Content-Type"), c.ctype)
		}
	}
	if loc := get(t, h, "GET", "/ui", nil).Header().Get("Location"); loc != "/ui/" {
		t.Errorf("/ui redirects to %q", loc)
	}
}

// TestAssetsRevalidate: an asset's ETag answers 304.
func TestAssetsRevalidate(t *testing.T) {
	h := New()
	w := get(t, h, "GET", "/ui/console.js", nil)
	tag := w.Header().Get("ETag")
	if tag == "" || w.Body.Len() == 0 {
		t.Fatalf("no ETag or body: %v", w.Header())
	}
	if w := get(t, h, "GET", "/ui/console.js", map[string]string{"If-None-Match": tag}); w.Code != 304 || w.Body.Len() != 0 {
		t.Errorf("revalidation: %d, %d bytes", w.Code, w.Body.Len())
	}
}

// TestNoInlineCodeOrMarkupSinks guards what the CSP relies on and what
// keeps PR names inert: the page has no inline script, style or event
// handler (the CSP would block them, breaking the page), and the console's
// own script never turns a string into markup or code.
func TestNoInlineCodeOrMarkupSinks(t *testing.T) {
	html := readAsset(t, "assets/index.html")
	for _, re := range []string{`<script(?:\s[^>]*)?>\s*[^<\s]`, `<style`, `\sstyle=`, `\son[a-z]+=`, `javascript:`} {
		if m := regexp.MustCompile(`(?i)` + re).FindString(html); m != "" {
			t.Errorf("index.html has inline code or style: %q", m)
		}
	}
	for _, tag := range regexp.MustCompile(`(?i)<script[^>]*>`).FindAllString(html, -1) {
		if !strings.Contains(tag, ` src="`) {
			t.Errorf("script without src: %s", tag)
		}
	}
	js := readAsset(t, "assets/console.js")
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "setAttribute(\"on", "setAttribute(\"style", ".srcdoc"} {
		if strings.Contains(js, sink) {
			t.Errorf("console.js uses %s", sink)
		}
	}
}

func readAsset(t *testing.T, p string) string {
	t.Helper()
	b, err := fs.ReadFile(assets, p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
