package githubemu

import (
	"net/http"
	"strconv"
	"strings"
)

// pager writes GitHub's pagination: the slice a request asks for and the
// Link header. Links are absolute, so it knows the API prefix.
type pager struct {
	prefix string
}

// paginate picks the slice [lo, hi) of n items the request's page and
// per_page ask for (GitHub's defaults: page 1, 30 per page, at most 100)
// and sets the Link header with first/prev/next/last, which go-github
// reads the page numbers from.
func (s pager) paginate(w http.ResponseWriter, r *http.Request, n int) (lo, hi int) {
	q := r.URL.Query()
	per := atoiOr(q.Get("per_page"), 30)
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	page := max(atoiOr(q.Get("page"), 1), 1)
	last := max((n+per-1)/per, 1)
	var links []string
	link := func(p int, rel string) {
		links = append(links, "<"+s.pageURL(r, p, per)+">; rel=\""+rel+"\"")
	}
	if page > 1 {
		link(page-1, "prev")
	}
	if page < last {
		link(page+1, "next")
		link(last, "last")
	}
	if page > 1 {
		link(1, "first")
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	lo = min((page-1)*per, n)
	return lo, min(lo+per, n)
}

// pageURL is the request's absolute URL at another page.
func (s pager) pageURL(r *http.Request, page, per int) string {
	q := r.URL.Query()
	q.Set("page", strconv.Itoa(page))
	q.Set("per_page", strconv.Itoa(per))
	path := r.URL.Path
	if r.URL.RawPath != "" {
		path = r.URL.RawPath
	}
	// The pipeline stripped the API prefix; Links are absolute, with it.
	return "http://" + r.Host + strings.TrimSuffix(s.prefix, "/") + path + "?" + q.Encode()
}

// atoiOr parses s, or returns def when it is not an integer.
func atoiOr(s string, def int) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return v
}
