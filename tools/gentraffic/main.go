// Command gentraffic writes a deterministic sample of HTTP requests, one JSON
// request object per line (the request schema of CONTRACT.md §1, snake_case
// keys, RFC 3339 times), for replaying against the example policies:
//
//	go run ./tools/gentraffic                      # writes policies.example/_traffic/sample.jsonl
//	go run ./tools/gentraffic -n 500 -o - | head   # 500 requests to stdout
//	reconciler replay --live policies.example/edge-firewall \
//	    --experiment my-branch/edge-firewall --traffic policies.example/_traffic/sample.jsonl
//
// Flags:
//
//	-n     number of requests (default 2500)
//	-o     output file, "-" for stdout (default policies.example/_traffic/sample.jsonl)
//	-seed  random seed (default 20250601); the same seed and -n give byte-identical output
//
// The requests cover three days, Saturday 2025-05-31 12:00 UTC to Tuesday
// 2025-06-03 12:00 UTC (so the Sunday shop maintenance window and weekday
// business hours of the billing rules are both in it), with a day/night
// curve, sorted by time. They mix, for both example policies:
//
//   - public browsing of www.example.com (pages, static assets, search) over IPv4 and IPv6
//   - shop.example.com browsing, cart and checkout writes
//   - api.example.com clients with API keys or bearer tokens, and some without
//   - the account endpoints (login, password reset, sign-up) with and without
//     the CSRF and captcha headers, and credential-stuffing bursts that the
//     gateway's rate limiter annotates with attributes.auth_attempts_1m
//   - load-balancer health checks (external ranges for the edge, the internal
//     load balancer for the admin API)
//   - office and VPN users (192.0.2.0/24, 2001:db8:100::/48, 10.20/16, 10.8/16)
//   - admin API calls by SREs, auditors, finance, support, product owners,
//     the CI deployer, the break-glass account, offboarded accounts, plain
//     employees, unauthenticated callers and callers outside the network
//   - attacks from the block-listed ranges (203.0.113.0/24, 198.51.100.0/24,
//     2001:db8:bad::/48, 2001:db8:dead::/48), embargoed countries, Tor,
//     vulnerability scanners, path probes, spoofed private sources, odd
//     methods, oversized query strings and payment-provider webhooks
//
// A per-category count goes to stderr. Addresses outside the documentation
// and private ranges are random and stand for ordinary residential clients.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// request is the request schema of CONTRACT.md §1, in its JSON form.
type request struct {
	Method     string            `json:"method,omitempty"`
	Path       string            `json:"path,omitempty"`
	Host       string            `json:"host,omitempty"`
	Scheme     string            `json:"scheme,omitempty"`
	Query      map[string]string `json:"query,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	SourceIP   string            `json:"source_ip,omitempty"`
	Principal  string            `json:"principal,omitempty"`
	Groups     []string          `json:"groups,omitempty"`
	Attributes map[string]any    `json:"attributes,omitempty"`
	Time       string            `json:"time,omitempty"`

	at       time.Time // for sorting
	seq      int       // generation order, the tie-breaker
	category string
}

var (
	start  = time.Date(2025, 5, 31, 12, 0, 0, 0, time.UTC)
	window = 72 * time.Hour
)

func main() {
	n := flag.Int("n", 2500, "number of requests")
	out := flag.String("o", "policies.example/_traffic/sample.jsonl", `output file, "-" for stdout`)
	seed := flag.Uint64("seed", 20250601, "random seed")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: gentraffic [-n N] [-o FILE|-] [-seed S]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || *n < 1 {
		flag.Usage()
		os.Exit(2)
	}

	g := newGen(*seed)
	reqs := g.generate(*n)

	var w io.Writer = os.Stdout
	if *out != "-" {
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			fatal(err)
		}
		f, err := os.Create(*out)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		w = f
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for _, r := range reqs {
		if err := enc.Encode(r); err != nil {
			fatal(err)
		}
	}
	if err := bw.Flush(); err != nil {
		fatal(err)
	}
	printSummary(reqs)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "gentraffic:", err)
	os.Exit(1)
}

func printSummary(reqs []request) {
	counts := map[string]int{}
	for _, r := range reqs {
		counts[r.category]++
	}
	names := make([]string, 0, len(counts))
	for k := range counts {
		names = append(names, k)
	}
	slices.Sort(names)
	fmt.Fprintf(os.Stderr, "gentraffic: %d requests\n", len(reqs))
	for _, k := range names {
		fmt.Fprintf(os.Stderr, "  %-28s %5d  %5.1f%%\n", k, counts[k], 100*float64(counts[k])/float64(len(reqs)))
	}
}

// gen holds the random source and the pools of clients it draws from.
type gen struct {
	r       *rand.Rand
	clients []client // ordinary public clients, reused across requests like real sessions
	out     []request
	seq     int
}

type client struct {
	ip      string
	country string
	ua      string
}

func newGen(seed uint64) *gen {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for range 400 {
		ip := g.publicIPv4()
		if g.chance(0.3) {
			ip = g.publicIPv6()
		}
		g.clients = append(g.clients, client{ip: ip, country: g.country(), ua: g.pick(browserUAs)})
	}
	return g
}

// scenario is one kind of traffic; weight is relative to the others and
// counts scenarios, not requests (a burst emits many requests).
type scenario struct {
	weight float64
	emit   func(g *gen, at time.Time)
}

func (g *gen) scenarios() []scenario {
	return []scenario{
		{22, (*gen).publicBrowse},
		{7, (*gen).shop},
		{9, (*gen).apiClient},
		{7, (*gen).account},
		{0.5, (*gen).loginBurst},
		{10, (*gen).healthCheck},
		{10, (*gen).officeEdge},
		{36, (*gen).adminAPI},
		{3, (*gen).badRange},
		{5, (*gen).blockedCountry},
		{2, (*gen).tor},
		{1.2, (*gen).scanner},
		{2.5, (*gen).probe},
		{3, (*gen).oddMethod},
		{2, (*gen).paymentWebhook},
		{1, (*gen).bogon},
		{0.6, (*gen).queryFlood},
	}
}

func (g *gen) generate(n int) []request {
	sc := g.scenarios()
	total := 0.0
	for _, s := range sc {
		total += s.weight
	}
	for len(g.out) < n {
		x := g.r.Float64() * total
		i := 0
		for ; i < len(sc)-1; i++ {
			if x < sc[i].weight {
				break
			}
			x -= sc[i].weight
		}
		sc[i].emit(g, g.diurnalTime())
	}
	out := g.out[:n]
	slices.SortStableFunc(out, func(a, b request) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.seq - b.seq
	})
	return out
}

// emit records a request at time at.
func (g *gen) emit(category string, at time.Time, r request) {
	if r.Scheme == "" {
		r.Scheme = "https"
	}
	r.at = at
	r.Time = at.Format(time.RFC3339)
	r.category = category
	r.seq = g.seq
	g.seq++
	g.out = append(g.out, r)
}

// diurnalTime picks a time in the window, more likely by day (UTC-ish
// Europe/Americas audience) than by night.
func (g *gen) diurnalTime() time.Time {
	for {
		t := start.Add(time.Duration(g.r.Int64N(int64(window/time.Second))) * time.Second)
		h := t.Hour()
		p := 0.35
		switch {
		case h >= 7 && h < 23:
			p = 1
		case h >= 5 && h < 7:
			p = 0.6
		}
		if g.r.Float64() < p {
			return t
		}
	}
}

// businessTime is a weekday time between 07:00 and 19:00 UTC in the window.
func (g *gen) businessTime() time.Time {
	for {
		t := g.diurnalTime()
		if wd := t.Weekday(); wd != time.Saturday && wd != time.Sunday && t.Hour() >= 7 && t.Hour() < 19 {
			return t
		}
	}
}

// ---- random helpers ----

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

func (g *gen) pick(xs []string) string { return xs[g.r.IntN(len(xs))] }

func (g *gen) between(lo, hi int) int { return lo + g.r.IntN(hi-lo+1) }

func (g *gen) hex4() string { return fmt.Sprintf("%x", g.r.IntN(0x10000)) }

// publicIPv4 draws from first octets that hold no special-purpose ranges.
func (g *gen) publicIPv4() string {
	first := []int{24, 31, 37, 46, 62, 71, 73, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
		91, 92, 93, 94, 95, 98, 99, 107, 108, 109, 151, 176, 178, 188, 212, 213, 217}
	return fmt.Sprintf("%d.%d.%d.%d", first[g.r.IntN(len(first))], g.r.IntN(256), g.r.IntN(256), 1+g.r.IntN(254))
}

func (g *gen) publicIPv6() string {
	prefixes := []string{"2a02:8108", "2a02:810d", "2003:e4", "2a00:23c5", "2600:1700", "2601:646", "2a01:cb00", "2405:6580"}
	return fmt.Sprintf("%s:%s:%s::%s", g.pick(prefixes), g.hex4(), g.hex4(), g.hex4())
}

// cloudIPv4 stands for rented servers, where scanners and probes come from.
func (g *gen) cloudIPv4() string {
	first := []int{5, 45, 64, 104, 134, 138, 139, 143, 159, 161, 164, 165, 167, 170, 206}
	return fmt.Sprintf("%d.%d.%d.%d", first[g.r.IntN(len(first))], g.r.IntN(256), g.r.IntN(256), 1+g.r.IntN(254))
}

func (g *gen) badIP() string {
	switch g.r.IntN(4) {
	case 0:
		return fmt.Sprintf("203.0.113.%d", 1+g.r.IntN(254))
	case 1:
		return fmt.Sprintf("198.51.100.%d", 1+g.r.IntN(254))
	case 2:
		return fmt.Sprintf("2001:db8:bad::%s", g.hex4())
	default:
		return fmt.Sprintf("2001:db8:dead:%s::%s", g.hex4(), g.hex4())
	}
}

// officeEgressIP is how offices and the VPN appear to the public edge.
func (g *gen) officeEgressIP() string {
	switch g.r.IntN(5) {
	case 0:
		return fmt.Sprintf("2001:db8:100:%x::%s", g.r.IntN(16), g.hex4())
	case 1:
		return fmt.Sprintf("192.0.2.%d", 64+g.r.IntN(64)) // branch office
	case 2, 3:
		return fmt.Sprintf("192.0.2.%d", 128+g.r.IntN(127)) // VPN gateways
	default:
		return fmt.Sprintf("192.0.2.%d", 1+g.r.IntN(63)) // HQ
	}
}

// internalIP is how offices and the VPN appear to internal services.
func (g *gen) internalIP() string {
	if g.chance(0.55) {
		return fmt.Sprintf("10.8.%d.%d", g.r.IntN(64), 2+g.r.IntN(250))
	}
	return fmt.Sprintf("10.20.%d.%d", g.r.IntN(32), 2+g.r.IntN(250))
}

var countries = []string{
	"US", "US", "US", "US", "DE", "DE", "DE", "GB", "GB", "FR", "FR", "NL", "IN", "IN", "BR", "JP",
	"CA", "PL", "ES", "IT", "SE", "AU", "AT", "CH", "MX", "KR", "XX",
}

func (g *gen) country() string { return g.pick(countries) }

var browserUAs = []string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/125.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:128.0) Gecko/20100101 Firefox/128.0",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/125.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (X11; Linux x86_64; rv:127.0) Gecko/20100101 Firefox/127.0",
	"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
}

var toolUAs = []string{"curl/8.5.0", "python-requests/2.31.0", "Go-http-client/1.1", "okhttp/4.12.0", "Wget/1.21.4"}

func (g *gen) client() client { return g.clients[g.r.IntN(len(g.clients))] }

func edgeHeaders(c client) map[string]string {
	return map[string]string{"user-agent": c.ua, "cf-ipcountry": c.country}
}

func (g *gen) productPath() string { return fmt.Sprintf("/products/%d", g.between(1, 4000)) }

// ---- scenarios ----

func (g *gen) publicBrowse(at time.Time) {
	c := g.client()
	pages := []string{"/", "/", "/products", "/about", "/blog", "/blog/release-notes", "/pricing", "/contact",
		"/docs/getting-started", "/careers", "/search", "/favicon.ico", "/robots.txt", "/sitemap.xml"}
	n := g.between(1, 4)
	for i := range n {
		h := edgeHeaders(c)
		r := request{Method: "GET", Host: "www.example.com", SourceIP: c.ip, Headers: h}
		switch {
		case i > 0 && g.chance(0.5):
			r.Path = g.pick([]string{"/static/js/app.4f9c1e.js", "/static/css/site.91ab.css", "/static/img/hero.webp", "/static/fonts/inter.woff2"})
		case g.chance(0.2):
			r.Path = "/search"
			r.Query = map[string]string{"q": g.pick([]string{"running shoes", "gift card", "return policy", "api", "pricing"})}
			if g.chance(0.3) {
				r.Query["page"] = fmt.Sprint(g.between(2, 9))
			}
		case g.chance(0.25):
			r.Path = g.productPath()
		default:
			r.Path = g.pick(pages)
		}
		if g.chance(0.03) {
			r.Method = "HEAD"
		}
		if g.chance(0.02) {
			r.Scheme = "http"
		}
		g.emit("public-www", at.Add(time.Duration(i)*time.Duration(g.between(1, 20))*time.Second), r)
	}
}

func (g *gen) shop(at time.Time) {
	c := g.client()
	if g.chance(0.06) {
		// Night owls in the Americas, during the Sunday 02:00-04:00 UTC maintenance window.
		at = time.Date(2025, 6, 1, 2, 0, 0, 0, time.UTC).Add(time.Duration(g.r.IntN(7200)) * time.Second)
	}
	steps := []struct{ method, path string }{
		{"GET", "/"}, {"GET", g.productPath()}, {"GET", g.productPath()},
		{"POST", "/cart/items"}, {"GET", "/cart"}, {"POST", "/cart/checkout"}, {"POST", "/orders"},
	}
	n := g.between(1, len(steps))
	for i := range n {
		r := request{Method: steps[i].method, Host: "shop.example.com", Path: steps[i].path, SourceIP: c.ip, Headers: edgeHeaders(c)}
		if r.Method == "POST" {
			r.Headers["content-type"] = "application/json"
		}
		if i == 4 && g.chance(0.1) {
			r.Method, r.Path = "DELETE", fmt.Sprintf("/cart/items/%d", g.between(1, 9))
		}
		g.emit("public-shop", at.Add(time.Duration(i*g.between(5, 40))*time.Second), r)
	}
}

func (g *gen) apiClient(at time.Time) {
	c := g.client()
	c.ua = g.pick([]string{"example-sdk-go/2.3.1", "example-sdk-python/1.8.0", "okhttp/4.12.0", "axios/1.7.2", "curl/8.5.0"})
	auth := g.r.IntN(10)
	n := g.between(1, 5)
	for i := range n {
		h := edgeHeaders(c)
		switch {
		case auth < 5:
			h["x-api-key"] = fmt.Sprintf("pk_live_%08x", g.r.Uint32())
		case auth < 9:
			h["authorization"] = "Bearer eyJhbGciOiJSUzI1NiJ9." + g.hex4()
		}
		r := request{Host: "api.example.com", SourceIP: c.ip, Headers: h}
		switch g.r.IntN(6) {
		case 0, 1:
			r.Method, r.Path = "GET", "/v1/products"
			r.Query = map[string]string{"limit": "50", "cursor": g.hex4()}
		case 2:
			r.Method, r.Path = "GET", fmt.Sprintf("/v1/orders/ord_%s%s", g.hex4(), g.hex4())
		case 3:
			r.Method, r.Path = "POST", "/v1/orders"
			h["content-type"] = "application/json"
		case 4:
			r.Method, r.Path = "PATCH", fmt.Sprintf("/v1/customers/cus_%s", g.hex4())
		default:
			r.Method, r.Path = "GET", "/status"
		}
		g.emit("public-api", at.Add(time.Duration(i)*time.Second), r)
	}
}

func (g *gen) account(at time.Time) {
	c := g.client()
	h := edgeHeaders(c)
	g.emit("account", at, request{Method: "GET", Host: "www.example.com", Path: g.pick([]string{"/account/login", "/account/signup", "/account/password-reset"}), SourceIP: c.ip, Headers: h})
	at = at.Add(time.Duration(g.between(5, 60)) * time.Second)
	h = edgeHeaders(c)
	h["content-type"] = "application/x-www-form-urlencoded"
	r := request{Method: "POST", Host: "www.example.com", SourceIP: c.ip, Headers: h,
		Attributes: map[string]any{"auth_attempts_1m": g.between(1, 3)}}
	switch g.r.IntN(6) {
	case 0, 1, 2:
		r.Path = "/account/login"
		if g.chance(0.93) {
			h["x-csrf-token"] = g.hex4() + g.hex4()
		}
	case 3, 4:
		r.Path = "/account/password-reset"
		if g.chance(0.85) {
			h["cf-turnstile-response"] = "0." + g.hex4() + g.hex4()
		}
	default:
		r.Path = "/account/signup"
		if g.chance(0.85) {
			h["cf-turnstile-response"] = "0." + g.hex4() + g.hex4()
		}
	}
	if g.chance(0.03) {
		r.Scheme = "http"
	}
	if g.chance(0.02) {
		r.Method = g.pick([]string{"PUT", "DELETE"})
	}
	g.emit("account", at, r)
}

// loginBurst is credential stuffing: one address (often a bad range, often
// not), many login POSTs within a minute, counted by the rate limiter.
func (g *gen) loginBurst(at time.Time) {
	ip := g.cloudIPv4()
	switch g.r.IntN(3) {
	case 0:
		ip = g.badIP()
	case 1:
		ip = g.publicIPv6()
	}
	ua := g.pick(append([]string{"python-requests/2.31.0", "Go-http-client/1.1"}, browserUAs[:3]...))
	country := g.pick([]string{"US", "NL", "DE", "BR", "VN", "ID", "XX"})
	path := "/account/login"
	if g.chance(0.2) {
		path = "/account/password-reset"
	}
	n := g.between(12, 40)
	for i := range n {
		h := map[string]string{"user-agent": ua, "cf-ipcountry": country, "content-type": "application/x-www-form-urlencoded"}
		if g.chance(0.7) {
			h["x-csrf-token"] = g.hex4() + g.hex4()
		}
		if path == "/account/password-reset" && g.chance(0.5) {
			h["cf-turnstile-response"] = "0." + g.hex4()
		}
		g.emit("login-burst", at.Add(time.Duration(i*g.between(1, 4))*time.Second), request{
			Method: "POST", Host: "www.example.com", Path: path, SourceIP: ip, Headers: h,
			Attributes: map[string]any{"auth_attempts_1m": i + 1},
		})
	}
}

func (g *gen) healthCheck(at time.Time) {
	if g.chance(0.3) {
		// The admin API's internal load balancer.
		r := request{Method: "GET", Host: "10.30.0.5:8443", Scheme: "http", Path: "/healthz",
			SourceIP: fmt.Sprintf("10.129.%d.%d", g.r.IntN(2), 2+g.r.IntN(250)), Headers: map[string]string{"user-agent": "GoogleHC/1.0"}}
		if g.chance(0.1) {
			r.Path = "/readyz"
		}
		g.emit("health-check", at, r)
		return
	}
	ip := fmt.Sprintf("35.191.%d.%d", g.r.IntN(256), 1+g.r.IntN(254))
	if g.chance(0.4) {
		ip = fmt.Sprintf("130.211.%d.%d", g.r.IntN(4), 1+g.r.IntN(254))
	}
	g.emit("health-check", at, request{
		Method: g.pick([]string{"GET", "GET", "HEAD"}), Host: g.pick([]string{"www.example.com", "api.example.com", "shop.example.com"}),
		Scheme: "http", Path: g.pick([]string{"/healthz", "/healthz", "/readyz", "/livez"}), SourceIP: ip,
		Headers: map[string]string{"user-agent": "GoogleHC/1.0"},
	})
}

// officeEdge is employees on the public hosts, including paths that are
// closed to the internet.
func (g *gen) officeEdge(at time.Time) {
	ip := g.officeEgressIP()
	h := map[string]string{"user-agent": g.pick(browserUAs[:5]), "cf-ipcountry": g.pick([]string{"NL", "NL", "DE", "GB", "US"})}
	r := request{Method: "GET", Host: g.pick([]string{"www.example.com", "shop.example.com", "api.example.com"}), SourceIP: ip, Headers: h}
	switch g.r.IntN(8) {
	case 0:
		r.Path, h["user-agent"] = "/metrics", "Prometheus/2.53.0"
	case 1:
		r.Path = g.pick([]string{"/internal/flags", "/internal/cache/stats", "/debug/pprof/heap", "/actuator/health"})
	case 2:
		r.Method, r.Path = "POST", "/account/login"
	default:
		r.Path = g.pick([]string{"/", "/products", "/pricing", g.productPath(), "/v1/products"})
	}
	g.emit("office-edge", at, r)
}

type person struct {
	principal string
	groups    []string
}

var people = []person{
	{"alice@example.com", []string{"employees", "engineering", "sre"}},
	{"bob@example.com", []string{"employees", "engineering", "sre"}},
	{"chen@example.com", []string{"employees", "engineering", "sre", "oncall"}},
	{"trent@example.com", []string{"employees", "auditors"}},
	{"olga@example.com", []string{"employees", "auditors", "sre"}},
	{"fiona@example.com", []string{"employees", "finance", "finance-admins"}},
	{"sam@example.com", []string{"employees", "support"}},
	{"sue@example.com", []string{"employees", "support"}},
	{"pat@example.com", []string{"employees", "product", "product-owners"}},
	{"eve@example.com", []string{"employees", "engineering"}},
	{"mallory@example.com", []string{"employees", "engineering", "sre", "offboarded"}},
	{"breakglass@example.com", nil},
	{"spiffe://example.com/ns/ci/sa/deployer", nil},
	{"", nil},
}

// adminAPI is a call to the admin API by one of the people above.
func (g *gen) adminAPI(at time.Time) {
	if g.chance(0.6) {
		at = g.businessTime()
	}
	weights := []int{8, 8, 5, 5, 3, 5, 6, 5, 4, 4, 1, 1, 3, 2}
	total := 0
	for _, w := range weights {
		total += w
	}
	x := g.r.IntN(total)
	i := 0
	for ; x >= weights[i]; i++ {
		x -= weights[i]
	}
	p := people[i]

	r := request{Principal: p.principal, Groups: slices.Clone(p.groups), Headers: map[string]string{}}
	// Where the call comes from: VPN/office internally, or through the edge.
	if g.chance(0.6) {
		r.Host, r.SourceIP = "admin-api.internal.example.com", g.internalIP()
		r.Headers["user-agent"] = g.pick([]string{"admin-cli/3.2.0", "curl/8.5.0", "Go-http-client/2.0"})
	} else {
		r.Host, r.SourceIP = "admin.example.com", g.officeEgressIP()
		r.Headers["user-agent"] = g.pick(browserUAs[:5])
		r.Headers["cf-ipcountry"] = g.pick([]string{"NL", "DE", "GB", "US"})
	}
	if g.chance(0.04) {
		r.SourceIP = g.pick([]string{g.publicIPv4(), g.publicIPv6(), g.badIP()}) // off the VPN
	}
	if g.chance(0.01) {
		r.Scheme = "http"
	}
	if g.chance(0.01) {
		r.Host = "admin.example.org"
	}
	user := fmt.Sprintf("u-%d", g.between(100, 99999))
	get := func(paths ...string) { r.Method, r.Path = g.pick([]string{"GET", "GET", "GET", "HEAD"}), g.pick(paths) }

	switch {
	case p.principal == "spiffe://example.com/ns/ci/sa/deployer":
		r.SourceIP = fmt.Sprintf("10.40.%d.%d", g.r.IntN(16), 2+g.r.IntN(250))
		r.Host = "admin-api.internal.example.com"
		r.Method, r.Path = "POST", "/admin/deployments"
		if g.chance(0.15) {
			r.Method, r.Path = g.pick([]string{"GET", "DELETE"}), fmt.Sprintf("/admin/deployments/d-%d", g.between(1000, 9999))
		}
	case p.principal == "breakglass@example.com":
		if g.chance(0.7) {
			r.Headers["x-breakglass-ticket"] = fmt.Sprintf("INC-%d", g.between(10000, 29999))
		}
		r.Method, r.Path = g.pick([]string{"GET", "POST", "DELETE", "PUT"}), g.pick([]string{"/admin/users/" + user, "/admin/billing/invoices", "/admin/feature-flags/new-checkout", "/admin/audit-log/2025-05"})
	case p.principal == "":
		get("/admin/status", "/admin/status", "/admin/users", "/admin/billing/invoices")
	case slices.Contains(p.groups, "auditors"):
		get("/admin/audit-log", "/admin/users", "/admin/users/"+user, "/admin/billing/invoices", "/admin/feature-flags")
		if g.chance(0.1) {
			r.Method = g.pick([]string{"POST", "PATCH", "DELETE"})
		}
	case slices.Contains(p.groups, "finance-admins"):
		get("/admin/billing/invoices", "/admin/billing/plans", fmt.Sprintf("/admin/billing/invoices/%d", g.between(1000, 9999)))
		if g.chance(0.4) {
			r.Method = g.pick([]string{"POST", "PATCH"})
			r.Path = fmt.Sprintf("/admin/billing/invoices/%d/refund", g.between(1000, 9999))
		}
	case slices.Contains(p.groups, "support"):
		get("/admin/users", "/admin/users/"+user)
		if r.Path == "/admin/users" {
			r.Query = map[string]string{"email": fmt.Sprintf("customer%d@example.net", g.between(1, 9999))}
		}
		switch g.r.IntN(10) {
		case 0, 1, 2:
			r.Method, r.Path = "POST", "/admin/users/"+user+"/password-reset"
		case 3:
			r.Method, r.Path = "POST", "/admin/users/"+user+"/roles"
		}
	case slices.Contains(p.groups, "product-owners"):
		r.Method, r.Path = g.pick([]string{"GET", "GET", "PATCH", "PUT", "DELETE"}), g.pick([]string{"/admin/feature-flags", "/admin/feature-flags/new-checkout", "/admin/feature-flags/dark-mode"})
	case slices.Contains(p.groups, "sre"):
		switch g.r.IntN(10) {
		case 0:
			r.Method, r.Path = "DELETE", "/admin/users/"+user
			if g.chance(0.6) {
				r.Headers["x-approval-id"] = fmt.Sprintf("APR-%d", g.between(100, 9999))
			}
		case 1:
			r.Method, r.Path = "PUT", "/admin/users/"+user+"/roles"
		case 2:
			get("/admin/billing/invoices")
		case 3:
			r.Method, r.Path = "POST", "/admin/deployments"
		case 4:
			r.Method, r.Path = "DELETE", "/admin/audit-log/2025-04"
			if g.chance(0.7) {
				get("/admin/audit-log")
			}
		default:
			get("/admin/status", "/admin/users", "/admin/users/"+user, "/admin/deployments", "/admin/feature-flags", "/admin/cache")
		}
	default: // ordinary employees
		get("/admin/status", "/admin/users", "/admin/feature-flags", "/debug/vars")
	}
	if r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH" {
		r.Headers["content-type"] = "application/json"
	}
	g.emit("admin-api", at, r)
}

func (g *gen) badRange(at time.Time) {
	ip := g.badIP()
	ua := g.pick(append(slices.Clone(toolUAs), browserUAs[0], browserUAs[1]))
	n := g.between(1, 6)
	for i := range n {
		r := request{Method: "GET", Host: g.pick([]string{"www.example.com", "shop.example.com", "api.example.com"}), SourceIP: ip,
			Headers: map[string]string{"user-agent": ua, "cf-ipcountry": g.pick([]string{"US", "NL", "RU", "CN", "XX"})}}
		r.Path = g.pick([]string{"/", "/products", g.productPath(), "/v1/products", "/search", "/healthz", "/account/login"})
		if r.Path == "/search" {
			r.Query = map[string]string{"q": g.pick([]string{"a", "test", "<script>alert(1)</script>"})}
		}
		if r.Path == "/account/login" {
			r.Method = "POST"
		}
		g.emit("attack-bad-range", at.Add(time.Duration(i)*time.Second), r)
	}
}

func (g *gen) blockedCountry(at time.Time) {
	c := g.client()
	c.country = g.pick([]string{"IR", "IR", "KP", "SY", "CU", "CU"})
	r := request{Method: "GET", Host: g.pick([]string{"www.example.com", "shop.example.com", "api.example.com"}), SourceIP: c.ip, Headers: edgeHeaders(c),
		Path: g.pick([]string{"/", "/products", g.productPath(), "/pricing", "/v1/products"})}
	if r.Host == "api.example.com" {
		r.Headers["x-api-key"] = fmt.Sprintf("pk_live_%08x", g.r.Uint32())
	}
	g.emit("blocked-country", at, r)
}

func (g *gen) tor(at time.Time) {
	h := map[string]string{"user-agent": "Mozilla/5.0 (Windows NT 10.0; rv:115.0) Gecko/20100101 Firefox/115.0", "cf-ipcountry": "T1"}
	r := request{Method: "GET", Host: "www.example.com", SourceIP: fmt.Sprintf("185.220.101.%d", 1+g.r.IntN(254)), Headers: h,
		Path: g.pick([]string{"/", "/blog", "/products", "/account/login"})}
	if g.chance(0.4) {
		r.Method, r.Path = "POST", g.pick([]string{"/account/login", "/account/signup"})
		h["x-csrf-token"] = g.hex4()
		h["cf-turnstile-response"] = "0." + g.hex4()
	}
	g.emit("tor", at, r)
}

func (g *gen) scanner(at time.Time) {
	ip := g.cloudIPv4()
	ua := g.pick([]string{
		"sqlmap/1.7.2#stable (https://sqlmap.org)",
		"Mozilla/5.00 (Nikto/2.1.6) (Evasions:None) (Test:Port Check)",
		"Mozilla/5.0 (compatible; Nuclei - Open-source project (github.com/projectdiscovery/nuclei))",
		"masscan/1.3 (https://github.com/robertdavidgraham/masscan)",
		"Mozilla/5.0 zgrab/0.x",
		"WPScan v3.8.25 (https://wpscan.com/wordpress-security-scanner)",
	})
	n := g.between(2, 8)
	for i := range n {
		r := request{Method: "GET", Host: g.pick([]string{"www.example.com", "shop.example.com"}), SourceIP: ip,
			Headers: map[string]string{"user-agent": ua, "cf-ipcountry": g.pick([]string{"US", "DE", "NL", "SG"})},
			Path:    g.pick([]string{"/", "/products", "/login", "/admin", "/api/v1/users"})}
		if strings.HasPrefix(ua, "sqlmap") {
			r.Path, r.Query = "/products", map[string]string{"id": g.pick([]string{"1' OR '1'='1", "1 AND SLEEP(5)", "1 UNION SELECT NULL--"})}
		}
		g.emit("scanner", at.Add(time.Duration(i)*time.Second), r)
	}
}

func (g *gen) probe(at time.Time) {
	ip := g.cloudIPv4()
	if g.chance(0.3) {
		ip = g.publicIPv6()
	}
	ua := g.pick(toolUAs)
	paths := []string{"/.env", "/.env.production", "/.git/config", "/.git/HEAD", "/.aws/credentials", "/backup.sql", "/db.sql",
		"/config.php.bak", "/wp-login.php", "/wp-admin/", "/xmlrpc.php", "/phpmyadmin/index.php", "/index.php",
		"/static/../../../etc/passwd", "/files/%2e%2e/%2e%2e/etc/passwd", "/cgi-bin/%2e%2e/%2e%2e/bin/sh",
		"/actuator/env", "/actuator/heapdump", "/metrics", "/debug/pprof/", "/internal/config", "/.ssh/id_rsa"}
	n := g.between(1, 6)
	for i := range n {
		r := request{Method: "GET", Host: g.pick([]string{"www.example.com", "shop.example.com", "api.example.com"}), SourceIP: ip,
			Headers: map[string]string{"user-agent": ua, "cf-ipcountry": g.pick([]string{"US", "NL", "SG", "HK", "XX"})}, Path: g.pick(paths)}
		if r.Path == "/wp-login.php" || r.Path == "/xmlrpc.php" {
			r.Method = "POST"
		}
		g.emit("probe", at.Add(time.Duration(i)*time.Second), r)
	}
	if g.chance(0.2) {
		// Probing the admin host from the internet.
		g.emit("probe", at.Add(7*time.Second), request{Method: "GET", Host: "admin.example.com", SourceIP: ip, Path: g.pick([]string{"/admin/users", "/admin/status", "/"}),
			Headers: map[string]string{"user-agent": ua, "cf-ipcountry": "US"}})
	}
}

func (g *gen) oddMethod(at time.Time) {
	c := g.client()
	r := request{Method: g.pick([]string{"TRACE", "TRACK", "CONNECT", "PROPFIND", "DEBUG", "PURGE", "OPTIONS", "OPTIONS", "MKCOL", "get"}),
		Host: g.pick([]string{"www.example.com", "shop.example.com", "api.example.com"}), SourceIP: c.ip, Headers: edgeHeaders(c),
		Path: g.pick([]string{"/", "/uploads/", "/v1/products", "/account/login"})}
	if r.Method != "OPTIONS" {
		r.Headers["user-agent"] = g.pick(toolUAs)
	}
	g.emit("odd-method", at, r)
}

func (g *gen) paymentWebhook(at time.Time) {
	ip := fmt.Sprintf("198.18.10.%d", 1+g.r.IntN(254))
	if g.chance(0.1) {
		ip = g.cloudIPv4() // forged webhook
	}
	g.emit("payment-webhook", at, request{Method: "POST", Host: "api.example.com",
		Path:     g.pick([]string{"/webhooks/payments/charge-succeeded", "/webhooks/payments/charge-refunded", "/webhooks/payments/dispute-created"}),
		SourceIP: ip, Headers: map[string]string{"user-agent": "PaymentsWebhook/1.0", "cf-ipcountry": "US", "content-type": "application/json"}})
}

// bogon is a spoofed or misrouted private source at the public edge.
func (g *gen) bogon(at time.Time) {
	ip := g.pick([]string{
		fmt.Sprintf("192.168.%d.%d", g.r.IntN(256), 1+g.r.IntN(254)),
		fmt.Sprintf("172.%d.%d.%d", 16+g.r.IntN(16), g.r.IntN(256), 1+g.r.IntN(254)),
		fmt.Sprintf("10.%d.%d.%d", 100+g.r.IntN(100), g.r.IntN(256), 1+g.r.IntN(254)),
		fmt.Sprintf("100.%d.%d.%d", 64+g.r.IntN(64), g.r.IntN(256), 1+g.r.IntN(254)),
		fmt.Sprintf("fd%02x:%s::%s", g.r.IntN(256), g.hex4(), g.hex4()),
		"127.0.0.1",
	})
	g.emit("bogon", at, request{Method: "GET", Host: "www.example.com", Path: "/", SourceIP: ip,
		Headers: map[string]string{"user-agent": g.pick(toolUAs)}})
}

// queryFlood is a cache-busting or fuzzing request with many parameters.
func (g *gen) queryFlood(at time.Time) {
	c := g.client()
	q := map[string]string{}
	for i := range g.between(33, 80) {
		q[fmt.Sprintf("p%d", i)] = g.hex4()
	}
	g.emit("query-flood", at, request{Method: "GET", Host: g.pick([]string{"www.example.com", "shop.example.com"}), Path: "/search", Query: q,
		SourceIP: c.ip, Headers: map[string]string{"user-agent": g.pick(toolUAs), "cf-ipcountry": c.country}})
}
